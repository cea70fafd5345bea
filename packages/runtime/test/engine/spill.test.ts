import { afterEach, describe, expect, it } from 'vitest';
import type { ModelScript } from '../../src/index.js';
import { type Harness, harness } from './harness.js';
import { act, actionRows, allEvents, answer, ofType, payload, recordingModel } from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const big = Array.from({ length: 400 }, (_, i) => `line ${i + 1}: ${'lorem ipsum dolor sit amet '.repeat(3)}`).join(
  '\n',
);

function expandRefText(ref: string, range: Record<string, unknown>): string {
  const block = {
    type: 'agent.protocol',
    version: '1',
    intent: 'expand_ref',
    payload: { type: 'expand_ref', refs: [{ ref, reason: 'need the middle', range }] },
  };
  return `\`\`\`json agent-protocol\n${JSON.stringify(block)}\n\`\`\`\n`;
}

describe('spill and expand_ref', () => {
  it('a full read over the observation budget spills; expand_ref returns the requested lines', async () => {
    const script: ModelScript = {
      steps: [
        act([{ id: 'read_big', type: 'tool', name: 'read', args: { filePath: 'big.txt' }, result: 'full' }]),
        { text: 'replaced before the call' },
        answer('Line 200 is there.'),
      ],
    };
    let seenRef: string | undefined;
    const recorder = recordingModel(script, ({ index, text }) => {
      if (index !== 1) return;
      // The model only knows the ref from its observation: take it from what the model is shown.
      seenRef = /artifact:\/\/[A-Za-z0-9_-]+/.exec(text)?.[0];
      (script.steps as unknown[])[1] = {
        text: expandRefText(seenRef ?? 'artifact://none', { start_line: 200, end_line: 202 }),
      };
    });
    h = await harness(
      { steps: [] },
      { model: recorder.model, files: { 'big.txt': big }, limits: { observationTokens: 200 } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read big.txt' });
    await h.runtime.settled(sessionId);

    const events = await allEvents(h, sessionId);
    const spilled = ofType(events, 'output.spilled')[0];
    expect(spilled).toBeDefined();
    const ref = payload(spilled).uri as string;
    expect(ref).toMatch(/^artifact:\/\//);
    expect(seenRef).toBe(ref);
    const result = ofType(events, 'tool.result')[0];
    expect(payload(result)).toMatchObject({ truncated: true, outputRef: ref });
    const observation = payload(result).observation as { content: string; truncated: boolean; artifacts: string[] };
    expect(observation.truncated).toBe(true);
    expect(observation.artifacts).toContain(ref);
    expect(observation.content).toContain('expand_ref');
    expect(observation.content).not.toContain('line 200:');
    // The full output is stored: the artifact has every line.
    const artifact = ofType(events, 'artifact.changed')[0];
    expect(payload(artifact).size).toBeGreaterThan(big.length);

    // The expand_ref declaration became a runtime action with the requested lines.
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    const expand = actionRows(read).find((a) => a.actionId !== 'read_big');
    expect(expand?.status).toBe('completed');
    const expandEvent = ofType(events, 'run.status').find(
      (e) => payload(e).graphActionId === expand?.actionId && payload(e).status === 'completed',
    );
    const content = (payload(expandEvent).observation as { content: string }).content;
    expect(content).toContain('line 200:');
    expect(content).toContain('line 202:');
    expect(content).not.toContain('line 199:');
    expect(content).not.toContain('line 203:');
    expect(recorder.prompts[2]?.text).toContain('line 201:');
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Line 200 is there.' });
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('expand_ref on an unknown ref fails that action, not the turn', async () => {
    h = await harness({
      steps: [{ text: expandRefText('artifact://nope', { start_line: 1, end_line: 2 }) }, answer('No such ref.')],
    });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'expand' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({ status: 'failed', error: { code: 'unknown_reference' } });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'No such ref.' });
  });
});

describe('graph observation budget', () => {
  it('the actions of one graph share graphObservationTokens equally', async () => {
    const text = `${Array.from({ length: 200 }, (_, i) => `row ${i} ${'y'.repeat(30)}`).join('\n')}\n`;
    const files = Object.fromEntries([1, 2, 3, 4].map((i) => [`f${i}.txt`, text]));
    const reads = [1, 2, 3, 4].map((i) => ({
      id: `r${i}`,
      type: 'tool',
      name: 'read',
      args: { filePath: `f${i}.txt` },
      result: 'full',
    }));
    h = await harness(
      { steps: [act(reads), answer('ok')] },
      { files, limits: { observationTokens: 5_000, graphObservationTokens: 800 } },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read four files' });
    await h.runtime.settled(sessionId);
    const results = ofType(await allEvents(h, sessionId), 'tool.result').map(
      (e) => payload(e).observation as { content: string; truncated?: boolean },
    );
    expect(results).toHaveLength(4);
    for (const observation of results) {
      expect(observation.truncated).toBe(true);
      // 800 / 4 = 200 tokens each (~800 characters), far below the 5,000 a single action would get.
      expect(observation.content.length).toBeLessThan(1_200);
    }
  });
});
