import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentConfig } from '../../src/index.js';
import { assertEventsConform } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, actionRows, allEvents, answer, dsl, ofType, payload, recordingModel } from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

/** The specification's canonical example (agent-protocol-dsl.md, "推荐完整 DSL"), verbatim: examples/dsl-canonical.md. */
const CANONICAL = readFileSync(
  fileURLToPath(new URL('../../../../examples/dsl-canonical.md', import.meta.url)),
  'utf8',
);

const frontendReviewer: AgentConfig = {
  name: 'frontend-reviewer',
  description: 'Reviews frontend code',
  capabilities: ['code_review', 'frontend'],
  carrier: 'tool',
};

const TOOLBAR_FILES = {
  'Toolbar.vue': '<template><ToolbarButton v-for="b in buttons" /></template>\n',
  'ToolbarButton.vue': '<template><button @click="run">{{ label }}</button></template>\n',
  'useToolbar.ts': 'export function useToolbar() { return { undo: () => {}, redo: () => {} }; }\n',
};

describe('semantic tool actions', () => {
  it("runs the specification's canonical example: a tool worker inspects, the review agent gets its summary", async () => {
    const recorder = recordingModel({
      // The main agent speaks the text carrier, and so does its tool worker.
      steps: [{ text: CANONICAL }, { text: 'Two issues found; see the review.' }],
      agents: {
        'main.tool_worker': {
          steps: [
            dsl([
              { id: 'find', executor: { type: 'tool', target: 'glob' }, input: { pattern: '**/*Toolbar*' } },
              { id: 'undo', executor: { type: 'tool', target: 'grep' }, input: { pattern: 'undo' } },
            ]),
            { text: 'Found Toolbar.vue, ToolbarButton.vue and useToolbar.ts (undo/redo in useToolbar.ts).' },
          ],
        },
        'frontend-reviewer': {
          steps: [answer('Undo/redo state is not wired through; the dropdown can hide behind a layer.')],
        },
      },
    });
    h = await harness(
      { steps: [] },
      { model: recorder.model, agents: [frontendReviewer], mainAgent: { carrier: 'text' }, files: TOOLBAR_FILES },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'Review the toolbar buttons.' });
    await h.runtime.settled(sessionId);

    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Two issues found; see the review.' });
    expect(actionRows(read).map((a) => [a.actionId, a.status])).toEqual([
      ['inspect_code', 'completed'],
      ['review_toolbar', 'completed'],
    ]);
    // Who was asked what: the worker got the prompt_ref's text as its task, the reviewer the worker's summary.
    expect(recorder.prompts.map((p) => p.agent)).toEqual([
      'main',
      'main.tool_worker',
      'main.tool_worker',
      'frontend-reviewer',
      'main',
    ]);
    const workerPrompt = recorder.prompts[1]?.text ?? '';
    expect(workerPrompt).toContain('<node-request run_id=');
    expect(workerPrompt).toContain('action_id=\\"inspect_code\\"');
    expect(workerPrompt).toContain('Locate toolbar-related components, composables, styles');
    // The worker is offered exactly the tools with both capabilities, and no agents.
    expect(workerPrompt).toContain('- glob:');
    expect(workerPrompt).toContain('- grep:');
    expect(workerPrompt).not.toContain('- read:');
    expect(workerPrompt).not.toContain('frontend-reviewer');
    const reviewPrompt = recorder.prompts[3]?.text ?? '';
    expect(reviewPrompt).toContain('<item source=\\"action:inspect_code.summary\\">');
    expect(reviewPrompt).toContain('Found Toolbar.vue, ToolbarButton.vue and useToolbar.ts');
    expect(reviewPrompt).toContain('Review each toolbar button. Check click handlers');

    const events = await allEvents(h, sessionId);
    // The worker's calls were ordinary governed tool calls in its own thread.
    const spawned = ofType(events, 'subagent.spawned');
    expect(spawned.map((e) => payload(e).role ?? 'agent')).toEqual(['tool_worker', 'agent']);
    const workerThread = payload(spawned[0]).childThreadId as string;
    const workerResults = ofType(events, 'tool.result').filter((e) => e.threadId === workerThread);
    expect(workerResults.map((e) => payload(e).toolName).sort()).toEqual(['glob', 'grep']);
    expect(
      ofType(events, 'permission.evaluated').filter((e) => e.threadId === workerThread && payload(e).toolName),
    ).toHaveLength(2);
    const workerTask = ofType(events, 'task.created').find((e) => e.threadId === workerThread);
    expect(payload(workerTask)).toMatchObject({ taskKind: 'tool_worker' });

    // One observation for the action: the summary, and the calls as its structured result.
    const inspected = ofType(events, 'subagent.completed').find((e) => payload(e).graphActionId === 'inspect_code');
    const observation = payload(inspected).observation as Record<string, unknown>;
    expect(observation.summary).toContain('Found Toolbar.vue');
    expect(observation.artifacts).toHaveLength(1);
    const reviewed = ofType(events, 'subagent.completed').find((e) => payload(e).graphActionId === 'review_toolbar');
    expect((payload(reviewed).observation as Record<string, unknown>).status).toBe('completed');
    // The full output is the action's artifact, named like a tool output.
    const artifacts = ofType(events, 'artifact.changed').map((e) => payload(e).name as string);
    expect(artifacts.some((name) => name.endsWith('/inspect_code'))).toBe(true);
    expect(artifacts.some((name) => name.endsWith('/review_toolbar'))).toBe(true);

    assertEventsConform(events);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a complete call still runs directly: no tool worker, no extra model call', async () => {
    const recorder = recordingModel({
      steps: [
        act([
          {
            id: 'readme',
            type: 'tool',
            name: 'read',
            args: { filePath: 'README.md' },
            prompt: 'Read the README (the input is already complete).',
          },
        ]),
        answer('Read.'),
      ],
    });
    h = await harness({ steps: [] }, { model: recorder.model });
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read it' });
    await h.runtime.settled(sessionId);
    expect(recorder.prompts.map((p) => p.agent)).toEqual(['main', 'main']);
    expect(ofType(await allEvents(h, sessionId), 'subagent.spawned')).toEqual([]);
  });

  it('a named tool with partial input and a prompt: the worker may use that tool only', async () => {
    const recorder = recordingModel({
      steps: [
        act([{ id: 'peek', type: 'tool', name: 'read', args: { limit: 5 }, prompt: 'Read the main readme.' }]),
        answer('Done.'),
      ],
      agents: {
        'main.tool_worker': {
          steps: [
            // Not offered to this worker: a correctable fault, then the call it may make.
            act([{ id: 'g1', type: 'tool', name: 'glob', args: { pattern: '*.md' } }]),
            act([{ id: 'r1', type: 'tool', name: 'read', args: { filePath: 'README.md', limit: 5 } }]),
            answer('README.md starts with "# Sample".'),
          ],
        },
      },
    });
    h = await harness({ steps: [] }, { model: recorder.model });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'peek' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const workerThread = payload(ofType(events, 'subagent.spawned')[0]).childThreadId as string;
    expect(
      ofType(events, 'tool.started')
        .filter((e) => e.threadId === workerThread)
        .map((e) => payload(e).toolName),
    ).toEqual(['read']);
    expect(recorder.prompts[1]?.text).toContain('<input>');
    expect(recorder.prompts[1]?.text).toContain('limit');
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)).toMatchObject([{ actionId: 'peek', status: 'completed' }]);
  });

  it('bounds a worker: tool calls per declaration and in all, then its model calls', async () => {
    const recorder = recordingModel({
      steps: [
        act([{ id: 'scan', type: 'tool', name: 'auto', capabilities: ['search'], prompt: 'Scan.' }]),
        answer('ok'),
      ],
      agents: {
        'main.tool_worker': {
          steps: [
            // Three calls with two allowed: rejected, and the model is told why.
            act([
              { id: 'a', type: 'tool', name: 'glob', args: { pattern: '*' } },
              { id: 'b', type: 'tool', name: 'glob', args: { pattern: '*.md' } },
              { id: 'c', type: 'tool', name: 'glob', args: { pattern: '*.txt' } },
            ]),
            act([
              { id: 'a', type: 'tool', name: 'glob', args: { pattern: '*' } },
              { id: 'b', type: 'tool', name: 'glob', args: { pattern: '*.md' } },
            ]),
            // No calls left: no tools are offered, so this is a fault; the corrective retry would be a fourth call.
            act([{ id: 'd', type: 'tool', name: 'glob', args: { pattern: '*' } }]),
          ],
        },
      },
    });
    h = await harness(
      { steps: [] },
      { model: recorder.model, limits: { toolWorkerToolCalls: 2, toolWorkerModelCalls: 3 } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'scan' });
    await h.runtime.settled(sessionId);

    const workerPrompts = recorder.prompts.filter((p) => p.agent === 'main.tool_worker');
    expect(workerPrompts[1]?.text).toContain('too_many_actions');
    expect(workerPrompts[2]?.text).toContain('tool-call budget is used up');
    expect(workerPrompts[2]?.text).not.toContain('- glob:');
    const events = await allEvents(h, sessionId);
    const failed = ofType(events, 'subagent.failed')[0];
    const observation = payload(failed).observation as {
      error: { code: string };
      structured: { toolCalls: unknown[] };
    };
    // The worker ran out of model calls before answering; what it did is still reported.
    expect(observation.error.code).toBe('tool_worker_budget_exceeded');
    expect(observation.structured.toolCalls).toMatchObject([
      { id: 'a', tool: 'glob', status: 'completed' },
      { id: 'b', tool: 'glob', status: 'completed' },
    ]);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)).toMatchObject([{ actionId: 'scan', status: 'failed' }]);
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'ok' });
  });

  it('an action that asks for capabilities no offered tool has is rejected before it runs', async () => {
    const recorder = recordingModel({
      steps: [
        act([{ id: 'fly', type: 'tool', name: 'auto', capabilities: ['teleport'], prompt: 'Go.' }]),
        answer('Cannot.'),
      ],
    });
    h = await harness({ steps: [] }, { model: recorder.model });
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    expect(recorder.prompts[1]?.text).toContain('tool_target_unresolved');
    expect(ofType(await allEvents(h, sessionId), 'subagent.spawned')).toEqual([]);
  });
});

describe('a tool worker across a restart', () => {
  it('the semantic action stays with its worker when the parent thread is taken over (not lost)', async () => {
    const script = {
      steps: [
        act([{ id: 'note', type: 'tool', name: 'auto', capabilities: ['write'], prompt: 'Write a note.' }]),
        answer('Noted.'),
      ],
      agents: {
        'main.tool_worker': {
          steps: [
            act([{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'note.txt', content: 'hello' } }]),
            answer('Wrote note.txt.'),
          ],
        },
      },
    };
    const first = await harness(script, {});
    const { sessionId, threadId } = await first.runtime.createSession();
    await first.runtime.submitTurn({ sessionId, input: 'note it' });
    await first.runtime.settled(sessionId);
    // Default mode asks before a worker that can write starts, then before each write it makes.
    const start = (await first.runtime.getThreadRead({ sessionId, threadId })).pendingRequests[0];
    expect(start?.prompt).toContain('auto');
    await first.runtime.respondAction({ sessionId, actionId: start?.actionId as string, decision: 'approve' });
    await first.runtime.settled(sessionId);
    await first.runtime.close();
    // Another runtime on the same store takes every thread over, the parent included, while the worker waits.
    h = await harness(script, { store: first.store, workspaceRoot: first.workspace });
    const worker = payload(ofType(await allEvents(h, sessionId), 'subagent.spawned')[0]).childThreadId as string;
    const waiting = await h.runtime.getThreadRead({ sessionId, threadId: worker });
    const actionId = waiting.pendingRequests[0]?.actionId as string;
    expect(actionId).toBeDefined();
    await h.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)).toMatchObject([{ actionId: 'note', status: 'completed' }]);
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Noted.' });
  });
});
