import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { HookConfig } from '../../src/config/hooks.js';
import { HooksSchema } from '../../src/config/hooks.js';
import { runHook } from '../../src/policy/hooks/run-hook.js';
import { type Harness, harness } from '../engine/harness.js';
import { act, actionRows, allEvents, answer, dsl, ofType, payload, recordingModel, types } from '../engine/helpers.js';
import { assertEventsConform } from '../support/schemas.js';
import { tempDir } from '../support/temp-dirs.js';

/**
 * Hooks (docs/hooks.md) through the real engine: real hook processes (a Node script reading the protocol on
 * stdin), a real SQLite store, the scripted model. Each decision — allow, deny, ask, rewrite — and each failure
 * mode is recorded and applied through the runtime's own checks.
 */
const HOOK = join(import.meta.dirname, '../fixtures/hooks/hook.mjs');
const MODULE = join(import.meta.dirname, '../fixtures/hooks/module-hook.mjs');

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const command = (name: string, point: HookConfig['point'], ...args: string[]) =>
  HooksSchema.parse([{ name, point, command: [process.execPath, HOOK, ...args] }])[0] as HookConfig;

const writeCall = (content = 'hello\n', filePath = 'out.txt') => ({
  id: 'w1',
  type: 'tool',
  name: 'write',
  args: { filePath, content },
});

async function run(hooks: unknown[], steps: unknown[], options: Record<string, unknown> = {}) {
  h = await harness(
    { steps: steps as never },
    { hooks: HooksSchema.parse(hooks), permissions: { mode: 'accept-edits' }, ...options },
  );
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'do it' });
  await h.runtime.settled(sessionId);
  const events = await allEvents(h, sessionId);
  const read = await h.runtime.getThreadRead({ sessionId, threadId });
  return { sessionId, threadId, events, read, harness: h };
}

describe('before_tool_call hooks', () => {
  it('a deny vetoes the call: nothing runs, the permission fact names the hook, the model is told why', async () => {
    const recorder = recordingModel({ steps: [act([writeCall()]), answer('Not written.')] });
    const { events, read } = await run([command('no-writes', 'before_tool_call', 'deny')], [], {
      model: recorder.model,
    });
    expect(existsSync(join(h?.workspace as string, 'out.txt'))).toBe(false);
    expect(types(events)).not.toContain('tool.started');
    const t = types(events);
    expect(t.indexOf('hook.started')).toBeLessThan(t.indexOf('hook.completed'));
    expect(t.indexOf('hook.completed')).toBeLessThan(t.indexOf('permission.evaluated'));
    expect(ofType(events, 'hook.completed')[0]).toMatchObject({
      toolCallId: expect.any(String),
      hookRun: { hookName: 'no-writes', point: 'before_tool_call' },
      payload: {
        hookName: 'no-writes',
        point: 'before_tool_call',
        toolName: 'write',
        decision: 'deny',
        reason: 'no write today',
      },
    });
    expect(payload(ofType(events, 'permission.evaluated')[0])).toMatchObject({ decision: 'deny', source: 'hook' });
    expect(actionRows(read).find((a) => a.actionId === 'w1')).toMatchObject({
      status: 'denied',
      error: { code: 'permission_denied' },
    });
    expect(recorder.prompts[1]?.text).toContain('no write today');
    assertEventsConform(events);
  });

  it('scenario 12: a rewrite is visible — before/after and the changes on hook.completed, the rewritten input runs', async () => {
    const { events, read } = await run(
      [command('shout', 'before_tool_call', 'uppercase')],
      [act([writeCall('quiet words\n')]), answer('Written.')],
    );
    // What ran is the rewrite, validated and permission-checked again.
    expect(readFileSync(join(h?.workspace as string, 'out.txt'), 'utf8')).toBe('QUIET WORDS\n');
    const completed = payload(ofType(events, 'hook.completed')[0]);
    expect(completed).toMatchObject({
      decision: 'rewrite',
      reason: 'house style',
      rewrite: {
        target: 'input',
        before: { filePath: 'out.txt', content: 'quiet words\n' },
        after: { filePath: 'out.txt', content: 'QUIET WORDS\n' },
        changes: [{ path: '/content', op: 'replace', before: 'quiet words\n', after: 'QUIET WORDS\n' }],
      },
    });
    expect(payload(ofType(events, 'tool.started')[0])).toMatchObject({
      input: { filePath: 'out.txt', content: 'quiet words\n' },
      effectiveInput: { filePath: 'out.txt', content: 'QUIET WORDS\n' },
      rewrittenBy: ['shout'],
    });
    // The permission check judged the rewritten call: its fact comes after the hook's.
    const t = types(events);
    expect(t.indexOf('hook.completed')).toBeLessThan(t.indexOf('permission.evaluated'));
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Written.' });
    assertEventsConform(events);
  });

  it('a rewrite goes through the permission checks again: retargeting onto .env is denied by the default rule', async () => {
    const { events } = await run(
      [command('sneaky', 'before_tool_call', 'retarget', '.env')],
      [act([writeCall('X=1\n')]), answer('Done.')],
    );
    expect(existsSync(join(h?.workspace as string, '.env'))).toBe(false);
    expect(existsSync(join(h?.workspace as string, 'out.txt'))).toBe(false);
    expect(payload(ofType(events, 'permission.evaluated')[0])).toMatchObject({ decision: 'deny', source: 'default' });
  });

  it('a rewrite of a large input is recorded by its changes only, and held to the protocol size limit', async () => {
    // 40,000 characters: the model may send it; before and after together are over 64 KiB of JSON.
    const big = 'a'.repeat(40_000);
    const { events } = await run(
      [command('shout', 'before_tool_call', 'uppercase')],
      [act([writeCall(big)]), answer('Written.')],
    );
    expect(readFileSync(join(h?.workspace as string, 'out.txt'), 'utf8')).toBe(big.toUpperCase());
    const rewrite = payload(ofType(events, 'hook.completed')[0]).rewrite as Record<string, unknown>;
    expect(rewrite).toMatchObject({ target: 'input', whole: false, changes: [{ path: '/content', op: 'replace' }] });
    expect(rewrite).not.toHaveProperty('before');
    expect(JSON.stringify(rewrite).length).toBeLessThan(5_000);
    await h?.runtime.close();
    await h?.store.close();
    // A rewrite past the size limit the model's own input is held to fails the call.
    const grown = await run(
      [{ name: 'grow', point: 'before_tool_call', module: MODULE, export: 'inflate' }],
      [act([writeCall('small')]), answer('x')],
    );
    expect(existsSync(join(grown.harness.workspace, 'out.txt'))).toBe(false);
    expect(actionRows(grown.read).find((a) => a.actionId === 'w1')).toMatchObject({
      status: 'failed',
      error: { code: 'invalid_tool_input', details: { max: 65_536 } },
    });
  });

  it("a rewrite is validated again against the tool's schema", async () => {
    const { events, read } = await run(
      [command('broken', 'before_tool_call', 'invalid-input')],
      [act([writeCall()]), answer('Done.')],
    );
    expect(types(events)).not.toContain('tool.started');
    const row = actionRows(read).find((a) => a.actionId === 'w1');
    expect(row).toMatchObject({ status: 'failed', error: { code: 'invalid_tool_input' } });
    expect(JSON.stringify(row)).toContain('hook broken rewrote it');
  });

  it('an ask is a durable pending decision; once approved the call runs (the hook asked again and was answered)', async () => {
    h = await harness(
      { steps: [act([writeCall()]), answer('Written.')] as never },
      {
        hooks: HooksSchema.parse([command('review', 'before_tool_call', 'ask')]),
        permissions: { mode: 'accept-edits' },
      },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'do it' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.status).toBe('blocked');
    const request = read.pendingRequests[0];
    expect(request).toMatchObject({ actionType: 'tool_approval' });
    let events = await allEvents(h, sessionId);
    expect(payload(ofType(events, 'permission.evaluated')[0])).toMatchObject({ decision: 'ask', source: 'hook' });
    expect(payload(ofType(events, 'action.required')[0])).toMatchObject({
      decisions: ['approve', 'deny'],
      prompt: expect.stringContaining('a person should look at this'),
    });
    expect(existsSync(join(h.workspace, 'out.txt'))).toBe(false);
    await h.runtime.respondAction({ sessionId, actionId: request?.actionId as string, decision: 'approve' });
    await h.runtime.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'out.txt'), 'utf8')).toBe('hello\n');
    events = await allEvents(h, sessionId);
    expect(ofType(events, 'hook.completed')).toHaveLength(2);
    expect(payload(ofType(events, 'permission.evaluated')[1])).toMatchObject({ decision: 'allow', source: 'human' });
  });

  it('a hook allow is no permission: the mode still asks before a write', async () => {
    const { read } = await run([command('fine', 'before_tool_call', 'allow')], [act([writeCall()]), answer('x')], {
      permissions: { mode: 'default' },
    });
    expect(read.status).toBe('blocked');
    expect(read.pendingRequests).toHaveLength(1);
  });

  it('a hook that times out fails closed by default: hook.failed with hook_timeout, the call denied', async () => {
    const hook = { ...command('slow', 'before_tool_call', 'sleep'), timeoutMs: 300 };
    const { events } = await run([hook], [act([writeCall()]), answer('x')]);
    expect(existsSync(join(h?.workspace as string, 'out.txt'))).toBe(false);
    expect(payload(ofType(events, 'hook.failed')[0])).toMatchObject({
      hookName: 'slow',
      onFailure: 'deny',
      error: { code: 'hook_timeout', retryable: true },
    });
    expect(payload(ofType(events, 'permission.evaluated')[0])).toMatchObject({ decision: 'deny', source: 'hook' });
  });

  it('onFailure: allow fails open: garbage output and a non-zero exit are recorded and the call runs', async () => {
    const hooks = [
      { ...command('garbled', 'before_tool_call', 'garbage'), onFailure: 'allow' },
      { ...command('crashy', 'before_tool_call', 'exit3'), onFailure: 'allow' },
    ];
    const { events } = await run(hooks, [act([writeCall()]), answer('Written.')]);
    expect(readFileSync(join(h?.workspace as string, 'out.txt'), 'utf8')).toBe('hello\n');
    const failed = ofType(events, 'hook.failed').map(payload);
    expect(failed).toMatchObject([
      { hookName: 'garbled', onFailure: 'allow', error: { code: 'hook_output_invalid' } },
      { hookName: 'crashy', onFailure: 'allow', error: { code: 'hook_failed', details: { exitCode: 3 } } },
    ]);
    expect(JSON.stringify(failed[1])).toContain('something broke');
  });

  it('a decision the point does not take is malformed (ask after a call), and a missing command fails', async () => {
    const hooks = [
      { name: 'missing', point: 'before_tool_call', command: ['/nonexistent/hook'], onFailure: 'allow' },
      { ...command('late-ask', 'after_tool_call', 'ask') },
    ];
    const { events } = await run(hooks, [act([writeCall()]), answer('Written.')]);
    const failed = ofType(events, 'hook.failed').map(payload);
    expect(failed[0]).toMatchObject({ hookName: 'missing', error: { code: 'hook_failed' } });
    expect(failed[1]).toMatchObject({
      hookName: 'late-ask',
      onFailure: 'allow',
      error: { code: 'hook_output_invalid' },
    });
    expect(readFileSync(join(h?.workspace as string, 'out.txt'), 'utf8')).toBe('hello\n');
  });

  it('the matcher picks tools (exact and prefix*) and agents; other calls run no hook', async () => {
    const hooks = [
      { ...command('only-grep', 'before_tool_call', 'deny'), matcher: { tools: ['grep'] } },
      { ...command('other-agent', 'before_tool_call', 'deny'), matcher: { agents: ['reviewer'] } },
      { ...command('wr-prefix', 'before_tool_call', 'allow'), matcher: { tools: ['wr*'], executors: ['tool'] } },
    ];
    const { events } = await run(hooks, [act([writeCall()]), answer('Written.')]);
    expect(ofType(events, 'hook.started').map((e) => payload(e).hookName)).toEqual(['wr-prefix']);
    expect(existsSync(join(h?.workspace as string, 'out.txt'))).toBe(true);
  });

  it('a command hook sees only the variables it is allowed, and what it prints is redacted in the record', async () => {
    process.env.OAR_TEST_HOOK_SECRET = 'sk-hook-secret-value-0123456789';
    process.env.OAR_TEST_HOOK_HIDDEN = 'not-for-hooks';
    try {
      const hooks = [
        { ...command('leaky', 'before_tool_call', 'echo-env', 'OAR_TEST_HOOK_SECRET'), env: ['OAR_TEST_HOOK_SECRET'] },
      ];
      const { events } = await run(hooks, [act([writeCall()]), answer('x')], {
        secrets: { env: ['OAR_TEST_HOOK_SECRET'] },
      });
      const text = JSON.stringify(events);
      expect(text).not.toContain('sk-hook-secret-value-0123456789');
      expect(payload(ofType(events, 'hook.completed')[0]).reason).toMatch(/^OAR_TEST_HOOK_SECRET=\[REDACTED/);
      await h?.runtime.close();
      await h?.store.close();
      const hidden = [command('nosy', 'before_tool_call', 'echo-env', 'OAR_TEST_HOOK_HIDDEN')];
      const second = await run(hidden, [act([writeCall()]), answer('x')]);
      expect(payload(ofType(second.events, 'hook.completed')[0]).reason).toBe('OAR_TEST_HOOK_HIDDEN=<unset>');
    } finally {
      delete process.env.OAR_TEST_HOOK_SECRET;
      delete process.env.OAR_TEST_HOOK_HIDDEN;
    }
  });

  it('module hooks: a function rewrites, a default export denies, a throw follows onFailure', async () => {
    const hooks = [
      { name: 'tag', point: 'before_tool_call', module: MODULE, export: 'tagWrites' },
      { name: 'boom', point: 'before_tool_call', module: MODULE, export: 'throws', onFailure: 'allow' },
    ];
    const { events } = await run(hooks, [act([writeCall('body\n')]), answer('Written.')]);
    expect(readFileSync(join(h?.workspace as string, 'out.txt'), 'utf8')).toBe('# tagged\nbody\n');
    expect(payload(ofType(events, 'hook.failed')[0])).toMatchObject({
      hookName: 'boom',
      error: { code: 'hook_failed', message: expect.stringContaining('module hook exploded') },
    });
    await h?.runtime.close();
    await h?.store.close();
    const denied = await run(
      [{ name: 'no', point: 'before_tool_call', module: MODULE }],
      [act([writeCall()]), answer('x')],
    );
    expect(payload(ofType(denied.events, 'hook.completed')[0])).toMatchObject({
      decision: 'deny',
      reason: 'module says no',
    });
    expect(existsSync(join(denied.harness.workspace, 'out.txt'))).toBe(false);
  });
});

describe('after_tool_call hooks', () => {
  it('a deny withholds the result from the model: hook_denied, the full output still stored', async () => {
    const recorder = recordingModel({
      steps: [act([{ id: 'r1', type: 'tool', name: 'read', args: { filePath: 'README.md' } }]), answer('ok')],
    });
    const { events, read } = await run([command('censor', 'after_tool_call', 'deny')], [], { model: recorder.model });
    const row = actionRows(read).find((a) => a.actionId === 'r1');
    expect(row).toMatchObject({ status: 'failed', error: { code: 'hook_denied' } });
    expect(ofType(events, 'artifact.changed')).toHaveLength(1);
    expect(recorder.prompts[1]?.text).not.toContain('Hello from the sample workspace');
    expect(recorder.prompts[1]?.text).toContain('no read today');
    assertEventsConform(events);
  });
});

describe('policy.changed', () => {
  it('records a binding update that adds, changes or removes hooks, and nothing for other updates', async () => {
    h = await harness({ steps: [] });
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.updateBinding({ sessionId, update: { hooks: [command('a', 'before_tool_call', 'deny')] } });
    await h.runtime.updateBinding({
      sessionId,
      update: { hooks: [command('b', 'after_tool_call', 'allow'), { ...command('a', 'before_tool_call', 'ask') }] },
    });
    await h.runtime.updateBinding({ sessionId, update: { queuePolicy: 'reject' } });
    await h.runtime.updateBinding({ sessionId, update: { hooks: [] } });
    const all = await allEvents(h, sessionId);
    assertEventsConform(all);
    const changes = ofType(all, 'policy.changed').map(payload);
    expect(changes).toMatchObject([
      { policy: 'hooks', added: ['a'], removed: [], changed: [] },
      { policy: 'hooks', added: ['b'], removed: [], changed: ['a'] },
      { policy: 'hooks', added: [], removed: ['b', 'a'], changed: [], hooks: [] },
    ]);
    const bound = await h.runtime.getBinding(sessionId);
    expect(bound?.binding).not.toHaveProperty('hooks');
    expect(bound?.binding.queuePolicy).toBe('reject');
  });
});

describe('before_model_call and turn_end hooks', () => {
  it('a rewrite changes what the model is sent, and the record shows the change (not the whole transcript twice)', async () => {
    const recorder = recordingModel({ steps: [answer('Fine.')] });
    h = await harness(
      { steps: [] },
      { hooks: HooksSchema.parse([command('scrub', 'before_model_call', 'redact-messages')]), model: recorder.model },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'my password is hunter2, keep it safe' });
    await h.runtime.settled(sessionId);
    expect(recorder.prompts[0]?.text).not.toContain('hunter2');
    expect(recorder.prompts[0]?.text).toContain('[removed by hook]');
    const events = await allEvents(h, sessionId);
    const completed = payload(ofType(events, 'hook.completed')[0]);
    expect(completed).toMatchObject({
      point: 'before_model_call',
      decision: 'rewrite',
      rewrite: { target: 'messages' },
    });
    const rewrite = completed.rewrite as { changes: { path: string }[]; before?: unknown };
    expect(rewrite.changes.map((c) => c.path)).toEqual(['/1/content']);
    expect(rewrite.before).toBeUndefined();
    const t = types(events);
    expect(t.indexOf('hook.completed')).toBeLessThan(t.indexOf('model.requested'));
    assertEventsConform(events);
  });

  it('a deny before the model call fails the turn with hook_denied, and no call is made', async () => {
    h = await harness(
      { steps: [answer('never')] as never },
      { hooks: HooksSchema.parse([command('gate', 'before_model_call', 'deny')]) },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'hello' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(types(events)).not.toContain('model.requested');
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({
      status: 'failed',
      error: { code: 'hook_denied', message: expect.stringContaining('no call today') },
    });
  });

  it('turn_end hooks are told how the turn ended; they observe only', async () => {
    const log = join(tempDir('oar-turn-end-'), 'turns.jsonl');
    h = await harness(
      { steps: [answer('All done.')] as never },
      { hooks: HooksSchema.parse([command('notify', 'turn_end', 'record', log)]) },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'hello' });
    await h.runtime.settled(sessionId);
    expect(JSON.parse(readFileSync(log, 'utf8').trim())).toEqual({ outcome: 'completed', answer: 'All done.' });
    const events = await allEvents(h, sessionId);
    const t = types(events);
    expect(t.indexOf('turn.completed')).toBeLessThan(t.indexOf('hook.completed'));
    expect(payload(ofType(events, 'hook.completed')[0])).toMatchObject({ point: 'turn_end', decision: 'allow' });
  });
});

describe('command hooks as processes', () => {
  const options = { signal: new AbortController().signal, env: process.env, cwd: tempDir('oar-hook-cwd-') };
  const input = {
    version: 1 as const,
    point: 'before_tool_call' as const,
    hook: 'x',
    sessionId: 's',
    threadId: 't',
    turnId: 'u',
    agent: 'main',
    workspaceRoot: '/tmp',
  };

  it('output over maxOutputBytes stops the hook: hook_output_too_large', async () => {
    const hook = { ...command('flood', 'before_tool_call', 'flood'), maxOutputBytes: 1024 };
    const run = await runHook(hook, input, options);
    expect(run).toMatchObject({ ok: false, error: { code: 'hook_output_too_large' } });
  });

  it('a timeout kills the whole process group: a grandchild does not outlive the hook', async () => {
    const pidFile = join(tempDir('oar-hook-pid-'), 'pid');
    const hook = { ...command('forky', 'before_tool_call', 'fork-sleep', pidFile), timeoutMs: 500 };
    const run = await runHook(hook, input, options);
    expect(run).toMatchObject({ ok: false, error: { code: 'hook_timeout' } });
    const pid = Number(readFileSync(pidFile, 'utf8'));
    // The group was sent SIGTERM then SIGKILL: give the kernel a moment to reap, then the grandchild is gone.
    let alive = true;
    for (let i = 0; i < 50 && alive; i++) {
      try {
        process.kill(pid, 0);
        await new Promise((resolve) => setTimeout(resolve, 100));
      } catch {
        alive = false;
      }
    }
    expect(alive).toBe(false);
  });
});

describe('hooks on other executors', () => {
  const copy = {
    name: 'copy_file',
    description: 'Copies a file.',
    inputSchema: {
      type: 'object',
      properties: { from: { type: 'string' }, to: { type: 'string' } },
      required: ['from', 'to'],
    },
    steps: [
      { id: 'load', tool: 'read', input: { filePath: { $input: 'from' } } },
      {
        id: 'save',
        tool: 'write',
        depends: ['load'],
        input: { filePath: { $input: 'to' }, content: { $step: 'load' } },
      },
    ],
  };
  const pipelineCall = dsl([
    { id: 'p1', executor: { type: 'pipeline', target: 'copy_file' }, input: { from: 'README.md', to: 'copy.md' } },
  ]);

  it('a hook whose matcher names the pipeline executor vetoes the pipeline; one that does not name it stays out', async () => {
    const { events, read } = await run(
      [
        command('any-tool', 'before_tool_call', 'allow'),
        { ...command('no-pipelines', 'before_tool_call', 'deny'), matcher: { executors: ['pipeline'] } },
      ],
      [pipelineCall, answer('x')],
      { pipelines: [copy], permissions: { mode: 'bypass' } },
    );
    expect(existsSync(join(h?.workspace as string, 'copy.md'))).toBe(false);
    expect(ofType(events, 'hook.started').map((e) => payload(e).hookName)).toEqual(['no-pipelines']);
    expect(payload(ofType(events, 'permission.evaluated')[0])).toMatchObject({ decision: 'deny', source: 'hook' });
    expect(actionRows(read).find((a) => a.actionId === 'p1')).toMatchObject({ status: 'denied' });
  });

  it('a rewrite of a non-tool action is refused (nothing to validate it against): the action is denied', async () => {
    const { read } = await run(
      [{ ...command('meddle', 'before_tool_call', 'uppercase'), matcher: { executors: ['pipeline'] } }],
      [pipelineCall, answer('x')],
      { pipelines: [copy], permissions: { mode: 'bypass' } },
    );
    expect(existsSync(join(h?.workspace as string, 'copy.md'))).toBe(false);
    expect(JSON.stringify(actionRows(read).find((a) => a.actionId === 'p1'))).toContain(
      'rewrites apply to tool calls only',
    );
  });
});
