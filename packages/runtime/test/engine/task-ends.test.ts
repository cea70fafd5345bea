import type { RuntimeEvent, Task } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import {
  act,
  allEvents,
  answer,
  blockingTool,
  errorCode,
  ofType,
  payload,
  registryWith,
  type Timeline,
  waitForEvent,
} from './helpers.js';

/**
 * The ends of a task the lifecycle records besides completing and failing (docs/tasks.md): a cancel that first asks
 * the running work to stop (`task.cancel_requested`, then `task.cancelled` once it stopped) and reaches descendants
 * with `propagate: children`; a time budget that ends the work (`task.timed_out`, retried like a failure); and the
 * archive of an ended task (`task.archived`: out of the lists, still there by id).
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

async function task(sessionId: string, taskId: string): Promise<Task> {
  const found = (await (h as Harness).runtime.listTasks({ sessionId, archived: true })).find(
    (t) => t.taskId === taskId,
  );
  if (!found) throw new Error(`no task ${taskId}`);
  return found;
}

/** The task facts of one task, in log order. */
const factsOf = (events: RuntimeEvent[], taskId: string) =>
  events.filter((e) => e.taskId === taskId && e.type.startsWith('task.')).map((e) => e.type);

/** An agent's turn whose graph writes for `ms` with a tool that finishes before an interrupt is acted on. */
function slowWriter(ms: number) {
  const timeline: Timeline = [];
  const script = {
    steps: [
      act([
        { id: 'w', type: 'tool', name: 'slow_block', args: { label: 'w' } },
        { id: 'next', type: 'tool', name: 'read', args: { filePath: 'README.md' }, depends: 'w' },
      ]),
      answer('unused'),
    ],
  };
  return {
    script,
    options: { tools: registryWith(blockingTool(timeline, ms)), permissions: { mode: 'bypass' as const } },
  };
}

describe('cancel_task', () => {
  it('asks a running task to stop first (cancelling), then records it cancelled once its work stopped', async () => {
    const { script, options } = slowWriter(1_500);
    h = await harness(script, options);
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.createTask({ sessionId, taskId: 'write', objective: 'Write the file' });
    const started = await rt.startTask({ sessionId, taskId: 'write' });
    await waitForEvent(h, sessionId, 'tool.started', (e) => e.threadId === started.threadId);

    // The tool blocks the interrupt: the request is on record and the task is cancelling meanwhile.
    const result = await rt.cancelTask({ sessionId, taskId: 'write', reason: 'not needed any more' });
    expect(result).toEqual({
      taskId: 'write',
      status: 'cancelling',
      interrupted: true,
      tasks: [{ taskId: 'write', status: 'cancelling' }],
    });
    expect(await task(sessionId, 'write')).toMatchObject({
      status: 'cancelling',
      statusReason: 'not needed any more',
    });
    // Nothing starts or pauses it meanwhile; cancelling it again records nothing new.
    expect(await errorCode(rt.pauseTask({ sessionId, taskId: 'write' }))).toBe('task_cancelling');
    expect(await errorCode(rt.retryTask({ sessionId, taskId: 'write' }))).toBe('task_cancelling');
    expect((await rt.cancelTask({ sessionId, taskId: 'write' })).status).toBe('cancelling');

    await rt.settled(sessionId);
    const ended = await task(sessionId, 'write');
    expect(ended).toMatchObject({ status: 'cancelled', statusReason: 'not needed any more' });
    expect(ended.attempts).toMatchObject([{ runId: started.runId, status: 'failed' }]);
    const events = await allEvents(h, sessionId);
    expect(factsOf(events, 'write').slice(-3)).toEqual([
      'task.cancel_requested',
      'task.attempt.failed',
      'task.cancelled',
    ]);
    expect(ofType(events, 'task.cancel_requested')).toHaveLength(1);
    expect(payload(ofType(events, 'task.cancel_requested')[0])).toMatchObject({
      reason: 'not needed any more',
      requestedBy: 'owner',
    });
    expect(payload(events.find((e) => e.type === 'task.cancelled' && e.taskId === 'write'))).toMatchObject({
      requestedBy: 'owner',
    });
    // The graph the task's turn ran ended with the turn (the tool finished first: it blocks interrupts).
    const graph = (await rt.listTasks({ sessionId })).find((t) => t.taskKind === 'action_graph');
    expect(graph).toMatchObject({ parentTaskId: 'write', status: 'cancelled' });
    expect(ofType(events, 'tool.result')).toHaveLength(1);
    assertEventsConform(events);
    assertSnapshotConforms((await rt.getSession({ sessionId })).snapshot);
    expect((await rt.replaySession(sessionId)).differences).toEqual([]);

    // Cancelled, it is retried like a failed task.
    expect(await errorCode(rt.cancelTask({ sessionId, taskId: 'write' }))).toBe('task_not_active');
  });

  it('with propagate: children reaches every open descendant, each with its own facts', async () => {
    const { script, options } = slowWriter(1_000);
    h = await harness(script, options);
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.createTask({ sessionId, taskId: 'lead', objective: 'Lead the work' });
    // A child that waits for its parent (its turn held), a grandchild never started, and a task outside the tree.
    await rt.createTask({ sessionId, taskId: 'help', objective: 'Help', parentTaskId: 'lead', dependsOn: ['lead'] });
    await rt.createTask({ sessionId, taskId: 'tidy', objective: 'Tidy up', parentTaskId: 'help' });
    await rt.createTask({ sessionId, taskId: 'other', objective: 'Unrelated', assignee: { kind: 'external' } });
    const held = await rt.startTask({ sessionId, taskId: 'help' });
    expect(held.status).toBe('blocked');
    const lead = await rt.startTask({ sessionId, taskId: 'lead' });
    await waitForEvent(h, sessionId, 'tool.started', (e) => e.threadId === lead.threadId);
    const graph = (await rt.listTasks({ sessionId })).find((t) => t.taskKind === 'action_graph') as Task;

    const result = await rt.cancelTask({ sessionId, taskId: 'lead', propagate: 'children', reason: 'scrapped' });
    // Running work is asked to stop (the lead's turn, the graph in it); nothing of the others runs: cancelled now.
    expect(result.tasks[0]).toEqual({ taskId: 'lead', status: 'cancelling' });
    expect(result.tasks.slice(1).sort((a, b) => a.taskId.localeCompare(b.taskId))).toEqual(
      [
        { taskId: graph.taskId, status: 'cancelling' },
        { taskId: 'help', status: 'cancelled' },
        { taskId: 'tidy', status: 'cancelled' },
      ].sort((a, b) => a.taskId.localeCompare(b.taskId)),
    );
    // The held turn of the child is withdrawn with it: no worker starts it later.
    const thread = await rt.getThreadRead({ sessionId, threadId: held.threadId as string });
    expect(thread.turns?.find((t) => t.turnId === held.turnId)?.status).toBe('cancelled');

    await rt.settled(sessionId);
    for (const id of ['lead', 'help', 'tidy', graph.taskId])
      expect((await task(sessionId, id)).status).toBe('cancelled');
    expect((await task(sessionId, 'other')).status).toBe('accepted');
    const events = await allEvents(h, sessionId);
    const requested = ofType(events, 'task.cancel_requested');
    expect(requested.map((e) => [e.taskId, payload(e).propagatedFrom])).toEqual([
      ['lead', undefined],
      [graph.taskId, 'lead'],
    ]);
    const cancelled = (id: string) => payload(events.find((e) => e.type === 'task.cancelled' && e.taskId === id));
    expect(cancelled('help')).toMatchObject({ propagatedFrom: 'lead', requestedBy: 'owner', reason: 'scrapped' });
    expect(cancelled('tidy')).toMatchObject({ propagatedFrom: 'lead' });
    expect(factsOf(events, 'help')).not.toContain('task.cancel_requested');
    expect(factsOf(events, 'lead').at(-1)).toBe('task.cancelled');
    assertEventsConform(events);
    assertSnapshotConforms((await rt.getSession({ sessionId })).snapshot);
    expect((await rt.replaySession(sessionId)).differences).toEqual([]);
  });
});

describe('task.timed_out', () => {
  it('a task whose turn ran out of wall time is timed_out, its dependents told so; retry_task starts it again', async () => {
    // The first call takes longer than the turn may: the next call is stopped by the time budget.
    h = await harness(
      {
        steps: [
          { ...act([{ id: 'r', type: 'tool', name: 'read', args: { filePath: 'README.md' } }]), delayMs: 300 },
          answer('Read it, at last.'),
        ],
      },
      { budgets: { turn: { wallTimeMs: 200 }, onExceeded: 'fail' } },
    );
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.createTask({ sessionId, taskId: 'slow', objective: 'Read the README' });
    await rt.createTask({ sessionId, taskId: 'after', objective: 'Then this', assignee: { kind: 'external' } });
    await rt.linkTasks({ sessionId, taskId: 'after', kind: 'dependency', targetId: 'slow' });
    const first = await rt.startTask({ sessionId, taskId: 'slow' });
    await rt.settled(sessionId);

    const timedOut = await task(sessionId, 'slow');
    expect(timedOut).toMatchObject({
      status: 'timed_out',
      lastError: { code: 'budget_exceeded', details: { dimension: 'wallTimeMs' } },
    });
    expect(timedOut.attempts).toMatchObject([{ runId: first.runId, status: 'failed' }]);
    const events = await allEvents(h, sessionId);
    expect(factsOf(events, 'slow')).toContain('task.timed_out');
    expect(factsOf(events, 'slow')).not.toContain('task.failed');
    const attemptEnd = events.find((e) => e.type === 'task.attempt.failed' && e.taskId === 'slow');
    expect(payload(attemptEnd).failureCategory).toBe('timed_out');
    expect((await task(sessionId, 'after')).relationships).toContainEqual(
      expect.objectContaining({ kind: 'dependency', targetId: 'slow', status: 'timed_out' }),
    );
    const { snapshot } = await rt.getSession({ sessionId });
    expect(snapshot.taskSummary).toMatchObject({ timedOut: 1 });
    assertEventsConform(events);
    assertSnapshotConforms(snapshot);

    // A new attempt, with a new turn (and a wall-time budget of its own), completes; the timed-out one stays.
    const retry = await rt.retryTask({ sessionId, taskId: 'slow' });
    await rt.settled(sessionId);
    const retried = await task(sessionId, 'slow');
    expect(retried.status).toBe('completed');
    expect(retried.attempts?.map((a) => [a.runId, a.status])).toEqual([
      [first.runId, 'failed'],
      [retry.runId, 'completed'],
    ]);
    // Its completion is the dependent's news too: the edge that said timed_out now says completed.
    expect((await task(sessionId, 'after')).relationships).toContainEqual(
      expect.objectContaining({ kind: 'dependency', targetId: 'slow', status: 'completed' }),
    );
    expect((await rt.replaySession(sessionId)).differences).toEqual([]);
  });
});

describe('task.archived', () => {
  it('files an ended task away: out of the lists, whole by id; only an ended task, alone, once', async () => {
    h = await harness({ steps: [answer('Done.')] });
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    await rt.createTask({ sessionId, taskId: 'done', objective: 'Do it', threadId });
    await rt.createTask({ sessionId, taskId: 'open', objective: 'Not yet', assignee: { kind: 'external' } });
    await rt.startTask({ sessionId, taskId: 'done' });
    await rt.settled(sessionId);
    expect((await task(sessionId, 'done')).status).toBe('completed');

    expect(await errorCode(rt.updateTask({ sessionId, taskId: 'open', archived: true }))).toBe('task_not_ended');
    expect(await errorCode(rt.updateTask({ sessionId, taskId: 'done', archived: true, title: 'x' }))).toBe(
      'invalid_input',
    );
    expect(await errorCode(rt.updateTask({ sessionId, taskId: 'nope', archived: true }))).toBe('task_not_found');
    expect(await rt.updateTask({ sessionId, taskId: 'done', archived: true })).toEqual({
      taskId: 'done',
      changed: ['archived'],
    });
    // Archiving again changes nothing; an archived task is not retried, nor changed.
    expect(await rt.updateTask({ sessionId, taskId: 'done', archived: true })).toEqual({ taskId: 'done', changed: [] });
    expect(await errorCode(rt.retryTask({ sessionId, taskId: 'done' }))).toBe('task_not_retryable');
    expect(await errorCode(rt.updateTask({ sessionId, taskId: 'done', title: 'renamed' }))).toBe('task_not_active');

    const { snapshot } = await rt.getSession({ sessionId });
    expect(snapshot.tasks.map((t) => t.taskId)).toEqual(['open']);
    expect(snapshot.taskSummary).toMatchObject({ total: 2, archived: 1, completed: 0 });
    const read = await rt.getThreadRead({ sessionId, threadId });
    expect(read.tasks?.map((t) => t.taskId)).toEqual([]);
    expect((await rt.listTasks({ sessionId })).map((t) => t.taskId)).toEqual(['open']);
    const archived = await task(sessionId, 'done');
    expect(archived).toMatchObject({
      status: 'archived',
      archivedFrom: 'completed',
      attempts: [{ status: 'completed' }],
    });
    expect(archived.archivedAt).toBeDefined();
    const events = await allEvents(h, sessionId);
    expect(payload(ofType(events, 'task.archived')[0])).toMatchObject({ archivedFrom: 'completed' });
    expect(ofType(events, 'task.archived')).toHaveLength(1);
    assertEventsConform(events);
    assertSnapshotConforms(snapshot);
    expect((await rt.replaySession(sessionId)).differences).toEqual([]);
  });
});
