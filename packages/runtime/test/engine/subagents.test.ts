import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentConfig } from '../../src/index.js';
import { type Harness, harness } from './harness.js';
import { act, actionRows, allEvents, answer, dsl, ofType, payload, recordingModel, types } from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const reviewer: AgentConfig = {
  name: 'reviewer',
  description: 'Reviews code',
  capabilities: ['code_review'],
  carrier: 'tool',
};
const writer: AgentConfig = {
  name: 'writer',
  description: 'Writes docs',
  capabilities: ['docs', 'write'],
  carrier: 'tool',
};

describe('sub-agent delegation', () => {
  it('a delegation runs a child thread; the dependent action waits for it; tasks are linked', async () => {
    const recorder = recordingModel({
      steps: [
        act([
          { id: 'review', type: 'agent', name: 'reviewer', args: { prompt: 'Review README.md' } },
          { id: 'after', type: 'tool', name: 'read', args: { filePath: 'README.md' }, depends: 'review' },
        ]),
        answer('Reviewed and read.'),
      ],
      agents: { reviewer: { steps: [answer('The README is fine.')] } },
    });
    h = await harness({ steps: [] }, { agents: [reviewer], model: recorder.model });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'review then read' });
    await h.runtime.settled(sessionId);

    const events = await allEvents(h, sessionId);
    const spawned = ofType(events, 'subagent.spawned')[0];
    const completed = ofType(events, 'subagent.completed')[0];
    expect(spawned?.threadId).toBe(threadId);
    expect(completed?.threadId).toBe(threadId);
    expect(payload(spawned)).toMatchObject({ agentName: 'reviewer', graphActionId: 'review' });
    const childThreadId = payload(spawned).childThreadId as string;
    expect(childThreadId).not.toBe(threadId);

    // The dependent action started only after the child finished.
    const afterStarted = events.find((e) => e.type === 'tool.started' && payload(e).graphActionId === 'after');
    expect(afterStarted).toBeDefined();
    expect(completed?.sequence).toBeLessThan(afterStarted?.sequence ?? 0);

    // The child has its own turn, which answered; the answer reached the parent's model.
    const child = await h.runtime.getThreadRead({ sessionId, threadId: childThreadId });
    expect(child.turns).toHaveLength(1);
    expect(child.lastOutcome).toMatchObject({ status: 'completed', answer: 'The README is fine.' });
    expect(recorder.prompts.map((p) => p.agent)).toEqual(['main', 'reviewer', 'main']);
    expect(recorder.prompts[0]?.text).toContain('reviewer');
    expect(recorder.prompts[1]?.text).toContain('Review README.md');
    expect(recorder.prompts[2]?.text).toContain('The README is fine.');

    // Tasks: the delegation task is a child of the parent's action-graph task.
    const parentTaskId = ofType(events, 'task.created').find((e) => e.threadId === threadId)?.taskId;
    const childTask = ofType(events, 'task.created').find((e) => e.threadId === childThreadId);
    expect(childTask?.parentTaskId).toBe(parentTaskId);
    const { snapshot } = await h.runtime.getSession({ sessionId });
    const delegation = snapshot.tasks.find((t) => t.taskId === childTask?.taskId);
    expect(delegation).toMatchObject({ parentTaskId, status: 'completed', taskKind: 'delegation' });
    const subagents = await h.runtime.listSubagents({ sessionId });
    expect(subagents).toMatchObject([{ agent: 'reviewer', childThreadId, status: 'completed' }]);

    const parent = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(parent.lastOutcome).toMatchObject({ status: 'completed', answer: 'Reviewed and read.' });
    expect(actionRows(parent).map((a) => [a.actionId, a.status])).toEqual([
      ['review', 'completed'],
      ['after', 'completed'],
    ]);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('`auto` picks the agent by capabilities', async () => {
    h = await harness(
      {
        steps: [
          dsl([
            {
              id: 'docs',
              executor: { type: 'agent', target: 'auto', capabilities: ['docs'] },
              input: { prompt: 'Write a summary' },
            },
          ]),
          answer('Delegated.'),
        ],
        agents: { writer: { steps: [answer('Summary written.')] } },
      },
      { agents: [reviewer, writer] },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'summarize' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'subagent.spawned').map((e) => payload(e).agentName)).toEqual(['writer']);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Delegated.' });
  });

  it('maxSubagentDepth 1: a child cannot delegate further', async () => {
    h = await harness(
      {
        steps: [act([{ id: 'review', type: 'agent', name: 'reviewer', args: { prompt: 'Review' } }]), answer('Done.')],
        agents: {
          reviewer: {
            steps: [
              act([{ id: 'deeper', type: 'agent', name: 'writer', args: { prompt: 'Write' } }]),
              answer('Reviewed myself.'),
            ],
          },
          writer: { steps: [answer('should never run')] },
        },
      },
      { agents: [reviewer, writer], limits: { maxSubagentDepth: 1 } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'review' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'subagent.spawned')).toHaveLength(1);
    const childThreadId = payload(ofType(events, 'subagent.spawned')[0]).childThreadId as string;
    // The child was offered no agents, and its delegation was rejected before anything ran.
    const catalog = ofType(events, 'tool.catalog.resolved').find((e) => e.threadId === childThreadId);
    expect(payload(catalog).agents).toEqual([]);
    const warning = ofType(events, 'runtime.warning').find((e) => e.threadId === childThreadId);
    expect(payload(warning).code).toBe('protocol_violation');
    const child = await h.runtime.getThreadRead({ sessionId, threadId: childThreadId });
    expect(child.lastOutcome).toMatchObject({ status: 'completed', answer: 'Reviewed myself.' });
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Done.' });
  });

  it('a child waiting for approval keeps the parent running until respondAction on the child', async () => {
    h = await harness(
      {
        steps: [
          act([{ id: 'delegate', type: 'agent', name: 'writer', args: { prompt: 'Write notes.md' } }]),
          answer('Notes written.'),
        ],
        agents: {
          writer: {
            steps: [
              act([{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'notes.md', content: 'notes' } }]),
              answer('Wrote notes.md.'),
            ],
          },
        },
      },
      { agents: [writer] },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write notes' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const childThreadId = payload(ofType(events, 'subagent.spawned')[0]).childThreadId as string;
    const child = await h.runtime.getThreadRead({ sessionId, threadId: childThreadId });
    expect(child.status).toBe('blocked');
    expect(child.pendingRequests).toHaveLength(1);
    const parent = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(parent.status).toBe('running');
    expect(parent.lastOutcome).toBeUndefined();
    expect(actionRows(parent)[0]?.status).toBe('running');
    expect(types(events)).not.toContain('subagent.completed');
    // The parent's stream says what the child is doing: it started, then it waits for a decision.
    const statuses = ofType(events, 'subagent.status').map((e) => [e.threadId, payload(e).status]);
    expect(statuses).toEqual([
      [threadId, 'running'],
      [threadId, 'blocked'],
    ]);

    await h.runtime.respondAction({
      sessionId,
      actionId: child.pendingRequests[0]?.actionId as string,
      decision: 'approve',
    });
    await h.runtime.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'notes.md'), 'utf8')).toBe('notes');
    const done = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(done.lastOutcome).toMatchObject({ status: 'completed', answer: 'Notes written.' });
    const childDone = await h.runtime.getThreadRead({ sessionId, threadId: childThreadId });
    expect(childDone.lastOutcome).toMatchObject({ status: 'completed', answer: 'Wrote notes.md.' });
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a failed child turn fails the delegation and the parent is told', async () => {
    h = await harness(
      {
        steps: [
          act([
            { id: 'delegate', type: 'agent', name: 'reviewer', args: { prompt: 'Review' } },
            { id: 'after', type: 'tool', name: 'read', args: { filePath: 'README.md' }, depends: 'delegate' },
          ]),
          answer('The reviewer failed.'),
        ],
        agents: { reviewer: { steps: [{ error: { message: 'Bad request', statusCode: 400, retryable: false } }] } },
      },
      { agents: [reviewer] },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'review' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'subagent.failed')).toHaveLength(1);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    const byId = Object.fromEntries(actionRows(read).map((a) => [a.actionId, a]));
    expect(byId.delegate).toMatchObject({ status: 'failed', error: { code: 'model_invalid_request' } });
    expect(byId.after).toMatchObject({ status: 'skipped', error: { code: 'dependency_failed' } });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'The reviewer failed.' });
  });

  it('interrupting the parent interrupts a child that waits for approval', async () => {
    h = await harness(
      {
        steps: [
          act([{ id: 'delegate', type: 'agent', name: 'writer', args: { prompt: 'Write notes.md' } }]),
          answer('next'),
        ],
        agents: {
          writer: {
            steps: [act([{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'notes.md', content: 'n' } }])],
          },
        },
      },
      { agents: [writer] },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write notes' });
    await h.runtime.settled(sessionId);
    const spawned = ofType(await allEvents(h, sessionId), 'subagent.spawned')[0];
    const childThreadId = payload(spawned).childThreadId as string;
    expect((await h.runtime.getThreadRead({ sessionId, threadId: childThreadId })).pendingRequests).toHaveLength(1);

    await h.runtime.interruptTurn({ sessionId, threadId });
    await h.runtime.settled(sessionId);
    const child = await h.runtime.getThreadRead({ sessionId, threadId: childThreadId });
    expect(child.pendingRequests).toEqual([]);
    expect(child.lastOutcome).toMatchObject({ status: 'cancelled' });
    const parent = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(parent.status).toBe('idle');
    expect(parent.lastOutcome).toMatchObject({ status: 'cancelled', error: { code: 'interrupted' } });
    const events = await allEvents(h, sessionId);
    // The parent did not go on to a model step after its child ended.
    expect(ofType(events, 'model.requested').filter((e) => e.threadId === threadId)).toHaveLength(1);
    const parentTask = ofType(events, 'task.created').find((e) => e.threadId === threadId)?.taskId;
    const { snapshot } = await h.runtime.getSession({ sessionId });
    expect(snapshot.tasks.find((t) => t.taskId === parentTask)?.status).toBe('cancelled');
    expect(snapshot.tasks.filter((t) => t.status === 'running')).toEqual([]);
    expect(existsSync(join(h.workspace, 'notes.md'))).toBe(false);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });
});
