import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelScript, PermissionsConfig } from '../../src/index.js';
import { Store } from '../../src/index.js';
import { type Harness, harness } from '../engine/harness.js';
import { act, allEvents, answer, ofType, payload, recordingModel, waitFor, waitForEvent } from '../engine/helpers.js';
import { assertEventsConform } from '../support/schemas.js';
import { fields } from './support.js';

/**
 * Background processes (`exec` with `background: true`) and their companion `process` tool: a process id at once,
 * stdin written, output read, the process terminated — all on record; foreign and unknown ids are `unavailable`
 * with a warning; an interrupted turn takes its processes along. Unsandboxed and allowed (`profile: none`) so the
 * tests run wherever Node does; the sandbox has its own tests.
 */
const open: Harness[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
});

const permissions: PermissionsConfig = {
  mode: 'accept-edits',
  rules: [{ decision: 'allow', tool: 'exec', command: 'node' }],
};
const exec = { sandbox: { profile: 'none' as const, unsandboxed: 'allow' as const } };

const ECHO_UPPER =
  "process.stdin.on('data', d => process.stdout.write(String(d).toUpperCase())); process.stdin.on('end', () => { console.log('bye'); process.exit(0) })";

const PROC_ID = /proc_[A-Za-z0-9]+/;

/** A background process that runs until something stops it. */
const START_IDLE = {
  id: 'start',
  type: 'tool',
  name: 'exec',
  args: { command: ['node', '-e', 'setInterval(() => {}, 1000)'], background: true },
};

/** A script whose later steps name the process id the model was shown (as a real model would copy it). */
function followingScript(later: (processId: string) => ModelScript['steps']): {
  script: ModelScript;
  model: ReturnType<typeof recordingModel>['model'];
} {
  const script: ModelScript = {
    steps: [
      act([
        { id: 'start', type: 'tool', name: 'exec', args: { command: ['node', '-e', ECHO_UPPER], background: true } },
      ]),
    ],
  };
  let filled = false;
  const { model } = recordingModel(script, ({ index, text }) => {
    if (index !== 1 || filled) return;
    const processId = PROC_ID.exec(text)?.[0] ?? 'proc_missing';
    filled = true;
    script.steps.push(...later(processId));
  });
  return { script, model };
}

describe('exec: background processes', () => {
  it('returns a process id at once; stdin is written, output read, the end recorded with the whole output', async () => {
    const { script, model } = followingScript((processId) => [
      act([
        {
          id: 'write',
          type: 'tool',
          name: 'process',
          args: { processId, action: 'write', input: 'abc\n', closeStdin: true },
        },
      ]),
      act([{ id: 'read', type: 'tool', name: 'process', args: { processId, action: 'read', waitMs: 10_000 } }]),
      answer('done'),
    ]);
    const h = await harness(script, { model, exec, permissions });
    open.push(h);
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const started = fields(ofType(events, 'process.started')[0]);
    expect(started).toMatchObject({ background: true, sandboxProfile: 'none' });
    const processId = started.processId as string;
    const inputs = ofType(events, 'process.input').map(fields);
    expect(inputs).toEqual([expect.objectContaining({ processId, bytes: 4, closed: true })]);
    const results = ofType(events, 'tool.result').map((e) => payload(e));
    expect(String(results[0]?.summary)).toContain(processId);
    const read = results.find((r) => r.graphActionId === 'read');
    expect(JSON.stringify(read?.observation)).toContain('ABC');
    const completed = fields(ofType(events, 'process.completed')[0]);
    expect(completed).toMatchObject({ processId, exitCode: 0 });
    const artifact = await h.runtime.getArtifact({
      sessionId,
      artifactId: String(completed.outputRef).replace('artifact://', ''),
    });
    expect(new TextDecoder().decode(artifact.bytes)).toBe('ABC\nbye\n');
    // Ended: no longer among the thread's processes.
    const snapshot = await h.runtime.getThreadRead({ sessionId, threadId });
    expect((snapshot as { processes?: unknown[] }).processes).toBeUndefined();
  });

  it('terminate stops the whole group and records process.terminated', async () => {
    const { script, model } = followingScript((processId) => [
      act([{ id: 'stop', type: 'tool', name: 'process', args: { processId, action: 'terminate' } }]),
      answer('done'),
    ]);
    const h = await harness(script, { model, exec, permissions });
    open.push(h);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const terminated = fields(ofType(events, 'process.terminated')[0]);
    expect(terminated).toMatchObject({
      reason: 'terminated',
      processId: fields(ofType(events, 'process.started')[0]).processId,
    });
    expect(terminated.exitCode === null || typeof terminated.exitCode === 'number').toBe(true);
  });

  it("an unknown id, and another session's id, are unavailable with a runtime.warning — never a crash", async () => {
    const { script, model } = followingScript(() => []);
    const h = await harness(script, { model, exec, permissions });
    open.push(h);
    const first = await h.runtime.createSession();
    script.steps.push(answer('started'));
    await h.runtime.submitTurn({ sessionId: first.sessionId, input: 'go' });
    await h.runtime.settled(first.sessionId);
    const foreignId = fields(ofType(await allEvents(h, first.sessionId), 'process.started')[0]).processId as string;

    const other = await harness(
      {
        steps: [
          act([
            { id: 'foreign', type: 'tool', name: 'process', args: { processId: foreignId, action: 'read' } },
            {
              id: 'unknown',
              type: 'tool',
              name: 'process',
              args: { processId: 'proc_doesnotexist', action: 'terminate' },
            },
          ]),
          answer('checked'),
        ],
      },
      { exec, permissions: { mode: 'bypass' }, store: h.store, workspaceRoot: h.workspace },
    );
    open.unshift({ ...other, store: { close: async () => undefined } as never });
    const second = await other.runtime.createSession();
    await other.runtime.submitTurn({ sessionId: second.sessionId, input: 'poke' });
    await other.runtime.settled(second.sessionId);
    const events = await allEvents(other, second.sessionId);
    const failures = ofType(events, 'tool.failed').map((e) => payload(e).error as { code: string });
    expect(failures.map((f) => f.code)).toEqual(['unavailable', 'unavailable']);
    const warnings = ofType(events, 'runtime.warning').map(fields);
    expect(warnings.map((w) => w.code)).toEqual(['process_unavailable', 'process_unavailable']);
    expect(ofType(events, 'turn.completed')).toHaveLength(1);
    // The foreign process is untouched: still running in the first session, which then stops it.
    const read = await other.runtime.getThreadRead({ sessionId: first.sessionId, threadId: first.threadId });
    expect((read as { processes?: { processId: string }[] }).processes?.map((p) => p.processId)).toEqual([foreignId]);
  });

  it('interrupting the turn terminates its background process group', async () => {
    const script: ModelScript = {
      steps: [
        act([START_IDLE]),
        act([
          { id: 'wait', type: 'tool', name: 'exec', args: { command: ['node', '-e', 'setInterval(() => {}, 1000)'] } },
        ]),
        answer('never'),
      ],
    };
    const h = await harness(script, { exec, permissions });
    open.push(h);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await waitForEvent(h, sessionId, 'process.started', (e: RuntimeEvent) => fields(e).background === false);
    await h.runtime.interruptTurn({ sessionId, reason: 'stop' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const foreground = ofType(events, 'process.terminated').map(fields);
    expect(foreground).toEqual([expect.objectContaining({ reason: 'interrupted' })]);
    const background = fields(ofType(events, 'process.started')[0]).processId as string;
    const { backgroundProcesses } = await import('../../src/tools/exec/processes.js');
    const entry = backgroundProcesses.get(background);
    await entry?.group.ended;
    expect(entry?.group.running).toBe(false);
    expect((await entry?.group.ended)?.stoppedBy).toBe('interrupted');
  });
});

describe('exec: after a crash', () => {
  it('a process of the dead runtime is recorded as lost, never re-attached; the call is lost, not re-run', async () => {
    const script: ModelScript = {
      steps: [
        act([
          { id: 'long', type: 'tool', name: 'exec', args: { command: ['node', '-e', 'setInterval(() => {}, 1000)'] } },
        ]),
        answer('after restart'),
      ],
    };
    const options = { exec, permissions, worker: { leaseTtlMs: 300, pollMs: 50 } };
    const crashed = await harness(script, options);
    const { sessionId, threadId } = await crashed.runtime.createSession();
    await crashed.runtime.submitTurn({ sessionId, input: 'go' });
    const started = fields(await waitForEvent(crashed, sessionId, 'process.started'));
    // The runtime "dies" mid-command: abandoned, never closed (its command keeps running, as an orphan would).
    crashed.runtime.worker?.abandon();
    try {
      const store = await Store.open(join(crashed.dir, 'oar.db'));
      const second = await harness(script, { ...options, store, workspaceRoot: crashed.workspace });
      open.push(second);
      await second.runtime.settled(sessionId);
      const events = await allEvents(second, sessionId);
      const lost = ofType(events, 'process.failed');
      expect(lost).toHaveLength(1);
      expect(lost[0]?.status).toBe('lost');
      expect(fields(lost[0])).toMatchObject({ processId: started.processId, reason: 'lost', error: { code: 'lost' } });
      expect(ofType(events, 'process.started')).toHaveLength(1);
      expect(ofType(events, 'tool.failed').map((e) => e.status)).toEqual(['lost']);
      // Its action's task is lost too, not failed: nobody can tell whether the command did its work.
      const taskLost = ofType(events, 'task.lost');
      expect(taskLost.map((e) => fields(e).lostActions)).toEqual([['long']]);
      expect(ofType(events, 'task.failed')).toHaveLength(0);
      const { snapshot } = await second.runtime.getSession({ sessionId, limit: 0 });
      expect(snapshot.tasks.find((t) => t.taskId === taskLost[0]?.taskId)?.status).toBe('lost');
      const read = await second.runtime.getThreadRead({ sessionId, threadId });
      expect((read as { processes?: unknown[] }).processes).toBeUndefined();
      expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'after restart' });
    } finally {
      try {
        process.kill(-(started.pid as number), 'SIGKILL');
      } catch {
        // already gone
      }
      await crashed.store.close();
    }
  });
});

describe('exec: a lost lease', () => {
  it("stops the command's process group when the worker loses the thread's lease", async () => {
    const script: ModelScript = {
      steps: [
        act([
          { id: 'long', type: 'tool', name: 'exec', args: { command: ['node', '-e', 'setInterval(() => {}, 1000)'] } },
        ]),
        answer('never'),
      ],
    };
    const h = await harness(script, { exec, permissions, worker: { leaseTtlMs: 300, pollMs: 50 } });
    open.push(h);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    const pid = fields(await waitForEvent(h, sessionId, 'process.started')).pid as number;
    const alive = () => {
      try {
        process.kill(-pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    expect(alive()).toBe(true);
    // Another worker takes the thread over: the lease moves to a new owner and token.
    await h.store.db
      .updateTable('oar_thread_leases')
      .set((eb) => ({ owner: 'another-worker', token: eb('token', '+', 1), expires_at: Date.now() + 60_000 }))
      .where('session_id', '=', sessionId)
      .execute();
    await waitFor(async () => !alive(), 10_000);
    expect(alive()).toBe(false);
  });
});

describe('exec: approve_for_session', () => {
  it('grants the exact command line, never a longer one', async () => {
    const echo = (id: string, words: string[]) =>
      act([{ id, type: 'tool', name: 'exec', args: { command: ['node', '-e', 'console.log(1)', ...words] } }]);
    const h = await harness(
      {
        steps: [
          echo('a', ['--x']),
          answer('first'),
          echo('b', ['--x']),
          answer('second'),
          echo('c', ['--x', '--more']),
          answer('third'),
        ],
      },
      { exec, permissions: { mode: 'default' } },
    );
    open.push(h);
    const { sessionId } = await h.runtime.createSession();
    const pending = async () => {
      await h.runtime.settled(sessionId);
      const { snapshot } = await h.runtime.getSession({ sessionId, limit: 0 });
      return snapshot.threads.flatMap((t) => t.pendingRequests);
    };
    await h.runtime.submitTurn({ sessionId, input: 'one' });
    const [asked] = await pending();
    expect(asked?.prompt).toContain("exec node -e 'console.log(1)' --x");
    await h.runtime.respondAction({ sessionId, actionId: asked?.actionId as string, decision: 'approve_for_session' });
    await h.runtime.settled(sessionId);
    const resolved = ofType(await allEvents(h, sessionId), 'permission.resolved')[0];
    expect(payload(resolved)).toMatchObject({
      grant: { tool: 'exec', operation: "node -e 'console.log(1)' --x", paths: ['.'] },
    });
    // The same command line again: covered by the grant.
    await h.runtime.submitTurn({ sessionId, input: 'two' });
    expect(await pending()).toEqual([]);
    // One option more (the same paths): asked again, since the grant is for the exact command line.
    await h.runtime.submitTurn({ sessionId, input: 'three' });
    const [again] = await pending();
    expect(again?.prompt).toContain("exec node -e 'console.log(1)' --x --more");
  });
});

const SECRET_VALUE = 'env-value-that-must-not-show-4471';

/**
 * get_execution_environment (docs/commands.md "Where a session's work runs"): the workspace, the variables commands
 * get — by name, never a value — the command limits of the binding, and the processes started and not ended.
 */
describe('the execution environment of a session', () => {
  it('lists the workspace, variables by name, the limits and a background process while it runs', async () => {
    process.env.OAR_TEST_ENV_SECRET = SECRET_VALUE;
    const withNames = { ...exec, env: ['PATH', 'HOME'], secrets: ['OAR_TEST_ENV_SECRET'], maxBackground: 3 };
    const script = {
      steps: [act([START_IDLE]), answer('started')],
    };
    const h = await harness(script, { exec: withNames, permissions });
    open.push(h);
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'start it' });
    await h.runtime.settled(sessionId);

    const env = await h.runtime.getExecutionEnvironment({ sessionId });
    expect(env).toMatchObject({
      sessionId,
      binding: 'recorded',
      env: { passed: ['PATH', 'HOME'], secrets: ['OAR_TEST_ENV_SECRET'] },
      processLimits: { status: 'available', sandboxProfile: 'none', network: false, maxBackground: 3 },
    });
    expect(env.cwd).toBe(env.workspaceRoots[0]);
    expect(env.activeProcesses).toEqual([
      expect.objectContaining({ threadId, background: true, command: expect.stringContaining('node') }),
    ]);
    expect(JSON.stringify(env)).not.toContain(SECRET_VALUE);
    // Of one thread: the same process; of a thread that does not exist: not found.
    const ofThread = await h.runtime.getExecutionEnvironment({ sessionId, threadId });
    expect(ofThread.activeProcesses.map((p) => p.processId)).toEqual(env.activeProcesses.map((p) => p.processId));
    await expect(h.runtime.getExecutionEnvironment({ sessionId, threadId: 'thr_missing' })).rejects.toMatchObject({
      code: 'thread_not_found',
    });
    delete process.env.OAR_TEST_ENV_SECRET;
  });

  it('says commands are unavailable when the binding runs none, and refuses an unknown session', async () => {
    const h = await harness({ steps: [answer('hi')] });
    open.push(h);
    const { sessionId } = await h.runtime.createSession();
    const env = await h.runtime.getExecutionEnvironment({ sessionId });
    expect(env.processLimits).toEqual({ status: 'unavailable', reason: expect.stringContaining('exec is off') });
    expect(env.activeProcesses).toEqual([]);
    expect(env.env.passed).toEqual([]);
    await expect(h.runtime.getExecutionEnvironment({ sessionId: 'ses_missing' })).rejects.toMatchObject({
      code: 'session_not_found',
    });
    await expect(h.runtime.getExecutionEnvironment({ sessionId: '' })).rejects.toMatchObject({
      code: 'invalid_input',
    });
  });
});

describe('exec: output over maxArtifactBytes', () => {
  it('keeps the head and records output.truncated with what was written and what was kept', async () => {
    const write = "process.stdout.write('x'.repeat(5000))";
    const script: ModelScript = {
      steps: [
        act([
          { id: 'fg', type: 'tool', name: 'exec', args: { command: ['node', '-e', write] } },
          { id: 'bg', type: 'tool', name: 'exec', args: { command: ['node', '-e', write], background: true } },
        ]),
        answer('done'),
      ],
    };
    const h = await harness(script, { exec, permissions, limits: { maxArtifactBytes: 1000 } });
    open.push(h);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const started = ofType(await allEvents(h, sessionId), 'process.started').map((e) => fields(e));
    const background = started.find((p) => p.background === true)?.processId as string;
    // The background one's end (and its truncation) is recorded when it is next looked at.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await h.runtime.terminateProcess({ sessionId, processId: background });
    const truncated = ofType(await allEvents(h, sessionId), 'output.truncated').map((e) => fields(e));
    expect(truncated).toHaveLength(2);
    for (const t of truncated) expect(t).toMatchObject({ originalBytes: 5000, keptBytes: 1000, strategy: 'head' });
    expect(truncated.find((t) => t.processId === background)?.artifactId).toMatch(/^art_/);
    assertEventsConform(await allEvents(h, sessionId));
  });
});
