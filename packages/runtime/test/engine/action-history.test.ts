import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, payload } from './helpers.js';

/**
 * A thread's action history (the ids it declared, the actions that completed) is derived from its runs, not kept
 * as two ever-growing lists in the thread's read model: through the engine, a later graph still may not reuse an
 * id, and may depend on an action an earlier graph completed.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const read = (id: string) => ({ id, type: 'tool', name: 'read', args: { filePath: 'README.md' } });

describe('action history across graphs', () => {
  it('refuses a reused id, accepts a dependency on an action completed in an earlier graph', async () => {
    h = await harness({
      steps: [
        act([read('first')]),
        // Reuses "first": refused with a corrective retry, nothing runs.
        act([read('first')]),
        // Depends on the earlier graph's completed action: it is history, so the graph runs.
        act([{ ...read('second'), depends: 'first' }]),
        answer('done'),
      ],
    });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read twice' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);

    const warnings = ofType(events, 'runtime.warning');
    expect(warnings).toHaveLength(1);
    const codes = (payload(warnings[0]).details as { errors: { code: string }[] }).errors.map((e) => e.code);
    expect(codes).toContain('action_id_reused');
    const results = ofType(events, 'tool.result').map((e) => payload(e).graphActionId);
    expect(results).toEqual(['first', 'second']);
    expect(ofType(events, 'turn.completed')).toHaveLength(1);

    // The thread's read model no longer carries the lists; the runs hold the history.
    const thread = await h.runtime.log.thread(sessionId, threadId);
    expect(thread).not.toHaveProperty('usedActionIds');
    expect(thread).not.toHaveProperty('completedActionIds');
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('an unknown dependency is still refused (history holds only what completed)', async () => {
    h = await harness({
      steps: [act([read('first')]), act([{ ...read('second'), depends: 'never_declared' }]), answer('done')],
    });
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const warnings = ofType(events, 'runtime.warning');
    expect(warnings).toHaveLength(1);
    expect(ofType(events, 'tool.result').map((e) => payload(e).graphActionId)).toEqual(['first']);
  });
});
