import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  mixed,
  type PlantedSecrets,
  plantedSecrets,
  SecretScanner,
  writeSecretWorkspace,
} from '../../runtime/test/support/secret-scan.js';
import { dropSchema, POSTGRES_URL, postgresUnavailable } from '../../runtime/test/support/stores.js';
import { oarIn, tempDir, writeJson } from './cli-helpers.js';

/**
 * Secrets never reach what the `oar` binary prints or stores. Seen: a `.env` read by the `read` tool was printed
 * verbatim on stdout and stored in the events, the read models and the exports. Here known secrets are planted in
 * the environment and in the workspace, `oar demo` and a scripted `oar run` go over them, and stdout, stderr,
 * `oar events`, `oar inspect`, both exports and the store are scanned: zero hits.
 */

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

async function project(planted: PlantedSecrets, store?: string): Promise<string> {
  const cwd = tempDir('oar-secrets-');
  dirs.push(cwd);
  await writeSecretWorkspace(cwd, planted);
  const github = planted.byLabel('github_pat').value;
  writeJson(cwd, 'script.json', {
    steps: [
      {
        protocol: {
          kind: 'act',
          message: 'Reading the configuration.',
          calls: [
            { id: 'config', type: 'tool', name: 'read', args: { filePath: 'src/config.ts' } },
            { id: 'dotenv', type: 'tool', name: 'read', args: { filePath: '.env' } },
            { id: 'search', type: 'tool', name: 'grep', args: { pattern: 'password|Bearer' } },
          ],
        },
      },
      { protocol: { kind: 'answer', message: `The token is ${github}; rotate it.` } },
    ],
  });
  writeJson(cwd, 'oar.config.json', {
    model: 'script:script.json',
    permissions: { mode: 'bypass' },
    secrets: { env: planted.secretEnvNames },
    ...(store ? { store } : {}),
  });
  return cwd;
}

async function runAndScan(
  planted: PlantedSecrets,
  store: string | undefined,
  scanStore: (cwd: string) => Promise<unknown[]>,
) {
  const cwd = await project(planted, store);
  const scanner = new SecretScanner(planted.all);
  const run = oarIn(cwd, ['run', 'review the config'], undefined, planted.env);
  expect(run.code, run.stderr).toBe(0);
  const json = oarIn(cwd, ['run', '--json', 'review the config again'], undefined, planted.env);
  const sessionId = /"sessionId":"(ses_[a-z0-9]+)"/.exec(json.stdout)?.[1] ?? '';
  expect(sessionId).not.toBe('');
  const outputs = [
    ['run', run],
    ['run --json', json],
    ['events', oarIn(cwd, ['events', sessionId, '--json'], undefined, planted.env)],
    ['inspect', oarIn(cwd, ['inspect', sessionId], undefined, planted.env)],
    ['export', oarIn(cwd, ['export', sessionId], undefined, planted.env)],
    ['export --evidence', oarIn(cwd, ['export', sessionId, '--evidence'], undefined, planted.env)],
  ] as const;
  // The secrets were read and said (so a leak was possible): the record says what it redacted.
  expect(outputs[2][1].stdout).toContain('output.redacted');
  const hits = outputs.flatMap(([name, result]) => [
    ...scanner.text(result.stdout, `${name} stdout`),
    ...scanner.text(result.stderr, `${name} stderr`),
  ]);
  expect([...hits, ...(await scanStore(cwd))]).toEqual([]);
}

describe('the oar binary leaks no secret', { timeout: 180_000 }, () => {
  it('oar demo with secrets in the environment prints none of them', () => {
    const planted = plantedSecrets();
    const cwd = tempDir('oar-secrets-demo-');
    dirs.push(cwd);
    const demo = oarIn(cwd, ['demo'], undefined, planted.env);
    expect(demo.code, demo.stderr).toBe(0);
    const scanner = new SecretScanner(planted.all);
    expect([...scanner.text(demo.stdout, 'demo stdout'), ...scanner.text(demo.stderr, 'demo stderr')]).toEqual([]);
  });

  it('on SQLite: output, exports and the store file hold none of the planted secrets', async () => {
    const planted = plantedSecrets();
    await runAndScan(planted, undefined, (cwd) => new SecretScanner(planted.all).sqlite(join(cwd, '.oar', 'oar.db')));
  });

  it('on PostgreSQL: output, exports and the store schema hold none of the planted secrets', async () => {
    const unavailable = await postgresUnavailable();
    if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
    if (unavailable) {
      console.warn(`SKIPPED PostgreSQL secret scan: ${unavailable.message}`);
      return;
    }
    const schema = `oar_t_${randomBytes(6).toString('hex')}`;
    const planted = plantedSecrets();
    try {
      await runAndScan(planted, `${POSTGRES_URL}?schema=${schema}`, () =>
        new SecretScanner(planted.all).postgres(POSTGRES_URL, schema),
      );
    } finally {
      await dropSchema(schema);
    }
  });
});

describe('the errors the oar binary prints are redacted', { timeout: 120_000 }, () => {
  // Random bodies, so nothing but these inputs can have put them in the output.
  const github = `ghp_${mixed(36)}`;
  const openai = `sk-proj-${mixed(40)}`;
  // No credential shape: only the process's knowledge of its provider key variables can recognise it.
  const providerKey = `provider-key-${mixed(24)}`;
  const env = { OPENAI_API_KEY: providerKey };

  function expectRedacted(result: { code: number | null; stdout: string; stderr: string }, code: string) {
    const output = result.stdout + result.stderr;
    for (const secret of [github, openai, providerKey]) expect(output, output).not.toContain(secret);
    const error = (JSON.parse(result.stderr.trim().split('\n').at(-1) ?? '{}') as { error: { code: string } }).error;
    expect(error.code, output).toBe(code);
    expect(result.code).toBe(2);
    return JSON.stringify(error);
  }

  it('an unknown session id that embeds a token, or is a provider key value', () => {
    const cwd = tempDir('oar-secrets-err-');
    dirs.push(cwd);
    // A store with no such session (without one, a reading command says store_not_found: reading-cli.test.ts).
    expect(oarIn(cwd, ['workspaces', 'create', 'team'], undefined, env).code).toBe(0);
    const shown = expectRedacted(oarIn(cwd, ['session', 'show', github], undefined, env), 'session_not_found');
    expect(shown).toContain('[REDACTED:github_token]');
    const inspected = expectRedacted(oarIn(cwd, ['inspect', `ses/${openai}`], undefined, env), 'session_not_found');
    expect(inspected).toContain('[REDACTED:openai_key]');
    const events = expectRedacted(oarIn(cwd, ['events', providerKey], undefined, env), 'session_not_found');
    expect(events).toContain('[REDACTED:env_secret]');
  });

  it('a bad config value holding a key, and a usage mistake that repeats one', () => {
    const cwd = tempDir('oar-secrets-err-');
    dirs.push(cwd);
    writeJson(cwd, 'oar.config.json', { model: `nope:${openai}` });
    const config = expectRedacted(oarIn(cwd, ['run', 'hello'], undefined, env), 'unknown_model');
    expect(config).toContain('[REDACTED:openai_key]');
    const usage = expectRedacted(oarIn(cwd, ['run', `--token=${github}`, 'hello'], undefined, env), 'usage_error');
    expect(usage).toContain('[REDACTED:github_token]');
  });
});

describe('oar protocol prints what it checked redacted', { timeout: 120_000 }, () => {
  const github = `ghp_${mixed(36)}`;
  const providerKey = `provider-key-${mixed(24)}`;
  const env = { OPENAI_API_KEY: providerKey };

  it('check: a declaration, an error and a recovered call that carry secrets', () => {
    const cwd = tempDir('oar-secrets-check-');
    dirs.push(cwd);
    const declaration = {
      kind: 'act',
      message: `Using ${providerKey}.`,
      calls: [{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'a.txt', content: `token=${github}` } }],
    };
    const ok = oarIn(cwd, ['protocol', 'check', '--no-validate'], JSON.stringify(declaration), env);
    expect(ok.code, ok.stderr).toBe(0);
    for (const secret of [github, providerKey]) expect(ok.stdout).not.toContain(secret);
    expect(ok.stdout).toContain('[REDACTED:github_token]');
    expect(ok.stdout).toContain('[REDACTED:env_secret]');

    // A text carrier whose block does not parse: the errors quote the input.
    const text = `Here:\n\`\`\`agent-protocol\n{"kind": "act", "message": "${github}", "calls": [\n\`\`\``;
    const failed = oarIn(cwd, ['protocol', 'check', '--carrier', 'text'], text, env);
    expect(failed.code).toBe(1);
    expect(failed.stdout + failed.stderr).not.toContain(github);
  });

  it('transcript: the rendered Markdown', () => {
    const cwd = tempDir('oar-secrets-check-');
    dirs.push(cwd);
    const file = writeJson(cwd, 'transcript.json', {
      turns: [
        { kind: 'user', text: `my key is ${github} and ${providerKey}` },
        { kind: 'answer', text: 'noted' },
      ],
    });
    const result = oarIn(cwd, ['protocol', 'transcript', file], undefined, env);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('[REDACTED:github_token]');
    for (const secret of [github, providerKey]) expect(result.stdout + result.stderr).not.toContain(secret);
  });
});
