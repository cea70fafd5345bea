import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { afterAll, describe, expect, it } from 'vitest';
import { dropSchema, POSTGRES_URL, postgresUnavailable } from '../../runtime/test/support/stores.js';
import { ndjson, oarIn, repoRoot, spawnOar, tempDir, writeJson } from './cli-helpers.js';

/**
 * The runner host end to end through the real `oar` binary on SQLite: discovery (`oar runners list`), and one turn of
 * the example local-agent runner (a child process on the runner SDK) with a scripted model, a governed tool call,
 * the audit trail and the answer in `oar inspect` (docs/runners.md).
 */

const LOCAL_AGENT = join(repoRoot, 'examples/runners/local-agent');
const PYTHON_ECHO = join(repoRoot, 'examples/runners/python-echo');
const OPENAI_AGENTS = join(repoRoot, 'examples/runners/openai-agents');
const RUNNER_ID = 'plugin:oar/local-agent/default';

function project(extra: Record<string, unknown> = {}) {
  const dir = tempDir('oar-runners-');
  writeFileSync(join(dir, 'notes.txt'), 'The secret word is pineapple.\n');
  writeJson(dir, 'script.json', {
    description: 'local-agent: one read through tools.call, then the answer',
    steps: [
      { toolCalls: [{ name: 'read', arguments: { filePath: 'notes.txt' } }] },
      { text: 'The notes say the secret word is pineapple.' },
    ],
  });
  const bad = join(dir, 'not-a-runner');
  mkdirSync(bad);
  writeJson(dir, 'oar.config.json', {
    model: 'script:script.json',
    runners: { packages: [LOCAL_AGENT, PYTHON_ECHO, OPENAI_AGENTS, bad] },
    ...extra,
  });
  return dir;
}

describe('oar runners list', () => {
  it('lists the example runner and says why a package was skipped', () => {
    const dir = project();
    const listed = oarIn(dir, ['runners', 'list', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const found = JSON.parse(listed.stdout) as {
      runners: { id: string; package: string; manifest: { permissions: { models: string[] } } }[];
      diagnostics: { package: string; reason: string }[];
    };
    expect(found.runners.map((r) => r.id)).toEqual([
      RUNNER_ID,
      'plugin:oar/python-echo/echo',
      'plugin:oar/openai-agents/default',
    ]);
    expect(found.runners[0]?.package).toBe(LOCAL_AGENT);
    expect(found.runners[0]?.manifest.permissions.models).toEqual(['invoke', 'stream']);
    expect(found.diagnostics).toHaveLength(1);
    expect(found.diagnostics[0]?.package).toBe(join(dir, 'not-a-runner'));
    expect(found.diagnostics[0]?.reason).toMatch(/oar-runner\.json/);
    const human = oarIn(dir, ['runners', 'list']);
    expect(human.stdout).toContain(RUNNER_ID);
    expect(human.stdout).toContain('skipped:');
  });
});

function endToEnd(storeFor: (dir: string) => string) {
  it('runs one turn on the local-agent runner with its facts in the log and its answer in inspect', () => {
    const dir = project();
    const store = storeFor(dir);
    const run = oarIn(dir, ['run', '--runner', RUNNER_ID, 'What do the notes say?', '--json', '--store', store]);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const events = ndjson(run.stdout).filter((e) => typeof e.type === 'string' && typeof e.sequence === 'number');
    const types = events.map((e) => e.type);
    const sessionId = events[0]?.sessionId as string;
    // Gap-free: the log as printed has every sequence once, in order.
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    // The run is a task attempt of the turn.
    const task = events.find((e) => e.type === 'task.created');
    expect(((task?.payload ?? {}) as { taskKind?: string }).taskKind).toBe('runner');
    expect(types).toContain('task.attempt.started');
    expect(types).toContain('task.attempt.completed');
    // The frozen access: ids and ops only.
    const access = events.find((e) => (e.payload as { phase?: string }).phase === 'runner_access');
    const granted = ((access?.payload ?? {}) as { runner: { access: { models: string[]; tools: string[] } } }).runner
      .access;
    expect(granted.models).toContain('default');
    expect(granted.tools).toContain('read');
    // Both model calls went through OAR's model layer, the tool call through the governed path.
    expect(types.filter((t) => t === 'model.requested')).toHaveLength(2);
    expect(types.filter((t) => t === 'model.completed')).toHaveLength(2);
    expect(types).toContain('permission.evaluated');
    const result = events.find((e) => e.type === 'tool.result');
    expect(((result?.payload ?? {}) as { toolName: string }).toolName).toBe('read');
    // Every proxy call is audited.
    const audits = events
      .filter((e) => (e.payload as { phase?: string }).phase === 'runner_api')
      .map((e) => (e.payload as { runner: { action: string; result: string } }).runner);
    expect(audits).toEqual([
      expect.objectContaining({ action: 'models.stream', result: 'allowed' }),
      expect.objectContaining({ action: 'tools.call', result: 'allowed' }),
      expect.objectContaining({ action: 'models.stream', result: 'allowed' }),
    ]);
    // The runner's own view of the tool call is linked to the proxy call, not counted again.
    const linked = events
      .filter((e) => (e.payload as { phase?: string }).phase === 'runner_tool')
      .map((e) => (e.payload as { runner: { linkedToProxyCall: boolean; event: string } }).runner);
    expect(linked).toContainEqual(expect.objectContaining({ event: 'tool.call.completed', linkedToProxyCall: true }));
    const completed = events.find((e) => e.type === 'turn.completed');
    expect(((completed?.payload ?? {}) as { answer: string }).answer).toBe(
      'The notes say the secret word is pineapple.',
    );

    const inspect = oarIn(dir, ['inspect', sessionId, '--json', '--store', store]);
    expect(inspect.code).toBe(0);
    const snapshot = JSON.parse(inspect.stdout) as { threads: { turns: { status: string; answer?: string }[] }[] };
    expect(snapshot.threads[0]?.turns[0]?.status).toBe('completed');
    expect(JSON.stringify(snapshot)).toContain('pineapple');
    const replay = oarIn(dir, ['replay', sessionId, '--store', store]);
    expect(replay.code, replay.stdout).toBe(0);
    expect((JSON.parse(replay.stdout) as { equal: boolean }).equal).toBe(true);
  });

  it('runs the OpenAI Agents SDK adapter; turn 2 continues its own session with no host bootstrap', () => {
    const dir = project();
    writeJson(dir, 'script.json', {
      steps: [
        { toolCalls: [{ name: 'read', arguments: { filePath: 'notes.txt' } }] },
        { text: 'The secret word is pineapple.' },
        { text: 'You asked me about the notes: pineapple.' },
      ],
    });
    const store = storeFor(dir);
    const id = 'plugin:oar/openai-agents/default';
    const first = oarIn(dir, ['run', '--runner', id, 'What do the notes say?', '--json', '--store', store]);
    expect(first.code, `${first.stdout}\n${first.stderr}`).toBe(0);
    const sessionId = ndjson(first.stdout)[0]?.sessionId as string;
    const second = oarIn(dir, ['run', '--session', sessionId, 'What did I ask?', '--json', '--store', store]);
    expect(second.code, `${second.stdout}\n${second.stderr}`).toBe(0);
    const log = ndjson(oarIn(dir, ['events', sessionId, '--json', '--store', store]).stdout);
    const answers = log.filter((e) => e.type === 'turn.completed').map((e) => (e.payload as { answer: string }).answer);
    expect(answers).toEqual(['The secret word is pineapple.', 'You asked me about the notes: pineapple.']);
    // The library's model calls went through the host; the tool through the governed path.
    expect(log.filter((e) => e.type === 'model.completed')).toHaveLength(3);
    expect(log.filter((e) => e.type === 'tool.result')).toHaveLength(1);
    // Its session pointer is host-owned state, set in turn 1 and handed to turn 2.
    const pointer = log.find(
      (e) =>
        e.type === 'thread.updated' &&
        (e.payload as { state?: { key: string } }).state?.key === 'runner:conversation:external.session_id',
    );
    expect(pointer).toBeDefined();
    // Turn 2's model request carried turn 1's items (system, user, call, result, answer, user) although the host
    // inlined nothing (bootstrap none).
    const requests = log
      .filter((e) => e.type === 'model.requested')
      .map((e) => (e.payload as { messageCount: number }).messageCount);
    expect(requests[2]).toBeGreaterThanOrEqual(6);
    const contexts = log.filter((e) => ((e.payload ?? {}) as { phase?: string }).phase === 'runner_access');
    expect(contexts).toHaveLength(2);
    expectGapFree(log);
    expectAnswersInInspect(dir, store, sessionId, [
      'The secret word is pineapple.',
      'You asked me about the notes: pineapple.',
    ]);
  });

  it('runs the Python runner end to end with the session model', () => {
    const dir = project();
    writeJson(dir, 'script.json', { steps: [{ text: 'Hello from the scripted model.' }] });
    const store = storeFor(dir);
    const run = oarIn(dir, ['run', '--runner', 'plugin:oar/python-echo/echo', 'hi', '--json', '--store', store]);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const events = ndjson(run.stdout);
    expect(events.filter((e) => e.type === 'model.completed')).toHaveLength(1);
    const completed = events.find((e) => e.type === 'turn.completed');
    expect(((completed?.payload ?? {}) as { answer: string }).answer).toBe('Hello from the scripted model.');
    const sessionId = events[0]?.sessionId as string;
    const log = ndjson(oarIn(dir, ['events', sessionId, '--json', '--store', store]).stdout);
    expect(log.find((e) => e.type === 'task.created')?.payload).toMatchObject({ taskKind: 'runner' });
    expectGapFree(log);
    expectAnswersInInspect(dir, store, sessionId, ['Hello from the scripted model.']);
  });
}

/** The session's log as `oar events` prints it has every sequence once, in order, from 1. */
function expectGapFree(log: Record<string, unknown>[]) {
  const sequences = log.filter((e) => typeof e.sequence === 'number').map((e) => e.sequence);
  expect(sequences.length).toBeGreaterThan(0);
  expect(sequences).toEqual(sequences.map((_, i) => i + 1));
}

/**
 * `oar inspect` shows one completed turn per answer, the last one's answer as the thread's outcome, and each turn's
 * runner run as a completed task attempt ending with that turn's answer.
 */
function expectAnswersInInspect(dir: string, store: string, sessionId: string, answers: string[]) {
  const inspect = oarIn(dir, ['inspect', sessionId, '--json', '--store', store]);
  expect(inspect.code, inspect.stderr).toBe(0);
  const snapshot = JSON.parse(inspect.stdout) as {
    threads: { turns: { turnId: string; status: string }[]; lastOutcome?: { status: string; answer?: string } }[];
    tasks: { turnId: string; taskKind: string; status: string; attempts: { completionSummary?: string }[] }[];
  };
  const turns = snapshot.threads[0]?.turns ?? [];
  expect(turns.map((t) => t.status)).toEqual(answers.map(() => 'completed'));
  expect(snapshot.threads[0]?.lastOutcome).toMatchObject({ status: 'completed', answer: answers.at(-1) });
  // The tasks are not listed in turn order: each turn's runner task is found by its turn.
  const runs = turns.map((turn) => snapshot.tasks.find((t) => t.turnId === turn.turnId && t.taskKind === 'runner'));
  expect(runs.map((t) => [t?.status, t?.attempts.at(-1)?.completionSummary])).toEqual(
    answers.map((a) => ['completed', a]),
  );
}

describe('oar run --runner on SQLite', () => {
  endToEnd((dir) => join(dir, 'oar.db'));
});

describe('oar run --runner on PostgreSQL', async () => {
  const unavailable = await postgresUnavailable();
  if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
  if (unavailable) {
    console.warn(`SKIPPED PostgreSQL runner test: ${unavailable.message}`);
    return;
  }
  const schemas: string[] = [];
  afterAll(async () => {
    for (const schema of schemas) await dropSchema(schema);
  });
  endToEnd(() => {
    const schema = `oar_runner_${Math.random().toString(36).slice(2, 10)}`;
    schemas.push(schema);
    return `${POSTGRES_URL}?schema=${schema}`;
  });
});

describe('oar run --runner: refusals', () => {
  it('refuses an id no configured package provides, before anything is recorded', () => {
    const dir = project();
    const run = oarIn(dir, ['run', '--runner', 'plugin:nobody/none/x', 'hi', '--store', join(dir, 'oar.db')]);
    expect(run.code).toBe(2);
    expect(run.stderr + run.stdout).toContain('unknown_runner');
  });

  it('fails the turn with a config error naming the field', () => {
    const dir = project({ agent: { runner: { id: RUNNER_ID, config: { max_steps: 'many' } } } });
    const run = oarIn(dir, ['run', 'hi', '--json', '--store', join(dir, 'oar.db')]);
    expect(run.code).toBe(1);
    const failed = ndjson(run.stdout).find((e) => e.type === 'turn.failed');
    const error = ((failed?.payload ?? {}) as { error: { code: string; message: string; details: { field: string } } })
      .error;
    expect(error.code).toBe('runner_config_invalid');
    expect(error.details.field).toBe('max_steps');
    expect(error.message).toContain('max_steps');
  });
});

/**
 * A runner published as an npm package: its manifest in package.json's `oarRunner` field, its code a runner that
 * speaks the NDJSON wire by hand (an external process, no SDK) and answers with the input and who it acts for.
 */
const NPM_RUNNER = `import { createInterface } from 'node:readline';
const send = (frame) => process.stdout.write(JSON.stringify(frame) + '\\n');
const manifest = { id: 'plugin:acme/npm-echo/echo', name: 'echo', label: { en_US: 'npm echo' }, capabilities: {},
  permissions: {}, context: {}, config_schema: [] };
const lines = createInterface({ input: process.stdin });
lines.on('close', () => process.exit(0));
lines.on('line', (line) => {
  const frame = JSON.parse(line);
  if (frame.method === 'LIST_AGENT_RUNNERS') return send({ id: frame.id, kind: 'end', data: { runners: [manifest] } });
  if (frame.method !== 'RUN_AGENT') return;
  const ctx = frame.params.context;
  const result = (type, data, sequence) =>
    send({ id: frame.id, kind: 'continue', data: { run_id: ctx.run_id, type, data, sequence } });
  const text = 'npm echo: ' + ctx.input.text + ' (for ' + ctx.actor.actor_id + ', ' + ctx.input.attachments.length + ' files)';
  result('message.completed', { message: { role: 'assistant', content: text } }, 0);
  result('run.completed', {}, 1);
  send({ id: frame.id, kind: 'end', data: null });
});
`;

describe('a runner installed as an npm package (npm:<name>)', () => {
  it('is listed and runs a turn end to end; a package that is not installed is a diagnostic', () => {
    const dir = project();
    const pkgDir = join(dir, 'node_modules/@acme/oar-runner-echo');
    mkdirSync(pkgDir, { recursive: true });
    writeJson(pkgDir, 'package.json', {
      name: '@acme/oar-runner-echo',
      version: '1.0.0',
      type: 'module',
      oarRunner: { plugin: 'acme/npm-echo', command: 'node', args: ['runner.mjs'] },
    });
    writeFileSync(join(pkgDir, 'runner.mjs'), NPM_RUNNER);
    writeJson(dir, 'oar.config.json', {
      model: 'script:script.json',
      runners: { packages: ['npm:@acme/not-installed', 'npm:@acme/oar-runner-echo', LOCAL_AGENT] },
    });

    const listed = oarIn(dir, ['runners', 'list', '--json']);
    expect(listed.code, listed.stderr).toBe(0);
    const found = JSON.parse(listed.stdout) as {
      runners: { id: string; package: string }[];
      diagnostics: { package: string; pointer: string; reason: string }[];
    };
    expect(found.runners.map((r) => [r.id, r.package])).toEqual([
      ['plugin:acme/npm-echo/echo', realpathSync(pkgDir)],
      [RUNNER_ID, LOCAL_AGENT],
    ]);
    expect(found.diagnostics).toEqual([
      {
        package: 'npm:@acme/not-installed',
        pointer: '',
        reason: expect.stringContaining('npm package @acme/not-installed is not installed'),
      },
    ]);
    expect(oarIn(dir, ['runners', 'list']).stdout).toContain('skipped: npm:@acme/not-installed');

    const store = join(dir, 'oar.db');
    const run = oarIn(dir, ['run', '--runner', 'plugin:acme/npm-echo/echo', 'hello', '--json', '--store', store]);
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    const events = ndjson(run.stdout).filter((e) => typeof e.sequence === 'number');
    const sessionId = events[0]?.sessionId as string;
    // The context carried the session's actor (the local user) and the turn's files (none).
    const answer = `npm echo: hello (for user:${userInfo().username}, 0 files)`;
    const completed = events.find((e) => e.type === 'turn.completed');
    expect(((completed?.payload ?? {}) as { answer: string }).answer).toBe(answer);
    // The binding recorded the resolved package directory, so any worker starts the same code.
    const shown = oarIn(dir, ['session', 'show', sessionId, '--store', store]);
    const binding = JSON.parse(shown.stdout) as { binding: { mainAgent: { runner: { package: string } } } };
    expect(binding.binding.mainAgent.runner.package).toBe(realpathSync(pkgDir));
    expectGapFree(ndjson(oarIn(dir, ['events', sessionId, '--json', '--store', store]).stdout));
    expectAnswersInInspect(dir, store, sessionId, [answer]);
  });
});

const FAKE = join(repoRoot, 'packages/runtime/test/fixtures/runners/fake');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(check: () => boolean, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('a host crash during a runner run', () => {
  it('leaves no runner process behind and records the run lost on resume', async () => {
    const dir = tempDir('oar-runner-crash-');
    const pidFile = join(dir, 'pids.json');
    writeJson(dir, 'oar.config.json', {
      model: 'script:script.json',
      runners: { packages: [FAKE] },
      agent: { runner: { id: 'plugin:test/fake/fake', policy: { env: ['FAKE_MODE', 'FAKE_PID_FILE'] } } },
    });
    writeJson(dir, 'script.json', { steps: [{ text: 'unused' }] });
    process.env.FAKE_MODE = 'hang';
    process.env.FAKE_PID_FILE = pidFile;
    const child = spawnOar(dir, ['run', '--json', 'go']);
    let buffer = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
    });
    await until(() => existsSync(pidFile), 'the runner to start');
    const [runnerPid, helperPid] = JSON.parse(readFileSync(pidFile, 'utf8')) as number[];
    child.kill('SIGKILL');
    await new Promise((resolve) => child.on('exit', resolve));
    // The runner's stdin closed with the host: it exits by itself.
    await until(() => !alive(runnerPid as number), 'the runner to exit');
    const sessionId = (ndjson(buffer)[0] as { sessionId: string }).sessionId;
    const resume = oarIn(dir, ['resume', sessionId]);
    expect(resume.code, resume.stdout + resume.stderr).toBe(0);
    const log = ndjson(oarIn(dir, ['events', sessionId, '--json']).stdout) as unknown as RuntimeEvent[];
    const failed = log.find((e) => e.type === 'turn.failed');
    expect(((failed?.payload ?? {}) as { error: { code: string } }).error.code).toBe('runner_lost');
    const attempt = log.find((e) => e.type === 'task.attempt.failed');
    expect(((attempt?.payload ?? {}) as { failureCategory: string }).failureCategory).toBe('lost');
    // What the runner left in its process group went with the recovery.
    await until(() => !alive(helperPid as number), 'the helper to be killed');
    expect(JSON.parse(oarIn(dir, ['replay', sessionId]).stdout).equal).toBe(true);
  });
});
