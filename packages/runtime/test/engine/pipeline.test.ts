import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { applyBindingUpdate } from '../../src/config/binding.js';
import { OarConfigSchema } from '../../src/config/oar-config.js';
import { PipelineSchema } from '../../src/config/pipelines.js';
import { resolveMapping } from '../../src/executors/pipeline.js';
import { bindingHash, defineTool, Store } from '../../src/index.js';
import { secretEnvNames } from '../../src/redaction/sources.js';
import { assertEventsConform } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import {
  act,
  actionRows,
  allEvents,
  answer,
  cancellableTool,
  dsl,
  ofType,
  payload,
  READ_ONLY_TEST_TOOL,
  recordingModel,
  registryWith,
  type Timeline,
  waitFor,
  waitForEvent,
} from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

/** A read-only tool that upper-cases its text and reports its length as structured output. */
const shout = defineTool<{ text: string }>({
  name: 'shout',
  description: 'Upper-cases a text.',
  input: z.strictObject({ text: z.string() }),
  ...READ_ONLY_TEST_TOOL,
  async execute(input) {
    return {
      text: input.text.toUpperCase(),
      structured: { length: input.text.length, first: input.text.split('\n')[0] },
    };
  },
});

/** read README.md → shout its text → write the result to a file named by the pipeline input. */
const publish = {
  name: 'publish_readme',
  description: 'Reads a file, upper-cases it and writes the result.',
  capabilities: ['docs'],
  inputSchema: {
    type: 'object',
    properties: { source: { type: 'string' }, target: { type: 'string' } },
    required: ['source', 'target'],
    additionalProperties: false,
  },
  steps: [
    { id: 'load', tool: 'read', input: { filePath: { $input: 'source' } } },
    { id: 'loud', tool: 'shout', input: { text: { $step: 'load' } }, depends: ['load'] },
    {
      id: 'save',
      tool: 'write',
      input: { filePath: { $input: 'target' }, content: { $step: 'loud', path: 'text' } },
      depends: ['loud'],
    },
  ],
};

describe('pipeline executor', () => {
  it('runs a configured pipeline as one action with every step governed and visible', async () => {
    const recorder = recordingModel({
      steps: [
        dsl([
          {
            id: 'pub',
            executor: { type: 'pipeline', target: 'publish_readme' },
            input: { source: 'README.md', target: 'OUT.md' },
            result_policy: { return_to_model: 'structured' },
          },
        ]),
        answer('Published.'),
      ],
    });
    h = await harness(
      { steps: [] },
      {
        model: recorder.model,
        tools: registryWith(shout),
        pipelines: [publish],
        // The pipeline itself is allowed by a rule; its write step is then covered by that authorization.
        permissions: { mode: 'default', rules: [{ decision: 'allow', executor: 'pipeline' }] },
      },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'publish it' });
    await h.runtime.settled(sessionId);

    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Published.' });
    expect(actionRows(read)).toMatchObject([{ actionId: 'pub', status: 'completed' }]);
    // `read` numbers its lines; the pipeline wrote what `shout` made of exactly that text.
    expect(readFileSync(join(h.workspace, 'OUT.md'), 'utf8')).toMatch(
      /1\t# SAMPLE\n.*3\tHELLO FROM THE SAMPLE WORKSPACE\./s,
    );

    const events = await allEvents(h, sessionId);
    assertEventsConform(events);
    // One pipeline start and end (naming the graph action), and one start and end per step (naming their step).
    const started = ofType(events, 'tool.started');
    expect(started.map((e) => payload(e).pipelineStep ?? payload(e).toolName)).toEqual([
      'publish_readme',
      'load',
      'loud',
      'save',
    ]);
    expect(started.map((e) => e.toolCallId)).toEqual([
      expect.stringMatching(/\.pub$/),
      expect.stringMatching(/\.pub\.load$/),
      expect.stringMatching(/\.pub\.loud$/),
      expect.stringMatching(/\.pub\.save$/),
    ]);
    const results = ofType(events, 'tool.result');
    expect(results).toHaveLength(4);
    expect(results.filter((e) => payload(e).graphActionId === 'pub')).toHaveLength(1);
    // Each step was evaluated by the policy; the write's mode "ask" is covered by the pipeline's authorization.
    const evaluated = ofType(events, 'permission.evaluated');
    expect(evaluated.map((e) => [payload(e).pipelineStep ?? 'pipeline', payload(e).decision])).toEqual([
      ['pipeline', 'allow'],
      ['load', 'allow'],
      ['loud', 'allow'],
      ['save', 'allow'],
    ]);
    expect(payload(evaluated[3])).toMatchObject({ coveredBy: { executor: 'pipeline', target: 'publish_readme' } });
    // Every step's output and the pipeline's own are stored in full.
    expect(ofType(events, 'artifact.changed')).toHaveLength(4);
    const observation = payload(results.at(-1)).observation as { structured?: Record<string, unknown> };
    expect(observation.structured).toMatchObject({
      pipeline: 'publish_readme',
      steps: [{ id: 'load' }, { id: 'loud' }, { id: 'save' }],
    });
    // The model saw the pipeline in its system prompt, with its input schema.
    expect(recorder.prompts[0]?.text).toContain('## Pipelines');
    expect(recorder.prompts[0]?.text).toContain('publish_readme: Reads a file, upper-cases it and writes the result.');
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it("judges each step in the session's workspace: a session grant for its write applies to the step", async () => {
    // The write to OUT.md is approved for the session first; the pipeline's save step then writes the same file.
    h = await harness(
      {
        steps: [
          act([{ id: 'w1', type: 'tool', name: 'write', args: { filePath: 'OUT.md', content: 'first\n' } }]),
          answer('Written.'),
          dsl([
            {
              id: 'pub',
              executor: { type: 'pipeline', target: 'publish_readme' },
              input: { source: 'README.md', target: 'OUT.md' },
            },
          ]),
          answer('Published.'),
        ],
      },
      {
        tools: registryWith(shout),
        pipelines: [publish],
        permissions: { mode: 'default', rules: [{ decision: 'allow', executor: 'pipeline' }] },
      },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write it' });
    await h.runtime.settled(sessionId);
    const asked = (await h.runtime.getThreadRead({ sessionId, threadId })).pendingRequests[0];
    await h.runtime.respondAction({ sessionId, actionId: asked?.actionId as string, decision: 'approve_for_session' });
    await h.runtime.settled(sessionId);
    await h.runtime.submitTurn({ sessionId, input: 'publish it' });
    await h.runtime.settled(sessionId);

    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Published.' });
    const save = ofType(await allEvents(h, sessionId), 'permission.evaluated').find(
      (e) => payload(e).pipelineStep === 'save',
    );
    // Allowed by the grant (the workspace the grant was given in is the step's), not merely covered by the pipeline.
    expect(payload(save)).toMatchObject({ decision: 'allow', source: 'human', grant: { tool: 'write' } });
    expect(payload(save).coveredBy).toBeUndefined();
  });

  it('asks for approval of the pipeline in default mode and runs it once approved', async () => {
    h = await harness(
      {
        steps: [
          dsl([
            {
              id: 'p1',
              executor: { type: 'pipeline', target: 'publish_readme' },
              input: { source: 'README.md', target: 'B.md' },
            },
          ]),
          answer('ok'),
        ],
      },
      { tools: registryWith(shout), pipelines: [publish] },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.pendingRequests).toMatchObject([
      { actionType: 'tool_approval', prompt: expect.stringContaining('Allow pipeline:publish_readme?') },
    ]);
    await h.runtime.respondAction({
      sessionId,
      actionId: read.pendingRequests[0]?.actionId as string,
      decision: 'approve',
    });
    await h.runtime.settled(sessionId);
    const after = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(after.lastOutcome).toMatchObject({ status: 'completed' });
    expect(readFileSync(join(h.workspace, 'B.md'), 'utf8')).toContain('HELLO');
  });

  it('rejects input that does not match the pipeline schema before anything runs', async () => {
    h = await harness(
      {
        steps: [
          dsl([
            { id: 'bad', executor: { type: 'pipeline', target: 'publish_readme' }, input: { source: 'README.md' } },
          ]),
          answer('gave up'),
        ],
      },
      { tools: registryWith(shout), pipelines: [publish], permissions: { mode: 'bypass', rules: [] } },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const warning = ofType(events, 'runtime.warning').find((e) => payload(e).code === 'protocol_violation');
    expect(JSON.stringify(payload(warning))).toContain("pipeline 'publish_readme'");
    expect(ofType(events, 'tool.started')).toHaveLength(0);
  });

  it('stops at a denied step and fails the pipeline with the step named', async () => {
    h = await harness(
      {
        steps: [
          dsl([
            {
              id: 'p2',
              executor: { type: 'pipeline', target: 'publish_readme' },
              input: { source: 'README.md', target: 'secret/x.md' },
            },
          ]),
          answer('denied'),
        ],
      },
      {
        tools: registryWith(shout),
        pipelines: [publish],
        permissions: {
          mode: 'bypass',
          rules: [{ decision: 'deny', tool: 'write', paths: ['secret/**'], reason: 'no writes there' }],
        },
      },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({
      actionId: 'p2',
      status: 'failed',
      error: { code: 'pipeline_step_failed' },
    });
    const events = await allEvents(h, sessionId);
    assertEventsConform(events);
    const stepFailed = ofType(events, 'tool.failed').find((e) => payload(e).pipelineStep === 'save');
    expect(payload(stepFailed)).toMatchObject({ error: { code: 'permission_denied' } });
    // The steps before it ran; the write did not.
    expect(ofType(events, 'tool.result').map((e) => payload(e).pipelineStep)).toEqual(['load', 'loud']);
  });

  it('an interrupt stops the pipeline: the running step is cancelled and no later step starts', async () => {
    const timeline: Timeline = [];
    h = await harness(
      {
        steps: [
          dsl([{ id: 'slowp', executor: { type: 'pipeline', target: 'slow_then_write' }, input: {} }]),
          answer('after'),
        ],
      },
      {
        tools: registryWith(cancellableTool(timeline)),
        permissions: { mode: 'bypass', rules: [] },
        pipelines: [
          {
            name: 'slow_then_write',
            steps: [
              { id: 'wait', tool: 'slow_cancel', input: { label: 'w' } },
              { id: 'write', tool: 'write', input: { filePath: 'late.md', content: 'x' }, depends: ['wait'] },
            ],
          },
        ],
      },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await waitFor(async () => timeline.includes('start:w'));
    const result = await h.runtime.interruptTurn({ sessionId, reason: 'stop' });
    expect(result).toMatchObject({ interrupted: true, status: 'cancelled' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({ actionId: 'slowp', status: 'cancelled' });
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'tool.started').map((e) => payload(e).pipelineStep ?? 'pipeline')).toEqual([
      'pipeline',
      'wait',
    ]);
    expect(() => readFileSync(join(h?.workspace ?? '', 'late.md'))).toThrow();
  });

  it('keeps the binding hash of sessions without pipelines or services', async () => {
    h = await harness({ steps: [] });
    const plain = h.runtime.defaultBinding;
    expect(JSON.stringify(plain)).not.toContain('pipelines');
    expect(JSON.stringify(plain)).not.toContain('services');
    const { sessionId } = await h.runtime.createSession();
    const bound = await h.runtime.getBinding(sessionId);
    expect(bound?.bindingHash).toBe(bindingHash(plain));
    // Adding a pipeline changes the binding; clearing it gives back the very binding (and hash) without one.
    const withOne = applyBindingUpdate(plain, { pipelines: [PipelineSchema.parse(publish)] });
    expect(bindingHash(withOne)).not.toBe(bindingHash(plain));
    const cleared = applyBindingUpdate(withOne, { pipelines: [], services: [] });
    expect(bindingHash(cleared)).toBe(bindingHash(plain));
    expect(JSON.stringify(cleared)).toBe(JSON.stringify(applyBindingUpdate(plain, {})));
  });
});

describe('pipeline crash recovery', () => {
  const crashed: Store[] = [];
  afterEach(async () => {
    for (const store of crashed.splice(0)) await store.close();
  });

  /** A pipeline whose second step hangs on its first call (the process "dies" there); later calls succeed. */
  async function crashMidPipeline(idempotent: boolean) {
    const calls = { n: 0 };
    const hang = defineTool<{ label: string }>({
      name: 'hang',
      description: 'Hangs on the first call.',
      input: z.strictObject({ label: z.string() }),
      ...READ_ONLY_TEST_TOOL,
      isIdempotent: idempotent,
      interruptBehavior: 'block',
      async execute(input) {
        calls.n++;
        if (calls.n === 1) await new Promise(() => undefined);
        return { text: `done ${input.label}` };
      },
    });
    const script = {
      // A persistent graph: resumed after the crash (a non-persistent one would not be: docs/protocol.md).
      steps: [
        dsl([{ id: 'pp', executor: { type: 'pipeline', target: 'two' }, input: {} }], { persist: true }),
        answer('after restart'),
      ],
    };
    const options = {
      tools: registryWith(shout, hang),
      permissions: { mode: 'bypass' as const, rules: [] },
      worker: { leaseTtlMs: 300, pollMs: 50 },
      pipelines: [
        {
          name: 'two',
          steps: [
            { id: 'first', tool: 'shout', input: { text: 'a' } },
            { id: 'second', tool: 'hang', input: { label: 'b' }, depends: ['first'] },
          ],
        },
      ],
    };
    const first = await harness(script, options);
    const { sessionId, threadId } = await first.runtime.createSession();
    await first.runtime.submitTurn({ sessionId, input: 'go' });
    crashed.push(first.store);
    await waitForEvent(first, sessionId, 'tool.started', (e) => payload(e).pipelineStep === 'second');
    first.runtime.worker?.abandon();
    const store = await Store.open(join(first.dir, 'oar.db'));
    h = await harness(script, { ...options, store, workspaceRoot: first.workspace });
    await h.runtime.settled(sessionId);
    return { sessionId, threadId, calls };
  }

  it('a pipeline with a non-idempotent step that was running becomes lost and is not re-run', async () => {
    const { sessionId, threadId, calls } = await crashMidPipeline(false);
    expect(calls.n).toBe(1);
    const read = await h?.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read as never)[0]).toMatchObject({ actionId: 'pp', status: 'lost', error: { code: 'lost' } });
    expect(read?.lastOutcome).toMatchObject({ status: 'completed', answer: 'after restart' });
  });

  it('a pipeline whose steps are all idempotent is re-run from its start', async () => {
    const { sessionId, threadId, calls } = await crashMidPipeline(true);
    expect(calls.n).toBe(2);
    const read = await h?.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read as never)[0]).toMatchObject({ actionId: 'pp', status: 'completed', attempt: 2 });
  });
});

describe('pipeline definitions', () => {
  it('a service auth variable is a secret of the binding', () => {
    const service = { name: 's', url: 'https://x.test', auth: { type: 'bearer', tokenEnv: 'MY_SVC_TOKEN' } };
    expect(secretEnvNames({ models: {}, services: [service as never] })).toContain('MY_SVC_TOKEN');
  });

  it('rejects unknown dependencies, cycles, undeclared step reads and misspelt references', () => {
    const base = { name: 'p', steps: [] as unknown[] };
    const problems = (steps: unknown[]) => {
      const parsed = PipelineSchema.safeParse({ ...base, steps });
      return parsed.success ? [] : parsed.error.issues.map((i) => i.message);
    };
    expect(problems([{ id: 'a', tool: 'read', depends: ['zz'] }])).toEqual(['step "a" depends on unknown step "zz"']);
    expect(
      problems([
        { id: 'a', tool: 'read', depends: ['b'] },
        { id: 'b', tool: 'read', depends: ['a'] },
      ]),
    ).toEqual(['the steps\' "depends" form a cycle']);
    expect(
      problems([
        { id: 'a', tool: 'read' },
        { id: 'b', tool: 'read', input: { x: { $step: 'a' } } },
      ]),
    ).toEqual(['step "b" reads step "a", which is not among its "depends" (directly or not)']);
    expect(problems([{ id: 'a', tool: 'read', input: { x: { $inptu: 'q' } } }])[0]).toContain('unknown reference key');
    expect(OarConfigSchema.safeParse({ pipelines: [{ name: 'p', steps: [{ id: 'a', tool: 'read' }] }] }).success).toBe(
      true,
    );
  });

  it('resolves $input, $step paths, defaults and $literal, and names what is missing', () => {
    const values = new Map([['a', { text: 'hello', structured: { files: [{ path: 'x.ts' }] } }]]);
    expect(
      resolveMapping(
        {
          q: { $input: 'query' },
          all: { $input: '' },
          file: { $step: 'a', path: 'structured.files.0.path' },
          text: { $step: 'a' },
          fallback: { $input: 'nope', default: 3 },
          raw: { $literal: { $input: 'kept' } },
          list: [{ $input: 'query' }, 1],
        },
        { query: 'q1' },
        values,
      ),
    ).toEqual({
      value: {
        q: 'q1',
        all: { query: 'q1' },
        file: 'x.ts',
        text: 'hello',
        fallback: 3,
        raw: { $input: 'kept' },
        list: ['q1', 1],
      },
    });
    const missing = resolveMapping({ x: { $step: 'a', path: 'structured.nope' } }, {}, values);
    expect(missing).toMatchObject({ error: { code: 'pipeline_mapping_unresolved' } });
  });
});
