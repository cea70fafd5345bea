import type { RuntimeEvent } from '@oar/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentConfig, ModelScript } from '../../src/index.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, payload, recordingModel } from './helpers.js';

/**
 * Every reference type × every consumer (docs/protocol.md "References"): a first turn reads a file whose output is
 * longer than its summary; each later turn hands one reference of that output to an agent, a tool worker, a
 * human, a runtime merge and expand_ref, and checks what each of them received.
 */

const HEAD = 'NOTES-HEAD first line of the notes';
const TAIL = 'NOTES-TAIL-MARKER';
// Long enough that the action's summary is a preview: `.summary` has the head, only `.output` reaches the tail.
const NOTES = [
  HEAD,
  ...Array.from({ length: 120 }, (_, i) => `line ${i} of filler text for the notes file`),
  TAIL,
].join('\n');

const helper: AgentConfig = { name: 'helper', description: 'Helps', capabilities: ['help'], carrier: 'tool' };

let h: Harness;
let recorder: ReturnType<typeof recordingModel>;
const script: ModelScript & { steps: ModelScript['steps'][number][] } = {
  steps: [act([{ id: 'src', type: 'tool', name: 'read', args: { filePath: 'notes.txt' } }]), answer('read')],
  agents: {
    helper: { steps: [answer('helped')] },
    'main.tool_worker': { steps: [answer('worked')] },
  },
};
let sessionId: string;
let firstRunId: string;
let artifactId: string;

beforeAll(async () => {
  recorder = recordingModel(script);
  h = await harness({ steps: [] }, { model: recorder.model, agents: [helper], files: { 'notes.txt': NOTES } });
  ({ sessionId } = await h.runtime.createSession());
  await h.runtime.submitTurn({ sessionId, input: 'read the notes' });
  await h.runtime.settled(sessionId);
  const result = ofType(await allEvents(h, sessionId), 'tool.result')[0] as RuntimeEvent;
  firstRunId = result.runId as string;
  artifactId = (payload(result).artifactIds as string[])[0] as string;
});

afterAll(async () => {
  await h?.runtime.close();
  await h?.store.close();
});

/** What a consumer must have received for a ref: a text it contains, and one it must not (the summary's cut). */
type Expectation = { has: string; lacks?: string };

const CASES: Array<[string, () => string, Expectation]> = [
  ['action:<id>.summary', () => 'action:src.summary', { has: HEAD, lacks: TAIL }],
  ['action:<id>.output', () => 'action:src.output', { has: TAIL }],
  ['input:user.goal', () => 'input:user.goal', { has: 'GOAL-OF-TURN' }],
  ['runtime://runs/<run>/actions/<id>/output', () => `runtime://runs/${firstRunId}/actions/src/output`, { has: TAIL }],
  [
    'runtime://<run>/actions/<id>/summary',
    () => `runtime://${firstRunId}/actions/src/summary`,
    { has: HEAD, lacks: TAIL },
  ],
  ['artifact:<run>/<name>', () => `artifact:${firstRunId}/src`, { has: TAIL }],
  ['artifact://<id>', () => `artifact://${artifactId}`, { has: TAIL }],
];

describe('every reference type reaches every consumer', () => {
  it.each(CASES)('%s', async (_label, refOf, expected) => {
    const ref = refOf();
    const n = script.steps.length;
    const context = [ref];
    script.steps.push(
      act([
        { id: `agent_${n}`, type: 'agent', name: 'helper', args: { prompt: 'Use the context.' }, context },
        { id: `worker_${n}`, type: 'tool', name: 'auto', capabilities: ['search'], prompt: 'Look.', context },
        { id: `human_${n}`, type: 'human', name: 'ask_user', args: { question: 'Fine?' }, context },
        { id: `merge_${n}`, type: 'runtime', name: 'merge', context, result: 'full' },
        { id: `expand_${n}`, type: 'runtime', name: 'expand_ref', args: { ref }, result: 'full' },
      ]),
      answer('checked'),
    );
    const seen = recorder.prompts.length;
    await h.runtime.submitTurn({ sessionId, input: `GOAL-OF-TURN ${n}` });
    await h.runtime.settled(sessionId);

    // The human sees the question with the context; answering lets the turn finish.
    const events = await allEvents(h, sessionId);
    const required = ofType(events, 'action.required').find((e) => payload(e).graphActionId === `human_${n}`);
    const question = String(payload(required).prompt);
    await h.runtime.respondAction({
      sessionId,
      actionId: required?.actionId as string,
      decision: 'approve',
      payload: { text: 'fine' },
    });
    await h.runtime.settled(sessionId);

    const prompts = recorder.prompts.slice(seen);
    const received = {
      agent: prompts.find((p) => p.agent === 'helper')?.text ?? '',
      worker: prompts.find((p) => p.agent === 'main.tool_worker')?.text ?? '',
      human: question,
      merge: await fullOutput(`merge_${n}`),
      expand: await fullOutput(`expand_${n}`),
    };
    for (const [consumer, text] of Object.entries(received)) {
      expect(text, `${consumer} got ${ref}`).toContain(expected.has);
      if (expected.lacks) expect(text, `${consumer} got only the summary of ${ref}`).not.toContain(expected.lacks);
    }
    // The delegated nodes see the source of each item.
    expect(received.agent).toContain(`<item source=\\"${ref}\\">`);
    expect(received.worker).toContain(`<item source=\\"${ref}\\">`);
  });

  it('a ref that resolves to nothing fails its action with unresolved_reference', async () => {
    const n = script.steps.length;
    script.steps.push(
      act([
        { id: `ghost_${n}`, type: 'agent', name: 'helper', args: { prompt: 'x' }, context: ['artifact://art_nope'] },
      ]),
      answer('gone'),
    );
    await h.runtime.submitTurn({ sessionId, input: 'ghost' });
    await h.runtime.settled(sessionId);
    const ended = (await allEvents(h, sessionId)).find(
      (e) => e.type === 'run.status' && payload(e).graphActionId === `ghost_${n}` && payload(e).status === 'failed',
    );
    expect((payload(ended).observation as { error: { code: string } }).error.code).toBe('unresolved_reference');
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });
});

/** The full output an action of the latest run ended with (its observation's content, or the stored artifact). */
async function fullOutput(actionId: string): Promise<string> {
  const ended = (await allEvents(h, sessionId)).find(
    (e) => e.type === 'run.status' && payload(e).graphActionId === actionId && payload(e).status === 'completed',
  );
  const observation = payload(ended).observation as { content?: string; summary?: string };
  return observation?.content ?? observation?.summary ?? '';
}
