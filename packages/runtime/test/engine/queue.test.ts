import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from './harness.js';
import { allEvents, answer, errorCode, ofType, payload, waitForEvent } from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const slowAnswer = (message: string, delayMs = 300) => ({ ...answer(message), delayMs });

describe('the turn queue', () => {
  it('queues a turn submitted while another runs, and runs it afterwards', async () => {
    h = await harness({ steps: [slowAnswer('first'), answer('second')] });
    const { sessionId, threadId } = await h.runtime.createSession();
    const a = await h.runtime.submitTurn({ sessionId, input: 'one' });
    await waitForEvent(h, sessionId, 'model.requested');
    const b = await h.runtime.submitTurn({ sessionId, input: 'two' });
    expect(a.status).toBe('accepted');
    expect(b.status).toBe('queued');
    let read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.queuedTurns.map((q) => q.turnId)).toEqual([b.turnId]);
    let events = await allEvents(h, sessionId);
    const enqueued = ofType(events, 'queue.changed').find((e) => payload(e).change === 'enqueued');
    expect(payload(enqueued)).toMatchObject({ queuedTurnId: b.turnId });
    expect(ofType(events, 'turn.submitted').at(-1)?.status).toBe('queued');

    await h.runtime.settled(sessionId);
    read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.queuedTurns).toEqual([]);
    const answers = Object.fromEntries(read.turns.map((t) => [t.turnId, t.status]));
    expect(answers).toEqual({ [a.turnId]: 'completed', [b.turnId]: 'completed' });
    expect(read.lastOutcome).toMatchObject({ turnId: b.turnId, answer: 'second' });
    events = await allEvents(h, sessionId);
    const completed = ofType(events, 'turn.completed').map((e) => e.turnId);
    expect(completed).toEqual([a.turnId, b.turnId]);
    expect(ofType(events, 'queue.changed').map((e) => payload(e).change)).toEqual(['enqueued', 'dequeued']);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('removeQueuedTurn drops a queued turn; promoteQueuedTurn moves one to the front', async () => {
    h = await harness({ steps: [slowAnswer('first'), answer('second-run'), answer('third-run')] });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'one' });
    await waitForEvent(h, sessionId, 'model.requested');
    const b = await h.runtime.submitTurn({ sessionId, input: 'two' });
    const c = await h.runtime.submitTurn({ sessionId, input: 'three' });
    const d = await h.runtime.submitTurn({ sessionId, input: 'four' });
    await h.runtime.promoteQueuedTurn({ sessionId, threadId, turnId: d.turnId });
    let read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.queuedTurns.map((q) => [q.turnId, q.position])).toEqual([
      [d.turnId, 0],
      [b.turnId, 1],
      [c.turnId, 2],
    ]);
    await h.runtime.removeQueuedTurn({ sessionId, threadId, turnId: b.turnId });
    read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.queuedTurns.map((q) => q.turnId)).toEqual([d.turnId, c.turnId]);
    expect(await errorCode(h.runtime.removeQueuedTurn({ sessionId, threadId, turnId: b.turnId }))).toBe(
      'queued_turn_not_found',
    );

    await h.runtime.settled(sessionId);
    read = await h.runtime.getThreadRead({ sessionId, threadId });
    const status = Object.fromEntries(read.turns.map((t) => [t.turnId, t.status]));
    expect(status[b.turnId]).toBe('cancelled');
    expect(status[c.turnId]).toBe('completed');
    expect(status[d.turnId]).toBe('completed');
    const events = await allEvents(h, sessionId);
    const answers = Object.fromEntries(ofType(events, 'turn.completed').map((e) => [e.turnId, payload(e).answer]));
    expect(answers[d.turnId]).toBe('second-run');
    expect(answers[c.turnId]).toBe('third-run');
    expect(ofType(events, 'turn.started').map((e) => e.turnId)).not.toContain(b.turnId);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it("queuePolicy 'reject' refuses a turn while the thread is busy", async () => {
    h = await harness({ steps: [slowAnswer('first'), answer('later')] }, { queuePolicy: 'reject' });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'one' });
    await waitForEvent(h, sessionId, 'model.requested');
    const before = (await allEvents(h, sessionId)).length;
    expect(await errorCode(h.runtime.submitTurn({ sessionId, input: 'two' }))).toBe('thread_busy');
    expect((await allEvents(h, sessionId)).length).toBe(before);
    await h.runtime.settled(sessionId);
    // Idle again: accepted.
    const next = await h.runtime.submitTurn({ sessionId, input: 'three' });
    expect(next.status).toBe('accepted');
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ turnId: next.turnId, answer: 'later' });
  });

  it('submitTurn with a known turnId is idempotent', async () => {
    h = await harness({ steps: [answer('once')] });
    const { sessionId, threadId } = await h.runtime.createSession();
    const first = await h.runtime.submitTurn({ sessionId, turnId: 'turn_fixed', input: 'hello' });
    expect(first).toMatchObject({ turnId: 'turn_fixed', duplicate: false, status: 'accepted' });
    await h.runtime.settled(sessionId);
    const before = await allEvents(h, sessionId);
    const again = await h.runtime.submitTurn({ sessionId, turnId: 'turn_fixed', input: 'hello' });
    expect(again).toMatchObject({ turnId: 'turn_fixed', duplicate: true, threadId });
    await h.runtime.settled(sessionId);
    expect((await allEvents(h, sessionId)).length).toBe(before.length);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.turns).toHaveLength(1);
  });

  it('rejects empty input', async () => {
    h = await harness({ steps: [] });
    const { sessionId } = await h.runtime.createSession();
    expect(await errorCode(h.runtime.submitTurn({ sessionId, input: '  ' }))).toBe('invalid_input');
  });

  it('after an interrupt the next queued turn runs', async () => {
    h = await harness({ steps: [slowAnswer('never', 10_000), answer('queued one ran')] });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'one' });
    await waitForEvent(h, sessionId, 'model.requested');
    const b = await h.runtime.submitTurn({ sessionId, input: 'two' });
    await h.runtime.interruptTurn({ sessionId });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ turnId: b.turnId, status: 'completed', answer: 'queued one ran' });
  });
});

describe('concurrent submissions', () => {
  it('accept exactly one turn; the rest queue behind it and every turn runs once, in order', async () => {
    h = await harness({ steps: Array.from({ length: 8 }, (_, i) => answer(`answer ${i}`)) });
    const { sessionId, threadId } = await h.runtime.createSession();
    const results = await Promise.all(
      [0, 1, 2, 3].map((i) => h!.runtime.submitTurn({ sessionId, input: `burst ${i}` })),
    );
    expect(results.filter((r) => r.status === 'accepted')).toHaveLength(1);
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.turns.map((t) => t.status)).toEqual(['completed', 'completed', 'completed', 'completed']);
    const started = ofType(await allEvents(h, sessionId), 'turn.started').map((e) => e.turnId);
    expect(started).toEqual(read.turns.map((t) => t.turnId));
    expect(new Set(started).size).toBe(4);
  });
});
