import { describe, expect, it } from 'vitest';
import { maskConnectionUrl } from '../../src/redaction/index.js';

describe('maskConnectionUrl', () => {
  it.each([
    ['postgres://app:s3cret@db:5432/app', 'postgres://app:***@db:5432/app'],
    ['postgresql://app:p@ss@word@db/app?sslmode=require', 'postgresql://app:***@db/app?sslmode=require'],
    ['postgres://:s3cret@db/app', 'postgres://:***@db/app'],
    ['postgres://db/app?user=app&password=s3cret&schema=oar', 'postgres://db/app?user=app&password=***&schema=oar'],
    ['postgres://db/app?PASSWORD=s3cret', 'postgres://db/app?PASSWORD=***'],
    ['postgres://db/app?sslpassword=k3y&sslmode=verify-full', 'postgres://db/app?sslpassword=***&sslmode=verify-full'],
    ['postgres://u:a@db/app?password=b', 'postgres://u:***@db/app?password=***'],
    // Malformed (a raw `/` or `?` in the password): still masked, up to the first `@`.
    ['postgres://app:pa/ss@db/app', 'postgres://app:***@db/app'],
    ['postgres://app:pa?ss@db/app', 'postgres://app:***@db/app'],
    // key=value DSNs.
    ['host=db user=app password=s3cret dbname=app', 'host=db user=app password=*** dbname=app'],
    ["host=db password='s 3 \\'c' dbname=app", 'host=db password=*** dbname=app'],
    ['Server=db;User Id=sa;Password=P@ss;', 'Server=db;User Id=sa;Password=***;'],
  ])('%s', (url, masked) => {
    expect(maskConnectionUrl(url)).toBe(masked);
  });

  it.each([
    '.oar/oar.db',
    '/var/lib/oar/oar.db',
    ':memory:',
    'postgres://app@db:5432/app',
    'postgres://db/app?schema=oar_1',
    'https://example.com:8080/path',
  ])('leaves %s as it is', (url) => {
    expect(maskConnectionUrl(url)).toBe(url);
  });
});
