import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from './harness.js';
import { actionRows, allEvents, answer, dsl, errorCode, ofType, payload, recordingModel } from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

describe('human input', () => {
  it('ask_user waits for respond_action; the answer text is the output the model sees', async () => {
    const recorder = recordingModel({
      steps: [
        dsl([{ id: 'ask', executor: { type: 'human', target: 'ask_user' }, input: { question: 'Which colour?' } }]),
        answer('You chose teal.'),
      ],
    });
    h = await harness({ steps: [] }, { model: recorder.model });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'ask me' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.status).toBe('blocked');
    expect(read.turns.at(-1)?.status).toBe('waiting_input');
    expect(read.pendingRequests).toMatchObject([{ actionType: 'user_input', prompt: 'Which colour?' }]);
    const required = ofType(await allEvents(h, sessionId), 'action.required')[0];
    expect(payload(required)).toMatchObject({ actionType: 'user_input', decisionKind: 'ask_user' });
    const actionId = read.pendingRequests[0]?.actionId as string;

    expect(await errorCode(h.runtime.respondAction({ sessionId, actionId, decision: 'approve_for_session' }))).toBe(
      'invalid_decision',
    );
    await h.runtime.respondAction({ sessionId, actionId, decision: 'approve', payload: { text: 'teal' } });
    await h.runtime.settled(sessionId);
    const after = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(after.pendingRequests).toEqual([]);
    expect(actionRows(after)[0]).toMatchObject({ actionId: 'ask', status: 'completed', summary: 'teal' });
    expect(after.lastOutcome).toMatchObject({ status: 'completed', answer: 'You chose teal.' });
    expect(recorder.prompts).toHaveLength(2);
    expect(recorder.prompts[1]?.text).toContain('teal');
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a declined confirm is reported to the model as declined', async () => {
    h = await harness({
      steps: [
        dsl([{ id: 'sure', executor: { type: 'human', target: 'confirm' }, input: { question: 'Proceed?' } }]),
        answer('Stopped.'),
      ],
    });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'confirm' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    await h.runtime.respondAction({
      sessionId,
      actionId: read.pendingRequests[0]?.actionId as string,
      decision: 'deny',
    });
    await h.runtime.settled(sessionId);
    const after = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(after)[0]).toMatchObject({ status: 'denied', error: { code: 'declined' } });
    expect(after.lastOutcome).toMatchObject({ status: 'completed', answer: 'Stopped.' });
  });
});
