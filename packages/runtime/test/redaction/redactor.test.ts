import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEvent, OutputRedactedPayloadSchema } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import {
  bindingSecrets,
  type LiteralSecret,
  MIN_SECRET_LENGTH,
  REDACTION_KINDS,
  RedactionTally,
  Redactor,
  redactionFact,
} from '../../src/redaction/index.js';
import { eventProblems } from '../support/schemas.js';
import { plantedSecrets, plantedText, SecretScanner, writeSecretWorkspace } from '../support/secret-scan.js';

const shapes = Redactor.patternsOnly();

/** Deterministic pseudo-random bytes (xorshift), so "random-looking" inputs are the same on every run. */
function noise(length: number, seed = 0x9e3779b9): Buffer {
  const out = Buffer.alloc(length);
  let x = seed >>> 0;
  for (let i = 0; i < length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

describe('credential shapes', () => {
  const cases: [string, string, string][] = [
    ['openai_key', 'key: sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z', 'key: [REDACTED:openai_key]'],
    ['openai_key', 'sk-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb3dEf6hIj9kLm2n', '[REDACTED:openai_key]'],
    ['anthropic_key', 'ANTHROPIC=sk-ant-api03-abcDEF123_ghiJKL456-mnoPQR789stu', 'ANTHROPIC=[REDACTED:anthropic_key]'],
    ['github_token', 'token ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789 ok', 'token [REDACTED:github_token] ok'],
    ['github_token', 'gho_0123456789abcdefghijABCDEFGHIJ012345', '[REDACTED:github_token]'],
    ['github_token', 'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123', '[REDACTED:github_token]'],
    ['slack_token', 'xoxb-123456789012-1234567890123-AbCdEfGhIjKl', '[REDACTED:slack_token]'],
    ['slack_token', 'xoxp-1234567890-abcdef', '[REDACTED:slack_token]'],
    [
      'slack_token',
      'https://hooks.slack.com/services/T0000000/B0000000/XXXXXXXXXXXXXXXXXXXXXXXX',
      'https://hooks.slack.com/services/[REDACTED:slack_token]',
    ],
    ['stripe_key', "Stripe('sk_live_4eC39HqLyjWDarjtT1zdp7dc')", "Stripe('[REDACTED:stripe_key]')"],
    ['aws_access_key', 'id=AKIAIOSFODNN7EXAMPLE;', 'id=[REDACTED:aws_access_key];'],
    ['aws_access_key', 'ASIAY34FZKBOKMUTVV7A', '[REDACTED:aws_access_key]'],
    [
      'aws_secret_key',
      'aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
      'aws_secret_access_key = [REDACTED:aws_secret_key]',
    ],
    [
      'aws_secret_key',
      '{"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}',
      '{"SecretAccessKey": "[REDACTED:aws_secret_key]"}',
    ],
    [
      'aws_secret_key',
      'AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
      'AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]',
    ],
    ['google_api_key', 'key=AIzaSyDdI0hCZtE6vySjMm-WEfRq3CPzqKqqsHI&x', 'key=[REDACTED:google_api_key]&x'],
    [
      'oar_api_key',
      'Authorization: oar_Xy3_Ab9-cD4eF5gH6iJ7kL8mN9oP0qR1sT2uV3wZ',
      'Authorization: [REDACTED:oar_api_key]',
    ],
    ['bearer_token', 'Authorization: Bearer abcdefgh.ijkl', 'Authorization: Bearer [REDACTED:bearer_token]'],
    [
      'bearer_token',
      "headers: { authorization: 'bearer tok_abcdefghijk' }",
      "headers: { authorization: 'bearer [REDACTED:bearer_token]' }",
    ],
    ['bearer_token', 'curl -H "Authorization: Bearer $TOKEN"', 'curl -H "Authorization: Bearer $TOKEN"'],
    ['bearer_token', 'sent Bearer 9f8e7d6c5b4a39281706abcdef', 'sent Bearer [REDACTED:bearer_token]'],
    ['basic_auth', 'Authorization: Basic dXNlcjpwYXNzd29yZA==', 'Authorization: Basic [REDACTED:basic_auth]'],
    [
      'jwt',
      'cookie=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U; path=/',
      'cookie=[REDACTED:jwt]; path=/',
    ],
    ['url_password', 'postgres://app:s3cret@db:5432/app', 'postgres://app:[REDACTED:url_password]@db:5432/app'],
    ['url_password', 'redis://:hunter2@cache:6379/0', 'redis://:[REDACTED:url_password]@cache:6379/0'],
    ['url_password', 'mysql://root:p@ss@word@db/x', 'mysql://root:[REDACTED:url_password]@db/x'],
    [
      'url_password',
      'https://host/login?user=a&password=hunter2&next=/',
      'https://host/login?user=a&password=[REDACTED:url_password]&next=/',
    ],
    [
      'url_password',
      'jdbc:postgresql://db/app?PASSWORD=x1',
      'jdbc:postgresql://db/app?PASSWORD=[REDACTED:url_password]',
    ],
    ['password', 'PGPASSWORD=s3cr3t psql -h db', 'PGPASSWORD=[REDACTED:password] psql -h db'],
    ['password', 'export MYSQL_ROOT_PASSWORD="p w d"', 'export MYSQL_ROOT_PASSWORD="[REDACTED:password]"'],
    ['password', 'MYSQL_PWD=abc123 mysql', 'MYSQL_PWD=[REDACTED:password] mysql'],
    [
      'password',
      'host=db user=app password=letmein dbname=app',
      'host=db user=app password=[REDACTED:password] dbname=app',
    ],
    ['password', 'Server=db;User Id=sa;Password=P@ss;', 'Server=db;User Id=sa;Password=[REDACTED:password];'],
    ['password', '{"user": "a", "password": "hunter2!"}', '{"user": "a", "password": "[REDACTED:password]"}'],
    ['password', "db_password = 'tr0ub4dor&3'", "db_password = '[REDACTED:password]'"],
    ['password', 'password: s3cret-Value\n', 'password: [REDACTED:password]\n'],
    ['password', 'db:\n  - POSTGRES_PASSWORD: letmein', 'db:\n  - POSTGRES_PASSWORD: [REDACTED:password]'],
  ];

  it.each(cases)('%s: %s', (kind, input, expected) => {
    const tally = new RedactionTally();
    expect(shapes.redactText(input, tally)).toBe(expected);
    if (expected !== input) expect(tally.counts).toEqual({ [kind]: 1 });
  });

  it('private keys: the whole PEM block, END line included, whatever its label', () => {
    for (const label of ['RSA ', 'EC ', 'DSA ', 'OPENSSH ', 'ENCRYPTED ', '']) {
      const pem = `-----BEGIN ${label}PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi\nZ9+AbC/de==\n-----END ${label}PRIVATE KEY-----`;
      expect(shapes.redactText(`key:\n${pem}\nafter`)).toBe('key:\n[REDACTED:private_key]\nafter');
    }
    const pgp = '-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF0\n-----END PGP PRIVATE KEY BLOCK-----';
    expect(shapes.redactText(pgp)).toBe('[REDACTED:private_key]');
  });

  it('private keys: encrypted headers, JSON-escaped newlines, and a key cut off before its END line', () => {
    const encrypted =
      '-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,8A72BD\n\nMIIEowIBAAK\n-----END RSA PRIVATE KEY-----';
    expect(shapes.redactText(encrypted)).toBe('[REDACTED:private_key]');
    const escaped = JSON.stringify({ key: '-----BEGIN PRIVATE KEY-----\nMIIEvQIBADAN\n-----END PRIVATE KEY-----\n' });
    expect(shapes.redactText(escaped)).toBe('{"key":"[REDACTED:private_key]\\n"}');
    const cut =
      '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAMwAAAAtzc2gtZW…[truncated]';
    expect(shapes.redactText(cut)).toBe('[REDACTED:private_key]…[truncated]');
  });

  it('covers every kind of the vocabulary', () => {
    const seen = new Set([...cases.map(([kind]) => kind), 'private_key', 'env_secret', 'dotenv']);
    expect([...seen].sort()).toEqual([...REDACTION_KINDS].sort());
  });
});

describe('no false positives on ordinary text', () => {
  const pngBase64 = `data:image/png;base64,iVBORw0KGgo${noise(30_000).toString('base64')}`;
  const ordinary = [
    'sk-',
    'use sk- as the prefix',
    'sk-learn-is-a-great-library-for-machine-learning',
    'the task-queue-processor-for-background-jobs',
    'id 123e4567-e89b-12d3-a456-426614174000 and 550e8400-e29b-41d4-a716-446655440000',
    'commit 3b23289c1e2f4a5b6c7d8e9f0a1b2c3d4e5f6a7b, short 3b23289',
    'sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
    pngBase64,
    'https://example.com:8080/path/to/page?q=search&page=2#top',
    'http://localhost:3000/api/v1/users/42',
    'git@github.com:org/repo.git and ssh://git@github.com/org/repo',
    'mail user@example.com or https://user@example.com/',
    'const password = req.body.password;',
    'password: string;',
    "if (password === confirm) { throw new Error('mismatch'); }",
    'def login(username, password=None):',
    'connect(host=h, password=pw, port=5432)',
    'password=getpass()',
    "password = os.environ['DB_PASSWORD']",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a YAML reference, not a template
    'password: ${DB_PASSWORD}',
    'password: str | None = None',
    '  password: userInput\n',
    'login failed, password: incorrect for user',
    '"password": "Password", "confirm": "Confirm password"',
    'PASSWORD_MIN_LENGTH = 8',
    'user.passwordHash = await hash(password)',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell reference, not a template
    'Authorization: Bearer ${token}',
    'Bearer tokens are short-lived credentials',
    '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----',
    '-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----',
    'eyJ is how base64 JSON starts',
    'postgres://app:***@db/app?password=***',
    'The secret to success is consistency. Enter your password below.',
    'AKIA is the prefix of AWS access key ids',
    'ASIAN-PACIFIC-REGIONS',
  ];

  it.each(ordinary.map((text) => [text.length > 80 ? `${text.slice(0, 60)}…` : text, text]))('%s', (_label, text) => {
    // Unchanged means the very same string: the fast path allocated nothing.
    expect(shapes.redactText(text)).toBe(text);
  });

  it('redacting twice changes nothing (markers and masks are not secrets)', () => {
    const planted = plantedSecrets();
    const once = shapes.redactText(plantedText(planted));
    expect(shapes.redactText(once)).toBe(once);
  });
});

describe('literal secrets', () => {
  const env = 'Zq8-env-secret_value/4';
  const dotenv = 'dotenv"value\\with-quote';
  const redactor = Redactor.create({
    secrets: [
      { value: env, kind: 'env_secret' },
      { value: dotenv, kind: 'dotenv' },
    ],
  });

  it('replaces the raw value and its JSON-escaped and URL-encoded forms', () => {
    const tally = new RedactionTally();
    expect(redactor.redactText(`a ${env} b`, tally)).toBe('a [REDACTED:env_secret] b');
    expect(redactor.redactText(JSON.stringify({ v: dotenv }), tally)).toBe('{"v":"[REDACTED:dotenv]"}');
    expect(redactor.redactText(`?t=${encodeURIComponent(env)}`, tally)).toBe('?t=[REDACTED:env_secret]');
    expect(tally.counts).toEqual({ env_secret: 2, dotenv: 1 });
    expect(tally.total).toBe(3);
  });

  it('replaces the base64 form, whatever precedes it in the encoded blob', () => {
    for (const prefix of ['', 'u', 'us', 'user:']) {
      const blob = Buffer.from(`${prefix}${env}-trailer`).toString('base64');
      const out = redactor.redactText(`data: ${blob}`);
      expect(out, prefix).toContain('[REDACTED:env_secret]');
      expect(new SecretScanner([env]).text(out, 'out'), prefix).toEqual([]);
    }
  });

  it(`ignores values shorter than ${MIN_SECRET_LENGTH} characters`, () => {
    const short = Redactor.create({ secrets: [{ value: 'admin', kind: 'dotenv' }] });
    expect(short.secretCount).toBe(0);
    expect(short.redactText('admin logged in')).toBe('admin logged in');
  });

  it('a value known from the environment and from .env is an env_secret; the longest value wins', () => {
    const both = Redactor.create({
      secrets: [
        { value: 'abc123def', kind: 'dotenv' },
        { value: 'abc123def', kind: 'env_secret' },
        { value: 'abc123def456', kind: 'dotenv' },
      ],
    });
    expect(both.redactText('x abc123def y abc123def456 z')).toBe('x [REDACTED:env_secret] y [REDACTED:dotenv] z');
  });

  it('overlapping finds become one marker', () => {
    const key = 'ghp_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789';
    const overlapping = Redactor.create({ secrets: [{ value: key.slice(10), kind: 'dotenv' }] });
    expect(overlapping.redactText(`t=${key};`)).toBe('t=[REDACTED:github_token];');
    const inside = Redactor.create({ secrets: [{ value: 'MIIEowIBAAK', kind: 'dotenv' }] });
    expect(inside.redactText('-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAK\n-----END RSA PRIVATE KEY-----')).toBe(
      '[REDACTED:private_key]',
    );
  });

  it('scales: a thousand secrets, one pass', () => {
    const many: LiteralSecret[] = Array.from({ length: 1000 }, (_, i) => ({
      value: `secret-${i}-${noise(12, i + 1).toString('hex')}`,
      kind: 'dotenv',
    }));
    const big = Redactor.create({ secrets: many });
    const text = many
      .filter((_, i) => i % 100 === 0)
      .map((s) => `x ${s.value} y`)
      .join('\n');
    const tally = new RedactionTally();
    expect(big.redactText(text, tally)).not.toContain('secret-');
    expect(tally.counts).toEqual({ dotenv: 10 });
  });
});

describe('redactJson', () => {
  const redactor = Redactor.create({ secrets: [{ value: 'tok-123456789', kind: 'env_secret' }] });

  it('redacts strings anywhere in the value and keeps unchanged parts by reference', () => {
    const clean = { list: [1, 'two', { three: true }], note: 'fine' };
    const value = {
      clean,
      nested: { deep: [{ header: 'Authorization: Bearer abcdef123456' }, 'tok-123456789'], n: 1 },
      nil: null,
    };
    const tally = new RedactionTally();
    const out = redactor.redactJson(value, tally);
    expect(out).toEqual({
      clean,
      nested: { deep: [{ header: 'Authorization: Bearer [REDACTED:bearer_token]' }, '[REDACTED:env_secret]'], n: 1 },
      nil: null,
    });
    expect(out.clean).toBe(clean);
    expect(value.nested.deep[1]).toBe('tok-123456789');
    expect(tally.counts).toEqual({ bearer_token: 1, env_secret: 1 });
  });

  it('returns the very same value when there is nothing to redact', () => {
    const value = { a: [{ b: 'c' }, 'd', 3, null, true], e: { f: 'g' } };
    expect(redactor.redactJson(value)).toBe(value);
    expect(redactor.redactJson('plain')).toBe('plain');
    expect(redactor.redactJson(42)).toBe(42);
  });

  it('redacts object keys that contain a secret, without losing entries', () => {
    const out = redactor.redactJson({ 'tok-123456789': 1, 'x tok-123456789': 2, '[REDACTED:env_secret]': 3, ok: 4 });
    expect(out).toEqual({
      '[REDACTED:env_secret]': 1,
      'x [REDACTED:env_secret]': 2,
      '[REDACTED:env_secret]#2': 3,
      ok: 4,
    });
  });

  it('walks very deep JSON without overflowing the stack', () => {
    let value: unknown = 'tok-123456789';
    for (let i = 0; i < 5000; i++) value = { v: value };
    const out = redactor.redactJson(value);
    let node = out as { v: unknown };
    for (let i = 0; i < 5000; i++) node = node.v as { v: unknown };
    expect(node).toBe('[REDACTED:env_secret]');
  });

  it('redacts byte arrays inside the value', () => {
    const bytes = new TextEncoder().encode('x tok-123456789 y');
    const out = redactor.redactJson({ bytes });
    expect(new TextDecoder().decode(out.bytes)).toBe('x [REDACTED:env_secret] y');
  });
});

describe('redactBytes', () => {
  const redactor = Redactor.create({ secrets: [{ value: 'tok-123456789', kind: 'env_secret' }] });

  it('redacts UTF-8 text and keeps its other characters', () => {
    const bytes = Buffer.from('é tok-123456789 — ok');
    expect(Buffer.from(redactor.redactBytes(bytes)).toString()).toBe('é [REDACTED:env_secret] — ok');
  });

  it('redacts inside binary data and leaves every other byte as it was', () => {
    const before = noise(1000, 7);
    const after = noise(1000, 8);
    const bytes = Buffer.concat([before, Buffer.from('tok-123456789'), after]);
    const out = Buffer.from(redactor.redactBytes(bytes));
    expect(out.subarray(0, 1000).equals(before)).toBe(true);
    expect(out.subarray(1000, 1000 + 21).toString('latin1')).toBe('[REDACTED:env_secret]');
    expect(out.subarray(1021).equals(after)).toBe(true);
  });

  it('returns the same array when nothing matched', () => {
    const bytes = noise(5000);
    expect(redactor.redactBytes(bytes)).toBe(bytes);
  });
});

describe('redact and the output.redacted fact', () => {
  it('redact returns the value, the counts and the total', () => {
    const out = Redactor.patternsOnly().redact({ a: 'PGPASSWORD=abc123 psql', b: 'AKIAIOSFODNN7EXAMPLE' });
    expect(out).toEqual({
      value: { a: 'PGPASSWORD=[REDACTED:password] psql', b: '[REDACTED:aws_access_key]' },
      counts: { password: 1, aws_access_key: 1 },
      total: 2,
    });
  });

  it('no fact when nothing was redacted; otherwise counts and kinds, never values, valid for the protocol', () => {
    const tally = new RedactionTally();
    expect(redactionFact(tally)).toBeUndefined();
    Redactor.patternsOnly().redactText(
      'AKIAIOSFODNN7EXAMPLE and AKIAIOSFODNN7EXAMPLF, eyJhbGciOi.eyJzdWIiOi.sig',
      tally,
    );
    const fact = redactionFact(tally, { sink: 'event', source: 'tool_output' });
    expect(fact).toEqual({ count: 3, kinds: { aws_access_key: 2, jwt: 1 }, sink: 'event', source: 'tool_output' });
    expect(OutputRedactedPayloadSchema.parse(fact)).toEqual(fact);
    const event = createEvent('output.redacted', {
      runtimeId: 'rt_1',
      sessionId: 'sess_1',
      threadId: 'thr_1',
      turnId: 'turn_1',
      sequence: 3,
      payload: fact!,
    });
    expect(eventProblems(event)).toEqual([]);
    expect(JSON.stringify(event)).not.toContain('AKIA');
  });
});

describe('end to end with planted secrets', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('shapes alone catch every shaped secret, with its kind', () => {
    const planted = plantedSecrets();
    for (const secret of planted.all.filter((s) => s.shape)) {
      const tally = new RedactionTally();
      const out = shapes.redactText(secret.inContext, tally);
      expect(new SecretScanner([secret]).text(out, secret.label), `${secret.label}: ${out}`).toEqual([]);
      expect(tally.counts, secret.label).toEqual({ [secret.shape as string]: 1 });
    }
  });

  it('a redactor built from the binding (env + workspace .env) leaves none of them anywhere', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'oar-redact-e2e-'));
    dirs.push(dir);
    const planted = plantedSecrets();
    const { files } = await writeSecretWorkspace(dir, planted);
    const secrets = await bindingSecrets(
      { models: {}, secrets: { env: planted.secretEnvNames }, workspaceRoot: dir },
      planted.env,
    );
    const redactor = Redactor.create({ secrets });
    const scan = new SecretScanner(planted.all);
    scan.text(redactor.redactText(plantedText(planted)), 'planted text');
    for (const file of files) scan.text(redactor.redactText(readFileSync(join(dir, file), 'utf8')), file);
    scan.text(redactor.redactBytes(Buffer.from(plantedText(planted))), 'bytes');
    scan.text(JSON.stringify(redactor.redactJson({ events: planted.all.map((s) => ({ out: s.inContext })) })), 'json');
    expect(scan.hits).toEqual([]);
  });
});
