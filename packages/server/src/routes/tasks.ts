import { TaskSchema } from '@oar/protocol';
import { notFound, TASK_EDGE_KINDS, TaskDefinitionSchema } from '@oar/runtime';
import { z } from 'zod';
import { Accepted, Id, NoQuery, type Route, route, type ServerDeps, SessionParams } from '../route.js';

/**
 * The task routes (docs/tasks.md): the standard's task commands under `/v1/sessions/{sessionId}/tasks`, each
 * operation named after its command (`create_task` → `createTask`). A handler calls the one runtime method that does
 * the work; the runtime validates again and records the facts.
 */

const Text = z.string();
const TaskParams = z.object({ sessionId: Id, taskId: Id });
const Reason = z.strictObject({ reason: Text.max(1_000).optional() }).default({});

const CreateTaskBody = TaskDefinitionSchema.extend({
  objective: Text.min(1).max(20_000),
  taskId: Id.optional().describe('the id to give the task: the same id and definition again returns the first'),
  parentTaskId: Id.optional(),
  dependsOn: z.array(Id).max(100).optional(),
  threadId: Id.optional().describe("the thread its agent works in (default: a thread of the task's own)"),
});

const PauseBody = z
  .strictObject({ reason: Text.max(1_000).optional(), propagate: z.enum(['none', 'children']).optional() })
  .default({});

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
      params: SessionParams,
      query: NoQuery,
      response: z.object({ tasks: z.array(TaskSchema) }),
    },
    async ({ deps, params }) => {
      const { snapshot } = await deps.runtime.getSession({ sessionId: params.sessionId, limit: 0 });
      return { tasks: snapshot.tasks };
    },
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
      summary: 'One task: status, attempts, progress, edges of the task graph both ways',
      tag: 'tasks',
      scope: 'viewer',
      params: TaskParams,
      response: TaskSchema,
    },
    async ({ deps, params }) => {
      const { snapshot } = await deps.runtime.getSession({ sessionId: params.sessionId, limit: 0 });
      const task = snapshot.tasks.find((t) => t.taskId === params.taskId);
      if (!task) throw notFound('task', params.taskId);
      return task;
    },
  ),
  route(
    {
      method: 'patch',
      path: '/v1/sessions/{sessionId}/tasks/{taskId}',
      operationId: 'updateTask',
      summary: "Change a task's definition (its next attempt runs with it)",
      tag: 'tasks',
      scope: 'operator',
      params: TaskParams,
      body: TaskDefinitionSchema,
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
    summary: 'Cancel an active task',
    body: Reason,
    run: (deps, input) => deps.runtime.cancelTask(input),
  }),
  taskCommand({
    path: 'retry',
    operationId: 'retryTask',
    summary: 'Retry a failed, lost or cancelled task: a new attempt, the earlier ones kept',
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
