import type { RuntimeEvent, Task } from '@oar/protocol';
import type { ModelScript } from '@oar/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { type TestServer, testServer, until } from './support.js';

/**
 * Tasks made by clients over HTTP (docs/tasks.md), through a real server on a real socket: every task command —
 * create, update, start, progress, pause, resume, complete, fail, cancel, retry, link, unlink — answers its happy
 * path and its effect is read back with GET; bad input gets a structured error with the status its code means.
 */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

interface ErrorBody {
  error: { code: string; message: string; retryable: boolean; details?: Record<string, unknown> };
}

const answer = (message: string) => ({ protocol: { kind: 'answer' as const, message } });

/**
 * The scripted model's cursor is per thread (each task's thread starts at the first step): one step per attempt a
 * thread makes, each telling the tasks apart by the objective in their prompt.
 */
const step = {
  ...answer('Done.'),
  alternatives: [
    { ifPrompt: 'Objective: Draft the schema', ...answer('Schema drafted.') },
    { ifPrompt: 'Objective: Write the migration', ...answer('Migration written.') },
  ],
};
const SCRIPT = { steps: [step, step, step] } as ModelScript;

/** Each test sends more writes than the default burst of a key's rate limit: that limit is not what is tested. */
const NO_RATE_LIMIT = { rateLimit: { perMinute: 60_000, burst: 1_000 } };

const tasksOf = (sessionId: string) => `/v1/sessions/${sessionId}/tasks`;

async function newSession(s: TestServer): Promise<string> {
  const created = await s.json<{ sessionId: string }>('POST', '/v1/sessions', { body: { title: 'tasks' } });
  expect(created.status).toBe(201);
  return created.body.sessionId;
}

async function getTask(s: TestServer, sessionId: string, taskId: string): Promise<Task> {
  const read = await s.json<Task>('GET', `${tasksOf(sessionId)}/${taskId}`);
  expect(read.status, JSON.stringify(read.body)).toBe(200);
  return read.body;
}

/** Polls GET …/tasks/{taskId} until its status is `status`; returns the task as it is then. */
async function taskReaches(s: TestServer, sessionId: string, taskId: string, status: string): Promise<Task> {
  let last: Task | undefined;
  await until(async () => {
    last = await getTask(s, sessionId, taskId);
    return last.status === status;
  }, 15_000).catch((error: unknown) => {
    throw new Error(`task ${taskId} never reached ${status} (last: ${JSON.stringify(last)}): ${String(error)}`);
  });
  return last as Task;
}

/** POST a task command (`…/tasks/{taskId}/{command}`). */
function command<T = Record<string, unknown>>(
  s: TestServer,
  sessionId: string,
  taskId: string,
  path: string,
  body?: unknown,
  key?: string,
) {
  return s.json<T>('POST', `${tasksOf(sessionId)}/${taskId}/${path}`, {
    ...(body !== undefined ? { body } : {}),
    ...(key !== undefined ? { key } : {}),
  });
}

function expectError(response: { status: number; body: unknown }, status: number, code: string): void {
  const body = response.body as ErrorBody;
  expect([response.status, body.error?.code], JSON.stringify(body)).toEqual([status, code]);
  expect(body.error).toMatchObject({ code, message: expect.any(String), retryable: expect.any(Boolean) });
  expect(body.error.message.length).toBeGreaterThan(0);
}

const edgesOf = (task: Task) =>
  (task.relationships ?? []).map((r) => `${r.kind}:${r.targetId}${r.status ? `:${r.status}` : ''}`);

/** One request per task command (its POST route) with a body of the right shape; the edge bodies are given. */
function everyCommand(link: object, unlink: object): [string, object | undefined][] {
  return [
    ['start', {}],
    ['progress', { message: 'x' }],
    ['pause', {}],
    ['resume', {}],
    ['complete', {}],
    ['fail', { error: { message: 'x' } }],
    ['cancel', {}],
    ['retry', undefined],
    ['links', link],
    ['links/remove', unlink],
  ];
}

describe('tasks over HTTP', () => {
  it('creates (idempotently), updates, lists and starts agent tasks; a dependent started first runs after its dependency', async () => {
    t = await testServer({ script: SCRIPT, serve: NO_RATE_LIMIT });
    const sessionId = await newSession(t);

    // createTask: 201, accepted, not started; the same id and definition again is the same task.
    const definition = { taskId: 'schema', title: 'Draft the schema', objective: 'Draft the schema' };
    const created = await t.json('POST', tasksOf(sessionId), { body: definition });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ sessionId, taskId: 'schema', status: 'accepted', duplicate: false });
    const again = await t.json('POST', tasksOf(sessionId), { body: definition });
    expect([again.status, again.body.duplicate]).toEqual([201, true]);
    expectError(
      await t.json('POST', tasksOf(sessionId), { body: { taskId: 'schema', objective: 'something else' } }),
      409,
      'task_exists',
    );
    expect(await getTask(t, sessionId, 'schema')).toMatchObject({
      taskId: 'schema',
      title: 'Draft the schema',
      objective: 'Draft the schema',
      status: 'accepted',
      taskKind: 'task',
      visibility: 'foreground',
    });

    // An id made by the server when none is given.
    const anonymous = await t.json<{ taskId: string }>('POST', tasksOf(sessionId), {
      body: { objective: 'Nothing in particular', priority: 'low' },
    });
    expect(anonymous.status).toBe(201);
    expect(anonymous.body.taskId).toMatch(/^task_\w+$/);

    const migrate = await t.json('POST', tasksOf(sessionId), {
      body: {
        taskId: 'migrate',
        objective: 'Write the migration',
        dependsOn: ['schema'],
        scope: { paths: ['db/'] },
        constraints: { noDrops: true },
      },
    });
    expect(migrate.status).toBe(201);

    // updateTask (PATCH): the changed fields, read back.
    const updated = await t.json('PATCH', `${tasksOf(sessionId)}/migrate`, {
      body: { title: 'Migrate', priority: 'high' },
    });
    expect(updated.status).toBe(200);
    expect(updated.body).toEqual({ taskId: 'migrate', changed: ['title', 'priority'] });
    expect(await getTask(t, sessionId, 'migrate')).toMatchObject({
      title: 'Migrate',
      priority: 'high',
      objective: 'Write the migration',
      scope: { paths: ['db/'] },
      constraints: { noDrops: true },
      status: 'accepted',
    });

    // listTasks: every task of the session, the graph both ways.
    const listed = await t.json<{ tasks: Task[] }>('GET', tasksOf(sessionId));
    expect(listed.status).toBe(200);
    expect(listed.body.tasks.map((x) => x.taskId).sort()).toEqual([anonymous.body.taskId, 'migrate', 'schema'].sort());
    const byId = new Map(listed.body.tasks.map((x) => [x.taskId, x]));
    expect(edgesOf(byId.get('schema') as Task)).toEqual(['dependent:migrate']);
    expect(edgesOf(byId.get('migrate') as Task)).toEqual(['dependency:schema:pending']);

    // startTask before its dependency completed: blocked (its turn held); starting it again is a conflict.
    const held = await command<{ status: string; waitsFor: string[]; attempt: number; threadId: string }>(
      t,
      sessionId,
      'migrate',
      'start',
    );
    expect(held.status).toBe(200);
    expect(held.body).toMatchObject({
      sessionId,
      taskId: 'migrate',
      status: 'blocked',
      waitsFor: ['schema'],
      attempt: 1,
    });
    expect((await getTask(t, sessionId, 'migrate')).status).toBe('blocked');
    expectError(await command(t, sessionId, 'migrate', 'start'), 409, 'task_already_started');

    const started = await command<{ status: string; threadId: string; runId: string }>(
      t,
      sessionId,
      'schema',
      'start',
      {},
    );
    expect(started.status).toBe(200);
    expect(started.body.status).toBe('queued');
    expect(started.body.threadId).not.toBe(held.body.threadId);

    const schema = await taskReaches(t, sessionId, 'schema', 'completed');
    expect(schema.attempts).toMatchObject([{ runId: started.body.runId, status: 'completed', attemptCount: 1 }]);
    expect(schema.threadId).toBe(started.body.threadId);
    // The dependency's end released the dependent: ready, its held turn free to start.
    const released = await getTask(t, sessionId, 'migrate');
    expect(edgesOf(released)).toEqual(['dependency:schema:completed']);
    expect(['queued', 'running', 'completed']).toContain(released.status);
    // The server's worker runs the released dependent by itself: no further request.
    const done = await taskReaches(t, sessionId, 'migrate', 'completed');
    expect(done.threadId).toBe(held.body.threadId);
    expect(edgesOf(done)).toEqual(['dependency:schema:completed']);
    expect(done.attempts).toHaveLength(1);
    expect(done.attempts?.[0]).toMatchObject({ status: 'completed', attemptCount: 1 });

    // Each task answered on its own thread, the dependent after its dependency.
    const thread = await t.json<{ lastOutcome?: { answer?: string } }>(
      'GET',
      `/v1/sessions/${sessionId}/threads/${held.body.threadId}`,
    );
    expect(thread.body.lastOutcome?.answer).toBe('Migration written.');
    const events = await t.json<{ events: RuntimeEvent[] }>(
      'GET',
      `/v1/sessions/${sessionId}/events?type=task.completed`,
    );
    expect(events.body.events.map((e) => e.taskId)).toEqual(['schema', 'migrate']);
    // An ended task is not changed, started or ended again.
    expectError(
      await t.json('PATCH', `${tasksOf(sessionId)}/schema`, { body: { title: 'Later' } }),
      409,
      'task_not_active',
    );
    expectError(await command(t, sessionId, 'schema', 'complete'), 409, 'task_not_active');
  });

  it('an external task is linked, started, reported on and completed; acceptance waits for the owner', async () => {
    t = await testServer({ script: SCRIPT, serve: NO_RATE_LIMIT });
    const sessionId = await newSession(t);
    await t.json('POST', tasksOf(sessionId), {
      body: { taskId: 'review', objective: 'Review the report', assignee: { kind: 'external', name: 'ada' } },
    });
    await t.json('POST', tasksOf(sessionId), {
      body: { taskId: 'report', objective: 'Write the report', acceptance: [{ criterion: 'cites its sources' }] },
    });

    // linkTasks: the edge on both tasks; linking it again records nothing new.
    const linked = await command(t, sessionId, 'review', 'links', {
      kind: 'dependency',
      targetId: 'report',
      reason: 'reviews it',
    });
    expect([linked.status, linked.body]).toEqual([200, { linked: true }]);
    expect((await command(t, sessionId, 'review', 'links', { kind: 'dependency', targetId: 'report' })).body).toEqual({
      linked: false,
    });
    const review = await getTask(t, sessionId, 'review');
    expect(edgesOf(review)).toEqual(['dependency:report:pending']);
    expect(review.relationships?.[0]?.reason).toBe('reviews it');
    expect(review.assignee).toEqual({ kind: 'external', name: 'ada' });
    expect(edgesOf(await getTask(t, sessionId, 'report'))).toEqual(['dependent:review']);

    expect((await command(t, sessionId, 'review', 'start')).body).toMatchObject({
      status: 'blocked',
      waitsFor: ['report'],
    });
    // A dependency is added before the waiting task starts.
    await t.json('POST', tasksOf(sessionId), { body: { taskId: 'late', objective: 'Too late' } });
    expectError(
      await command(t, sessionId, 'review', 'links', { kind: 'dependency', targetId: 'late' }),
      409,
      'task_not_linkable',
    );

    // The agent's task does its work, then waits for its owner to check the acceptance criteria.
    expect((await command(t, sessionId, 'report', 'start')).status).toBe(200);
    const waiting = await taskReaches(t, sessionId, 'report', 'waiting_input');
    expect(waiting.attempts?.[0]?.status).toBe('completed');
    expect((await getTask(t, sessionId, 'review')).status).toBe('blocked');

    // completeTask: the owner's word; the external dependent is ready, started by nobody but its owner.
    const completed = await command(t, sessionId, 'report', 'complete', { summary: 'sources checked' });
    expect(completed.status).toBe(200);
    expect(completed.body).toMatchObject({ taskId: 'report', status: 'completed' });
    expect((await getTask(t, sessionId, 'report')).status).toBe('completed');
    expect(await getTask(t, sessionId, 'review')).toMatchObject({ status: 'queued' });
    expect(edgesOf(await getTask(t, sessionId, 'review'))).toEqual(['dependency:report:completed']);

    const running = await command<{ status: string; runId: string; attempt: number }>(t, sessionId, 'review', 'start');
    expect(running.body).toMatchObject({ status: 'running', attempt: 1 });
    expect(running.body).not.toHaveProperty('turnId');
    expect((await getTask(t, sessionId, 'review')).status).toBe('running');

    // appendTaskProgress: the latest report is the task's progress.
    const progress = await command(t, sessionId, 'review', 'progress', {
      message: 'half way',
      percent: 50,
      completed: 5,
      total: 10,
      refs: ['art_1'],
    });
    expect([progress.status, progress.body]).toEqual([200, { taskId: 'review' }]);
    expect((await getTask(t, sessionId, 'review')).progress).toMatchObject({
      message: 'half way',
      percent: 50,
      completed: 5,
      total: 10,
      refs: ['art_1'],
    });
    await command(t, sessionId, 'review', 'progress', { percent: 90 });
    expect((await getTask(t, sessionId, 'review')).progress).toMatchObject({ percent: 90 });
    expect((await getTask(t, sessionId, 'review')).progress).not.toHaveProperty('message');
    // Nothing to report, a percent over 100, a body missing: bad input.
    expectError(await command(t, sessionId, 'review', 'progress', {}), 400, 'invalid_input');
    expectError(await command(t, sessionId, 'review', 'progress', { percent: 150 }), 400, 'invalid_input');
    expectError(await command(t, sessionId, 'review', 'progress'), 400, 'invalid_input');

    const reviewed = await command(t, sessionId, 'review', 'complete');
    expect(reviewed.status).toBe(200);
    const ended = await getTask(t, sessionId, 'review');
    expect(ended.status).toBe('completed');
    expect(ended.attempts).toMatchObject([{ status: 'completed', runId: running.body.runId }]);
    expectError(await command(t, sessionId, 'review', 'complete'), 409, 'task_not_active');
    expectError(await command(t, sessionId, 'review', 'progress', { message: 'after' }), 409, 'task_not_active');
  });

  it('pauses and resumes a task with its children; unlinks, fails, retries and cancels', async () => {
    t = await testServer({ script: SCRIPT, serve: NO_RATE_LIMIT });
    const sessionId = await newSession(t);
    await t.json('POST', tasksOf(sessionId), { body: { taskId: 'parent', objective: 'Draft the schema' } });
    await t.json('POST', tasksOf(sessionId), {
      body: { taskId: 'child', objective: 'Write the migration', parentTaskId: 'parent', dependsOn: ['parent'] },
    });
    expect(edgesOf(await getTask(t, sessionId, 'parent'))).toEqual(['child:child', 'dependent:child']);
    expect(await getTask(t, sessionId, 'child')).toMatchObject({ parentTaskId: 'parent' });
    const held = await command<{ threadId: string; turnId: string }>(t, sessionId, 'child', 'start');
    expect(held.body).toMatchObject({ status: 'blocked' });

    // pauseTask with its children.
    const paused = await command(t, sessionId, 'parent', 'pause', { propagate: 'children', reason: 'lunch' });
    expect([paused.status, paused.body]).toEqual([200, { paused: ['parent', 'child'] }]);
    expect(await getTask(t, sessionId, 'parent')).toMatchObject({
      status: 'paused',
      pausedFrom: 'accepted',
      statusReason: 'lunch',
    });
    expect(await getTask(t, sessionId, 'child')).toMatchObject({ status: 'paused', pausedFrom: 'blocked' });
    expectError(await command(t, sessionId, 'parent', 'start'), 409, 'task_paused');
    // Pausing what is paused pauses nothing more.
    expect((await command(t, sessionId, 'parent', 'pause')).body).toEqual({ paused: [] });

    // resumeTask: back where each was.
    const resumed = await command(t, sessionId, 'parent', 'resume', { propagate: 'children' });
    expect([resumed.status, resumed.body]).toEqual([200, { resumed: ['parent', 'child'] }]);
    expect((await getTask(t, sessionId, 'parent')).status).toBe('accepted');
    expect((await getTask(t, sessionId, 'child')).status).toBe('blocked');
    expectError(await command(t, sessionId, 'parent', 'resume'), 409, 'task_not_paused');

    // unlinkTasks: the blocked child's last open dependency goes, so it runs; the edge is gone from both sides.
    expectError(
      await command(t, sessionId, 'parent', 'links/remove', { kind: 'child', targetId: 'nope' }),
      404,
      'relationship_not_found',
    );
    const unlinked = await command(t, sessionId, 'child', 'links/remove', { kind: 'dependency', targetId: 'parent' });
    expect([unlinked.status, unlinked.body]).toEqual([200, { unlinked: true }]);
    const child = await taskReaches(t, sessionId, 'child', 'completed');
    expect(edgesOf(child)).toEqual(['parent:parent']);
    expect(edgesOf(await getTask(t, sessionId, 'parent'))).toEqual(['child:child']);

    // failTask of a task not started: failed with the owner's error; retryTask: a new attempt that completes.
    const failed = await command(t, sessionId, 'parent', 'fail', {
      error: { code: 'bad_input', message: 'the spec was wrong' },
    });
    expect(failed.status).toBe(200);
    expect(failed.body).toMatchObject({ taskId: 'parent', status: 'failed' });
    expect(await getTask(t, sessionId, 'parent')).toMatchObject({
      status: 'failed',
      lastError: { code: 'bad_input', message: 'the spec was wrong' },
    });
    expectError(await command(t, sessionId, 'parent', 'start'), 409, 'task_not_startable');
    const retry = await command<{ runId: string; turnId: string }>(t, sessionId, 'parent', 'retry');
    expect(retry.status).toBe(200);
    expect(retry.body.runId).toMatch(/^run_/);
    const retried = await taskReaches(t, sessionId, 'parent', 'completed');
    expect(retried.attempts?.map((a) => [a.runId, a.status])).toEqual([[retry.body.runId, 'completed']]);
    expectError(await command(t, sessionId, 'parent', 'retry'), 409, 'task_not_retryable');

    // cancelTask of a started task whose turn is held: the task ends cancelled, its turn withdrawn.
    await t.json('POST', tasksOf(sessionId), { body: { taskId: 'gate', objective: 'Open the gate' } });
    await t.json('POST', tasksOf(sessionId), {
      body: { taskId: 'behind', objective: 'Walk through', dependsOn: ['gate'] },
    });
    const pending = await command<{ threadId: string; turnId: string }>(t, sessionId, 'behind', 'start');
    const cancelled = await command(t, sessionId, 'behind', 'cancel', { reason: 'not needed' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'cancelled', interrupted: false });
    expect(await getTask(t, sessionId, 'behind')).toMatchObject({ status: 'cancelled' });
    const thread = await t.json<{ turns?: { turnId: string; status: string }[] }>(
      'GET',
      `/v1/sessions/${sessionId}/threads/${pending.body.threadId}`,
    );
    expect(thread.body.turns?.find((x) => x.turnId === pending.body.turnId)?.status).toBe('cancelled');
    // The gate ended cancelled for its dependents too; a cancel with no body works.
    expect((await command(t, sessionId, 'gate', 'cancel')).status).toBe(200);
    expect((await getTask(t, sessionId, 'gate')).status).toBe('cancelled');
    expectError(await command(t, sessionId, 'gate', 'cancel'), 409, 'task_not_active');
  });

  it('pausing a running agent task stops its turn; resuming starts a new attempt that completes', async () => {
    // The first model call of the task's thread waits until the pause interrupts it; the second answers.
    t = await testServer({
      serve: NO_RATE_LIMIT,
      script: { steps: [{ ...answer('never seen'), delayMs: 30_000 }, answer('Resumed and done.')] } as ModelScript,
    });
    const sessionId = await newSession(t);
    await t.json('POST', tasksOf(sessionId), { body: { taskId: 'long', objective: 'A long piece of work' } });
    const first = await command<{ threadId: string; runId: string }>(t, sessionId, 'long', 'start');
    await until(async () => {
      const events = await t?.json<{ events: RuntimeEvent[] }>(
        'GET',
        `/v1/sessions/${sessionId}/events?type=model.requested&threadId=${first.body.threadId}`,
      );
      return (events?.body.events.length ?? 0) > 0;
    });
    expect((await getTask(t, sessionId, 'long')).status).toBe('running');
    const paused = await command(t, sessionId, 'long', 'pause', { reason: 'lunch' });
    expect(paused.body).toEqual({ paused: ['long'] });
    // The attempt ends with its turn; the task does not.
    await until(async () => (await getTask(t as TestServer, sessionId, 'long')).attempts?.[0]?.status === 'failed');
    expect(await getTask(t, sessionId, 'long')).toMatchObject({
      status: 'paused',
      pausedFrom: 'running',
      statusReason: 'lunch',
    });

    // Resumed once the stopped turn has ended (task_still_stopping, retryable, until then).
    let resumed: { status: number; body: unknown } | undefined;
    await until(async () => {
      resumed = await command(t as TestServer, sessionId, 'long', 'resume');
      if (resumed.status === 409) expect((resumed.body as ErrorBody).error.code).toBe('task_still_stopping');
      return resumed.status === 200;
    });
    expect(resumed?.body).toEqual({ resumed: ['long'] });
    const done = await taskReaches(t, sessionId, 'long', 'completed');
    expect(done.attempts?.map((a) => [a.attemptCount, a.status])).toEqual([
      [1, 'failed'],
      [2, 'completed'],
    ]);
    expect(done.attempts?.[0]?.runId).toBe(first.body.runId);
    const cancelledEvents = await t.json<{ events: RuntimeEvent[] }>(
      'GET',
      `/v1/sessions/${sessionId}/events?type=task.cancelled`,
    );
    expect(cancelledEvents.body.events).toEqual([]);
  });
});

describe('task routes refuse bad requests', () => {
  it('malformed bodies 400, unknown tasks 404, cycles and unknown agents 422, conflicts 409, a viewer 403', async () => {
    t = await testServer({ script: SCRIPT, serve: NO_RATE_LIMIT });
    const sessionId = await newSession(t);
    await t.json('POST', tasksOf(sessionId), { body: { taskId: 'a', objective: 'A' } });
    await t.json('POST', tasksOf(sessionId), { body: { taskId: 'b', objective: 'B', dependsOn: ['a'] } });

    // Malformed: not JSON, the wrong shape, a field no task has, a value out of range, an unknown edge kind.
    const notJson = await t.call('POST', tasksOf(sessionId), { body: '{"objective": ' });
    expectError({ status: notJson.status, body: await notJson.json() }, 400, 'invalid_json');
    expectError(await t.json('POST', tasksOf(sessionId), { body: { objective: 5 } }), 400, 'invalid_input');
    expectError(await t.json('POST', tasksOf(sessionId), { body: {} }), 400, 'invalid_input');
    expectError(await t.json('POST', tasksOf(sessionId), { body: { objective: '' } }), 400, 'invalid_input');
    expectError(await t.json('POST', tasksOf(sessionId), { body: { objective: '  ' } }), 400, 'invalid_input');
    const extra = await t.json<ErrorBody>('POST', tasksOf(sessionId), { body: { objective: 'x', extra: true } });
    expectError(extra, 400, 'invalid_input');
    expect(extra.body.error.details).toMatchObject({ where: 'body' });
    expectError(
      await t.json('POST', tasksOf(sessionId), { body: { objective: 'x', assignee: { kind: 'robot' } } }),
      400,
      'invalid_input',
    );
    expectError(
      await t.json('POST', tasksOf(sessionId), { body: { objective: 'x', taskId: 'has space' } }),
      400,
      'invalid_input',
    );
    expectError(await t.json('PATCH', `${tasksOf(sessionId)}/a`, { body: {} }), 400, 'invalid_input');
    expectError(await t.json('PATCH', `${tasksOf(sessionId)}/a`, { body: { taskId: 'z' } }), 400, 'invalid_input');
    expectError(await command(t, sessionId, 'a', 'links', { kind: 'sibling', targetId: 'b' }), 400, 'invalid_input');
    expectError(await command(t, sessionId, 'a', 'links', { kind: 'dependency', targetId: 'a' }), 400, 'invalid_input');
    expectError(
      await command(t, sessionId, 'a', 'links/remove', { kind: 'sibling', targetId: 'b' }),
      400,
      'invalid_input',
    );
    expectError(await command(t, sessionId, 'a', 'fail', { error: {} }), 400, 'invalid_input');
    expectError(await command(t, sessionId, 'a', 'fail', {}), 400, 'invalid_input');
    expectError(await command(t, sessionId, 'a', 'pause', { propagate: 'everyone' }), 400, 'invalid_input');
    expectError(await command(t, sessionId, 'a', 'start', { threadId: 7 }), 400, 'invalid_input');
    expectError(await command(t, sessionId, 'a', 'complete', { summary: 'x', extra: 1 }), 400, 'invalid_input');
    expectError(await command(t, sessionId, 'a', 'cancel', '"a string"'), 400, 'invalid_input');

    // Unknown: the task, a dependency, a parent, an edge's target, the session.
    expectError(await t.json('GET', `${tasksOf(sessionId)}/nope`), 404, 'task_not_found');
    expectError(await t.json('PATCH', `${tasksOf(sessionId)}/nope`, { body: { title: 'x' } }), 404, 'task_not_found');
    for (const [path, body] of everyCommand(
      { kind: 'dependency', targetId: 'a' },
      { kind: 'dependency', targetId: 'a' },
    )) {
      const response = await command(t, sessionId, 'nope', path, body);
      expect([path, response.status, (response.body as unknown as ErrorBody).error?.code]).toEqual([
        path,
        404,
        'task_not_found',
      ]);
    }
    const missing = await t.json<ErrorBody>('POST', tasksOf(sessionId), {
      body: { objective: 'x', dependsOn: ['ghost'] },
    });
    expectError(missing, 404, 'task_not_found');
    expect(missing.body.error.details).toMatchObject({ taskId: 'ghost' });
    expectError(
      await t.json('POST', tasksOf(sessionId), { body: { objective: 'x', parentTaskId: 'ghost' } }),
      404,
      'task_not_found',
    );
    expectError(
      await command(t, sessionId, 'a', 'links', { kind: 'parent', targetId: 'ghost' }),
      404,
      'task_not_found',
    );
    expectError(await t.json('GET', '/v1/sessions/ses_nope/tasks'), 404, 'session_not_found');
    expectError(
      await t.json('POST', '/v1/sessions/ses_nope/tasks', { body: { objective: 'x' } }),
      404,
      'session_not_found',
    );

    // A cycle (b already depends on a), and a parent cycle: 422 task_cycle, nothing recorded.
    const cycle = await t.json<ErrorBody>('POST', `${tasksOf(sessionId)}/a/links`, {
      body: { kind: 'dependency', targetId: 'b' },
    });
    expectError(cycle, 422, 'task_cycle');
    expect(cycle.body.error.details).toMatchObject({ taskId: 'a', targetId: 'b', kind: 'dependency' });
    expectError(await command(t, sessionId, 'b', 'links', { kind: 'dependent', targetId: 'a' }), 422, 'task_cycle');
    expect(edgesOf(await getTask(t, sessionId, 'a'))).toEqual(['dependent:b']);
    expect(edgesOf(await getTask(t, sessionId, 'b'))).toEqual(['dependency:a:pending']);
    expect((await command(t, sessionId, 'b', 'links', { kind: 'parent', targetId: 'a' })).body).toEqual({
      linked: true,
    });
    expectError(await command(t, sessionId, 'a', 'links', { kind: 'parent', targetId: 'b' }), 422, 'task_cycle');
    await t.json('POST', tasksOf(sessionId), { body: { taskId: 'c', objective: 'C' } });
    expectError(await command(t, sessionId, 'b', 'links', { kind: 'parent', targetId: 'c' }), 409, 'task_has_parent');

    // An agent the session does not have: 422.
    expectError(
      await t.json('POST', tasksOf(sessionId), {
        body: { objective: 'x', assignee: { kind: 'agent', agent: 'ghost' } },
      }),
      422,
      'unknown_agent',
    );
    expectError(
      await t.json('PATCH', `${tasksOf(sessionId)}/a`, { body: { assignee: { kind: 'agent', agent: 'ghost' } } }),
      422,
      'unknown_agent',
    );

    // Conflicts with the task's state: 409.
    expect((await command(t, sessionId, 'b', 'start')).body).toMatchObject({ status: 'blocked' });
    expectError(await command(t, sessionId, 'b', 'start'), 409, 'task_already_started');
    expectError(await command(t, sessionId, 'a', 'resume'), 409, 'task_not_paused');
    expectError(await command(t, sessionId, 'a', 'retry'), 409, 'task_not_retryable');
    expectError(
      await t.json('POST', tasksOf(sessionId), { body: { taskId: 'a', objective: 'another A' } }),
      409,
      'task_exists',
    );

    // A viewer reads the tasks and changes none of them; an operator may.
    const viewer = await t.keyOf('viewer');
    expect((await t.json('GET', tasksOf(sessionId), { key: viewer })).status).toBe(200);
    expect((await t.json('GET', `${tasksOf(sessionId)}/a`, { key: viewer })).status).toBe(200);
    expectError(
      await t.json('POST', tasksOf(sessionId), { key: viewer, body: { taskId: 'v', objective: 'x' } }),
      403,
      'forbidden',
    );
    expectError(
      await t.json('PATCH', `${tasksOf(sessionId)}/a`, { key: viewer, body: { title: 'x' } }),
      403,
      'forbidden',
    );
    for (const [path, body] of everyCommand(
      { kind: 'artifact', targetId: 'art_1' },
      { kind: 'dependent', targetId: 'b' },
    )) {
      const response = await command(t, sessionId, 'a', path, body, viewer);
      expect([path, response.status, (response.body as unknown as ErrorBody).error?.code]).toEqual([
        path,
        403,
        'forbidden',
      ]);
    }
    // Nothing the viewer asked for happened.
    const a = await getTask(t, sessionId, 'a');
    expect(a.status).toBe('accepted');
    expect(a.title).toBeUndefined();
    expect(edgesOf(a)).toEqual(['dependent:b', 'child:b']);
    expect((await t.json<{ tasks: Task[] }>('GET', tasksOf(sessionId))).body.tasks.map((x) => x.taskId)).not.toContain(
      'v',
    );
    const operator = await t.keyOf('operator');
    const byOperator = await t.json('POST', tasksOf(sessionId), {
      key: operator,
      body: { taskId: 'o', objective: 'x' },
    });
    expect(byOperator.status).toBe(201);
    expect((await command(t, sessionId, 'o', 'links', { kind: 'artifact', targetId: 'art_1' }, operator)).status).toBe(
      200,
    );
    expect(edgesOf(await getTask(t, sessionId, 'o'))).toEqual(['artifact:art_1']);
  });
});

describe("a dependent released by its dependency's turn", () => {
  // The turn that completes the dependency writes the release on the dependent's thread and wakes it: a worker does
  // not hear of its own drivers' writes (`Runtime.settled` would kick the thread itself, so it is not used here).
  it('runs without any further request once its dependency completes (a dependent is never left queued)', async () => {
    t = await testServer({ script: SCRIPT, serve: NO_RATE_LIMIT });
    const sessionId = await newSession(t);
    await t.json('POST', tasksOf(sessionId), { body: { taskId: 'schema', objective: 'Draft the schema' } });
    await t.json('POST', tasksOf(sessionId), {
      body: { taskId: 'migrate', objective: 'Write the migration', dependsOn: ['schema'] },
    });
    expect((await command(t, sessionId, 'migrate', 'start')).body).toMatchObject({ status: 'blocked' });
    expect((await command(t, sessionId, 'schema', 'start')).body).toMatchObject({ status: 'queued' });
    await taskReaches(t, sessionId, 'schema', 'completed');
    await until(async () => (await getTask(t as TestServer, sessionId, 'migrate')).status === 'completed', 5_000);
  });
});
