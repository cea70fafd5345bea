import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { OarRuntimeError, Store } from '../../src/index.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, errorCode, ofType, payload, waitForEvent } from './helpers.js';

/**
 * Acceptance scenario 5 of the Agent Runtime standard, queue and resume: "Given a busy thread receives another turn,
 * the runtime either rejects it with policy detail or stores it as a queued turn. After restart, the queue is still
 * visible and can be resumed or reordered." Both branches. Stored: turns submitted while the thread's turn waits for
 * an approval are queued (`turn.submitted` `queued`, `queue.changed`); after the runtime is closed and a new one
 * opened on the same SQLite file, the queue is in the read model in its order, is reordered and trimmed there, and
 * runs in the new order once the running turn goes on. Resumed without anyone's help: a runtime closed in the middle
 * of a model call; a control plane (no worker) on the same file shows and reorders the queue; a runtime with a worker
 * then finishes the cut-off turn and runs the queue in its new order. Rejected: with `queuePolicy: reject` the
 * runtime refuses with `thread_busy` naming the running turn, and records nothing.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const queuedIds = async (x: Harness, sessionId: string, threadId: string) =>
  (await x.runtime.getThreadRead({ sessionId, threadId })).queuedTurns.map((q) => [q.turnId, q.position]);

describe('acceptance scenario 5: queue and resume', () => {
  it('stores turns for a busy thread as queued; after a restart the queue is visible, reordered and resumed', async () => {
    // Turn 1 writes (and waits for approval); the queued turns answer in the order they run.
    const script = {
      steps: [
        act([{ id: 'w1', type: 'tool', name: 'write', args: { filePath: 'one.txt', content: '1' } }]),
        answer('First done.'),
        answer('ran second'),
        answer('ran third'),
      ],
    };
    h = await harness(script);
    const { sessionId, threadId } = await h.runtime.createSession();
    const first = await h.runtime.submitTurn({ sessionId, input: 'one' });
    await h.runtime.settled(sessionId);
    const [pending] = (await h.runtime.getThreadRead({ sessionId, threadId })).pendingRequests;
    expect(pending?.turnId).toBe(first.turnId);

    // The thread is busy (its turn waits for a decision): the next turns are stored as queued, in order.
    const two = await h.runtime.submitTurn({ sessionId, input: 'two' });
    const three = await h.runtime.submitTurn({ sessionId, input: 'three' });
    const four = await h.runtime.submitTurn({ sessionId, input: 'four' });
    expect([first.status, two.status, three.status, four.status]).toEqual(['accepted', 'queued', 'queued', 'queued']);
    expect(await queuedIds(h, sessionId, threadId)).toEqual([
      [two.turnId, 0],
      [three.turnId, 1],
      [four.turnId, 2],
    ]);
    let events = await allEvents(h, sessionId);
    expect(ofType(events, 'turn.submitted').map((e) => [e.turnId, payload(e).status])).toEqual([
      [first.turnId, 'accepted'],
      [two.turnId, 'queued'],
      [three.turnId, 'queued'],
      [four.turnId, 'queued'],
    ]);
    expect(payload(ofType(events, 'queue.changed').at(-1))).toMatchObject({
      change: 'enqueued',
      queuedTurnId: four.turnId,
      queuedTurns: [{ turnId: two.turnId }, { turnId: three.turnId }, { turnId: four.turnId }],
    });

    // A restart: the runtime and its store closed, a new runtime on the same file.
    const { dir, workspace } = h;
    await h.runtime.close();
    await h.store.close();
    h = await harness(script, { store: await Store.open(join(dir, 'oar.db')), workspaceRoot: workspace });
    await h.runtime.settled(sessionId);

    // Still visible, in order, in the thread read model and in the session snapshot.
    expect(await queuedIds(h, sessionId, threadId)).toEqual([
      [two.turnId, 0],
      [three.turnId, 1],
      [four.turnId, 2],
    ]);
    let { snapshot } = await h.runtime.getSession({ sessionId });
    assertSnapshotConforms(snapshot);
    const thread = snapshot.threads.find((t) => t.threadId === threadId);
    expect(thread?.queuedTurns.map((q) => q.queuedTurnId)).toEqual([two.turnId, three.turnId, four.turnId]);
    expect(thread?.turns.filter((t) => t.status === 'queued').map((t) => t.turnId)).toEqual([
      two.turnId,
      three.turnId,
      four.turnId,
    ]);

    // Reordered after the restart: the last one to the front, the middle one removed.
    await h.runtime.promoteQueuedTurn({ sessionId, threadId, turnId: four.turnId });
    await h.runtime.removeQueuedTurn({ sessionId, threadId, turnId: three.turnId });
    expect(await queuedIds(h, sessionId, threadId)).toEqual([
      [four.turnId, 0],
      [two.turnId, 1],
    ]);
    expect(await errorCode(h.runtime.promoteQueuedTurn({ sessionId, threadId, turnId: three.turnId }))).toBe(
      'queued_turn_not_found',
    );

    // Resumed: the running turn goes on once answered, then the queue runs in its new order.
    await h.runtime.respondAction({ sessionId, actionId: pending?.actionId as string, decision: 'approve' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.queuedTurns).toEqual([]);
    expect(Object.fromEntries(read.turns.map((t) => [t.turnId, t.status]))).toEqual({
      [first.turnId]: 'completed',
      [two.turnId]: 'completed',
      [three.turnId]: 'cancelled',
      [four.turnId]: 'completed',
    });
    events = await allEvents(h, sessionId);
    expect(ofType(events, 'turn.started').map((e) => e.turnId)).toEqual([first.turnId, four.turnId, two.turnId]);
    const answers = Object.fromEntries(ofType(events, 'turn.completed').map((e) => [e.turnId, payload(e).answer]));
    expect(answers).toEqual({
      [first.turnId]: 'First done.',
      [four.turnId]: 'ran second',
      [two.turnId]: 'ran third',
    });
    expect(ofType(events, 'queue.changed').map((e) => [payload(e).change, payload(e).queuedTurnId])).toEqual([
      ['enqueued', two.turnId],
      ['enqueued', three.turnId],
      ['enqueued', four.turnId],
      ['promoted', four.turnId],
      ['removed', three.turnId],
      ['dequeued', four.turnId],
      ['dequeued', two.turnId],
    ]);
    ({ snapshot } = await h.runtime.getSession({ sessionId }));
    assertSnapshotConforms(snapshot);
    assertEventsConform(events);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a turn cut off by the restart resumes on the new runtime; the queue, reordered meanwhile, runs after it', async () => {
    h = await harness({ steps: [{ ...answer('never delivered'), delayMs: 10_000 }] });
    const { sessionId, threadId } = await h.runtime.createSession();
    const first = await h.runtime.submitTurn({ sessionId, input: 'one' });
    await waitForEvent(h, sessionId, 'model.requested');
    const two = await h.runtime.submitTurn({ sessionId, input: 'two' });
    const three = await h.runtime.submitTurn({ sessionId, input: 'three' });
    expect([two.status, three.status]).toEqual(['queued', 'queued']);
    // The runtime goes away in the middle of turn 1's model call.
    const { dir, workspace } = h;
    await h.runtime.close();
    await h.store.close();

    // A control plane on the same file (no worker: nothing runs): the queue is visible, and reordered there.
    const control = await harness(
      { steps: [] },
      { store: await Store.open(join(dir, 'oar.db')), workspaceRoot: workspace, worker: false },
    );
    h = control;
    let read = await control.runtime.getThreadRead({ sessionId, threadId });
    expect(read.activeTurnId).toBe(first.turnId);
    expect(read.queuedTurns.map((q) => q.turnId)).toEqual([two.turnId, three.turnId]);
    await control.runtime.promoteQueuedTurn({ sessionId, threadId, turnId: three.turnId });
    expect(await queuedIds(control, sessionId, threadId)).toEqual([
      [three.turnId, 0],
      [two.turnId, 1],
    ]);
    assertSnapshotConforms((await control.runtime.getSession({ sessionId })).snapshot);
    await control.runtime.close();
    await control.store.close();

    // A runtime with a worker on the same file resumes: turn 1 again from its unfinished step, then the queue.
    h = await harness(
      { steps: [answer('one, resumed'), answer('ran second'), answer('ran third')] },
      { store: await Store.open(join(dir, 'oar.db')), workspaceRoot: workspace },
    );
    await h.runtime.settled(sessionId);
    read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.queuedTurns).toEqual([]);
    expect(read.turns.map((t) => [t.turnId, t.status])).toEqual([
      [first.turnId, 'completed'],
      [two.turnId, 'completed'],
      [three.turnId, 'completed'],
    ]);
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'turn.started').map((e) => e.turnId)).toEqual([first.turnId, three.turnId, two.turnId]);
    expect(Object.fromEntries(ofType(events, 'turn.completed').map((e) => [e.turnId, payload(e).answer]))).toEqual({
      [first.turnId]: 'one, resumed',
      [three.turnId]: 'ran second',
      [two.turnId]: 'ran third',
    });
    assertEventsConform(events);
    assertSnapshotConforms((await h.runtime.getSession({ sessionId })).snapshot);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('with queuePolicy reject, refuses a turn for a busy thread with the policy detail and records nothing', async () => {
    h = await harness(
      { steps: [{ ...answer('Slow first.'), delayMs: 400 }, answer('Later.')] },
      { queuePolicy: 'reject' },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    const first = await h.runtime.submitTurn({ sessionId, input: 'one' });
    await waitForEvent(h, sessionId, 'model.requested');
    const before = await allEvents(h, sessionId);
    let refusal: unknown;
    await h.runtime.submitTurn({ sessionId, input: 'two' }).catch((error: unknown) => {
      refusal = error;
    });
    expect(refusal).toBeInstanceOf(OarRuntimeError);
    expect((refusal as OarRuntimeError).error).toMatchObject({
      code: 'thread_busy',
      retryable: true,
      details: { activeTurnId: first.turnId },
    });
    expect((refusal as Error).message).toContain(first.turnId);
    // Nothing stored: no turn, no queue entry.
    const after = await allEvents(h, sessionId);
    expect(after.slice(0, before.length)).toEqual(before);
    expect(ofType(after, 'turn.submitted')).toHaveLength(1);
    expect(ofType(after, 'queue.changed')).toEqual([]);
    expect((await h.runtime.getThreadRead({ sessionId, threadId })).queuedTurns).toEqual([]);
    await h.runtime.settled(sessionId);
    assertEventsConform(await allEvents(h, sessionId));
  });
});
