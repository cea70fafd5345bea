import { TaskSchema, TaskStatusValueSchema } from '@oar/protocol';
import { notFound, TASK_EDGE_KINDS, TaskDefinitionSchema } from '@oar/runtime';
import { z } from 'zod';
import { Accepted, Id, type Route, route, type ServerDeps, SessionParams } from '../route.js';

/**
 * The task routes (docs/tasks.md): the standard's task commands under `/v1/sessions/{sessionId}/tasks`, each
 * operation named after its command (`create_task` → `createTask`). A handler calls the one runtime method that does
 * the work; the runtime validates again and records the facts.
 */

const Text = z.string();
const TaskParams = z.object({ sessionId: Id, taskId: Id });

const CreateTaskBody = TaskDefinitionSchema.extend({
  objective: Text.min(1).max(20_000),
  taskId: Id.optional().describe('the id to give the task: the same id and definition again returns the first'),
  parentTaskId: Id.optional(),
  dependsOn: z.array(Id).max(100).optional(),
  threadId: Id.optional().describe("the thread its agent works in (default: a thread of the task's own)"),
});

/** Pause, resume and cancel: why, and whether the task's descendants (its `child` edges) go with it. */
const PauseBody = z
  .strictObject({ reason: Text.max(1_000).optional(), propagate: z.enum(['none', 'children']).optional() })
  .default({});

const CancelTaskResult = z.object({
  taskId: z.string(),
  status: TaskStatusValueSchema.describe('`cancelled`, or `cancelling` while its running work stops'),
  interrupted: z.boolean(),
  tasks: z.array(z.object({ taskId: z.string(), status: TaskStatusValueSchema })),
});

const LinkBody = z.strictObject({
  kind: z.enum(TASK_EDGE_KINDS as unknown as [string, ...string[]]),
  targetId: Id,
  reason: Text.max(1_000).optional(),
});

const StartTaskResult = z.object({
  sessionId: z.string(),
  taskId: z.string(),
  status: z.enum(['queued', 'blocked', 'running']),
  attempt: z.number().int(),
  runId: z.string(),
  threadId: z.string().optional(),
  turnId: z.string().optional(),
  waitsFor: z.array(z.string()),
});

type TaskInput<B extends z.ZodType> = { sessionId: string; taskId: string } & z.infer<B>;

/** A POST on one task that runs one runtime method with the body (operator scope: it changes the task). */
function taskCommand<B extends z.ZodType>(spec: {
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  body?: B;
  response?: z.ZodType;
  run: (deps: ServerDeps, input: TaskInput<B>) => Promise<unknown>;
}): Route {
  return route(
    {
      method: 'post',
      path: `/v1/sessions/{sessionId}/tasks/{taskId}/${spec.path}`,
      operationId: spec.operationId,
      summary: spec.summary,
      ...(spec.description ? { description: spec.description } : {}),
      tag: 'tasks',
      scope: 'operator',
      params: TaskParams,
      ...(spec.body ? { body: spec.body } : {}),
      conflicts: true,
      response: spec.response ?? Accepted,
    },
    async ({ deps, params, body }) => (await spec.run(deps, { ...(body ?? {}), ...params } as TaskInput<B>)) ?? {},
  );
}

export const taskRoutes: Route[] = [
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/tasks',
      operationId: 'listTasks',
      summary:
        "The session's tasks — the model's, its delegations', and those made with createTask — with their attempts",
      tag: 'tasks',
      scope: 'viewer',
      description: 'Archived tasks are filed away: listed with `archived=1` only (`getTask` finds each by id).',
      params: SessionParams,
      query: z.object({ archived: z.enum(['0', '1']).optional().describe('1: the archived tasks too') }),
      response: z.object({ tasks: z.array(TaskSchema) }),
    },
    async ({ deps, params, query }) => ({
      tasks: await deps.runtime.listTasks({ sessionId: params.sessionId, archived: query.archived === '1' }),
    }),
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/tasks',
      operationId: 'createTask',
      summary: 'Create a task: objective, scope, profile, constraints, assignee, acceptance, parent and dependencies',
      description:
        'The task is accepted, not started: `startTask` starts it. An agent’s task runs as turns of a thread of its own; an external one (`assignee.kind: external`) is reported on through the task commands.',
      tag: 'tasks',
      scope: 'operator',
      params: SessionParams,
      body: CreateTaskBody,
      status: 201,
      conflicts: true,
      response: z.object({
        sessionId: z.string(),
        taskId: z.string(),
        status: z.literal('accepted'),
        duplicate: z.boolean(),
      }),
    },
    async ({ deps, params, body }) => deps.runtime.createTask({ ...body, sessionId: params.sessionId }),
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/tasks/{taskId}',
      operationId: 'getTask',
      summary: 'One task, archived or not: status, attempts, progress, edges of the task graph both ways',
      tag: 'tasks',
      scope: 'viewer',
      params: TaskParams,
      response: TaskSchema,
    },
    async ({ deps, params }) => {
      const tasks = await deps.runtime.listTasks({ sessionId: params.sessionId, archived: true });
      const task = tasks.find((t) => t.taskId === params.taskId);
      if (!task) throw notFound('task', params.taskId);
      return task;
    },
  ),
  route(
    {
      method: 'patch',
      path: '/v1/sessions/{sessionId}/tasks/{taskId}',
      operationId: 'updateTask',
      summary: "Change a task's definition (its next attempt runs with it), or archive an ended task",
      description:
        '`{"archived": true}` alone files an ended task away (`task.archived`): it leaves the lists of recent tasks (`listTasks` shows it with `archived=1`) and `getTask` still returns it whole. The standard has no archive command: archiving is this runtime’s policy of update_task. A task not ended: `task_not_ended`.',
      tag: 'tasks',
      scope: 'operator',
      params: TaskParams,
      body: TaskDefinitionSchema.extend({ archived: z.literal(true).optional() }),
      conflicts: true,
      response: z.object({ taskId: z.string(), changed: z.array(z.string()) }),
    },
    async ({ deps, params, body }) => deps.runtime.updateTask({ ...body, ...params }),
  ),
  taskCommand({
    path: 'start',
    operationId: 'startTask',
    summary: 'Start a task: its agent’s turn is queued (held while a dependency has not completed)',
    body: z.strictObject({ threadId: Id.optional() }).default({}),
    response: StartTaskResult,
    run: (deps, input) => deps.runtime.startTask(input),
  }),
  taskCommand({
    path: 'progress',
    operationId: 'appendTaskProgress',
    summary: 'Report progress: a message, a percent, counts, refs (the latest is the task’s progress)',
    body: z.strictObject({
      message: Text.max(10_000).optional(),
      percent: z.number().min(0).max(100).optional(),
      completed: z.number().int().min(0).optional(),
      total: z.number().int().min(0).optional(),
      refs: z.array(Id).max(100).optional(),
    }),
    run: (deps, input) => deps.runtime.appendTaskProgress(input),
  }),
  taskCommand({
    path: 'pause',
    operationId: 'pauseTask',
    summary: 'Pause a task (with `propagate: children`, its descendants too); a running turn is stopped',
    body: PauseBody,
    run: (deps, input) => deps.runtime.pauseTask(input),
  }),
  taskCommand({
    path: 'resume',
    operationId: 'resumeTask',
    summary: 'Resume a paused task: back where it was; one that was running starts a new attempt',
    body: PauseBody,
    run: (deps, input) => deps.runtime.resumeTask(input),
  }),
  taskCommand({
    path: 'complete',
    operationId: 'completeTask',
    summary: 'Complete a task (its owner’s word: acceptance checked, external work done); dependents are released',
    body: z.strictObject({ summary: Text.max(10_000).optional() }).default({}),
    run: (deps, input) => deps.runtime.completeTask(input),
  }),
  taskCommand({
    path: 'fail',
    operationId: 'failTask',
    summary: 'Fail a task; a running turn of it is stopped',
    body: z.strictObject({ error: z.strictObject({ code: Id.optional(), message: Text.min(1).max(10_000) }) }),
    run: (deps, input) => deps.runtime.failTask(input),
  }),
  taskCommand({
    path: 'cancel',
    operationId: 'cancelTask',
    summary: 'Cancel a task (with `propagate: children`, its open descendants too)',
    description:
      'A task whose work runs (its turn, a runner run, a delegated child) is asked first: `task.cancel_requested`, status `cancelling`; its work is interrupted and the task ends `task.cancelled` once it stopped. A task with nothing running is cancelled at once.',
    body: PauseBody,
    response: CancelTaskResult,
    run: (deps, input) => deps.runtime.cancelTask(input),
  }),
  taskCommand({
    path: 'retry',
    operationId: 'retryTask',
    summary: 'Retry a failed, timed out, lost or cancelled task: a new attempt, the earlier ones kept',
    run: (deps, input) => deps.runtime.retryTask(input),
  }),
  taskCommand({
    path: 'links',
    operationId: 'linkTasks',
    summary: 'Add an edge to the task graph (recorded on both tasks when both are tasks)',
    description:
      'Kinds: parent, child, dependency, dependent, source, derived (task to task); artifact, evidence, subagent (to a record that is not a task). A dependency is added before the waiting task starts; a cycle is refused (`task_cycle`).',
    body: LinkBody,
    run: (deps, input) => deps.runtime.linkTasks(input),
  }),
  taskCommand({
    path: 'links/remove',
    operationId: 'unlinkTasks',
    summary: 'Remove an edge from the task graph (a blocked task whose last open dependency goes is ready)',
    body: LinkBody.omit({ reason: true }),
    run: (deps, input) => deps.runtime.unlinkTasks(input),
  }),
];
