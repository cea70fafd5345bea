import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentConfig } from '../../src/index.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, actionRows, allEvents, answer, ofType, payload } from './helpers.js';

/**
 * Acceptance scenario 7 of the Agent Runtime standard, subagent delegation: "Given a parent turn spawns a child
 * agent, parent and child ids are linked. Waiting, sending input, failure, and close events are visible without
 * parsing child prose." The parent's model delegates to a researcher; the child's first turn waits for an approval,
 * then fails (its provider refuses the call); a client sends the child more input, which it answers; then closes
 * it. Each step is a typed fact on the parent's thread carrying the sub-agent's id (`subagent.spawned`,
 * `subagent.status` running / blocked / completed, `subagent.failed` with a structured error, `subagent.input`,
 * `subagent.closed`), the ids join parent and child both ways (thread, turn, task, action), and every assertion
 * below reads ids, statuses and error codes — never what the child wrote.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const researcher: AgentConfig = {
  name: 'researcher',
  description: 'Looks things up and keeps notes',
  capabilities: ['research'],
  carrier: 'tool',
};

describe('acceptance scenario 7: subagent delegation', () => {
  it('links parent and child, and shows waiting, input, failure and close as facts', async () => {
    h = await harness(
      {
        steps: [
          act([{ id: 'research', type: 'agent', name: 'researcher', args: { prompt: 'Find sources, keep notes' } }]),
          answer('Noted.'),
        ],
        agents: {
          researcher: {
            steps: [
              act([{ id: 'notes', type: 'tool', name: 'write', args: { filePath: 'notes.md', content: 'sources\n' } }]),
              { error: { message: 'the provider refused the request', statusCode: 400, retryable: false } },
              answer('Prose the parent never parses.'),
            ],
          },
        },
      },
      { agents: [researcher] },
    );
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    const { turnId } = await rt.submitTurn({ sessionId, input: 'research durable execution' });
    await rt.settled(sessionId);

    // Spawned and linked: the parent's fact names the child thread; the child names its parent.
    let events = await allEvents(h, sessionId);
    const spawned = ofType(events, 'subagent.spawned');
    expect(spawned).toHaveLength(1);
    const subagentId = spawned[0]?.subagentId as string;
    const childThreadId = payload(spawned[0]).childThreadId as string;
    expect(spawned[0]).toMatchObject({ threadId, turnId });
    expect(payload(spawned[0])).toMatchObject({ agentName: 'researcher', graphActionId: 'research' });
    expect(childThreadId).not.toBe(threadId);
    const childStarted = ofType(events, 'thread.started').find((e) => e.threadId === childThreadId);
    expect(payload(childStarted)).toMatchObject({ parentThreadId: threadId, agent: 'researcher' });
    expect(await rt.listSubagents({ sessionId, threadId })).toMatchObject([
      { subagentId, agent: 'researcher', childThreadId, parentThreadId: threadId },
    ]);
    // The child's task is a child of the parent's (the graph the delegation belongs to).
    const parentTask = ofType(events, 'task.created').find((e) => e.threadId === threadId);
    const childTask = ofType(events, 'task.created').find((e) => e.threadId === childThreadId);
    expect(childTask?.parentTaskId).toBe(parentTask?.taskId);

    // Waiting: the child waits for a decision — a status on the parent, a pending request on the child.
    const child = await rt.getThreadRead({ sessionId, threadId: childThreadId });
    expect(child.status).toBe('blocked');
    expect(child.pendingRequests).toHaveLength(1);
    const onParent = (type: string) =>
      ofType(events, type).filter((e) => e.threadId === threadId && e.subagentId === subagentId);
    expect(onParent('subagent.status').map((e) => payload(e).status)).toEqual(['running', 'blocked']);
    expect(payload(onParent('subagent.status')[1]).childThreadId).toBe(childThreadId);
    const parent = await rt.getThreadRead({ sessionId, threadId });
    expect(parent.status).toBe('running');
    expect(actionRows(parent).find((a) => a.actionId === 'research')?.status).toBe('running');
    const waited = await rt.waitSubagents({ sessionId, subagentIds: [subagentId], timeoutMs: 200 });
    expect(waited).toMatchObject({ timedOut: true, subagents: [{ subagentId, childThreadId }] });

    // Failure: approved, the child's next call is refused; its turn fails and the parent is told, structured.
    await rt.respondAction({ sessionId, actionId: child.pendingRequests[0]?.actionId as string, decision: 'approve' });
    await rt.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'notes.md'), 'utf8')).toBe('sources\n');
    events = await allEvents(h, sessionId);
    const failed = onParent('subagent.failed');
    expect(failed).toHaveLength(1);
    // The failure is the child's turn's, naming the child thread and turn (and the sub-agent's id).
    const childTurn = ofType(events, 'turn.failed').find((e) => e.threadId === childThreadId);
    expect(payload(failed[0])).toMatchObject({
      graphActionId: 'research',
      childThreadId,
      childTurnId: childTurn?.turnId,
      error: { code: 'model_invalid_request', retryable: false },
    });
    expect(payload(childTurn)).toMatchObject({ error: { code: 'model_invalid_request' } });
    expect(childTurn?.sequence).toBeLessThan(failed[0]?.sequence ?? 0);
    const afterFailure = await rt.getThreadRead({ sessionId, threadId });
    expect(actionRows(afterFailure).find((a) => a.actionId === 'research')).toMatchObject({
      status: 'failed',
      error: { code: 'model_invalid_request' },
    });
    expect(afterFailure.lastOutcome).toMatchObject({ turnId, status: 'completed' });
    expect((await rt.listSubagents({ sessionId }))[0]?.status).toBe('failed');

    // Sending input: a new turn of the child, recorded on the parent, whose end is a status on the parent.
    const more = await rt.sendSubagentInput({ sessionId, subagentId, input: 'Try again, briefly.' });
    expect(more.threadId).toBe(childThreadId);
    const done = await rt.waitSubagents({ sessionId, subagentIds: [subagentId], timeoutMs: 10_000 });
    expect(done).toMatchObject({ timedOut: false, subagents: [{ subagentId, status: 'completed' }] });
    await rt.settled(sessionId);

    // Close: recorded on the parent with its reason; the sub-agent is closed.
    await rt.closeSubagent({ sessionId, subagentId, reason: 'research done' });
    expect((await rt.listSubagents({ sessionId }))[0]?.status).toBe('closed');
    events = await allEvents(h, sessionId);
    expect(payload(onParent('subagent.input')[0])).toMatchObject({ childThreadId, turnId: more.turnId });
    expect(onParent('subagent.status').map((e) => [payload(e).status, payload(e).childTurnId])).toEqual([
      ['running', undefined],
      ['blocked', undefined],
      ['running', more.turnId],
      ['completed', more.turnId],
    ]);
    expect(payload(onParent('subagent.closed')[0])).toMatchObject({ reason: 'research done' });
    // The parent's record of it, in order: every fact carries the sub-agent's id.
    const facts = events.filter((e) => e.type.startsWith('subagent.'));
    expect(facts.every((e) => e.threadId === threadId && e.subagentId === subagentId)).toBe(true);
    expect(facts.map((e) => e.type)).toEqual([
      'subagent.spawned',
      'subagent.status',
      'subagent.status',
      'subagent.failed',
      'subagent.input',
      'subagent.status',
      'subagent.status',
      'subagent.closed',
    ]);
    expect(existsSync(join(h.workspace, 'notes.md'))).toBe(true);

    const { snapshot } = await rt.getSession({ sessionId });
    assertSnapshotConforms(snapshot);
    expect(snapshot.threads.map((t) => t.threadId)).toEqual([threadId, childThreadId]);
    expect(snapshot.threads[0]?.subagents).toMatchObject([{ subagentId, childThreadId, status: 'closed' }]);
    expect(snapshot.tasks.find((t) => t.taskId === childTask?.taskId)).toMatchObject({
      parentTaskId: parentTask?.taskId,
      taskKind: 'delegation',
    });
    assertEventsConform(events);
    expect((await rt.replaySession(sessionId)).differences).toEqual([]);
  });
});
