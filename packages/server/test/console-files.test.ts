import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestServer, testServer } from './support.js';

/** `consoleDir`: the web console's files at `/`, index.html for client routes, and `/v1/*` never shadowed. */

describe('serving the console', () => {
  let t: TestServer;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'oar-console-files-'));
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>OAR console</title>');
    writeFileSync(join(dir, 'assets/app-1234.js'), 'console.log(1)');
    writeFileSync(join(dir, '..', 'oar-secret.txt'), 'outside');
    t = await testServer({ serve: { consoleDir: dir } });
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(join(dir, '..', 'oar-secret.txt'), { force: true });
  });

  it('serves index.html at / and for client routes, assets with their type, without a key', async () => {
    for (const path of ['/', '/sessions/ses_1', '/inbox', '/sessions/ses_1/time?at=3']) {
      const r = await t.call('GET', path, { key: null });
      expect(r.status, path).toBe(200);
      expect(r.headers.get('content-type')).toContain('text/html');
      expect(r.headers.get('content-security-policy')).toContain("default-src 'self'");
      expect(await r.text()).toContain('OAR console');
    }
    const js = await t.call('GET', '/assets/app-1234.js', { key: null });
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toContain('text/javascript');
    expect(js.headers.get('cache-control')).toContain('immutable');
  });

  it('never shadows the API and never leaves its directory', async () => {
    const unknown = await t.call('GET', '/v1/nothing-here');
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { code: string } }).error.code).toBe('route_not_found');
    expect((await t.call('GET', '/v1/sessions', { key: null })).status).toBe(401);
    expect((await t.call('GET', '/v1/health', { key: null })).status).toBe(200);
    expect((await t.call('GET', '/assets/missing.js', { key: null })).status).toBe(404);
    for (const path of ['/../oar-secret.txt', '/%2e%2e/oar-secret.txt', '/assets/..%2f..%2foar-secret.txt']) {
      const r = await t.call('GET', path, { key: null });
      expect(await r.text(), path).not.toContain('outside');
    }
    expect((await t.call('POST', '/', { key: null, body: {} })).status).toBe(404);
  });
});
