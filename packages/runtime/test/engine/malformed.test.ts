import { afterEach, describe, expect, it } from 'vitest';
import type { ModelScriptStep } from '../../src/models/testing.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, payload, recordingModel, types } from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const readCall = (id: string, args: Record<string, unknown> = { filePath: 'README.md' }) => ({
  id,
  type: 'tool',
  name: 'read',
  args,
});

/** Each malformed output class, with the parse/validation code the runtime must name in its correction. */
const CASES: { name: string; bad: ModelScriptStep; code: string }[] = [
  {
    name: 'invalid JSON arguments',
    bad: { toolCalls: [{ name: 'AgentProtocolOutput', arguments: '{"kind": "act", "calls": [{"id": x}]}' }] },
    code: 'invalid_json',
  },
  {
    name: 'a pseudo tool call in text for a tool outside the catalog',
    bad: { text: '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>' },
    code: 'unknown_direct_call',
  },
  {
    name: 'cut-off output (finish reason length, truncated JSON)',
    bad: {
      toolCalls: [{ name: 'AgentProtocolOutput', arguments: '{"kind": "answer", "message": "The README sa' }],
      finishReason: 'length',
    },
    code: 'truncated_output',
  },
  {
    name: 'two AgentProtocolOutput calls',
    bad: {
      toolCalls: [
        { name: 'AgentProtocolOutput', arguments: { kind: 'answer', message: 'one' } },
        { name: 'AgentProtocolOutput', arguments: { kind: 'answer', message: 'two' } },
      ],
    },
    code: 'multiple_declarations',
  },
  {
    name: 'an unknown tool',
    bad: act([{ id: 'sh', type: 'tool', name: 'bash', args: { command: 'ls' } }]),
    code: 'unknown_tool',
  },
  {
    name: 'bad tool arguments',
    bad: act([readCall('r', { path: 'README.md' })]),
    code: 'invalid_tool_args',
  },
  {
    name: 'a dependency cycle',
    bad: act([
      { ...readCall('a'), depends: 'b' },
      { ...readCall('b'), depends: 'a' },
    ]),
    code: 'dependency_cycle',
  },
];

async function run(steps: ModelScriptStep[], options: Parameters<typeof harness>[1] = {}) {
  const recorder = recordingModel({ steps });
  h = await harness({ steps: [] }, { ...options, model: recorder.model });
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'go' });
  await h.runtime.settled(sessionId);
  const events = await allEvents(h, sessionId);
  const read = await h.runtime.getThreadRead({ sessionId, threadId });
  return { events, read, prompts: recorder.prompts, sessionId };
}

describe('malformed model output', () => {
  for (const c of CASES) {
    describe(c.name, () => {
      it('gets one corrective retry, then the corrected output runs', async () => {
        const { events, read, prompts, sessionId } = await run([c.bad, answer('Recovered.')]);
        const warnings = ofType(events, 'runtime.warning');
        expect(warnings).toHaveLength(1);
        expect(payload(warnings[0])).toMatchObject({ code: 'protocol_violation' });
        const codes = (payload(warnings[0]).details as { errors: { code: string }[] }).errors.map((e) => e.code);
        expect(codes).toContain(c.code);
        const requested = ofType(events, 'model.requested');
        expect(requested.map((e) => payload(e).corrective)).toEqual([false, true]);
        // The corrective request came after the warning and told the model what was wrong.
        expect(warnings[0]?.sequence).toBeLessThan(requested[1]?.sequence ?? 0);
        expect(prompts[1]?.text).toContain('rejected');
        expect(prompts[1]?.text).toContain(c.code);
        expect(prompts[0]?.text).not.toContain('rejected');
        // Nothing ran from the rejected output.
        expect(types(events)).not.toContain('tool.started');
        expect(types(events)).not.toContain('task.created');
        expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Recovered.' });
        expect((await h?.runtime.replaySession(sessionId))?.differences).toEqual([]);
      });

      it('fails closed with protocol_violation when the retry is malformed too', async () => {
        const { events, read } = await run([c.bad, c.bad, answer('never')]);
        expect(ofType(events, 'model.requested')).toHaveLength(2);
        expect(ofType(events, 'runtime.warning').map((e) => payload(e).code)).toEqual(['protocol_violation']);
        expect(types(events)).not.toContain('tool.started');
        expect(read.lastOutcome).toMatchObject({ status: 'failed', error: { code: 'protocol_violation' } });
      });
    });
  }

  it('a cut-off output is named as such in the correction', async () => {
    const cut = CASES.find((c) => c.code === 'truncated_output')?.bad as ModelScriptStep;
    const { events, prompts } = await run([cut, answer('Shorter.')]);
    expect(payload(ofType(events, 'model.completed')[0])).toMatchObject({ finishReason: 'length' });
    expect(prompts[1]?.text).toContain('cut off');
  });

  it('a pseudo tool call in text for a catalog tool is recovered and flagged', async () => {
    const { events, read } = await run([
      { text: 'Let me look.\n<tool_call>{"name": "read", "arguments": {"filePath": "README.md"}}</tool_call>' },
      answer('It says hello.'),
    ]);
    expect(ofType(events, 'runtime.warning')).toHaveLength(0);
    const declared = ofType(events, 'run.status').find((e) => payload(e).phase === 'declared');
    expect(payload(declared)).toMatchObject({ recovered: true, form: 'text_tool_call' });
    expect(ofType(events, 'tool.result')).toHaveLength(1);
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'It says hello.' });
  });

  it('a direct native call to a catalog tool is recovered and flagged', async () => {
    const { events, read } = await run([
      { toolCalls: [{ name: 'read', arguments: { filePath: 'README.md' } }] },
      answer('Read it.'),
    ]);
    const declared = ofType(events, 'run.status').find((e) => payload(e).phase === 'declared');
    expect(payload(declared)).toMatchObject({ recovered: true, form: 'direct_tool_call' });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Read it.' });
  });

  it("onProtocolFailure 'plain_text' shows the text as the answer after a failed retry", async () => {
    const prose = { text: 'The README greets the reader.' };
    const { events, read } = await run([prose, prose], { onProtocolFailure: 'plain_text' });
    expect(ofType(events, 'runtime.warning').map((e) => payload(e).code)).toEqual([
      'protocol_violation',
      'protocol_fallback_plain_text',
    ]);
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'The README greets the reader.' });
    expect(types(events)).not.toContain('tool.started');
  });

  it("'plain_text' still fails closed when there is no text to show", async () => {
    const bad = act([{ id: 'sh', type: 'tool', name: 'bash', args: { command: 'ls' } }]);
    const { read } = await run([bad, bad], { onProtocolFailure: 'plain_text' });
    expect(read.lastOutcome).toMatchObject({ status: 'failed', error: { code: 'protocol_violation' } });
  });

  it('a second violation later in the turn gets its own corrective retry after a valid step', async () => {
    const bad = act([{ id: 'sh', type: 'tool', name: 'bash', args: { command: 'ls' } }]);
    const { events, read } = await run([bad, act([readCall('r1')]), bad, answer('Fine.')]);
    expect(ofType(events, 'runtime.warning')).toHaveLength(2);
    expect(ofType(events, 'model.requested').map((e) => payload(e).corrective)).toEqual([false, true, false, true]);
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Fine.' });
  });
});
