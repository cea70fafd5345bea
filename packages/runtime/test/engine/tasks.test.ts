import { join } from 'node:path';
import type { Task } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../../src/index.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, errorCode, ofType, payload, waitForEvent } from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

async function task(sessionId: string, taskId: string): Promise<Task> {
  const { snapshot } = await (h as Harness).runtime.getSession({ sessionId, limit: 0 });
  const found = snapshot.tasks.find((t) => t.taskId === taskId);
  if (!found) throw new Error(`no task ${taskId}`);
  return found;
}

const edgesOf = (t: Task) =>
  (t.relationships ?? []).map((r) => `${r.kind}:${r.targetId}${r.status ? `:${r.status}` : ''}`);

describe('tasks made by clients (create_task … link_tasks)', () => {
  it('an agent task runs on a thread of its own; a dependent started first waits, then runs when it completes', async () => {
    // The scripted model's cursor is per thread: each task's thread starts at the first step, told apart by prompt.
    h = await harness({
      steps: [
        {
          ...answer('Schema drafted.'),
          alternatives: [{ ifPrompt: 'the migration', ...answer('Migration written.') }],
        },
      ],
    });
    const rt = h.runtime;
    const { sessionId, threadId: mainThread } = await rt.createSession();
    const schema = await rt.createTask({
      sessionId,
      taskId: 'schema',
      title: 'Draft the schema',
      objective: 'Draft it',
    });
    expect(schema).toMatchObject({ taskId: 'schema', status: 'accepted', duplicate: false });
    // The same id with the same definition is the same task; another definition is refused.
    expect(
      await rt.createTask({ sessionId, taskId: 'schema', title: 'Draft the schema', objective: 'Draft it' }),
    ).toMatchObject({
      duplicate: true,
    });
    expect(await errorCode(rt.createTask({ sessionId, taskId: 'schema', objective: 'something else' }))).toBe(
      'task_exists',
    );
    await rt.createTask({ sessionId, taskId: 'migrate', objective: 'Write the migration', dependsOn: ['schema'] });

    // Started before its dependency completed: held on its thread, blocked.
    const blocked = await rt.startTask({ sessionId, taskId: 'migrate' });
    expect(blocked).toMatchObject({ status: 'blocked', waitsFor: ['schema'], attempt: 1 });
    await rt.settled(sessionId);
    expect((await task(sessionId, 'migrate')).status).toBe('blocked');
    expect(await errorCode(rt.startTask({ sessionId, taskId: 'migrate' }))).toBe('task_already_started');

    const started = await rt.startTask({ sessionId, taskId: 'schema' });
    expect(started.status).toBe('queued');
    expect(started.threadId).not.toBe(mainThread);
    // The worker starts the released dependent on its own (no settled() here: it would wake the thread itself).
    await waitForEvent(h, sessionId, 'task.completed', (e) => e.taskId === 'migrate');
    await rt.settled(sessionId);

    const done = await task(sessionId, 'schema');
    expect(done).toMatchObject({ status: 'completed', taskKind: 'task', threadId: started.threadId });
    expect(done.attempts).toMatchObject([{ runId: started.runId, status: 'completed', attemptCount: 1 }]);
    expect(edgesOf(done)).toEqual(['dependent:migrate']);
    const migrate = await task(sessionId, 'migrate');
    expect(migrate).toMatchObject({ status: 'completed', threadId: blocked.threadId });
    expect(edgesOf(migrate)).toEqual(['dependency:schema:completed']);
    expect(migrate.attempts).toHaveLength(1);

    // Each task's answer came from its own thread: the dependent ran after its dependency.
    const read = await rt.getThreadRead({ sessionId, threadId: blocked.threadId as string });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Migration written.' });
    const events = await allEvents(h, sessionId);
    const order = events.filter((e) => e.type === 'task.completed').map((e) => e.taskId);
    expect(order).toEqual(['schema', 'migrate']);
    expect(ofType(events, 'task.dependency.updated').map((e) => payload(e).change)).toEqual([
      'linked',
      'linked',
      'dependency_ended',
    ]);
    expect(ofType(events, 'task.delegated')).toHaveLength(2);
    assertEventsConform(events);
    assertSnapshotConforms((await rt.getSession({ sessionId })).snapshot);
  });

  it('an external task is started, reported on and completed through the commands; acceptance waits for its owner', async () => {
    h = await harness({ steps: [answer('Report written.')] });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.createTask({
      sessionId,
      taskId: 'review',
      objective: 'Review the report',
      assignee: { kind: 'external', name: 'ada' },
    });
    await rt.createTask({
      sessionId,
      taskId: 'report',
      objective: 'Write the report',
      acceptance: [{ criterion: 'cites its sources' }],
    });
    await rt.linkTasks({ sessionId, taskId: 'review', kind: 'dependency', targetId: 'report' });
    expect(await rt.startTask({ sessionId, taskId: 'review' })).toMatchObject({
      status: 'blocked',
      waitsFor: ['report'],
    });

    await rt.startTask({ sessionId, taskId: 'report' });
    await rt.settled(sessionId);
    // The agent finished, but the task has acceptance criteria: its owner decides.
    const waiting = await task(sessionId, 'report');
    expect(waiting.status).toBe('waiting_input');
    expect(waiting.attempts?.[0]?.status).toBe('completed');
    expect((await task(sessionId, 'review')).status).toBe('blocked');

    await rt.completeTask({ sessionId, taskId: 'report', summary: 'sources checked' });
    expect((await task(sessionId, 'report')).status).toBe('completed');
    // The external dependent is ready (queued), not started by anyone but its owner.
    expect((await task(sessionId, 'review')).status).toBe('queued');
    const running = await rt.startTask({ sessionId, taskId: 'review' });
    expect(running).toMatchObject({ status: 'running', attempt: 1 });
    await rt.appendTaskProgress({ sessionId, taskId: 'review', message: 'half way', percent: 50 });
    expect((await task(sessionId, 'review')).progress).toMatchObject({ message: 'half way', percent: 50 });
    expect(await errorCode(rt.appendTaskProgress({ sessionId, taskId: 'review' }))).toBe('invalid_input');
    await rt.completeTask({ sessionId, taskId: 'review' });
    const reviewed = await task(sessionId, 'review');
    expect(reviewed).toMatchObject({ status: 'completed' });
    expect(reviewed.attempts).toMatchObject([{ status: 'completed', runId: running.runId }]);
    expect(await errorCode(rt.completeTask({ sessionId, taskId: 'review' }))).toBe('task_not_active');
    assertEventsConform(await allEvents(h, sessionId));
  });

  it('pause holds a task and its children; resume lets them go on, a stopped attempt starting again', async () => {
    h = await harness({ steps: [] });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.createTask({ sessionId, taskId: 'parent', objective: 'Lead the work' });
    await rt.createTask({
      sessionId,
      taskId: 'child',
      objective: 'Help',
      parentTaskId: 'parent',
      dependsOn: ['parent'],
    });
    expect(edgesOf(await task(sessionId, 'parent'))).toEqual(['child:child', 'dependent:child']);
    expect(edgesOf(await task(sessionId, 'child'))).toEqual(['parent:parent', 'dependency:parent:pending']);
    await rt.startTask({ sessionId, taskId: 'child' });

    expect(await rt.pauseTask({ sessionId, taskId: 'parent', propagate: 'children' })).toEqual({
      paused: ['parent', 'child'],
    });
    expect(await task(sessionId, 'child')).toMatchObject({ status: 'paused', pausedFrom: 'blocked' });
    expect(await errorCode(rt.startTask({ sessionId, taskId: 'parent' }))).toBe('task_paused');

    expect(await rt.resumeTask({ sessionId, taskId: 'parent', propagate: 'children' })).toEqual({
      resumed: ['parent', 'child'],
    });
    expect((await task(sessionId, 'parent')).status).toBe('accepted');
    expect((await task(sessionId, 'child')).status).toBe('blocked');
    expect(await errorCode(rt.resumeTask({ sessionId, taskId: 'parent' }))).toBe('task_not_paused');

    // A child paused on its own stays paused when its parent's pause is lifted; without `propagate`, only the task.
    await rt.pauseTask({ sessionId, taskId: 'child', reason: 'its own' });
    expect(await rt.pauseTask({ sessionId, taskId: 'parent', propagate: 'children' })).toEqual({ paused: ['parent'] });
    expect(await rt.resumeTask({ sessionId, taskId: 'parent', propagate: 'children' })).toEqual({
      resumed: ['parent'],
    });
    expect(await task(sessionId, 'child')).toMatchObject({ status: 'paused', statusReason: 'its own' });
  });

  it('a paused task resumes to what is true now: ready if its dependencies completed, still awaiting acceptance', async () => {
    h = await harness({ steps: [answer('Reviewed.')] });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    const external = { kind: 'external' as const, name: 'ada' };
    await rt.createTask({ sessionId, taskId: 'd', objective: 'Sign off', assignee: external });
    await rt.createTask({ sessionId, taskId: 'w', objective: 'Publish', assignee: external, dependsOn: ['d'] });
    await rt.startTask({ sessionId, taskId: 'w' });
    await rt.pauseTask({ sessionId, taskId: 'w' });
    await rt.startTask({ sessionId, taskId: 'd' });
    await rt.completeTask({ sessionId, taskId: 'd' });
    expect((await task(sessionId, 'w')).status).toBe('paused');
    await rt.resumeTask({ sessionId, taskId: 'w' });
    expect((await task(sessionId, 'w')).status).toBe('queued');
    expect(await rt.startTask({ sessionId, taskId: 'w' })).toMatchObject({ status: 'running' });

    // Paused while its finished work waits for acceptance: resumed, it still waits; the agent is not asked again.
    await rt.createTask({ sessionId, taskId: 'acc', objective: 'Review it', acceptance: [{ criterion: 'cites' }] });
    await rt.startTask({ sessionId, taskId: 'acc' });
    await rt.settled(sessionId);
    expect((await task(sessionId, 'acc')).status).toBe('waiting_input');
    await rt.pauseTask({ sessionId, taskId: 'acc' });
    await rt.resumeTask({ sessionId, taskId: 'acc' });
    await rt.settled(sessionId);
    const acc = await task(sessionId, 'acc');
    expect(acc.status).toBe('waiting_input');
    expect(acc.attempts).toHaveLength(1);
  });

  it('refuses what would break the graph, and cancels or fails a task with what it started', async () => {
    h = await harness({ steps: [answer('one'), answer('two')] });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.createTask({ sessionId, taskId: 'a', objective: 'A' });
    await rt.createTask({ sessionId, taskId: 'b', objective: 'B', dependsOn: ['a'] });
    expect(await errorCode(rt.linkTasks({ sessionId, taskId: 'a', kind: 'dependency', targetId: 'b' }))).toBe(
      'task_cycle',
    );
    expect(await errorCode(rt.linkTasks({ sessionId, taskId: 'a', kind: 'dependency', targetId: 'a' }))).toBe(
      'invalid_input',
    );
    expect(await errorCode(rt.linkTasks({ sessionId, taskId: 'a', kind: 'sibling', targetId: 'b' }))).toBe(
      'invalid_input',
    );
    expect(await errorCode(rt.linkTasks({ sessionId, taskId: 'a', kind: 'parent', targetId: 'nope' }))).toBe(
      'task_not_found',
    );
    expect(await errorCode(rt.createTask({ sessionId, objective: ' ' }))).toBe('invalid_input');
    expect(await errorCode(rt.createTask({ sessionId, objective: 'x', dependsOn: ['nope'] }))).toBe('task_not_found');
    expect(
      await errorCode(rt.createTask({ sessionId, objective: 'x', assignee: { kind: 'agent', agent: 'ghost' } })),
    ).toBe('unknown_agent');
    expect(
      await errorCode(
        rt.createTask({ sessionId, objective: 'x', extra: true } as unknown as Parameters<typeof rt.createTask>[0]),
      ),
    ).toBe('invalid_input');
    expect(await errorCode(rt.startTask({ sessionId: 'ses_nope', taskId: 'a' }))).toBe('task_not_found');
    // Linking twice records one edge; unlinking what is not there is a clear error.
    expect(await rt.linkTasks({ sessionId, taskId: 'b', kind: 'dependency', targetId: 'a' })).toEqual({
      linked: false,
    });
    expect(await errorCode(rt.unlinkTasks({ sessionId, taskId: 'a', kind: 'child', targetId: 'b' }))).toBe(
      'relationship_not_found',
    );
    await rt.linkTasks({ sessionId, taskId: 'a', kind: 'artifact', targetId: 'art_1', reason: 'its spec' });
    expect(edgesOf(await task(sessionId, 'a'))).toEqual(['dependent:b', 'artifact:art_1']);

    // b is held by a; unlinking the dependency lets it run.
    const held = await rt.startTask({ sessionId, taskId: 'b' });
    expect(held.status).toBe('blocked');
    await rt.unlinkTasks({ sessionId, taskId: 'b', kind: 'dependency', targetId: 'a' });
    await rt.settled(sessionId);
    expect((await task(sessionId, 'b')).status).toBe('completed');
    expect(edgesOf(await task(sessionId, 'a'))).toEqual(['artifact:art_1']);

    // Cancelling a task whose turn has not started withdraws the turn.
    await rt.createTask({ sessionId, taskId: 'c', objective: 'C', dependsOn: ['a'] });
    const pending = await rt.startTask({ sessionId, taskId: 'c' });
    await rt.cancelTask({ sessionId, taskId: 'c', reason: 'not needed' });
    expect((await task(sessionId, 'c')).status).toBe('cancelled');
    const thread = await rt.getThreadRead({ sessionId, threadId: pending.threadId as string });
    expect(thread.turns?.find((t) => t.turnId === pending.turnId)?.status).toBe('cancelled');

    // A failed task is retried as a new attempt; the first one stays on record.
    await rt.failTask({ sessionId, taskId: 'a', error: { code: 'bad_input', message: 'the spec was wrong' } });
    expect(await task(sessionId, 'a')).toMatchObject({ status: 'failed', lastError: { code: 'bad_input' } });
    const retry = await rt.retryTask({ sessionId, taskId: 'a' });
    await rt.settled(sessionId);
    const retried = await task(sessionId, 'a');
    expect(retried.status).toBe('completed');
    expect(retried.attempts?.map((x) => x.runId)).toEqual([retry.runId]);
    assertEventsConform(await allEvents(h, sessionId));
  });

  it('pausing a running agent task stops its turn and keeps the task; resuming starts a new attempt', async () => {
    // The first model call of the task's thread waits until the pause interrupts it; the second answers.
    h = await harness({ steps: [{ ...answer('never seen'), delayMs: 30_000 }, answer('Resumed and done.')] });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.createTask({ sessionId, taskId: 'long', objective: 'A long piece of work' });
    const first = await rt.startTask({ sessionId, taskId: 'long' });
    await waitForEvent(h, sessionId, 'model.requested', (e) => e.threadId === first.threadId);
    expect(await rt.pauseTask({ sessionId, taskId: 'long', reason: 'lunch' })).toEqual({ paused: ['long'] });
    await rt.settled(sessionId);
    const paused = await task(sessionId, 'long');
    // The attempt ended with its turn; the task did not (a pause is not a cancellation).
    expect(paused).toMatchObject({ status: 'paused', pausedFrom: 'running', statusReason: 'lunch' });
    expect(paused.attempts).toMatchObject([{ runId: first.runId, status: 'failed' }]);

    await rt.resumeTask({ sessionId, taskId: 'long' });
    await rt.settled(sessionId);
    const resumed = await task(sessionId, 'long');
    expect(resumed.status).toBe('completed');
    expect(resumed.attempts?.map((a) => [a.attemptCount, a.status])).toEqual([
      [1, 'failed'],
      [2, 'completed'],
    ]);
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'task.cancelled')).toEqual([]);
    expect(ofType(events, 'turn.failed').map((e) => e.status)).toEqual(['cancelled']);
    assertEventsConform(events);
  });
});

describe("a task's own work", () => {
  it('an action graph the agent declares in a task turn is a child of that task, both ways', async () => {
    h = await harness({
      steps: [act([{ id: 'r', type: 'tool', name: 'read', args: { filePath: 'README.md' } }]), answer('Read it.')],
    });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.createTask({ sessionId, taskId: 'readme', objective: 'Read the README' });
    await rt.startTask({ sessionId, taskId: 'readme' });
    await rt.settled(sessionId);
    const { snapshot } = await rt.getSession({ sessionId, limit: 0 });
    const graph = snapshot.tasks.find((t) => t.taskKind === 'action_graph');
    expect(graph).toMatchObject({ parentTaskId: 'readme', status: 'completed' });
    const readme = await task(sessionId, 'readme');
    expect(readme.status).toBe('completed');
    expect(edgesOf(readme)).toEqual([`child:${graph?.taskId}`]);
    expect((await rt.replaySession(sessionId)).differences).toEqual([]);
  });
});

describe('a task on a thread that has other work', () => {
  it("a held turn does not hold the thread's other turns; it runs there once released", async () => {
    h = await harness({ steps: [answer('Hi.'), answer('Later done.')] });
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    await rt.createTask({ sessionId, taskId: 'first', objective: 'Sign off', assignee: { kind: 'external' } });
    await rt.createTask({ sessionId, taskId: 'later', objective: 'Follow up', threadId, dependsOn: ['first'] });
    const held = await rt.startTask({ sessionId, taskId: 'later' });
    expect(held).toMatchObject({ status: 'blocked', threadId });
    // The user's turn on the same thread runs while the task's turn is held.
    const hi = await rt.submitTurn({ sessionId, input: 'hello' });
    await rt.settled(sessionId);
    let read = await rt.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ turnId: hi.turnId, answer: 'Hi.' });
    expect((await task(sessionId, 'later')).status).toBe('blocked');

    await rt.startTask({ sessionId, taskId: 'first' });
    await rt.completeTask({ sessionId, taskId: 'first' });
    await rt.settled(sessionId);
    read = await rt.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ turnId: held.turnId, answer: 'Later done.' });
    expect(await task(sessionId, 'later')).toMatchObject({ status: 'completed', threadId });
  });
});

describe('tasks sharing a thread with other work', () => {
  it('withdraws a queued task turn with its cancel, releases only the task unlinked, refuses what would strand one', async () => {
    h = await harness({ steps: [{ ...answer('User turn done.'), delayMs: 400 }, answer('T1 done.')] });
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    const user = await rt.submitTurn({ sessionId, input: 'a slow question' });
    await waitForEvent(h, sessionId, 'model.requested');
    // Queued behind the running user turn, then cancelled: the turn leaves the queue in the same write.
    await rt.createTask({ sessionId, taskId: 'q', objective: 'Queued work', threadId });
    const queued = await rt.startTask({ sessionId, taskId: 'q' });
    expect(queued.status).toBe('queued');
    await rt.createTask({ sessionId, taskId: 'q2', objective: 'More queued work', threadId });
    const queued2 = await rt.startTask({ sessionId, taskId: 'q2' });
    expect(await errorCode(rt.removeQueuedTurn({ sessionId, threadId, turnId: queued2.turnId as string }))).toBe(
      'invalid_input',
    );
    await rt.cancelTask({ sessionId, taskId: 'q' });
    await rt.cancelTask({ sessionId, taskId: 'q2' });
    await rt.settled(sessionId);
    let read = await rt.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ turnId: user.turnId, answer: 'User turn done.' });
    const status = (turnId?: string) => read.turns?.find((t) => t.turnId === turnId)?.status;
    expect([status(queued.turnId), status(queued2.turnId)]).toEqual(['cancelled', 'cancelled']);
    expect((await task(sessionId, 'q')).status).toBe('cancelled');

    // Two tasks on the thread wait for the same one: unlinking it from one releases that one only.
    await rt.createTask({ sessionId, taskId: 'd', objective: 'Decide', assignee: { kind: 'external' } });
    await rt.createTask({ sessionId, taskId: 't1', objective: 'First follow-up', threadId, dependsOn: ['d'] });
    await rt.createTask({ sessionId, taskId: 't2', objective: 'Second follow-up', threadId, dependsOn: ['d'] });
    const t1 = await rt.startTask({ sessionId, taskId: 't1' });
    const t2 = await rt.startTask({ sessionId, taskId: 't2' });
    await rt.unlinkTasks({ sessionId, taskId: 't1', kind: 'dependency', targetId: 'd' });
    await rt.settled(sessionId);
    read = await rt.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ turnId: t1.turnId, answer: 'T1 done.' });
    expect(status(t2.turnId)).toBe('accepted');
    expect((await task(sessionId, 't2')).status).toBe('blocked');
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'runtime.error')).toEqual([]);
    assertEventsConform(events);
  });

  it('keeps a task as asked: the same create is a duplicate, another is refused; no late dependency or assignee', async () => {
    h = await harness({ steps: [] });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    const external = { kind: 'external' as const, name: 'ada' };
    await rt.createTask({ sessionId, taskId: 'a', objective: 'A', assignee: external });
    await rt.createTask({ sessionId, taskId: 'b', objective: 'B', assignee: external });
    const asked = { sessionId, taskId: 'c', objective: 'C', scope: { x: 1, y: 2 }, dependsOn: ['a', 'b'] };
    await rt.createTask(asked);
    // Key order and dependency order do not matter; other dependencies do.
    expect(await rt.createTask({ ...asked, scope: { y: 2, x: 1 }, dependsOn: ['b', 'a'] })).toMatchObject({
      duplicate: true,
    });
    expect(await errorCode(rt.createTask({ ...asked, dependsOn: ['a'] }))).toBe('task_exists');

    await rt.startTask({ sessionId, taskId: 'c' });
    await rt.pauseTask({ sessionId, taskId: 'c' });
    // Paused after it started: it keeps the dependencies it started with.
    await rt.createTask({ sessionId, taskId: 'e', objective: 'E', assignee: external });
    expect(await errorCode(rt.linkTasks({ sessionId, taskId: 'c', kind: 'dependency', targetId: 'e' }))).toBe(
      'task_not_linkable',
    );
    expect(await errorCode(rt.updateTask({ sessionId, taskId: 'c', assignee: external }))).toBe('task_already_started');
    expect(await rt.updateTask({ sessionId, taskId: 'c', title: 'C, renamed' })).toEqual({
      taskId: 'c',
      changed: ['title'],
    });
  });
});

describe('tasks started while what they wait for ends', () => {
  it('never leaves a dependent waiting for a dependency that already completed', async () => {
    h = await harness({
      steps: [
        { ...answer('A done.'), delayMs: 150, alternatives: [{ ifPrompt: 'Follow up', ...answer('Follow-up done.') }] },
      ],
    });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.createTask({ sessionId, taskId: 'a', objective: 'The first piece' });
    await rt.startTask({ sessionId, taskId: 'a' });
    // Dependents created and started one after another while `a` runs and ends: some before, some after its end.
    for (let n = 0; n < 8; n++) {
      await rt.createTask({ sessionId, taskId: `d${n}`, objective: `Follow up ${n}`, dependsOn: ['a'] });
      await rt.startTask({ sessionId, taskId: `d${n}` });
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    await rt.settled(sessionId);
    const { snapshot } = await rt.getSession({ sessionId, limit: 0 });
    expect(snapshot.tasks.map((t) => [t.taskId, t.status])).toEqual([
      ['a', 'completed'],
      ...Array.from({ length: 8 }, (_, n) => [`d${n}`, 'completed']),
    ]);
  });
});

describe('acceptance scenario 8: task lifecycle across a restart, with child work and a retry', () => {
  it('keeps prior attempts and the graph both ways through a restart, then the retry releases the child', async () => {
    const script = {
      steps: [
        {
          error: { message: 'the provider refused', statusCode: 400, retryable: false },
          alternatives: [{ ifPrompt: 'Lint the code', ...answer('Lint clean.') }],
        },
        answer('Built.'),
      ],
    };
    h = await harness(script);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.createTask({ sessionId, taskId: 'build', title: 'Build', objective: 'Build the project' });
    await h.runtime.createTask({
      sessionId,
      taskId: 'lint',
      objective: 'Lint the code',
      parentTaskId: 'build',
      dependsOn: ['build'],
    });
    const lint = await h.runtime.startTask({ sessionId, taskId: 'lint' });
    const build = await h.runtime.startTask({ sessionId, taskId: 'build' });
    await h.runtime.settled(sessionId);
    expect((await task(sessionId, 'build')).status).toBe('failed');
    expect(await task(sessionId, 'lint')).toMatchObject({
      status: 'blocked',
      statusReason: 'dependency build ended failed',
    });

    // A restart: the runtime and its store closed, a new runtime on the same file.
    const { dir, workspace } = h;
    await h.runtime.close();
    await h.store.close();
    const store = await Store.open(join(dir, 'oar.db'));
    h = await harness(script, { store, workspaceRoot: workspace });
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
    const restored = await task(sessionId, 'build');
    expect(restored.attempts).toMatchObject([{ runId: build.runId, status: 'failed', attemptCount: 1 }]);
    expect(edgesOf(restored)).toEqual(['child:lint', 'dependent:lint']);
    expect(edgesOf(await task(sessionId, 'lint'))).toEqual(['parent:build', 'dependency:build:failed']);

    const retry = await h.runtime.retryTask({ sessionId, taskId: 'build' });
    await h.runtime.settled(sessionId);
    const built = await task(sessionId, 'build');
    expect(built.status).toBe('completed');
    expect(built.attempts?.map((a) => [a.attemptCount, a.status, a.runId])).toEqual([
      [1, 'failed', build.runId],
      [2, 'completed', retry.runId],
    ]);
    const linted = await task(sessionId, 'lint');
    expect(linted).toMatchObject({ status: 'completed', parentTaskId: 'build', threadId: lint.threadId });
    expect(edgesOf(linted)).toEqual(['parent:build', 'dependency:build:completed']);
    const read = await h.runtime.getThreadRead({ sessionId, threadId: lint.threadId as string });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Lint clean.' });
    assertEventsConform(await allEvents(h, sessionId));
  });
});
