import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ModelScript, PermissionsConfig, RuntimeOptions } from '../../src/index.js';
import { type Harness, harness } from '../engine/harness.js';
import { act, allEvents, answer, ofType, payload, sleep } from '../engine/helpers.js';
import { tempDir } from '../support/temp-dirs.js';
import { fields, sandboxUnavailable } from './support.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

let skip: string | undefined;
beforeAll(async () => {
  skip = await sandboxUnavailable();
});

const allow = (...commands: string[]): PermissionsConfig => ({
  mode: 'default',
  rules: commands.map((command) => ({ decision: 'allow' as const, tool: 'exec', command })),
});

const exec = (args: Record<string, unknown>, id = 'run') => act([{ id, type: 'tool', name: 'exec', args }]);

/** One turn that runs the given calls, then answers; the session's events once it settled. */
async function runTurn(
  steps: ModelScript['steps'],
  options: Partial<RuntimeOptions> & { files?: Record<string, string>; storeUrl?: string },
): Promise<{ sessionId: string; threadId: string; events: RuntimeEvent[] }> {
  h = await harness({ steps: [...steps, answer('done')] }, options);
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'go' });
  await h.runtime.settled(sessionId);
  return { sessionId, threadId, events: await allEvents(h, sessionId) };
}

async function artifactText(sessionId: string, ref: unknown): Promise<string> {
  const artifactId = String(ref).replace('artifact://', '');
  const artifact = await (h as Harness).runtime.getArtifact({ sessionId, artifactId });
  return new TextDecoder().decode(artifact.bytes);
}

describe('exec: a command under the sandbox', () => {
  it('runs an argv with stdin, streams its output live, stores it whole, shows the model the exit code', async (t) => {
    if (skip) t.skip();
    const program =
      "process.stdin.on('data', d => process.stdout.write('got ' + d)); process.stdin.on('end', () => { console.error('warn line'); process.exit(3); })";
    h = await harness(
      { steps: [exec({ command: ['node', '-e', program], stdin: 'hello\n' }), answer('done')] },
      { exec: {}, permissions: allow('node') },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    const live: RuntimeEvent[] = [];
    const controller = new AbortController();
    const runtime = h.runtime;
    const listening = (async () => {
      for await (const event of runtime.subscribe(sessionId, { deltas: true, signal: controller.signal })) {
        if (event.type === 'process.output') live.push(event);
      }
    })();
    await h.runtime.submitTurn({ sessionId, input: 'run it' });
    await h.runtime.settled(sessionId);
    controller.abort();
    await listening;
    const events = await allEvents(h, sessionId);
    const kinds = events.map((e) => e.type);
    // The profile is on record before the process starts; its end after.
    expect(kinds.indexOf('sandbox.applied')).toBeLessThan(kinds.indexOf('process.started'));
    expect(kinds.indexOf('process.started')).toBeLessThan(kinds.indexOf('process.completed'));
    expect(fields(ofType(events, 'sandbox.applied')[0])).toMatchObject({ profile: 'bwrap', network: false });
    const started = fields(ofType(events, 'process.started')[0]);
    expect(started).toMatchObject({ command: expect.stringContaining('node -e'), cwd: '.', sandboxProfile: 'bwrap' });
    expect(fields(ofType(events, 'process.input')[0])).toMatchObject({ bytes: 6, closed: true });
    const completed = ofType(events, 'process.completed')[0];
    expect(fields(completed)).toMatchObject({ exitCode: 3, processId: started.processId });
    expect(completed?.processId).toBe(started.processId);
    const result = payload(ofType(events, 'tool.result')[0]);
    const observation = result.observation as { summary?: string };
    expect(observation.summary).toMatch(/^exit 3, \d+ bytes of output\ngot hello\nwarn line/);
    expect(await artifactText(sessionId, result.outputRef)).toBe('got hello\nwarn line\n');
    // Live: the output came as process.output deltas of that process, and none of them is in the log.
    expect(live.map((e) => (e.payload as { delta: string }).delta).join('')).toContain('got hello');
    expect(live.every((e) => e.processId === started.processId)).toBe(true);
    expect(kinds).not.toContain('process.output');
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(JSON.stringify(read)).not.toContain('sandbox_violation');
  });

  it('detects binary output: stored with its type, never inlined', async (t) => {
    if (skip) t.skip();
    const program = 'process.stdout.write(Buffer.from([0, 159, 146, 150, 0, 1, 2]))';
    const { sessionId, events } = await runTurn([exec({ command: ['node', '-e', program] })], {
      exec: {},
      permissions: allow('node'),
    });
    const completed = fields(ofType(events, 'process.completed')[0]);
    expect(completed).toMatchObject({ binary: true, exitCode: 0, outputBytes: 7 });
    const artifact = await (h as Harness).runtime.getArtifact({
      sessionId,
      artifactId: String(completed.outputRef).replace('artifact://', ''),
    });
    expect(artifact.mime).toBe('application/octet-stream');
    expect([...artifact.bytes]).toEqual([0, 159, 146, 150, 0, 1, 2]);
    const summary = (payload(ofType(events, 'tool.result')[0]).observation as { summary: string }).summary;
    expect(summary).toContain('binary');
    expect(summary).not.toContain('\u0000');
  });

  it('passes only allowed variables, and redacts a secret variable from every record', async (t) => {
    if (skip) t.skip();
    process.env.OAR_EXEC_TEST_TOKEN = 'tok-9f8e7d6c5b4a39281706';
    process.env.OAR_EXEC_TEST_HIDDEN = 'not-for-commands';
    try {
      const program =
        "console.log('token=' + process.env.OAR_EXEC_TEST_TOKEN); console.log('hidden=' + process.env.OAR_EXEC_TEST_HIDDEN); console.log('mine=' + process.env.MINE); console.log('key=' + process.env.OAR_IDEMPOTENCY_KEY)";
      // The call's idempotency key is the runtime's: a variable the model names the same does not replace it.
      const env = { MINE: 'explicit', OAR_IDEMPOTENCY_KEY: 'forged' };
      h = await harness(
        { steps: [exec({ command: ['node', '-e', program], env }), answer('done')] },
        { exec: { secrets: ['OAR_EXEC_TEST_TOKEN'] }, permissions: allow('node') },
      );
      const runtime = h.runtime;
      const { sessionId } = await runtime.createSession();
      const live: string[] = [];
      const controller = new AbortController();
      const listening = (async () => {
        for await (const event of runtime.subscribe(sessionId, { deltas: true, signal: controller.signal })) {
          if (event.type === 'process.output') live.push((event.payload as { delta: string }).delta);
        }
      })();
      await runtime.submitTurn({ sessionId, input: 'go' });
      await runtime.settled(sessionId);
      controller.abort();
      await listening;
      const events = await allEvents(h, sessionId);
      // Live output is redacted like the record.
      expect(live.join('')).toContain('token=[REDACTED');
      expect(live.join('')).not.toContain('tok-9f8e7d6c5b4a39281706');
      const started = fields(ofType(events, 'process.started')[0]);
      expect(started.env).toContain('OAR_EXEC_TEST_TOKEN');
      expect(started.env).not.toContain('OAR_EXEC_TEST_HIDDEN');
      expect(started.explicitEnv).toEqual(['MINE', 'OAR_IDEMPOTENCY_KEY']);
      const result = payload(ofType(events, 'tool.result')[0]);
      const stored = await artifactText(sessionId, result.outputRef);
      expect(stored).toContain('hidden=undefined');
      expect(stored).toContain('mine=explicit');
      const key = payload(ofType(events, 'tool.started')[0]).idempotencyKey as string;
      expect(key).toMatch(/^idem_[0-9a-f]{32}$/);
      expect(stored).toContain(`key=${key}`);
      expect(stored).toContain('token=[REDACTED');
      expect(stored).not.toContain('tok-9f8e7d6c5b4a39281706');
      expect(JSON.stringify(events)).not.toContain('tok-9f8e7d6c5b4a39281706');
    } finally {
      delete process.env.OAR_EXEC_TEST_TOKEN;
      delete process.env.OAR_EXEC_TEST_HIDDEN;
    }
  });
});

describe('exec: scheduling by the facts of each call', () => {
  const sleeper = (label: string) => ['node', '-e', `setTimeout(() => console.log('${label}'), 200)`];
  const order = (events: RuntimeEvent[]) =>
    events.filter((e) => e.type === 'process.started' || e.type === 'process.completed').map((e) => e.type);

  it('read-only commands on the allowlist run together; they are idempotent', async (t) => {
    if (skip) t.skip();
    // A barrier, not a clock: each marks its start and waits for the other's, so run one after the other they
    // would never end (and time out).
    const meet = (self: string, other: string) => [
      'node',
      '-e',
      `const fs = require('fs'); fs.writeFileSync('${self}.started', ''); const t = setInterval(() => { if (fs.existsSync('${other}.started')) { clearInterval(t); console.log('met'); } }, 20)`,
    ];
    const { events } = await runTurn(
      [
        act([
          { id: 'a', type: 'tool', name: 'exec', args: { command: meet('a', 'b'), timeoutMs: 20_000 } },
          { id: 'b', type: 'tool', name: 'exec', args: { command: meet('b', 'a'), timeoutMs: 20_000 } },
        ]),
      ],
      { exec: { readOnlyCommands: ['node -e'] } },
    );
    // Both started before either ended: they shared the lock.
    expect(order(events)).toEqual(['process.started', 'process.started', 'process.completed', 'process.completed']);
    expect(ofType(events, 'process.completed').map((e) => payload(e).exitCode)).toEqual([0, 0]);
    expect(ofType(events, 'tool.started').map((e) => payload(e).idempotent)).toEqual([true, true]);
  });

  it('other commands take the write lock one at a time, and are not idempotent', async (t) => {
    if (skip) t.skip();
    const { events } = await runTurn(
      [
        act([
          { id: 'a', type: 'tool', name: 'exec', args: { command: sleeper('a') } },
          { id: 'b', type: 'tool', name: 'exec', args: { command: sleeper('b') } },
        ]),
      ],
      { exec: {}, permissions: allow('node') },
    );
    expect(order(events)).toEqual(['process.started', 'process.completed', 'process.started', 'process.completed']);
    expect(ofType(events, 'tool.started').map((e) => payload(e).idempotent)).toEqual([false, false]);
  });
});

describe('exec: permissions by command prefix', () => {
  const rules: PermissionsConfig = {
    mode: 'default',
    rules: [
      { decision: 'deny', tool: 'exec', command: 'rm -rf', reason: 'never wipe' },
      { decision: 'ask', tool: 'exec', command: 'git push' },
      { decision: 'allow', tool: 'exec', command: 'git' },
    ],
  };

  it('denies by prefix on the parsed argv (flags in any order), before anything starts', async (t) => {
    if (skip) t.skip();
    const { events } = await runTurn([exec({ command: ['/bin/rm', '-f', '-r', 'src'] })], {
      exec: {},
      permissions: rules,
      files: { 'keep.txt': 'x' },
    });
    expect(fields(ofType(events, 'permission.evaluated')[0])).toMatchObject({ decision: 'deny', source: 'rule' });
    expect(ofType(events, 'sandbox.applied')).toHaveLength(0);
    expect(ofType(events, 'process.started')).toHaveLength(0);
    expect(existsSync(join((h as Harness).workspace, 'keep.txt'))).toBe(true);
  });

  it('asks for `git push` although `git` is allowed, naming the command', async (t) => {
    if (skip) t.skip();
    const { events } = await runTurn([exec({ command: ['git', 'push', 'origin', 'main'] })], {
      exec: {},
      permissions: rules,
    });
    const required = fields(ofType(events, 'action.required')[0]);
    expect(required.prompt).toContain('exec git push origin main');
    expect(ofType(events, 'process.started')).toHaveLength(0);
  });

  it('a shell string asks by default, and runs where a rule allows that exact line', async (t) => {
    if (skip) t.skip();
    const asked = await runTurn([exec({ shell: 'echo one | tr a-z A-Z' })], { exec: {}, permissions: allow('echo') });
    expect(fields(ofType(asked.events, 'permission.evaluated')[0]).decision).toBe('ask');
    await h?.runtime.close();
    await h?.store.close();
    const allowed = await runTurn([exec({ shell: 'echo one | tr a-z A-Z' })], {
      exec: {},
      permissions: allow('echo one | tr a-z A-Z'),
    });
    const result = payload(ofType(allowed.events, 'tool.result')[0]);
    expect((result.observation as { summary: string }).summary).toContain('ONE');
    expect(fields(ofType(allowed.events, 'process.started')[0])).toMatchObject({ shell: true });
  });

  it('read-only allowlisted commands run in default mode without a rule; others ask', async (t) => {
    if (skip) t.skip();
    const { events } = await runTurn(
      [
        act([
          { id: 'ls', type: 'tool', name: 'exec', args: { command: ['ls'] } },
          { id: 'touch', type: 'tool', name: 'exec', args: { command: ['touch', 'x'] } },
        ]),
      ],
      { exec: {} },
    );
    const evaluated = ofType(events, 'permission.evaluated').map((e) => fields(e));
    expect(evaluated.find((p) => p.operation === 'ls')?.decision).toBe('allow');
    expect(evaluated.find((p) => p.operation === 'touch x')?.decision).toBe('ask');
  });

  it('the default credential rules see the arguments: `cat .env` is denied', async (t) => {
    if (skip) t.skip();
    const { events } = await runTurn([exec({ command: ['cat', '.env'] })], {
      exec: {},
      files: { '.env': 'SECRET=1' },
    });
    expect(fields(ofType(events, 'permission.evaluated')[0])).toMatchObject({ decision: 'deny', source: 'default' });
    expect(ofType(events, 'process.started')).toHaveLength(0);
  });
});

describe('exec: what the sandbox contains', () => {
  it('a write outside the workspace is refused and recorded as a violation in the read model', async (t) => {
    if (skip) t.skip();
    const target = `/usr/oar-exec-escape-${process.pid}`;
    const { sessionId, threadId, events } = await runTurn(
      [
        exec({
          command: [
            'sh',
            '-c',
            `echo x > ${target}; echo private > /tmp/oar-private-${process.pid}; echo inside > in.txt`,
          ],
        }),
      ],
      { exec: {}, permissions: allow('sh') },
    );
    expect(existsSync(target)).toBe(false);
    // /tmp is private: the file written there is not the host's.
    expect(existsSync(`/tmp/oar-private-${process.pid}`)).toBe(false);
    expect(readFileSync(join((h as Harness).workspace, 'in.txt'), 'utf8')).toBe('inside\n');
    const violation = fields(ofType(events, 'sandbox.violation')[0]);
    expect(violation).toMatchObject({
      kind: 'write_blocked',
      evidence: expect.stringContaining('Read-only file system'),
    });
    const read = await (h as Harness).runtime.getThreadRead({ sessionId, threadId });
    expect(JSON.stringify(read)).toContain('sandbox_violation:write_blocked');
  });

  it('the store file and the home directory are hidden from commands', async (t) => {
    if (skip) t.skip();
    h = await harness({ steps: [] }, { exec: {}, permissions: allow('node') });
    const storeFile = h.store.location;
    await h.runtime.close();
    await h.store.close();
    const program = `const fs = require('fs'); let s; try { s = fs.readFileSync(${JSON.stringify(storeFile)}).length } catch (e) { s = e.code } console.log('store=' + s); console.log('home=' + fs.readdirSync(process.env.HOME).length)`;
    const { sessionId, events } = await runTurn([exec({ command: ['node', '-e', program] })], {
      exec: {},
      permissions: allow('node'),
      storeUrl: storeFile,
    });
    const stored = await artifactText(sessionId, payload(ofType(events, 'tool.result')[0]).outputRef);
    expect(stored).toMatch(/store=(0|ENOENT)\n/);
    expect(stored).toContain('home=0');
    expect(fields(ofType(events, 'sandbox.applied')[0]).hidden).toEqual(
      expect.arrayContaining([expect.stringContaining('oar-engine-')]),
    );
  });

  it('a store inside the workspace (.oar/oar.db) is hidden, its directory an empty one', async (t) => {
    if (skip) t.skip();
    const workspace = tempDir('oar-ws-store-');
    mkdirSync(join(workspace, '.oar'));
    const storeFile = join(workspace, '.oar', 'oar.db');
    const program =
      "const fs = require('fs'); console.log('entries=' + fs.readdirSync('.oar').length); fs.writeFileSync('.oar/planted', 'x')";
    const { sessionId, events } = await runTurn([exec({ command: ['node', '-e', program] })], {
      exec: {},
      permissions: allow('node'),
      storeUrl: storeFile,
      workspaceRoot: workspace,
    });
    const stored = await artifactText(sessionId, payload(ofType(events, 'tool.result')[0]).outputRef);
    expect(stored).toContain('entries=0');
    // What the command wrote there went to the sandbox's empty directory, not next to the store.
    expect(existsSync(join(workspace, '.oar', 'planted'))).toBe(false);
    expect(existsSync(storeFile)).toBe(true);
    expect(fields(ofType(events, 'sandbox.applied')[0]).hidden).toContain(join(workspace, '.oar'));
  });

  it('a socket cannot reach the network; the refused connection is a violation', async (t) => {
    if (skip) t.skip();
    const program =
      "require('net').connect(80, '1.1.1.1').on('error', e => { console.error('connect failed: ' + e.code); process.exit(2) }).on('connect', () => { console.log('connected'); process.exit(0) })";
    const { events } = await runTurn([exec({ command: ['node', '-e', program] })], {
      exec: {},
      permissions: allow('node'),
    });
    expect(fields(ofType(events, 'process.completed')[0]).exitCode).toBe(2);
    expect(fields(ofType(events, 'sandbox.violation')[0])).toMatchObject({ kind: 'network_blocked' });
  });

  it('a forked process that outlives the timeout is killed with its group', async (t) => {
    if (skip) t.skip();
    // The parent starts a detached child that would write late.txt after 4 s, then both wait far longer.
    const program =
      "const { spawn } = require('child_process'); spawn(process.execPath, ['-e', \"setTimeout(() => require('fs').writeFileSync('late.txt', 'x'), 4000); setInterval(() => {}, 1000)\"], { detached: true, stdio: 'ignore' }).unref(); console.log('forked'); setInterval(() => {}, 1000)";
    const { events } = await runTurn([exec({ command: ['node', '-e', program], timeoutMs: 2_500 })], {
      exec: { killGraceMs: 100 },
      permissions: allow('node'),
    });
    const failed = fields(ofType(events, 'tool.failed')[0]);
    // The child existed: the parent said so before it was stopped.
    expect(failed.error).toMatchObject({ code: 'tool_timeout', details: { tail: 'forked\n' } });
    expect(fields(ofType(events, 'process.failed')[0])).toMatchObject({ reason: 'timeout' });
    await sleep(2_500);
    expect(existsSync(join((h as Harness).workspace, 'late.txt'))).toBe(false);
  });

  it('unsandboxed (profile none): recorded as such, and even a read-only command is asked', async () => {
    const { events } = await runTurn([exec({ command: ['ls'] })], {
      exec: { sandbox: { profile: 'none' } },
    });
    expect(fields(ofType(events, 'permission.evaluated')[0]).decision).toBe('ask');
    expect(ofType(events, 'process.started')).toHaveLength(0);
  });

  it('unsandboxed and allowed: sandbox.applied says profile none, and a forked child still dies with the group', async () => {
    const program =
      "const { spawn } = require('child_process'); spawn(process.execPath, ['-e', \"setTimeout(() => require('fs').writeFileSync('late.txt', 'x'), 4000); setInterval(() => {}, 1000)\"], { stdio: 'ignore' }).unref(); console.log('forked'); setInterval(() => {}, 1000)";
    const { events } = await runTurn([exec({ command: ['node', '-e', program], timeoutMs: 2_500 })], {
      exec: { sandbox: { profile: 'none', unsandboxed: 'allow' }, killGraceMs: 100 },
      permissions: allow('node'),
    });
    expect(fields(ofType(events, 'sandbox.applied')[0])).toMatchObject({ profile: 'none' });
    expect(fields(ofType(events, 'process.failed')[0])).toMatchObject({ reason: 'timeout' });
    expect(fields(ofType(events, 'tool.failed')[0]).error).toMatchObject({ details: { tail: 'forked\n' } });
    await sleep(2_500);
    expect(existsSync(join((h as Harness).workspace, 'late.txt'))).toBe(false);
  });

  it('unsandboxed with `deny`: sandbox.applied says so, and nothing starts', async () => {
    const { events } = await runTurn([exec({ command: ['ls'] })], {
      exec: { sandbox: { profile: 'none', unsandboxed: 'deny' } },
      permissions: { mode: 'bypass' },
    });
    expect(fields(ofType(events, 'sandbox.applied')[0])).toMatchObject({ profile: 'none' });
    expect(fields(ofType(events, 'tool.failed')[0]).error).toMatchObject({ code: 'sandbox_unavailable' });
    expect(ofType(events, 'process.started')).toHaveLength(0);
  });

  it('a program that does not exist is command_not_found, under the sandbox and without it', async (t) => {
    if (skip) t.skip();
    for (const sandbox of [{}, { profile: 'none' as const, unsandboxed: 'allow' as const }]) {
      const { events } = await runTurn([exec({ command: ['oar-no-such-program', '--x'] })], {
        exec: { sandbox },
        permissions: { mode: 'bypass' },
      });
      expect(fields(ofType(events, 'tool.failed')[0]).error).toMatchObject({ code: 'command_not_found' });
      expect(fields(ofType(events, 'process.failed')[0]).error).toMatchObject({ code: 'command_not_found' });
      await h?.runtime.close();
      await h?.store.close();
      h = undefined;
    }
  });

  it('a working directory outside the workspace is refused as a violation', async () => {
    const { events } = await runTurn([exec({ command: ['ls'], cwd: '../' })], {
      exec: { sandbox: { profile: 'none', unsandboxed: 'allow' } },
    });
    expect(fields(ofType(events, 'sandbox.violation')[0])).toMatchObject({ kind: 'path_outside_workspace' });
    expect(ofType(events, 'process.started')).toHaveLength(0);
  });
});
