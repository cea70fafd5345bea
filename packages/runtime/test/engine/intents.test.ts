import { afterEach, describe, expect, it } from 'vitest';
import { ToolRegistry, workspaceTools } from '../../src/index.js';
import { getArtifactText } from '../../src/store/artifacts.js';
import { assertEventsConform } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { actionRows, allEvents, dsl, flakyTool, ofType, payload, recordingModel } from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

/** A full-DSL message whose payload is not an action graph (a decision, a report spec), with Markdown sections. */
function block(intent: string, payload: Record<string, unknown>, sections = ''): { text: string } {
  const envelope = { type: 'agent.protocol', version: '1', intent, payload };
  return { text: `\`\`\`json agent-protocol\n${JSON.stringify(envelope)}\n\`\`\`\n${sections}` };
}

const text = (t: string) => ({ text: t });
const flaky = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  executor: { type: 'tool', target: 'flaky' },
  input: { label: id },
  ...extra,
});

/** A runtime whose main agent speaks the full DSL, with a `flaky` tool that fails its first `failures` calls. */
async function setUp(steps: { text: string }[], failures: number) {
  const recorder = recordingModel({ steps });
  const counter = { calls: 0 };
  h = await harness(
    { steps: [] },
    {
      model: recorder.model,
      mainAgent: { carrier: 'text' },
      tools: new ToolRegistry([...workspaceTools(), flakyTool(counter, failures)]),
    },
  );
  const { sessionId, threadId } = await h.runtime.createSession();
  return { recorder, counter, sessionId, threadId };
}

async function run(sessionId: string, input: string) {
  if (!h) throw new Error('no harness');
  await h.runtime.submitTurn({ sessionId, input });
  await h.runtime.settled(sessionId);
  return allEvents(h, sessionId);
}

describe('decide', () => {
  it('retry: the failed actions get a new attempt of the same task, and their results reach the model', async () => {
    const { recorder, sessionId, threadId } = await setUp(
      [dsl([flaky('f')]), block('decide', { type: 'decision', decision: 'retry' }), text('Done after a retry.')],
      1,
    );
    const events = await run(sessionId, 'go');
    const declared = ofType(events, 'run.status').filter((e) => payload(e).phase === 'declared');
    expect(declared).toHaveLength(2);
    expect(declared[1]?.taskId).toBe(declared[0]?.taskId);
    expect(payload(declared[1])).toMatchObject({ retryOf: declared[0]?.runId, reason: 'decided_retry' });
    expect(payload(ofType(events, 'task.retrying')[0])).toMatchObject({ nextAttempt: 2 });
    const read = await h!.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read).map((a) => [a.runId === declared[1]?.runId, a.actionId, a.status])).toEqual([
      [false, 'f', 'failed'],
      [true, 'f', 'completed'],
    ]);
    expect(recorder.prompts[2]?.text).toContain('ok f after 2 calls');
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Done after a retry.' });
    assertEventsConform(events);
    expect((await h!.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('skip: the failed action is skipped and its dependants run without it, the skip on record', async () => {
    const { sessionId, threadId } = await setUp(
      [
        dsl([
          flaky('a'),
          { id: 'b', executor: { type: 'tool', target: 'read' }, input: { filePath: 'README.md' }, depends_on: ['a'] },
        ]),
        block('decide', { type: 'decision', decision: 'skip', reason: 'a is optional' }),
        text('Read it without a.'),
      ],
      5,
    );
    const events = await run(sessionId, 'go');
    const decision = ofType(events, 'run.status').find((e) => payload(e).phase === 'decision');
    expect(payload(decision)).toMatchObject({ skipped: ['a'], decision: { decision: 'skip' } });
    const read = await h!.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read).map((a) => [a.actionId, a.status])).toEqual([
      ['a', 'failed'],
      ['b', 'skipped'],
      ['b', 'completed'],
    ]);
  });

  it('replan: recorded, and the next step declares a new graph with the failure in view', async () => {
    const { recorder, sessionId, threadId } = await setUp(
      [
        dsl([flaky('a')]),
        block('decide', { type: 'decision', decision: 'replan' }),
        dsl([{ id: 'c', executor: { type: 'tool', target: 'read' }, input: { filePath: 'README.md' } }]),
        text('Replanned.'),
      ],
      5,
    );
    const events = await run(sessionId, 'go');
    expect(ofType(events, 'run.status').some((e) => payload(e).phase === 'decision')).toBe(true);
    expect(recorder.prompts[2]?.text).toContain('attempt 1 failed');
    const read = await h!.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read).map((a) => [a.actionId, a.status])).toEqual([
      ['a', 'failed'],
      ['c', 'completed'],
    ]);
  });

  it('abort: the turn ends aborted, nothing more runs', async () => {
    const { sessionId, threadId } = await setUp(
      [dsl([flaky('a')]), block('decide', { type: 'decision', decision: 'abort' })],
      5,
    );
    const events = await run(sessionId, 'go');
    expect(payload(ofType(events, 'turn.completed')[0])).toMatchObject({ outcome: 'aborted' });
    expect((await h!.runtime.getThreadRead({ sessionId, threadId })).status).not.toBe('running');
  });

  it('a decision that cannot apply is a correctable fault, not a guess', async () => {
    const { recorder, sessionId } = await setUp(
      [
        dsl([{ id: 'r', executor: { type: 'tool', target: 'read' }, input: { filePath: 'README.md' } }]),
        block('decide', { type: 'decision', decision: 'retry', action_ids: ['r'] }),
        text('Nothing to retry.'),
      ],
      0,
    );
    const events = await run(sessionId, 'go');
    const warning = ofType(events, 'runtime.warning').find((e) => payload(e).code === 'protocol_violation');
    expect(JSON.stringify(payload(warning))).toContain('decision_not_applicable');
    expect(recorder.prompts[2]?.text).toContain('nothing to retry');
    expect(ofType(events, 'run.status').filter((e) => payload(e).phase === 'declared')).toHaveLength(1);
  });
});

describe('plan, revise, cancel, final report', () => {
  it('plan: recorded and shown, never executed; a later execute may use its ids', async () => {
    const readme = { id: 'readme', executor: { type: 'tool', target: 'read' }, input: { filePath: 'README.md' } };
    const { sessionId, threadId } = await setUp(
      [
        { text: dsl([readme]).text.replace('"intent": "execute"', '"intent": "plan"') },
        dsl([readme]),
        text('Executed the plan.'),
      ],
      0,
    );
    let events = await run(sessionId, 'plan it');
    expect(ofType(events, 'tool.started')).toEqual([]);
    const planned = ofType(events, 'run.status').find((e) => payload(e).phase === 'planned');
    expect(payload(planned).declaration).toMatchObject({ intent: 'plan', actions: [{ id: 'readme' }] });
    const completed = payload(ofType(events, 'turn.completed')[0]);
    expect(completed.outcome).toBe('planned');
    expect(completed.answer).toContain('**readme**');
    expect(completed.answer).toContain('Nothing has run yet.');

    events = await run(sessionId, 'go ahead');
    expect(ofType(events, 'tool.result')).toHaveLength(1);
    const read = await h!.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ answer: 'Executed the plan.' });
  });

  it('revise: a new attempt replaces what had not started; the revision names what changed', async () => {
    const { sessionId, threadId } = await setUp(
      [
        dsl([
          flaky('a', { failure_policy: 'ask-model' }),
          { id: 'b', executor: { type: 'tool', target: 'read' }, input: { filePath: 'README.md' } },
          { id: 'c', executor: { type: 'tool', target: 'read' }, input: { filePath: 'README.md' }, depends_on: ['a'] },
        ]),
        {
          text: dsl([{ id: 'd', executor: { type: 'tool', target: 'glob' }, input: { pattern: '*.md' } }]).text.replace(
            '"intent": "execute"',
            '"intent": "revise"',
          ),
        },
        text('Revised.'),
      ],
      5,
    );
    const events = await run(sessionId, 'go');
    const declared = ofType(events, 'run.status').filter((e) => payload(e).phase === 'declared');
    expect(declared).toHaveLength(2);
    expect(declared[1]?.taskId).toBe(declared[0]?.taskId);
    const revision = payload(declared[1]);
    expect(revision.revisionOf).toBe(declared[0]?.runId);
    expect(revision.diff).toMatchObject({ replaced: ['c'], added: ['d'] });
    expect((revision.diff as { kept: string[] }).kept.sort()).toEqual(['a', 'b']);
    const read = await h!.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read).find((a) => a.actionId === 'd')?.status).toBe('completed');
  });

  it('revise with no graph in the turn is a correctable fault', async () => {
    const { recorder, sessionId } = await setUp(
      [
        {
          text: dsl([{ id: 'd', executor: { type: 'tool', target: 'glob' }, input: { pattern: '*' } }]).text.replace(
            '"intent": "execute"',
            '"intent": "revise"',
          ),
        },
        text('ok'),
      ],
      0,
    );
    await run(sessionId, 'go');
    expect(recorder.prompts[1]?.text).toContain('no graph in this turn to revise');
  });

  it('cancel: the turn ends cancelled with the decision on record', async () => {
    const { sessionId } = await setUp(
      [block('cancel', { type: 'decision', decision: 'abort', reason: 'the user changed their mind' })],
      0,
    );
    const events = await run(sessionId, 'never mind');
    expect(payload(ofType(events, 'turn.completed')[0])).toMatchObject({
      outcome: 'cancelled',
      decision: { reason: 'the user changed their mind' },
    });
  });

  it('final_report_spec: missing sections get one corrective request; the report is stored and shown', async () => {
    const spec = {
      type: 'final_report_spec',
      sections: [{ id: 'summary', title: 'Summary' }, { id: 'risks' }],
    };
    const { recorder, sessionId, threadId } = await setUp(
      [
        block('respond', spec, '\n## summary\n\nAll good.\n'),
        block('respond', spec, '\n## summary\n\nAll good.\n\n## risks\n\nNone found.\n'),
      ],
      0,
    );
    const events = await run(sessionId, 'report');
    expect(recorder.prompts[1]?.text).toContain('risks');
    const completed = payload(ofType(events, 'turn.completed')[0]);
    expect(completed.answer).toBe('## Summary\n\nAll good.\n\n## risks\n\nNone found.');
    const report = completed.report as { sections: { id: string; text: string }[]; artifact: string };
    expect(report.sections.map((s) => [s.id, s.text])).toEqual([
      ['summary', 'All good.'],
      ['risks', 'None found.'],
    ]);
    const artifactId = report.artifact.replace('artifact://', '');
    const stored = await getArtifactText(h!.store.db, sessionId, artifactId);
    expect(JSON.parse(stored ?? '{}')).toMatchObject({
      sections: [{ id: 'summary' }, { id: 'risks' }],
    });
    expect((await h!.runtime.getThreadRead({ sessionId, threadId })).lastOutcome).toMatchObject({
      status: 'completed',
    });
  });
});

describe('replay modes', () => {
  it.each([
    ['compressed', false],
    ['hybrid', true],
    ['full', true],
  ] as const)('%s: earlier declarations replayed = %s', async (replay, shown) => {
    const recorder = recordingModel({
      steps: [
        dsl([
          {
            id: 'peek',
            title: 'Peek at the readme',
            executor: { type: 'tool', target: 'read' },
            input: { filePath: 'README.md' },
          },
        ]),
        text('Peeked.'),
      ],
    });
    h = await harness({ steps: [] }, { model: recorder.model, mainAgent: { carrier: 'text', replay } });
    const { sessionId } = await h.runtime.createSession();
    await run(sessionId, 'peek');
    const second = recorder.prompts[1]?.text ?? '';
    // The call and its observation are always there; the declaration block only when the mode replays it.
    expect(second).toContain('Call peek');
    expect(second.includes('\\"intent\\": \\"execute\\"')).toBe(shown);
  });
});

describe('response_policy', () => {
  it("the graph's response_policy reaches the model when it answers after the results", async () => {
    const policy = { format: 'bullet_list', max_words: 50, language: 'en' };
    const { recorder, sessionId } = await setUp(
      [
        dsl([{ id: 'r', executor: { type: 'tool', target: 'read' }, input: { filePath: 'README.md' } }], {
          response_policy: policy,
        }),
        text('- fine'),
      ],
      0,
    );
    await run(sessionId, 'go');
    expect(recorder.prompts[0]?.text).not.toContain('response_policy you declared');
    expect(recorder.prompts[1]?.text).toContain('follow the response_policy you declared');
    expect(recorder.prompts[1]?.text).toContain('bullet_list');
  });
});
