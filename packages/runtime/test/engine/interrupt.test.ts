import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../../src/index.js';
import { type Harness, harness } from './harness.js';
import {
  act,
  actionRows,
  allEvents,
  answer,
  blockingTool,
  cancellableTool,
  ofType,
  payload,
  registryWith,
  type Timeline,
  types,
  waitFor,
  waitForEvent,
} from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

describe('interrupt', () => {
  it('cancels a running cancel-tool, records the cancellation, and leaves the thread usable', async () => {
    const timeline: Timeline = [];
    h = await harness(
      {
        steps: [
          act([{ id: 'slow', type: 'tool', name: 'slow_cancel', args: { label: 's' } }]),
          answer('After the interrupt.'),
        ],
      },
      { tools: registryWith(cancellableTool(timeline)) },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    const first = await h.runtime.submitTurn({ sessionId, input: 'slow' });
    await waitForEvent(h, sessionId, 'tool.started');
    const started = Date.now();
    const result = await h.runtime.interruptTurn({ sessionId, reason: 'user pressed stop' });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(result).toEqual({ interrupted: true, turnId: first.turnId, status: 'cancelled' });
    expect(timeline).toEqual(['start:s']);

    const events = await allEvents(h, sessionId);
    const failed = ofType(events, 'tool.failed')[0];
    expect(failed?.status).toBe('cancelled');
    expect(payload(failed)).toMatchObject({ actionStatus: 'cancelled', error: { code: 'interrupted' } });
    expect(ofType(events, 'task.cancelled')).toHaveLength(1);
    const turnFailed = ofType(events, 'turn.failed')[0];
    expect(turnFailed?.status).toBe('cancelled');
    expect(payload(turnFailed)).toMatchObject({ error: { code: 'interrupted' } });
    // The interrupted graph is not reported as an ordinary failure, and nothing follows the turn's end.
    expect(ofType(events, 'task.failed')).toHaveLength(0);
    expect(types(events).indexOf('tool.failed')).toBeLessThan(types(events).indexOf('turn.failed'));
    expect(types(events).slice(types(events).indexOf('turn.failed') + 1)).toEqual(['thread.updated']);

    let read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.status).toBe('idle');
    expect(read.activeTurnId).toBeUndefined();
    expect(read.lastOutcome).toMatchObject({
      turnId: first.turnId,
      status: 'cancelled',
      error: { code: 'interrupted' },
    });
    const { snapshot } = await h.runtime.getSession({ sessionId });
    expect(snapshot.tasks[0]?.status).toBe('cancelled');

    // The thread takes a new turn afterwards.
    await h.runtime.submitTurn({ sessionId, input: 'again' });
    await h.runtime.settled(sessionId);
    read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'After the interrupt.' });
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a block tool finishes its work before the interrupt is recorded', async () => {
    const timeline: Timeline = [];
    h = await harness(
      {
        steps: [
          act([
            { id: 'w', type: 'tool', name: 'slow_block', args: { label: 'w' } },
            { id: 'next', type: 'tool', name: 'read', args: { filePath: 'README.md' }, depends: 'w' },
          ]),
          answer('unused'),
        ],
      },
      { tools: registryWith(blockingTool(timeline, 200)), permissions: { mode: 'bypass' } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write' });
    await waitForEvent(h, sessionId, 'tool.started');
    await h.runtime.interruptTurn({ sessionId });
    expect(timeline).toEqual(['start:w', 'end:w']);
    const events = await allEvents(h, sessionId);
    const t = types(events);
    expect(t.indexOf('tool.result')).toBeGreaterThan(-1);
    expect(t.indexOf('tool.result')).toBeLessThan(t.indexOf('turn.failed'));
    // The dependent action never started.
    expect(ofType(events, 'tool.started').map((e) => payload(e).graphActionId)).toEqual(['w']);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    const byId = Object.fromEntries(actionRows(read).map((a) => [a.actionId, a.status]));
    expect(byId).toEqual({ w: 'completed', next: 'cancelled' });
    expect(read.lastOutcome?.status).toBe('cancelled');
  });

  it('interrupts a slow model call', async () => {
    h = await harness({ steps: [{ ...answer('too late'), delayMs: 10_000 }] });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'think' });
    await waitForEvent(h, sessionId, 'model.requested');
    const result = await h.runtime.interruptTurn({ sessionId });
    expect(result.interrupted).toBe(true);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'cancelled', error: { code: 'interrupted' } });
    const events = await allEvents(h, sessionId);
    expect(types(events)).not.toContain('model.completed');
    // The call is bracketed: model.requested … model.failed (interrupted), before the turn's end.
    const failed = ofType(events, 'model.failed')[0];
    expect(payload(failed)).toMatchObject({ error: { code: 'interrupted' } });
    expect(failed?.sequence).toBeLessThan(ofType(events, 'turn.failed')[0]?.sequence ?? 0);
  });

  it('closing the runtime mid model call is not an interrupt: a new runtime resumes the turn', async () => {
    const script = { steps: [{ ...answer('resumed answer'), delayMs: 300 }] };
    h = await harness(script);
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'think' });
    await waitForEvent(h, sessionId, 'model.requested');
    await h.runtime.close();
    await h.store.close();
    const store = await Store.open(join(h.dir, 'oar.db'));
    const first = h;
    h = await harness(script, { store, workspaceRoot: first.workspace });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(types(events)).not.toContain('model.failed');
    expect(types(events)).not.toContain('turn.failed');
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'resumed answer' });
  });

  it('interrupting an idle thread is a no-op', async () => {
    h = await harness({ steps: [] });
    const { sessionId } = await h.runtime.createSession();
    expect(await h.runtime.interruptTurn({ sessionId })).toEqual({ interrupted: false });
  });

  it('cancelTask on the running task interrupts its turn', async () => {
    const timeline: Timeline = [];
    h = await harness(
      { steps: [act([{ id: 'slow', type: 'tool', name: 'slow_cancel', args: { label: 's' } }])] },
      { tools: registryWith(cancellableTool(timeline)) },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'slow' });
    const created = await waitForEvent(h, sessionId, 'task.created');
    await waitForEvent(h, sessionId, 'tool.started');
    await h.runtime.cancelTask({ sessionId, taskId: created.taskId as string });
    await waitFor(async () => (await h?.runtime.getThreadRead({ sessionId, threadId }))?.status === 'idle');
    const { snapshot } = await h.runtime.getSession({ sessionId });
    expect(snapshot.tasks[0]?.status).toBe('cancelled');
  });
});
