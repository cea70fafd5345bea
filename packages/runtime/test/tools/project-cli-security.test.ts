import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { LanguageModelV3 } from '@ai-sdk/provider';
import { type RuntimeEvent, ToolAgentOutputSchema } from '@oar/protocol';
import { CREDENTIAL_ENV, IDEMPOTENCY_KEY_ENV, issueCredential } from '@oar/tool-cli';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { CliToolConfigSchema } from '../../src/config/cli.js';
import {
  loadConfig,
  type ModelScript,
  OarRuntimeError,
  type RuntimeOptions,
  Store,
  Workspaces,
} from '../../src/index.js';
import { createScriptedModel } from '../../src/models/testing.js';
import { type Harness, harness } from '../engine/harness.js';
import { act, allEvents, answer, ofType, payload, waitFor } from '../engine/helpers.js';
import { SecretScanner } from '../support/secret-scan.js';
import { tempDir } from '../support/temp-dirs.js';

/**
 * project_cli's security constraints (Agent Tool Protocol, docs/tool-protocol.md "The process boundary"), each
 * through the real subprocess: the fixture CLI (fixtures/business/cli.mjs, on the SDK) run by a runtime on a real
 * SQLite store under a scripted model. No timing assertions: waits poll with generous limits.
 */
const FIXTURES = fileURLToPath(new URL('../fixtures/business/', import.meta.url));
const CLI = join(FIXTURES, 'cli.mjs');

/** A fresh random HS256 secret: realistic, and unique, so a scan for it cannot match anything else. */
const randomKey = () => `hs256-${randomBytes(24).toString('base64url')}`;

const open: Harness[] = [];
const envBefore = new Map<string, string | undefined>();
/** Set a variable of this process for the current test (restored after it). */
function setEnv(name: string, value: string | undefined): void {
  if (!envBefore.has(name)) envBefore.set(name, process.env[name]);
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}

afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
  for (const [name, value] of envBefore) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  envBefore.clear();
});

const cliCall = (id: string, module: string, method: string, input: Record<string, unknown>) => ({
  id,
  type: 'tool',
  name: 'project_cli',
  args: { module, method, input },
});

interface Started {
  h: Harness;
  sessionId: string;
  threadId: string;
  key: string;
  log: string;
  capture: string;
  /** Processes started for calls (the manifest's `--describe` is not a call). */
  starts: () => string[];
  /** Every credential a CLI process was given (FIXTURE_CAPTURE). */
  tokens: () => string[];
}

type CliConfigInput = z.input<typeof CliToolConfigSchema>;

function cliConfig(overrides: Partial<CliConfigInput> = {}): CliConfigInput {
  return {
    command: [process.execPath, CLI],
    allow: ['calendar.*', 'contacts.read'],
    env: ['FIXTURE_LOG', 'FIXTURE_CAPTURE'],
    cwd: FIXTURES,
    timeoutMs: 10_000,
    credential: { algorithm: 'HS256', keyEnv: 'FIXTURE_CLI_KEY' },
    ...overrides,
  };
}

function lines(file: string): string[] {
  return existsSync(file)
    ? readFileSync(file, 'utf8')
        .split('\n')
        .filter((line) => line !== '')
    : [];
}

async function start(
  script: ModelScript,
  overrides: Partial<CliConfigInput> = {},
  options: {
    permissions?: RuntimeOptions['permissions'];
    store?: Store;
    dir?: string;
    session?: { actor?: string; workspaceId?: string };
  } = {},
): Promise<Started> {
  const files = tempDir('oar-cli-sec-');
  const log = join(files, 'starts.log');
  const capture = join(files, 'credentials.txt');
  const key = randomKey();
  setEnv('FIXTURE_CLI_KEY', key);
  setEnv('FIXTURE_LOG', log);
  setEnv('FIXTURE_CAPTURE', capture);
  const h = await harness(script, {
    cli: cliConfig(overrides),
    bindTools: [],
    ...(options.permissions ? { permissions: options.permissions } : {}),
    ...(options.store ? { store: options.store } : {}),
  });
  open.push(h);
  if (options.session?.workspaceId) {
    await new Workspaces(h.store).create({ workspaceId: options.session.workspaceId, name: 'Business' });
  }
  const { sessionId, threadId } = await h.runtime.createSession(options.session ?? {});
  return {
    h,
    sessionId,
    threadId,
    key,
    log,
    capture,
    starts: () => lines(log).filter((line) => line !== '["--describe"]'),
    tokens: () => lines(capture),
  };
}

async function run(h: Harness, sessionId: string, input = 'go'): Promise<RuntimeEvent[]> {
  await h.runtime.submitTurn({ sessionId, input });
  await h.runtime.settled(sessionId);
  return allEvents(h, sessionId);
}

const record = (event: RuntimeEvent | undefined) => ToolAgentOutputSchema.parse(payload(event).toolAgentOutput);
const resultOf = (events: RuntimeEvent[], callId: string) =>
  events.find(
    (e) =>
      (e.type === 'tool.result' || e.type === 'tool.failed') &&
      (payload(e).graphActionId === callId || e.toolCallId?.endsWith(`.${callId}`)),
  );
const dataOf = (event: RuntimeEvent | undefined) => record(event).result?.data as Record<string, unknown>;
const oarCode = (event: RuntimeEvent | undefined) => (payload(event).error as { code?: string } | undefined)?.code;

/** Is the process gone? (ESRCH; EPERM would mean it exists under another user.) */
function dead(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** Wait, generously, for the grandchild `sleep 60` to be gone; no timing is asserted, only that it ends. */
async function expectDead(pid: number): Promise<void> {
  await waitFor(async () => dead(pid), 30_000);
  expect(dead(pid)).toBe(true);
}

describe('project_cli security: no shell, model strings never become argv', () => {
  it('argv is the same constant for every input; hostile strings arrive only as stdin JSON data', async () => {
    const marker = join(tempDir('oar-cli-marker-'), 'pwned');
    const inputs: Record<string, unknown>[] = [
      { token: '--token x' },
      { '--token': 'x', '--describe': true },
      { cmd: ';rm -rf /' },
      { text: 'line one\nline two\r\n--pretty' },
      { sub: '$(id)', touch: `$(touch ${marker})` },
      { tick: '`id`', touch: `\`touch ${marker}\`` },
      { amp: `x && touch ${marker} || true`, pipe: `| touch ${marker}`, redirect: `> ${marker}` },
      { nested: { argv: ['--store', '/etc/passwd'], quote: '"\'\\' } },
      { nul: 'a\u0000b', unicode: '—\u202Eevil' },
    ];
    const calls = inputs.map((input, i) => cliCall(`a${i}`, 'calendar', 'argv', input));
    const { h, sessionId, starts } = await start({ steps: [act(calls), answer('done')] });
    const events = await run(h, sessionId);
    for (const [i, input] of inputs.entries()) {
      const result = resultOf(events, `a${i}`);
      expect(result?.type).toBe('tool.result');
      // Byte-identical argv every time: only the whitelisted module and method.
      expect(dataOf(result).argv).toEqual(['calendar', 'argv']);
      // The strings arrived as data, exactly as sent (through stdin JSON).
      expect(dataOf(result).input).toEqual(input);
    }
    // One process per call (nothing a shell would have started), each with the constant argv.
    expect(starts()).toEqual(inputs.map(() => '["calendar","argv"]'));
    expect(existsSync(marker)).toBe(false);
  });

  it('a module or method that is not a plain name never reaches a process', async () => {
    const { h, sessionId, starts } = await start({
      steps: [
        act([
          cliCall('m1', 'calendar', 'argv --token x', {}),
          cliCall('m2', 'calendar;id', 'argv', {}),
          cliCall('m3', 'calendar', '$(id)', {}),
        ]),
        answer('done'),
      ],
    });
    const events = await run(h, sessionId);
    expect(ofType(events, 'tool.result')).toHaveLength(0);
    expect(ofType(events, 'tool.started')).toHaveLength(0);
    expect(starts()).toEqual([]);
  });
});

describe('project_cli security: environment and descriptors', () => {
  it('the CLI sees exactly the allowlisted variables; planted secrets and the store are not inherited', async () => {
    const planted = `planted-${randomBytes(16).toString('hex')}`;
    const openai = `sk-proj-${randomBytes(24).toString('hex')}`;
    const dbUrl = `postgres://app:${randomBytes(8).toString('hex')}@db.internal/app`;
    setEnv('OAR_TEST_PLANTED_SECRET', planted);
    setEnv('OPENAI_API_KEY', openai);
    setEnv('DATABASE_URL', dbUrl);
    setEnv('OAR_STORE_URL', dbUrl);
    setEnv('NODE_OPTIONS', '--require /nonexistent/inject.js');
    const { h, sessionId } = await start({
      steps: [act([cliCall('e1', 'calendar', 'env', {}), cliCall('f1', 'calendar', 'fds', {})]), answer('done')],
    });
    const events = await run(h, sessionId);
    const result = resultOf(events, 'e1');
    expect(result?.type).toBe('tool.result');
    const env = dataOf(result).env as Record<string, string>;
    const base = ['PATH', 'LANG', 'TZ'].filter((name) => process.env[name] !== undefined);
    expect(Object.keys(env).sort()).toEqual(
      [
        ...base,
        'FIXTURE_LOG',
        'FIXTURE_CAPTURE',
        // HS256: the shared secret is the CLI's verification key, passed under OAR's keyEnv.
        'FIXTURE_CLI_KEY',
        CREDENTIAL_ENV,
        'OAR_SESSION_ID',
        'OAR_TURN_ID',
        'OAR_TOOL_CALL_ID',
        'OAR_TIME_ZONE',
        IDEMPOTENCY_KEY_ENV,
      ].sort(),
    );
    expect(env.OAR_SESSION_ID).toBe(sessionId);
    // The call's idempotency key, as its tool.started records it.
    const started = ofType(events, 'tool.started').find((e) => e.toolCallId === result?.toolCallId);
    expect(env[IDEMPOTENCY_KEY_ENV]).toMatch(/^idem_[0-9a-f]{32}$/);
    expect(env[IDEMPOTENCY_KEY_ENV]).toBe(payload(started).idempotencyKey);
    expect(env.OAR_TOOL_CALL_ID).toBe(result?.toolCallId);
    expect(env.OAR_TURN_ID).toBe(result?.turnId);
    const text = JSON.stringify(events);
    for (const value of [planted, openai, dbUrl]) expect(text).not.toContain(value);

    // Descriptors: 0, 1, 2 are the call's own pipes; beyond them only what any child of this process has (Node's
    // own epoll/eventfd/pipes, identical in a bare `spawnSync` baseline); never the SQLite store.
    const fds = dataOf(resultOf(events, 'f1')).fds as { fd: number; target: string | null }[];
    const dbFile = join(h.dir, 'oar.db');
    expect(fds.some((f) => f.target?.startsWith(h.dir))).toBe(false);
    expect(fds.some((f) => f.target?.includes(dbFile))).toBe(false);
    const std = fds.filter((f) => f.fd <= 2).map((f) => f.target?.replace(/\[\d+\]$/, ''));
    expect(std).toHaveLength(3);
    for (const target of std) expect(['socket:', 'pipe:']).toContain(target);
    const token = await issueCredential(
      { sub: 'user:baseline', ws: 'default', ops: ['calendar.fds'] },
      { algorithm: 'HS256', secret: process.env.FIXTURE_CLI_KEY as string },
      300,
    );
    const baseline = spawnSync(process.execPath, [CLI, 'calendar', 'fds'], {
      input: '{}',
      cwd: FIXTURES,
      env: { PATH: process.env.PATH ?? '', FIXTURE_CLI_KEY: process.env.FIXTURE_CLI_KEY, [CREDENTIAL_ENV]: token },
    });
    const bare = (JSON.parse(baseline.stdout.toString()) as { data: { fds: typeof fds } }).data.fds;
    const kinds = (list: typeof fds) =>
      list
        .filter((f) => f.fd > 2 && f.target !== null)
        .map((f) => (f.target as string).replace(/\[\d+\]$/, '[]'))
        .sort();
    expect(kinds(fds)).toEqual(kinds(bare));
  });
});

describe('project_cli security: the credential is never recorded', () => {
  it('no sink holds a credential or the signing key: events, exports, read models, artifacts, the database file', async () => {
    const { h, sessionId, threadId, key, tokens, capture } = await start(
      {
        steps: [
          act([
            // A success that returns the whole environment (the JWT and the HS256 key among it).
            cliCall('env', 'calendar', 'env', {}),
            // A success, with its own credential.
            cliCall('read', 'calendar', 'read', { mode: 'day', date: '2026-12-01' }),
            // A failure whose message and stderr hold the JWT and the key.
            cliCall('boom', 'calendar', 'boom', {}),
            // Non-JSON stdout holding both, exit 3 (stdout and stderr end up in the failure's diagnostics).
            cliCall('leak', 'calendar', 'leak', {}),
          ]),
          answer('done'),
        ],
      },
      {},
    );
    const events = await run(h, sessionId);
    expect(resultOf(events, 'env')?.type).toBe('tool.result');
    expect(resultOf(events, 'read')?.type).toBe('tool.result');
    expect(resultOf(events, 'boom')?.type).toBe('tool.failed');
    expect(oarCode(resultOf(events, 'boom'))).toBe('cli_failed');
    expect(resultOf(events, 'leak')?.type).toBe('tool.failed');
    expect(oarCode(resultOf(events, 'leak'))).toBe('cli_exit_nonzero');
    // The secrets were really there to leak: one credential per call (per: call), captured outside the store, and
    // the env call's output held the token and the key.
    const jwts = tokens();
    expect(jwts).toHaveLength(4);
    expect(new Set(jwts).size).toBe(4);
    const env = dataOf(resultOf(events, 'env')).env as Record<string, string>;
    // In the record, the env call's token and key are redaction markers, not values.
    expect(env[CREDENTIAL_ENV]).toMatch(/\[REDACTED:[a-z_]+\]/);
    expect(env.FIXTURE_CLI_KEY).toMatch(/\[REDACTED:[a-z_]+\]/);
    expect(ofType(events, 'output.redacted').length).toBeGreaterThan(0);

    const secrets = [
      { label: 'hs256_key', value: key, fragments: [] as string[] },
      ...jwts.map((jwt, i) => {
        const [, claims, signature] = jwt.split('.') as [string, string, string];
        return { label: `jwt#${i}`, value: jwt, fragments: [claims.slice(0, 40), signature.slice(0, 24)] };
      }),
    ];
    const scanner = new SecretScanner(secrets);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    const hits = [
      ...scanner.text(JSON.stringify(events), 'events'),
      ...scanner.text(JSON.stringify(await h.runtime.exportReplay(sessionId)), 'replay export'),
      ...scanner.text(JSON.stringify(await h.runtime.exportEvidence(sessionId)), 'evidence export'),
      ...scanner.text(JSON.stringify(await h.runtime.getSession({ sessionId, limit: 10_000 })), 'snapshot'),
      ...scanner.text(JSON.stringify(read), 'thread read model'),
    ];
    // Every artifact a tool event names, by its bytes (the records' JSON artifacts included).
    const refs = new Set(
      JSON.stringify(events)
        .match(/artifact:\/\/[A-Za-z0-9_.:-]+/g)
        ?.map((ref) => ref.replace('artifact://', '')),
    );
    expect(refs.size).toBeGreaterThan(0);
    for (const artifactId of refs) {
      const artifact = await h.runtime.getArtifact({ sessionId, artifactId });
      hits.push(...scanner.text(artifact.bytes, `artifact ${artifactId}`));
    }
    // The database file's bytes (free pages and WAL included) and every row of every table.
    await h.runtime.close();
    await h.store.close();
    open.splice(open.indexOf(h), 1);
    hits.push(...(await scanner.sqlite(join(h.dir, 'oar.db'))));
    hits.push(...(await scanner.directory(h.dir)));
    expect(hits).toEqual([]);
    // Positive control: the same scanner finds every token in the capture file (outside the store).
    expect(new SecretScanner(secrets).text(readFileSync(capture, 'utf8'), 'capture file')).toHaveLength(jwts.length);
  });
});

describe('project_cli security: identity is the credential', () => {
  it('owner_id in the input is data; the local user is the subject', async () => {
    const { h, sessionId } = await start({
      steps: [act([cliCall('r1', 'calendar', 'read', { mode: 'day', owner_id: 'user:admin' })]), answer('ok')],
    });
    const data = dataOf(resultOf(await run(h, sessionId), 'r1'));
    expect(data.asked_owner).toBe('user:admin');
    expect(data.owner).toMatch(/^user:/);
    expect(data.owner).not.toBe('user:admin');
    expect(data.workspace).toBe('default');
    expect(data.ops).toEqual(['calendar.read']);
  });

  it('a session created by an API key in a workspace acts as that key, in that workspace', async () => {
    const { h, sessionId } = await start(
      {
        steps: [act([cliCall('r1', 'calendar', 'read', { mode: 'day', owner_id: 'api_key:key_admin' })]), answer('ok')],
      },
      {},
      { session: { actor: 'api_key:key_x', workspaceId: 'biz' } },
    );
    const data = dataOf(resultOf(await run(h, sessionId), 'r1'));
    expect(data).toMatchObject({
      owner: 'api_key:key_x',
      workspace: 'biz',
      asked_owner: 'api_key:key_admin',
      ops: ['calendar.read'],
    });
  });
});

describe('project_cli security: forged, expired, out-of-scope and missing credentials', () => {
  it('a credential signed with another key than the CLI verifies with is refused by the CLI', async () => {
    // OAR signs with OAR_SIGNING_KEY; the CLI verifies with FIXTURE_CLI_KEY (passed through by name): they differ.
    setEnv('OAR_SIGNING_KEY', randomKey());
    const { h, sessionId, starts } = await start(
      { steps: [act([cliCall('r1', 'calendar', 'read', { mode: 'day' })]), answer('refused')] },
      {
        env: ['FIXTURE_LOG', 'FIXTURE_CAPTURE', 'FIXTURE_CLI_KEY'],
        credential: { algorithm: 'HS256', keyEnv: 'OAR_SIGNING_KEY' },
      },
    );
    const events = await run(h, sessionId);
    const failed = resultOf(events, 'r1');
    expect(failed?.type).toBe('tool.failed');
    expect(oarCode(failed)).toBe('credential_invalid');
    expect(record(failed).error).toMatchObject({ code: 'CREDENTIAL_INVALID', module: 'calendar', method: 'read' });
    // The process did start (it is the CLI that refused), once.
    expect(starts()).toEqual(['["calendar","read"]']);
  });

  it('a missing signing key variable is credential_unavailable and no process starts', async () => {
    setEnv('OAR_ABSENT_KEY', undefined);
    const { h, sessionId, starts } = await start(
      { steps: [act([cliCall('r1', 'calendar', 'read', { mode: 'day' })]), answer('no key')] },
      { credential: { algorithm: 'HS256', keyEnv: 'OAR_ABSENT_KEY' } },
    );
    const events = await run(h, sessionId);
    const failed = resultOf(events, 'r1');
    expect(failed?.type).toBe('tool.failed');
    expect(oarCode(failed)).toBe('credential_unavailable');
    expect(starts()).toEqual([]);
  });

  it('the CLI refuses expired, forged, unsigned, out-of-scope and absent credentials (real process)', async () => {
    const key = randomKey();
    const runCli = (method: string, token: string | undefined) => {
      const out = spawnSync(process.execPath, [CLI, 'calendar', method], {
        input: JSON.stringify({ mode: 'day' }),
        cwd: FIXTURES,
        env: { PATH: process.env.PATH ?? '', FIXTURE_CLI_KEY: key, ...(token ? { [CREDENTIAL_ENV]: token } : {}) },
      });
      return { status: out.status, output: JSON.parse(out.stdout.toString()) as Record<string, unknown> };
    };
    const claims = { sub: 'user:tester', ws: 'default', ops: ['calendar.read'] };
    const hs = { algorithm: 'HS256' as const, secret: key };
    const good = await issueCredential(claims, hs, 300);
    expect(runCli('read', good)).toMatchObject({ status: 0, output: { ok: true, data: { owner: 'user:tester' } } });
    const code = (result: ReturnType<typeof runCli>) => (result.output.error as { code: string }).code;

    const expired = await issueCredential(claims, hs, -3600);
    expect(code(runCli('read', expired))).toBe('CREDENTIAL_EXPIRED');
    const forged = await issueCredential(claims, { algorithm: 'HS256', secret: randomKey() }, 300);
    expect(code(runCli('read', forged))).toBe('CREDENTIAL_INVALID');
    // The same claims with the signature of another token, and an unsigned (alg: none) token.
    const [head, body] = good.split('.') as [string, string, string];
    const spliced = `${head}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(body, 'base64url').toString()), sub: 'user:root' })).toString('base64url')}.${good.split('.')[2]}`;
    expect(code(runCli('read', spliced))).toBe('CREDENTIAL_INVALID');
    const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${body}.`;
    expect(code(runCli('read', none))).toBe('CREDENTIAL_INVALID');
    // Scope: a credential for calendar.read does not run calendar.delete.
    expect(code(runCli('delete', good))).toBe('ACTION_NOT_ALLOWED');
    expect(code(runCli('read', undefined))).toBe('CREDENTIAL_MISSING');
    for (const refused of [expired, forged, spliced, none]) expect(runCli('read', refused).status).not.toBe(0);
  });

  it('a credential TTL outside 300-600 seconds is an invalid configuration', async () => {
    const parse = (ttlSeconds: number) =>
      CliToolConfigSchema.safeParse(cliConfig({ credential: { algorithm: 'HS256', keyEnv: 'K', ttlSeconds } })).success;
    expect([299, 300, 600, 601, 3600, 0].map(parse)).toEqual([false, true, true, false, false, false]);
    // Through oar.config.json: invalid_config, naming the field.
    const dir = tempDir('oar-cli-config-');
    writeFileSync(
      join(dir, 'oar.config.json'),
      JSON.stringify({
        tools: { cli: cliConfig({ credential: { algorithm: 'HS256', keyEnv: 'K', ttlSeconds: 3600 } }) },
      }),
    );
    let thrown: unknown;
    try {
      await loadConfig(undefined, dir);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(OarRuntimeError);
    expect((thrown as OarRuntimeError).code).toBe('invalid_config');
    expect(JSON.stringify((thrown as OarRuntimeError).error.details)).toContain('tools.cli.credential.ttlSeconds');
    // Programmatic options: Runtime.create parses them with the same schema and throws its error (a ZodError,
    // as for the other option schemas), so nothing is bound and nothing runs.
    setEnv('FIXTURE_CLI_KEY', randomKey());
    thrown = undefined;
    try {
      open.push(
        await harness(
          { steps: [answer('never')] },
          {
            cli: cliConfig({ credential: { algorithm: 'HS256', keyEnv: 'FIXTURE_CLI_KEY', ttlSeconds: 299 } }),
            bindTools: [],
          },
        ),
      );
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(z.ZodError);
    expect((thrown as z.ZodError).issues.map((i) => i.path.join('.'))).toEqual(['credential.ttlSeconds']);
  });
});

describe('project_cli security: the process group dies with the call', () => {
  it('a timeout kills the CLI and the grandchild it started', async () => {
    const pidFile = join(tempDir('oar-cli-pid-'), 'grandchild.pid');
    const { h, sessionId } = await start(
      { steps: [act([cliCall('h1', 'calendar', 'hang', { pidFile })]), answer('gave up')] },
      // Long enough for the fixture CLI (node + zod) to start and write the pid on a loaded 2-core CI machine:
      // at 1 s it sometimes timed out before the grandchild existed, and the test then had nothing to check.
      { timeoutMs: 5000 },
    );
    const events = await run(h, sessionId);
    const failed = resultOf(events, 'h1');
    expect(failed?.type).toBe('tool.failed');
    expect(oarCode(failed)).toBe('tool_timeout');
    expect(record(failed).error?.code).toBe('CLI_TIMEOUT');
    const pid = Number(readFileSync(pidFile, 'utf8'));
    expect(pid).toBeGreaterThan(0);
    await expectDead(pid);
  });

  it('an interrupt mid-call kills the CLI and the grandchild it started', async () => {
    const pidFile = join(tempDir('oar-cli-pid-'), 'grandchild.pid');
    const { h, sessionId } = await start(
      { steps: [act([cliCall('h1', 'calendar', 'hang', { pidFile })]), answer('stopped')] },
      { timeoutMs: 120_000 },
    );
    await h.runtime.submitTurn({ sessionId, input: 'hang' });
    const pid = await waitFor(async () => (existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8')) : 0), 30_000);
    expect(dead(pid)).toBe(false);
    await h.runtime.interruptTurn({ sessionId, reason: 'stop it' });
    await h.runtime.settled(sessionId);
    await expectDead(pid);
    const events = await allEvents(h, sessionId);
    const ended = resultOf(events, 'h1');
    expect(ended?.type).toBe('tool.failed');
    expect(oarCode(ended)).toBe('interrupted');
    expect(record(ended).error?.code).toBe('INTERRUPTED');
  });
});

describe('project_cli security: output faults', () => {
  it('non-JSON stdout, a non-zero exit without a result, and stdout over the cap each fail with their code', async () => {
    const { h, sessionId } = await start(
      {
        steps: [
          act([
            cliCall('g0', 'calendar', 'garbage', {}),
            cliCall('g3', 'calendar', 'garbage', { exit: 3 }),
            cliCall('sp', 'calendar', 'spew', { bytes: 100_000 }),
            cliCall('ok', 'calendar', 'spew', { bytes: 100 }),
          ]),
          answer('done'),
        ],
      },
      // The cap applies to --describe too: 16 KiB holds the fixture's manifest, not 100 000 bytes of output.
      { maxOutputBytes: 16 * 1024 },
    );
    const events = await run(h, sessionId);
    const expected = [
      ['g0', 'cli_output_invalid', 'CLI_OUTPUT_INVALID'],
      ['g3', 'cli_exit_nonzero', 'CLI_EXIT_NONZERO'],
      ['sp', 'cli_output_too_large', 'CLI_OUTPUT_TOO_LARGE'],
    ];
    for (const [id, code, toolCode] of expected) {
      const failed = resultOf(events, id as string);
      expect(failed?.type).toBe('tool.failed');
      expect(oarCode(failed)).toBe(code);
      expect(record(failed)).toMatchObject({ status: 'failure', result: null, error: { code: toolCode } });
    }
    expect(resultOf(events, 'ok')?.type).toBe('tool.result');
  });

  it('a command that does not exist: the binding cannot bind (binding_unavailable), no turn runs a call', async () => {
    setEnv('FIXTURE_CLI_KEY', randomKey());
    const h = await harness(
      { steps: [act([cliCall('r1', 'calendar', 'read', { mode: 'day' })]), answer('never')] },
      { cli: cliConfig({ command: ['/nonexistent/oar-business-cli'] }), bindTools: [] },
    );
    open.push(h);
    let thrown: unknown;
    try {
      await h.runtime.checkBinding();
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(OarRuntimeError);
    expect((thrown as OarRuntimeError).code).toBe('binding_unavailable');
    const { sessionId, threadId } = await h.runtime.createSession();
    const events = await run(h, sessionId);
    expect(ofType(events, 'tool.started')).toHaveLength(0);
    expect(ofType(events, 'tool.result')).toHaveLength(0);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'failed', error: { code: 'binding_unavailable' } });
  });

  it('a CLI that never answers --describe: binding_unavailable after describeTimeoutMs, not the call limit', async () => {
    setEnv('FIXTURE_CLI_KEY', randomKey());
    const silent = join(tempDir('oar-cli-silent-'), 'silent.mjs');
    writeFileSync(silent, 'setInterval(() => {}, 1000);\n');
    const h = await harness(
      { steps: [answer('never')] },
      { cli: cliConfig({ command: [process.execPath, silent], describeTimeoutMs: 300 }), bindTools: [] },
    );
    open.push(h);
    const thrown = await h.runtime.checkBinding().then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(thrown).toBeInstanceOf(OarRuntimeError);
    expect((thrown as OarRuntimeError).error).toMatchObject({ code: 'binding_unavailable', retryable: true });
    expect((thrown as OarRuntimeError).message).toContain('did not answer --describe within 300 ms');
  });

  it('a CLI that disappears after binding fails the call with cli_unavailable', async () => {
    const link = join(tempDir('oar-cli-link-'), 'node');
    symlinkSync(process.execPath, link);
    const { h, sessionId } = await start(
      {
        steps: [
          act([cliCall('r1', 'calendar', 'read', { mode: 'day' })]),
          answer('first'),
          act([cliCall('r2', 'calendar', 'read', { mode: 'day' })]),
          answer('second'),
        ],
      },
      { command: [link, CLI] },
    );
    expect(resultOf(await run(h, sessionId), 'r1')?.type).toBe('tool.result');
    unlinkSync(link);
    const events = await run(h, sessionId, 'again');
    const failed = resultOf(events, 'r2');
    expect(failed?.type).toBe('tool.failed');
    expect(oarCode(failed)).toBe('cli_unavailable');
    expect(record(failed).error?.code).toBe('CLI_UNAVAILABLE');
  });
});

describe('project_cli security: approvals and operation rules', () => {
  it('an approval of calendar.delete survives a restart; approved, the delete runs once', async () => {
    const script = { steps: [act([cliCall('d1', 'calendar', 'delete', { event_id: 'evt_1' })]), answer('deleted')] };
    const first = await start(script);
    await first.h.runtime.submitTurn({ sessionId: first.sessionId, input: 'delete it' });
    await first.h.runtime.settled(first.sessionId);
    const asked = ofType(await allEvents(first.h, first.sessionId), 'action.required')[0];
    expect((payload(asked).scope as { operation?: string }).operation).toBe('calendar.delete');
    expect(first.starts()).toEqual([]);
    await first.h.runtime.close();
    await first.h.store.close();
    open.splice(open.indexOf(first.h), 1);

    // A new runtime on the same SQLite file: still pending, nothing ran.
    const store = await Store.open(join(first.h.dir, 'oar.db'));
    const second = await harness(script, {
      store,
      workspaceRoot: first.h.workspace,
      cli: cliConfig(),
      bindTools: [],
    });
    open.push(second);
    await second.runtime.settled(first.sessionId);
    const read = await second.runtime.getThreadRead({ sessionId: first.sessionId, threadId: first.threadId });
    expect(read.status).toBe('blocked');
    expect(read.pendingRequests.map((p) => p.actionId)).toEqual([asked?.actionId]);
    expect(first.starts()).toEqual([]);
    await second.runtime.respondAction({
      sessionId: first.sessionId,
      actionId: asked?.actionId as string,
      decision: 'approve',
    });
    await second.runtime.settled(first.sessionId);
    const events = await allEvents(second, first.sessionId);
    expect(dataOf(resultOf(events, 'd1'))).toEqual({ deleted: 'evt_1' });
    expect(first.starts()).toEqual(['["calendar","delete"]']);
    const after = await second.runtime.getThreadRead({ sessionId: first.sessionId, threadId: first.threadId });
    expect(after.lastOutcome).toMatchObject({ status: 'completed', answer: 'deleted' });
  });

  it('deny with operation calendar.delete denies; allow with operation calendar.read allows', async () => {
    const { h, sessionId, starts } = await start(
      {
        steps: [
          act([
            cliCall('r1', 'calendar', 'read', { mode: 'day' }),
            cliCall('d1', 'calendar', 'delete', { event_id: 'e' }),
          ]),
          answer('done'),
        ],
      },
      {},
      {
        permissions: {
          mode: 'default',
          rules: [
            { decision: 'deny', tool: 'project_cli', operation: 'calendar.delete' },
            { decision: 'allow', tool: 'project_cli', operation: 'calendar.read' },
          ],
        },
      },
    );
    const events = await run(h, sessionId);
    const decisions = ofType(events, 'permission.evaluated').map((e) => [payload(e).operation, payload(e).decision]);
    expect(decisions).toContainEqual(['calendar.read', 'allow']);
    expect(decisions).toContainEqual(['calendar.delete', 'deny']);
    expect(ofType(events, 'action.required')).toHaveLength(0);
    expect(resultOf(events, 'r1')?.type).toBe('tool.result');
    expect(starts()).toEqual(['["calendar","read"]']);
  });
});

describe('project_cli security: the record reads back exactly', () => {
  it('after a restart the event, its artifact and a replay agree with what was recorded', async () => {
    const script = {
      steps: [act([cliCall('r1', 'calendar', 'read', { mode: 'day', date: '2026-12-02' })]), answer('read')],
    };
    const first = await start(script);
    const before = resultOf(await run(first.h, first.sessionId), 'r1');
    const recorded = record(before);
    expect(recorded).toMatchObject({ status: 'success', result: { module: 'calendar', method: 'read' } });
    await first.h.runtime.close();
    await first.h.store.close();
    open.splice(open.indexOf(first.h), 1);

    // A new process on the same file, with a model that records what it is shown.
    const prompts: string[] = [];
    const store = await Store.open(join(first.h.dir, 'oar.db'));
    const second = await harness(script, {
      store,
      workspaceRoot: first.h.workspace,
      cli: cliConfig(),
      bindTools: [],
      model: () => {
        const inner = createScriptedModel({ steps: [...script.steps, answer('again')] });
        const model: LanguageModelV3 = {
          specificationVersion: inner.specificationVersion,
          provider: inner.provider,
          modelId: inner.modelId,
          supportedUrls: inner.supportedUrls,
          doGenerate: (options) => {
            prompts.push(JSON.stringify(options.prompt));
            return inner.doGenerate(options);
          },
          doStream: (options) => {
            prompts.push(JSON.stringify(options.prompt));
            return inner.doStream(options);
          },
        };
        return { model, provider: 'oar-script', modelId: inner.modelId, supportsForcedToolChoice: true };
      },
    });
    open.push(second);
    const after = resultOf(await allEvents(second, first.sessionId), 'r1');
    expect(payload(after).toolAgentOutput).toEqual(payload(before).toolAgentOutput);
    expect(record(after)).toEqual(recorded);
    const ref = payload(after).toolAgentOutputRef as string;
    const artifact = await second.runtime.getArtifact({
      sessionId: first.sessionId,
      artifactId: ref.replace('artifact://', ''),
    });
    expect(JSON.parse(Buffer.from(artifact.bytes).toString('utf8'))).toEqual(recorded);
    const replay = await second.runtime.replaySession(first.sessionId);
    expect(replay.differences).toEqual([]);
    expect(replay.contradictions).toEqual([]);
    expect(replay.equal).toBe(true);
    // The context rebuilt from the log shows the model the very observation it saw before the restart.
    const seen = (payload(before).observation as { content?: string }).content as string;
    expect(JSON.parse(seen)).toEqual({ status: 'success', ...recorded.result });
    await second.runtime.submitTurn({ sessionId: first.sessionId, input: 'and now?' });
    await second.runtime.settled(first.sessionId);
    expect(prompts.length).toBeGreaterThan(0);
    expect(prompts.at(-1)).toContain(JSON.stringify(seen).slice(1, -1));
    expect((await second.runtime.replaySession(first.sessionId)).equal).toBe(true);
  });
});
