import { spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CliOutputSchema, CREDENTIAL_ENV, issueCredential, ManifestSchema } from '@oar/tool-cli';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The standard-library Python business CLI keeps the same contract as a CLI on the TypeScript SDK: run with
 * `python3` as a real subprocess, with credentials issued by `issueCredential` (the OAR side), it verifies the HS256
 * JWT itself, refuses unknown fields with an `input_schema` text map, and prints one JSON object.
 *
 * With CI set, a missing python3 FAILS this suite (.ci/run installs it); locally it is skipped with a message.
 */

const script = fileURLToPath(new URL('../business_cli.py', import.meta.url));
const SECRET = 'python-cli-test-secret-of-32-bytes-or-more';
const key = { algorithm: 'HS256' as const, secret: SECRET };
const ALL = ['contacts.*', 'memory.*'];

/** The interpreter's real path (a pyenv shim needs more environment than the CLI is given). */
function findPython(): string | undefined {
  const probe = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' });
  return probe.status === 0 && probe.stdout.trim() ? probe.stdout.trim() : undefined;
}

const python = findPython();
const inCi = Boolean(process.env.CI);
if (!python && !inCi) {
  console.warn('python-cli.test.ts: python3 not found, skipping the Python business CLI tests (in CI they fail)');
}

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'oar-business-cli-py-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function run(argv: string[], input: unknown, env: Record<string, string>) {
  if (!python) throw new Error('python3 is required (CI installs it in .ci/run)');
  const child = spawnSync(python, [script, ...argv], {
    input: typeof input === 'string' ? input : JSON.stringify(input),
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', ...env },
  });
  expect(child.stderr).toBe('');
  // One JSON object (on one line unless --pretty).
  if (!argv.includes('--pretty')) expect(child.stdout.trim().split('\n')).toHaveLength(1);
  return { status: child.status, stdout: child.stdout, output: CliOutputSchema.parse(JSON.parse(child.stdout)) };
}

function credential(sub = 'user:ada', ops = ALL, ttl = 300, secret = SECRET) {
  return issueCredential({ sub, ws: 'default', ops }, { ...key, secret }, ttl);
}

function errorCode(r: ReturnType<typeof run>): string {
  if (r.output.ok) throw new Error(`expected a failure, got ${r.stdout}`);
  return r.output.error.code;
}

const b64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

describe.skipIf(!python && !inCi)('the Python business CLI (python3 as a subprocess)', () => {
  it('python3 is available', () => {
    expect(python, 'python3 is required when CI is set (.ci/run installs it)').toBeDefined();
  });

  it('reads contacts and updates memory as the credential’s subject, one JSON object each', async () => {
    const store = join(dir, 'a.db');
    const env = { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: await credential() };
    const read = run(['--store', store, 'contacts', 'read'], { query: 'GRACE' }, env);
    expect(read.status).toBe(0);
    expect(read.output).toEqual({
      ok: true,
      module: 'contacts',
      method: 'read',
      data: {
        query: 'GRACE',
        items: [
          {
            id: 'ct_grace',
            name: 'Grace Hopper',
            email: 'grace@example.com',
            phone: '+1 555 0100',
            organization: 'Navy',
          },
        ],
        count: 1,
      },
    });
    const all = run(['--store', store, 'contacts', 'read'], {}, env);
    expect(all.output).toMatchObject({ ok: true, data: { count: 3 } });
    const bobEnv = { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: await credential('user:bob') };
    expect(run(['--store', store, 'contacts', 'read'], {}, bobEnv).output).toMatchObject({
      data: { items: [{ id: 'ct_bob_ada' }], count: 1 },
    });

    const first = run(['--store', store, 'memory', 'update'], { key: 'tz', value: '+08:00' }, env);
    expect(first.output).toMatchObject({
      ok: true,
      data: { key: 'tz', value: '+08:00', previous: null, created: true },
    });
    const second = run(['--store', store, 'memory', 'update', '--pretty'], { key: 'tz', value: '+09:00' }, env);
    expect(second.status).toBe(0);
    expect(second.output).toMatchObject({ data: { previous: '+08:00', created: false, changed: true } });
    // Bob's notes are his own.
    expect(run(['--store', store, 'memory', 'read'], {}, bobEnv).output).toMatchObject({ data: { count: 0 } });
    expect(run(['--store', store, 'memory', 'read'], { key: 'tz' }, env).output).toMatchObject({
      data: { items: [{ key: 'tz', value: '+09:00' }], count: 1 },
    });
  });

  it('refuses unknown fields (owner_id included), wrong types, junk and pairs outside the whitelist', async () => {
    const store = join(dir, 'b.db');
    const env = { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: await credential() };
    const unknown = run(['--store', store, 'contacts', 'read'], { query: 'a', owner_id: 'user:bob' }, env);
    expect(unknown.status).toBe(1);
    expect(unknown.output).toMatchObject({
      ok: false,
      status: 'failure',
      error: {
        code: 'INVALID_ACTION_INPUT',
        module: 'contacts',
        method: 'read',
        input_schema: { 'query?': 'string', 'contact_id?': 'string' },
      },
    });
    expect(unknown.stdout).toContain('owner_id');
    const missing = run(['--store', store, 'memory', 'update'], { key: 'k' }, env);
    expect(missing.output).toMatchObject({
      error: { code: 'INVALID_ACTION_INPUT', input_schema: { key: 'string', value: 'string' } },
    });
    expect(errorCode(run(['--store', store, 'memory', 'update'], { key: 'k', value: 3 }, env))).toBe(
      'INVALID_ACTION_INPUT',
    );
    expect(errorCode(run(['--store', store, 'memory', 'update'], [], env))).toBe('INVALID_ACTION_INPUT');
    expect(errorCode(run(['--store', store, 'memory', 'update'], '{not json', env))).toBe('INPUT_NOT_JSON');
    for (const [module, method] of [
      ['calendar', 'read'],
      ['contacts', '__init__'],
      ['__class__', 'read'],
      ['contacts;id', 'read'],
    ]) {
      expect(errorCode(run(['--store', store, module as string, method as string], {}, env))).toBe(
        'ACTION_NOT_ALLOWED',
      );
    }
    const usage = run(['--store', store, 'contacts'], {}, env);
    expect(usage.status).toBe(2);
    expect(errorCode(usage)).toBe('USAGE_ERROR');
    expect(run(['--store', store, 'contacts', 'read', '--rm'], {}, env).status).toBe(2);
  });

  it('refuses a missing, expired, forged, "none"-algorithm or out-of-scope credential, never echoing it', async () => {
    const argv = ['--store', join(dir, 'c.db'), 'contacts', 'read'];
    expect(errorCode(run(argv, {}, { BUSINESS_CLI_KEY: SECRET }))).toBe('CREDENTIAL_MISSING');
    const expired = await credential('user:ada', ALL, -60);
    expect(errorCode(run(argv, {}, { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: expired }))).toBe(
      'CREDENTIAL_EXPIRED',
    );
    const forged = await credential('user:ada', ALL, 300, 'another-secret-another-secret-another');
    const forgedRun = run(argv, {}, { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: forged });
    expect(forgedRun.status).toBe(1);
    expect(errorCode(forgedRun)).toBe('CREDENTIAL_INVALID');
    expect(forgedRun.stdout).not.toContain(forged);
    // A token that picks its own algorithm, or is signed with the right key but names another issuer or audience.
    const [, payload] = (await credential()).split('.');
    const none = `${b64url({ alg: 'none' })}.${payload}.`;
    expect(errorCode(run(argv, {}, { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: none }))).toBe('CREDENTIAL_INVALID');
    const now = Math.floor(Date.now() / 1000);
    const sign = (claims: Record<string, unknown>) => {
      const body = `${b64url({ alg: 'HS256' })}.${b64url(claims)}`;
      return `${body}.${createHmac('sha256', SECRET).update(body).digest('base64url')}`;
    };
    const base = { sub: 'user:ada', ws: 'default', ops: ALL, iat: now, exp: now + 300 };
    expect(
      run(argv, {}, { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: sign({ ...base, iss: 'oar', aud: 'oar-tool-cli' }) })
        .output.ok,
    ).toBe(true);
    for (const claims of [
      { ...base, iss: 'someone-else', aud: 'oar-tool-cli' },
      { ...base, iss: 'oar', aud: 'another-audience' },
      { ...base, iss: 'oar', aud: 'oar-tool-cli', ops: [] },
      { ...base, iss: 'oar', aud: 'oar-tool-cli', iat: now + 600, exp: now + 900 },
    ]) {
      expect(errorCode(run(argv, {}, { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: sign(claims) }))).toBe(
        'CREDENTIAL_INVALID',
      );
    }
    // Within the 5 s of clock skew an exp just passed still holds. "Just" is read now, not at the top: the runs
    // above take seconds on a busy machine, which would make this exp older than the skew allows.
    const justNow = Math.floor(Date.now() / 1000);
    expect(
      run(
        argv,
        {},
        {
          BUSINESS_CLI_KEY: SECRET,
          [CREDENTIAL_ENV]: sign({ ...base, iss: 'oar', aud: 'oar-tool-cli', exp: justNow - 1 }),
        },
      ).output.ok,
    ).toBe(true);
    // No verification key configured: nothing is trusted.
    expect(errorCode(run(argv, {}, { [CREDENTIAL_ENV]: await credential() }))).toBe('CREDENTIAL_INVALID');
    const readOnly = { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: await credential('user:ada', ['contacts.read']) };
    expect(run(argv, {}, readOnly).output.ok).toBe(true);
    const scoped = run(['--store', join(dir, 'c.db'), 'memory', 'update'], { key: 'k', value: 'v' }, readOnly);
    expect(errorCode(scoped)).toBe('ACTION_NOT_ALLOWED');
  });

  it('--describe prints a manifest of the SDK’s shape', () => {
    if (!python) throw new Error('python3 is required');
    const child = spawnSync(python, [script, '--describe'], { encoding: 'utf8', env: { PATH: '' } });
    expect(child.status).toBe(0);
    const manifest = ManifestSchema.parse(JSON.parse(child.stdout));
    expect(manifest).toMatchObject({ name: 'business-cli-python', credential: { algorithm: 'HS256' } });
    expect(manifest.methods.map((m) => `${m.module}.${m.method}`)).toEqual([
      'contacts.read',
      'memory.read',
      'memory.update',
    ]);
    expect(manifest.methods[0]).toMatchObject({
      inputSchema: { type: 'object', additionalProperties: false },
      facts: { readOnly: true, destructive: false, idempotent: true, concurrencySafe: true, interrupt: 'cancel' },
    });
    expect(manifest.methods[2]?.inputSchema).toMatchObject({ required: ['key', 'value'] });
    expect(manifest.methods[2]?.facts).toMatchObject({ readOnly: false, idempotent: true, interrupt: 'block' });
  });
});
