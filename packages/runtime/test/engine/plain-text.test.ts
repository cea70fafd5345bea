import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from './harness.js';
import { allEvents, ofType, payload, recordingModel } from './helpers.js';

/**
 * A model that answers in plain text under the tool carrier (issue: models, section 5): the corrective request
 * speaks the carrier in use, and the text is never lost — it is the answer where the agent's policy allows it,
 * otherwise the failed turn carries it.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const plain = (text: string) => ({ text });

describe('plain-text replies under the tool carrier', () => {
  it('the corrective request says to call the tool, and the failed turn carries the model’s text', async () => {
    const recorder = recordingModel({ steps: [plain('Paris is the capital.'), plain('Still Paris, as I said.')] });
    h = await harness({ steps: [] }, { model: recorder.model });
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'Capital of France?' });
    await h.runtime.settled(sessionId);
    const corrective = recorder.prompts[1]?.text ?? '';
    expect(corrective).toContain('no_tool_call');
    expect(corrective).toContain('Call the AgentProtocolOutput tool');
    // Not the text form's rules: this agent's carrier is the tool.
    expect(corrective).not.toContain('fenced');
    const events = await allEvents(h, sessionId);
    const error = payload(ofType(events, 'turn.failed')[0]).error as { code: string; details: { modelText?: string } };
    expect(error.code).toBe('protocol_violation');
    expect(error.details.modelText).toBe('Still Paris, as I said.');
  });

  it('an agent whose policy is plain_text answers with the text, though the binding says fail', async () => {
    const recorder = recordingModel({ steps: [plain('Paris.'), plain('Paris, really.')] });
    h = await harness(
      { steps: [] },
      { model: recorder.model, onProtocolFailure: 'fail', mainAgent: { onProtocolFailure: 'plain_text' } },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'Capital of France?' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const completed = payload(ofType(events, 'turn.completed')[0]);
    expect(completed).toMatchObject({ outcome: 'plain_text_fallback', answer: 'Paris, really.' });
    expect(ofType(events, 'runtime.warning').map((e) => payload(e).code)).toContain('protocol_fallback_plain_text');
    expect(ofType(events, 'tool.started')).toHaveLength(0);
  });
});
