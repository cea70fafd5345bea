import { describe, expect, it } from 'vitest';
import { dotenvSecretValues, isDotenvFileName, isDotenvSecret, parseDotenv } from '../../src/redaction/index.js';

describe('parseDotenv', () => {
  it('reads KEY=VALUE lines, export prefixes, comments, quotes and blank lines', () => {
    const text = [
      '\uFEFF# a comment',
      '',
      'PLAIN=value',
      'export EXPORTED=exp-value',
      'SPACED = spaced value  ',
      'INLINE=abc # trailing comment',
      'HASH=abc#not-a-comment',
      "SINGLE='it is # literal \\n'",
      'DOUBLE="line1\\nline2 # kept"',
      'BACKTICK=`tick`',
      'EMPTY=',
      'COLON: yaml-style',
      'not an assignment',
      'CRLF=value\r',
      'dotted.key-name=ok',
    ].join('\n');
    expect(parseDotenv(text)).toEqual([
      { key: 'PLAIN', value: 'value' },
      { key: 'EXPORTED', value: 'exp-value' },
      { key: 'SPACED', value: 'spaced value' },
      { key: 'INLINE', value: 'abc' },
      { key: 'HASH', value: 'abc#not-a-comment' },
      { key: 'SINGLE', value: 'it is # literal \\n' },
      { key: 'DOUBLE', value: 'line1\nline2 # kept', raw: 'line1\\nline2 # kept' },
      { key: 'BACKTICK', value: 'tick' },
      { key: 'EMPTY', value: '' },
      { key: 'COLON', value: 'yaml-style' },
      { key: 'CRLF', value: 'value' },
      { key: 'dotted.key-name', value: 'ok' },
    ]);
  });

  it('reads double-quoted values across lines (a PEM key in a .env file)', () => {
    const text = 'KEY="-----BEGIN PRIVATE KEY-----\nMIIEv\n-----END PRIVATE KEY-----"\nNEXT=1';
    expect(parseDotenv(text)).toEqual([
      { key: 'KEY', value: '-----BEGIN PRIVATE KEY-----\nMIIEv\n-----END PRIVATE KEY-----' },
      { key: 'NEXT', value: '1' },
    ]);
  });

  it('keeps an escaped quote inside a double-quoted value, and survives an unterminated one', () => {
    expect(parseDotenv('A="say \\"hi\\""')).toEqual([{ key: 'A', value: 'say "hi"', raw: 'say \\"hi\\"' }]);
    expect(parseDotenv('A="never closed\nB=2')).toEqual([{ key: 'A', value: 'never closed\nB=2' }]);
  });
});

describe('which .env values are secrets', () => {
  it.each([
    ['SESSION_SECRET', 'supersecretvalue', true],
    ['API_KEY', 'abcdefgh', true],
    ['DB_PASS', 'letmein', true],
    ['WEBHOOK', 'https://discord.com/api/webhooks/123/AbCdEfGhIjKlMnOpQrSt', true],
    ['DATABASE_URL', 'postgres://app:pw@db/app', true],
    ['STRIPE', 'rk_live_abc123', true],
    ['RANDOM', 'x9F2kQ7pL', true],
    ['NODE_ENV', 'development', false],
    ['PORT', '3000', false],
    ['HOST', '127.0.0.1:5432', false],
    ['API_HOST', 'api.example.com', false],
    ['API_URL', 'https://api.example.com/v1', false],
    ['PUBLIC_URL', 'http://localhost:3000', false],
    ['FLAG', 'true', false],
    ['SHORT_SECRET', 'abc12', false],
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a .env reference, not a template
    ['REF_SECRET', '${OTHER_SECRET}', false],
  ])('%s=%s → %s', (key, value, secret) => {
    expect(isDotenvSecret(key, value)).toBe(secret);
  });

  it('collects the secret values, as read and as written', () => {
    const text = 'NODE_ENV=production\nTOKEN="a\\nb-secret"\nPLAIN=zzzzzzzz1\n';
    expect(dotenvSecretValues(text)).toEqual(['a\nb-secret', 'a\\nb-secret', 'zzzzzzzz1']);
  });

  it.each([
    ['.env', true],
    ['.env.local', true],
    ['.env.production', true],
    ['.envrc', true],
    ['.env.example', false],
    ['.env.sample', false],
    ['.env.template', false],
    ['.env.local.example', false],
    ['env', false],
    ['app.env', false],
  ])('%s is a .env file: %s', (name, expected) => {
    expect(isDotenvFileName(name)).toBe(expected);
  });
});
