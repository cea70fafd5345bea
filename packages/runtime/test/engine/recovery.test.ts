import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AnyTool, defineTool, type ModelScript, Store } from '../../src/index.js';
import { type Harness, harness } from './harness.js';
import { act, actionRows, allEvents, answer, dsl, ofType, payload, registryWith, waitForEvent } from './helpers.js';

const open: Harness[] = [];
const crashedStores: Store[] = [];
afterEach(async () => {
  for (const x of open.splice(0)) {
    await x.runtime.close();
    await x.store.close();
  }
  // A crashed runtime is never closed (its driver is stuck in the tool); only its connection is released.
  for (const store of crashedStores.splice(0)) await store.close();
});

/** A tool whose first call never returns (the process "dies" while it runs); later calls succeed. */
function hangingTool(
  idempotent: boolean | 'by_key',
  calls: { n: number; keys?: (string | undefined)[] },
  reconcile?: AnyTool['reconcile'],
): AnyTool {
  return defineTool<{ label: string }>({
    name: 'hang',
    description: 'Hangs on the first call.',
    input: z.strictObject({ label: z.string() }),
    isReadOnly: false,
    isConcurrencySafe: false,
    isDestructive: false,
    isIdempotent: idempotent === true,
    ...(idempotent === 'by_key' ? { isIdempotentByKey: true } : {}),
    interruptBehavior: 'block',
    capabilities: ['write'],
    ...(reconcile ? { reconcile } : {}),
    async execute(input, context) {
      calls.n++;
      calls.keys?.push(context.idempotencyKey);
      if (calls.n === 1) await new Promise(() => undefined);
      return { text: `done ${input.label}` };
    },
  });
}

const CARRIER_SCRIPT = {
  steps: [act([{ id: 'h', type: 'tool', name: 'hang', args: { label: 'x' } }]), answer('after restart')],
};

async function crashAndRestart(
  idempotent: boolean | 'by_key',
  script: ModelScript = CARRIER_SCRIPT,
  carrier?: 'text',
  reconcile?: AnyTool['reconcile'],
  settle = true,
) {
  const calls = { n: 0, keys: [] as (string | undefined)[] };
  // Short leases: the second runtime takes the thread over once the crashed one's lease runs out.
  const options = {
    tools: registryWith(hangingTool(idempotent, calls, reconcile)),
    permissions: { mode: 'bypass' as const },
    worker: { leaseTtlMs: 300, pollMs: 50 },
    ...(carrier ? { mainAgent: { carrier } } : {}),
  };
  const crashed = await harness(script, options);
  const { sessionId, threadId } = await crashed.runtime.createSession();
  await crashed.runtime.submitTurn({ sessionId, input: 'go' });
  crashedStores.push(crashed.store);
  await waitForEvent(crashed, sessionId, 'tool.started');
  crashed.runtime.worker?.abandon();
  // The first runtime is abandoned mid-call (never closed: its driver is stuck, as in a crash).
  const store = await Store.open(join(crashed.dir, 'oar.db'));
  const second = await harness(script, { ...options, store, workspaceRoot: crashed.workspace });
  open.push(second);
  if (settle) await second.runtime.settled(sessionId);
  return { second, sessionId, threadId, calls };
}

describe('crash recovery', () => {
  it('an idempotent tool that started without a result is re-run on restart', async () => {
    const { second, sessionId, threadId, calls } = await crashAndRestart(true);
    expect(calls.n).toBe(2);
    const events = await allEvents(second, sessionId);
    expect(ofType(events, 'tool.started').map((e) => payload(e).attempt)).toEqual([1, 2]);
    const read = await second.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({ status: 'completed', attempt: 2 });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'after restart' });
    expect((await second.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a non-idempotent tool becomes lost and is not re-run; the model is told', async () => {
    const { second, sessionId, threadId, calls } = await crashAndRestart(false);
    expect(calls.n).toBe(1);
    const events = await allEvents(second, sessionId);
    expect(ofType(events, 'tool.started')).toHaveLength(1);
    const lost = ofType(events, 'tool.failed')[0];
    expect(lost?.status).toBe('lost');
    const read = await second.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({ status: 'lost', error: { code: 'lost' } });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'after restart' });
  });

  it('a tool idempotent by key is retried after a crash under the same idempotency key, not lost', async () => {
    const { second, sessionId, threadId, calls } = await crashAndRestart('by_key');
    expect(calls.n).toBe(2);
    const events = await allEvents(second, sessionId);
    const starts = ofType(events, 'tool.started').map((e) => payload(e));
    // Not idempotent by itself: its start was durable before it ran (a crash could have left it half-done).
    expect(starts.map((s) => [s.attempt, s.idempotent, s.idempotentByKey])).toEqual([
      [1, false, true],
      [2, false, true],
    ]);
    // Both attempts asked the world under one key, the first attempt's, so the world acted at most once.
    expect(calls.keys[0]).toMatch(/^idem_[0-9a-f]{32}$/);
    expect(calls.keys).toEqual([calls.keys[0], calls.keys[0]]);
    expect(starts.map((s) => s.idempotencyKey)).toEqual([calls.keys[0], calls.keys[0]]);
    expect(starts[1]?.keyAttempt).toBe(1);
    expect(ofType(events, 'tool.failed')).toEqual([]);
    const read = await second.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({ status: 'completed', attempt: 2 });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'after restart' });
    expect((await second.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a full-DSL graph declared without persistence is not resumed: its unfinished actions are lost', async () => {
    const hang = { id: 'h', executor: { type: 'tool', target: 'hang' }, input: { label: 'x' } };
    const after = { id: 'later', executor: { type: 'tool', target: 'hang' }, input: { label: 'y' }, depends_on: ['h'] };
    const kept = { id: 'kept', executor: { type: 'tool', target: 'hang' }, input: { label: 'z' }, persist: true };
    const script = { steps: [dsl([hang, after, kept], { persist: false }), { text: 'after restart' }] };
    const { second, sessionId, threadId, calls } = await crashAndRestart(true, script, 'text');
    const read = await second.runtime.getThreadRead({ sessionId, threadId });
    const rows = Object.fromEntries(actionRows(read).map((a) => [a.actionId, a]));
    // Idempotent, yet not re-run: the graph chose not to persist. Its own `persist: true` keeps `kept` resumable.
    expect(rows.h).toMatchObject({ status: 'lost', error: { code: 'not_resumed' } });
    expect(rows.later).toMatchObject({ status: 'lost', error: { code: 'not_resumed' } });
    expect(rows.kept?.status).toBe('completed');
    expect(calls.n).toBe(2);
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'after restart' });
    expect((await second.runtime.replaySession(sessionId)).differences).toEqual([]);
  });
});

describe('a lost action is reconciled, never silent', () => {
  const SCRIPT = {
    steps: [
      act([{ id: 'h', type: 'tool', name: 'hang', args: { label: 'x' }, title: 'Book the room' }]),
      answer('after restart'),
      answer('after retry'),
    ],
  };

  async function lostOne(reconcile?: AnyTool['reconcile']) {
    const crashed = await crashAndRestart(false, SCRIPT, undefined, reconcile);
    const { second, sessionId, threadId } = crashed;
    const read = await second.runtime.getThreadRead({ sessionId, threadId });
    return { ...crashed, read, request: read.unreconciledActions?.[0] };
  }

  it('is listed on its thread until answered, without holding the thread', async () => {
    const { second, sessionId, threadId, read, request } = await lostOne();
    const started = ofType(await allEvents(second, sessionId), 'tool.started')[0];
    expect(read.unreconciledActions).toHaveLength(1);
    expect(request).toMatchObject({
      graphActionId: 'h',
      toolName: 'hang',
      toolCallId: started?.toolCallId,
      idempotencyKey: payload(started).idempotencyKey,
    });
    expect(request?.prompt).toContain('Book the room');
    // Not a pending decision: the model was told, the turn completed, the thread is idle.
    expect(read.pendingRequests).toEqual([]);
    expect(read.status).toBe('idle');
    const required = ofType(await allEvents(second, sessionId), 'action.required')[0];
    expect(payload(required)).toMatchObject({
      actionType: 'reconcile',
      decisions: ['happened', 'not_happened', 'retry'],
    });
    const { snapshot } = await second.runtime.getSession({ sessionId });
    expect(snapshot.threads.find((t) => t.threadId === threadId)?.unreconciledActions).toHaveLength(1);
  });

  it('happened: the action ends completed, saying who decided and why', async () => {
    const { second, sessionId, threadId, request, calls } = await lostOne();
    const actionId = request?.actionId ?? '';
    const answered = await second.runtime.respondAction({
      sessionId,
      actionId,
      decision: 'happened',
      reason: 'the booking is in the calendar',
      resolvedBy: 'ops@example.com',
    });
    expect(answered).toMatchObject({ threadId, decision: 'happened' });
    expect(answered.turnId).toBeUndefined();
    const read = await second.runtime.getThreadRead({ sessionId, threadId });
    expect(read.unreconciledActions).toBeUndefined();
    expect(actionRows(read)[0]).toMatchObject({ status: 'completed' });
    const resolved = ofType(await allEvents(second, sessionId), 'action.resolved').at(-1);
    expect(resolved?.actionId).toBe(actionId);
    expect(payload(resolved)).toMatchObject({
      decision: 'happened',
      actionType: 'reconcile',
      resolvedBy: 'ops@example.com',
      reason: 'the booking is in the calendar',
    });
    expect(calls.n).toBe(1);
    // Answered once: a second answer says how and by whom it was answered.
    await expect(second.runtime.respondAction({ sessionId, actionId, decision: 'retry' })).rejects.toMatchObject({
      code: 'decision_already_resolved',
    });
    expect((await second.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('not_happened: the action ends failed (not_happened); an approval word is refused', async () => {
    const { second, sessionId, threadId, request } = await lostOne();
    const actionId = request?.actionId ?? '';
    await expect(second.runtime.respondAction({ sessionId, actionId, decision: 'approve' })).rejects.toMatchObject({
      code: 'invalid_decision',
    });
    await second.runtime.respondAction({ sessionId, actionId, decision: 'not_happened' });
    const read = await second.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({ status: 'failed', error: { code: 'not_happened' } });
    expect(read.unreconciledActions).toBeUndefined();
  });

  it('retry: runs it again in a turn of its own, under a new idempotency key; the model sees the result', async () => {
    const { second, sessionId, threadId, request, calls } = await lostOne();
    const answered = await second.runtime.respondAction({
      sessionId,
      actionId: request?.actionId ?? '',
      decision: 'retry',
    });
    expect(answered.turnId).toBeDefined();
    await second.runtime.settled(sessionId);
    expect(calls.n).toBe(2);
    expect(calls.keys[1]).toMatch(/^idem_[0-9a-f]{32}$/);
    expect(calls.keys[1]).not.toBe(calls.keys[0]);
    const read = await second.runtime.getThreadRead({ sessionId, threadId });
    expect(read.unreconciledActions).toBeUndefined();
    const rows = actionRows(read);
    // The lost call stays lost on record; the retry is a call of its own, which completed.
    expect(rows.map((r) => r.status)).toEqual(['lost', 'completed']);
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'after retry' });
    expect((await second.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it("a tool's reconcile step answers by idempotency key, with no person needed", async () => {
    const asked: string[] = [];
    const { second, sessionId, read, calls } = await lostOne(async ({ idempotencyKey, input }) => {
      asked.push(idempotencyKey);
      return { happened: true, evidence: { bookingId: 'bk_1', label: input.label } };
    });
    expect(asked).toEqual([calls.keys[0]]);
    expect(read.unreconciledActions).toBeUndefined();
    expect(actionRows(read)[0]).toMatchObject({ status: 'completed' });
    const resolved = ofType(await allEvents(second, sessionId), 'action.resolved')[0];
    expect(payload(resolved)).toMatchObject({
      decision: 'happened',
      resolvedBy: 'tool:hang',
      evidence: { bookingId: 'bk_1', label: 'x' },
    });
  });

  it('in a graph declared without persistence, the running call is asked about; one never started is not', async () => {
    const hang = { id: 'h', executor: { type: 'tool', target: 'hang' }, input: { label: 'x' } };
    const after = { id: 'later', executor: { type: 'tool', target: 'hang' }, input: { label: 'y' }, depends_on: ['h'] };
    const script = { steps: [dsl([hang, after], { persist: false }), { text: 'after restart' }] };
    const { second, sessionId, threadId } = await crashAndRestart(false, script, 'text');
    const read = await second.runtime.getThreadRead({ sessionId, threadId });
    const rows = Object.fromEntries(actionRows(read).map((a) => [a.actionId, a]));
    expect(rows.h).toMatchObject({ status: 'lost', error: { code: 'not_resumed' } });
    expect(rows.later).toMatchObject({ status: 'lost', error: { code: 'not_resumed' } });
    expect(read.unreconciledActions?.map((u) => u.graphActionId)).toEqual(['h']);
  });

  it('a person who answers while the tool is being asked wins, and the turn goes on', async () => {
    let askedNow: () => void = () => undefined;
    const asked = new Promise<void>((resolve) => {
      askedNow = resolve;
    });
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { second, sessionId, threadId } = await crashAndRestart(
      false,
      SCRIPT,
      undefined,
      async () => {
        askedNow();
        await released;
        return { happened: false };
      },
      false,
    );
    await asked;
    const request = (await second.runtime.getThreadRead({ sessionId, threadId })).unreconciledActions?.[0];
    await second.runtime.respondAction({
      sessionId,
      actionId: request?.actionId ?? '',
      decision: 'happened',
      resolvedBy: 'ops@example.com',
    });
    release();
    await second.runtime.settled(sessionId);
    const events = await allEvents(second, sessionId);
    expect(ofType(events, 'action.resolved').map((e) => payload(e).resolvedBy)).toEqual(['ops@example.com']);
    expect(ofType(events, 'runtime.error')).toEqual([]);
    const read = await second.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({ status: 'completed' });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'after restart' });
  });

  it('a reconcile step that cannot tell leaves it to a person, with a warning on record', async () => {
    const { second, sessionId, read } = await lostOne(async () => {
      throw new Error('calendar API unreachable');
    });
    expect(read.unreconciledActions).toHaveLength(1);
    const warning = ofType(await allEvents(second, sessionId), 'runtime.warning').find(
      (e) => payload(e).code === 'reconcile_failed',
    );
    expect(payload(warning)).toMatchObject({ retryable: true, details: { by: 'tool:hang' } });
    expect(JSON.stringify(payload(warning))).toContain('calendar API unreachable');
  });
});
