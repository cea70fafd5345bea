import type { Task } from '@oar/protocol';
import {
  DEPENDENCY,
  DEPENDENT,
  edgeLinked,
  edges,
  MAX_TASK_RETRIES,
  TaskChangedError,
  tasksUnchanged,
} from '../facts/task-end.js';
import { canonicalJson } from '../kernel/canonical-json.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import type { EventDraft } from '../log/draft.js';
import { bindingOf } from '../read-models/session.js';
import { definitionOf, isTerminalTaskStatus } from '../read-models/task.js';
import type { CommandContext } from './command-context.js';

/**
 * The commands that say what a task is and how tasks relate (docs/tasks.md): `create_task`, `update_task`,
 * `link_tasks`, `unlink_tasks`. The graph is kept both ways — each edge is recorded on both of its tasks
 * (`parent`/`child`, `dependency`/`dependent`, `source`/`derived`), so either side reads it without a search.
 */

/** Who does a task's work: an agent of the session (it runs as turns of the task's thread), or someone outside. */
export type TaskAssignee = { kind: 'agent'; agent?: string } | { kind: 'external'; name?: string };

export interface TaskDefinition {
  title?: string;
  objective?: string;
  visibility?: 'foreground' | 'background' | 'internal' | 'hidden';
  scope?: Record<string, unknown>;
  constraints?: Record<string, unknown>;
  taskProfile?: Record<string, unknown>;
  priority?: string;
  assignee?: TaskAssignee;
  /** Criteria the owner checks: a task with any completes only through `complete_task`. */
  acceptance?: Record<string, unknown>[];
}

export interface CreateTaskInput extends TaskDefinition {
  sessionId: string;
  objective: string;
  /** Give one to make creation idempotent: the same id with the same definition returns the task created first. */
  taskId?: string;
  parentTaskId?: string;
  /** Tasks this one waits for: started before they all completed, it is blocked until they have. */
  dependsOn?: string[];
  /** The thread its agent works in (default: a thread of its own, created when it first starts). */
  threadId?: string;
}

export interface UpdateTaskInput extends TaskDefinition {
  sessionId: string;
  taskId: string;
  /**
   * `true` archives an ended task (`task.archived`), alone: the task leaves the lists of recent tasks and is still
   * fetched by id. The standard has no archive command; filing a task away is this runtime's policy of update_task.
   */
  archived?: true;
}

export interface LinkTasksInput {
  sessionId: string;
  taskId: string;
  kind: string;
  targetId: string;
  reason?: string;
}

/** The edge kinds between two tasks, each with the kind its other side records. */
const INVERSE: Record<string, string> = {
  parent: 'child',
  child: 'parent',
  [DEPENDENCY]: DEPENDENT,
  [DEPENDENT]: DEPENDENCY,
  source: 'derived',
  derived: 'source',
};
/** Edge kinds whose target is not a task: an artifact, an evidence record, a sub-agent. */
const OUTWARD_KINDS = new Set(['artifact', 'evidence', 'subagent']);
export const TASK_EDGE_KINDS = [...Object.keys(INVERSE), ...OUTWARD_KINDS] as const;

const TASK_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

export async function createTask(
  ctx: CommandContext,
  input: CreateTaskInput,
): Promise<{ sessionId: string; taskId: string; status: 'accepted'; duplicate: boolean }> {
  const session = await ctx.session(input.sessionId);
  if (input.objective.trim() === '') throw invalid('a task needs a non-empty objective');
  if (input.taskId !== undefined && !TASK_ID.test(input.taskId)) {
    throw invalid('a task id is 1 to 128 letters, digits and "_.:-"');
  }
  checkAssignee(session, input.assignee);
  const definition = definitionOf(input);
  const taskId = input.taskId ?? `task_${crypto.randomUUID().replaceAll('-', '').slice(0, 20)}`;
  const dependsOn = [...new Set(input.dependsOn ?? [])];
  if (dependsOn.includes(taskId)) throw invalid('a task cannot depend on itself');
  return retryOnTaskChange(async () => {
    const related = [input.parentTaskId, ...dependsOn].filter((id): id is string => id !== undefined);
    const tasks = await ctx.tasks(input.sessionId, [taskId, ...related]);
    const existing = tasks.get(taskId);
    if (existing) {
      if (!sameRequest(existing, input, dependsOn)) {
        throw new OarRuntimeError('task_exists', `task "${taskId}" exists with another definition`, {
          details: { taskId },
        });
      }
      return { sessionId: input.sessionId, taskId, status: 'accepted' as const, duplicate: true };
    }
    for (const id of related) if (!tasks.has(id)) throw notFound('task', id);
    for (const id of dependsOn) checkDependencyTarget(tasks.get(id) as Task);
    if (input.threadId) await openThread(ctx, input.sessionId, input.threadId);
    const requestedBy = session.actor ? { actor: session.actor } : { actor: 'control_plane' };
    const drafts: EventDraft[] = [
      {
        type: 'task.created',
        taskId,
        ...(input.threadId ? { threadId: input.threadId } : {}),
        ...(input.parentTaskId ? { parentTaskId: input.parentTaskId } : {}),
        payload: { ...definition, taskKind: 'task', requestedBy },
      },
      { type: 'task.accepted', taskId, payload: { status: 'accepted', requestedBy } },
      ...(input.parentTaskId ? [edgeLinked(input.parentTaskId, 'child', taskId)] : []),
      ...dependsOn.flatMap((id) => dependencyLink(taskId, tasks.get(id) as Task)),
    ];
    await ctx.append(input.sessionId, drafts, {
      guard: tasksUnchanged(input.sessionId, related.map(byId(tasks)), [taskId]),
    });
    return { sessionId: input.sessionId, taskId, status: 'accepted' as const, duplicate: false };
  });
}

/**
 * Whether `existing` is what this create asked for: the same definition (a field not given is as the reducer sets it
 * by default — visibility foreground — else absent; key order does not matter), thread, parent and dependencies.
 */
function sameRequest(existing: Task, input: CreateTaskInput, dependsOn: string[]): boolean {
  const asked = { visibility: 'foreground', ...definitionOf(input) };
  const recorded = definitionOf(existing);
  return (
    existing.taskKind === 'task' &&
    canonicalJson(recorded) === canonicalJson(asked) &&
    existing.threadId === input.threadId &&
    existing.parentTaskId === input.parentTaskId &&
    canonicalJson(edges(existing, DEPENDENCY).sort()) === canonicalJson([...dependsOn].sort())
  );
}

/**
 * Change what a task is: applies to its next attempt (a running one keeps what it started with). With `archived:
 * true`, file an ended task away instead (`archiveTask`).
 */
export async function updateTask(
  ctx: CommandContext,
  input: UpdateTaskInput,
): Promise<{ taskId: string; changed: string[] }> {
  const definition = definitionOf(input);
  if (input.archived === true) {
    if (Object.keys(definition).length > 0) {
      throw invalid('archived is given alone: an ended task is archived as it ended, its definition unchanged');
    }
    return archiveTask(ctx, input.sessionId, input.taskId);
  }
  checkAssignee(await ctx.session(input.sessionId), input.assignee);
  if (definition.objective !== undefined && definition.objective.trim() === '') {
    throw invalid('a task needs a non-empty objective');
  }
  const changed = Object.keys(definition);
  if (changed.length === 0) throw invalid('update_task needs at least one field to change');
  return retryOnTaskChange(async () => {
    const task = await activeTask(ctx, input.sessionId, input.taskId);
    if (task.taskKind !== 'task') throw notStartable(task, 'changed');
    // Who does the work is fixed once it started: its turns and thread are the assignee's.
    if (input.assignee && (task.status !== 'accepted' || (task.attempts?.length ?? 0) > 0)) {
      throw new OarRuntimeError(
        'task_already_started',
        `task "${task.taskId}" has started (${task.status}): its assignee is fixed; create another task`,
        { details: { taskId: task.taskId, status: task.status } },
      );
    }
    await ctx.append(
      input.sessionId,
      [{ type: 'task.updated', taskId: task.taskId, payload: { ...definition, changed } }],
      {
        guard: tasksUnchanged(input.sessionId, [task]),
      },
    );
    return { taskId: task.taskId, changed };
  });
}

/**
 * Archive an ended task of any kind (the runtime's own pile up most): `task.archived`, with the status it ended
 * with. It leaves the snapshot's and threads' task lists (`list_tasks` shows it on request) and stays whole by id;
 * archived is final — no retry. Archiving an archived task changes nothing (`changed: []`).
 */
async function archiveTask(
  ctx: CommandContext,
  sessionId: string,
  taskId: string,
): Promise<{ taskId: string; changed: string[] }> {
  return retryOnTaskChange(async () => {
    const task = (await ctx.tasks(sessionId, [taskId])).get(taskId);
    if (!task) throw notFound('task', taskId);
    if (task.status === 'archived') return { taskId, changed: [] };
    if (!isTerminalTaskStatus(task.status)) {
      throw new OarRuntimeError(
        'task_not_ended',
        `task "${taskId}" is ${task.status}: only an ended task is archived (complete, fail or cancel it first)`,
        { details: { taskId, status: task.status } },
      );
    }
    await ctx.append(
      sessionId,
      [
        {
          type: 'task.archived',
          taskId,
          ...(task.threadId ? { threadId: task.threadId } : {}),
          payload: { archivedFrom: task.status, requestedBy: 'owner' },
        },
      ],
      { guard: tasksUnchanged(sessionId, [task]) },
    );
    return { taskId, changed: ['archived'] };
  });
}

/** Add an edge to the task graph (idempotent: an edge that exists is not recorded twice). */
export async function linkTasks(ctx: CommandContext, input: LinkTasksInput): Promise<{ linked: boolean }> {
  checkKind(input.kind);
  if (input.taskId === input.targetId) throw invalid('a task cannot be linked to itself');
  return retryOnTaskChange(async () => {
    const inverse = INVERSE[input.kind];
    const ids = inverse ? [input.taskId, input.targetId] : [input.taskId];
    const tasks = await ctx.tasks(input.sessionId, ids);
    for (const id of ids) if (!tasks.has(id)) throw notFound('task', id);
    const task = tasks.get(input.taskId) as Task;
    if (edges(task, input.kind).includes(input.targetId)) return { linked: false };
    if (isTerminalTaskStatus(task.status)) throw notActive(task);
    const drafts: EventDraft[] = [];
    // Every task the cycle check walked: a concurrent link among them could close a cycle this one does not see.
    const walked: Task[] = [];
    if (inverse) {
      const target = tasks.get(input.targetId) as Task;
      // Seen from the waiting side, whichever side the caller named.
      const [waiting, awaited] = input.kind === DEPENDENT ? [target, task] : [task, target];
      if (input.kind === DEPENDENCY || input.kind === DEPENDENT) {
        if (isTerminalTaskStatus(waiting.status)) throw notActive(waiting);
        const notStarted =
          waiting.status === 'accepted' || (waiting.status === 'paused' && waiting.pausedFrom === 'accepted');
        if (!notStarted || (waiting.attempts?.length ?? 0) > 0) {
          throw new OarRuntimeError(
            'task_not_linkable',
            `task "${waiting.taskId}" has started (${waiting.status}): a dependency is added before a task starts`,
            { details: { taskId: waiting.taskId, status: waiting.status } },
          );
        }
        checkDependencyTarget(awaited);
        walked.push(...(await checkNoCycle(ctx, input.sessionId, waiting.taskId, awaited.taskId, DEPENDENCY)));
        drafts.push(...dependencyLink(waiting.taskId, awaited, input.reason));
      } else {
        const [child, parent] = input.kind === 'parent' ? [task, target] : [target, task];
        if (input.kind === 'parent' || input.kind === 'child') {
          const current = child.parentTaskId;
          if (current && current !== parent.taskId) {
            throw new OarRuntimeError('task_has_parent', `task "${child.taskId}" already has parent "${current}"`, {
              details: { taskId: child.taskId, parentTaskId: current },
            });
          }
          walked.push(...(await checkNoCycle(ctx, input.sessionId, child.taskId, parent.taskId, 'parent')));
        }
        drafts.push(
          edgeLinked(input.taskId, input.kind, input.targetId, { reason: input.reason }),
          edgeLinked(input.targetId, inverse, input.taskId, { reason: input.reason }),
        );
      }
    } else {
      drafts.push(edgeLinked(input.taskId, input.kind, input.targetId, { reason: input.reason }));
    }
    const guarded = new Map([...walked, ...tasks.values()].map((t) => [t.taskId, t]));
    await ctx.append(input.sessionId, drafts, { guard: tasksUnchanged(input.sessionId, [...guarded.values()]) });
    return { linked: true };
  });
}

/** Remove an edge (from both of its tasks). A blocked task whose last open dependency goes is ready to run. */
export async function unlinkTasks(ctx: CommandContext, input: LinkTasksInput): Promise<{ unlinked: boolean }> {
  checkKind(input.kind);
  return retryOnTaskChange(async () => {
    const inverse = INVERSE[input.kind];
    const ids = inverse ? [input.taskId, input.targetId] : [input.taskId];
    const tasks = await ctx.tasks(input.sessionId, ids);
    const task = tasks.get(input.taskId);
    if (!task) throw notFound('task', input.taskId);
    if (!edges(task, input.kind).includes(input.targetId)) {
      throw new OarRuntimeError(
        'relationship_not_found',
        `task "${input.taskId}" has no ${input.kind} edge to "${input.targetId}"`,
        { details: { taskId: input.taskId, kind: input.kind, targetId: input.targetId } },
      );
    }
    const target = tasks.get(input.targetId);
    const drafts: EventDraft[] = [unlinked(task, input.kind, input.targetId)];
    if (inverse && target) drafts.push(unlinked(target, inverse, input.taskId));
    await ctx.append(input.sessionId, drafts, { guard: tasksUnchanged(input.sessionId, [...tasks.values()]) });
    return { unlinked: true };
  });
}

/** The task, which must exist and not have ended. */
export async function activeTask(ctx: CommandContext, sessionId: string, taskId: string): Promise<Task> {
  const task = (await ctx.tasks(sessionId, [taskId])).get(taskId);
  if (!task) throw notFound('task', taskId);
  if (isTerminalTaskStatus(task.status)) throw notActive(task);
  return task;
}

export function notActive(task: Task): OarRuntimeError {
  return new OarRuntimeError('task_not_active', `task "${task.taskId}" already ended (${task.status})`, {
    details: { taskId: task.taskId, status: task.status },
  });
}

/** Only tasks people and clients created are run and changed through these commands; the model's run by themselves. */
export function notStartable(task: Task, verb: string): OarRuntimeError {
  return new OarRuntimeError(
    'task_not_startable',
    `task "${task.taskId}" is the runtime's own (${task.taskKind ?? 'task'}): only tasks made with create_task are ${verb} this way`,
    { details: { taskId: task.taskId, taskKind: task.taskKind } },
  );
}

/** Run a read-compute-append task command again while a task it read changed first (bounded). */
export async function retryOnTaskChange<T>(command: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await command();
    } catch (error) {
      if (!(error instanceof TaskChangedError) || attempt >= MAX_TASK_RETRIES) throw error;
    }
  }
}

function invalid(message: string): OarRuntimeError {
  return new OarRuntimeError('invalid_input', message);
}

function checkKind(kind: string): void {
  if (!(TASK_EDGE_KINDS as readonly string[]).includes(kind)) {
    throw invalid(`unknown edge kind "${kind}" (one of ${TASK_EDGE_KINDS.join(', ')})`);
  }
}

/** The agent a task is assigned to must be one of the session's. */
function checkAssignee(session: Awaited<ReturnType<CommandContext['session']>>, assignee?: TaskAssignee): void {
  if (assignee?.kind !== 'agent' || assignee.agent === undefined) return;
  const binding = bindingOf(session);
  const names = new Set(['main', ...(binding ? [binding.mainAgent.name, ...binding.agents.map((a) => a.name)] : [])]);
  if (!names.has(assignee.agent)) {
    throw new OarRuntimeError('unknown_agent', `the session has no agent "${assignee.agent}"`, {
      details: { agent: assignee.agent, agents: [...names] },
    });
  }
}

/** Dependencies are between tasks made with create_task: their ends are what releases the tasks waiting for them. */
function checkDependencyTarget(task: Task): void {
  if (task.taskKind !== 'task') {
    throw invalid(
      `task "${task.taskId}" is the runtime's own (${task.taskKind}): a dependency names a task made with create_task`,
    );
  }
}

/**
 * Refuse an edge `from` → `to` of `kind` when `to` already reaches `from` along that kind (a cycle). Returns the
 * tasks it walked, for the link's guard.
 */
async function checkNoCycle(
  ctx: CommandContext,
  sessionId: string,
  from: string,
  to: string,
  kind: string,
): Promise<Task[]> {
  const seen = new Map<string, Task>();
  let frontier = [to];
  while (frontier.length > 0) {
    if (frontier.includes(from)) {
      throw new OarRuntimeError('task_cycle', `linking "${from}" to "${to}" (${kind}) would make a cycle`, {
        details: { taskId: from, targetId: to, kind },
      });
    }
    const tasks = await ctx.tasks(sessionId, frontier);
    for (const task of tasks.values()) seen.set(task.taskId, task);
    frontier = [...tasks.values()].flatMap((t) => edges(t, kind)).filter((id) => !seen.has(id));
  }
  return [...seen.values()];
}

async function openThread(ctx: CommandContext, sessionId: string, threadId: string): Promise<void> {
  const thread = await ctx.log.thread(sessionId, threadId);
  if (thread.status === 'closed') throw new OarRuntimeError('thread_closed', `thread "${threadId}" is closed`);
}

/** Both sides of `waiting` depending on `awaited`; the edge says whether `awaited` has already completed. */
function dependencyLink(waiting: string, awaited: Task, reason?: string): EventDraft[] {
  // An edge's status is how the task it waits for ended, or `pending` until it does.
  const status = isTerminalTaskStatus(awaited.status) ? awaited.status : 'pending';
  return [
    edgeLinked(waiting, DEPENDENCY, awaited.taskId, { reason, edgeStatus: status }),
    edgeLinked(awaited.taskId, DEPENDENT, waiting, { reason }),
  ];
}

/** An edge removed; on the task's thread too, where a held turn may wait for the dependency removed. */
function unlinked(task: Task, kind: string, targetId: string): EventDraft {
  return {
    type: 'task.dependency.updated',
    taskId: task.taskId,
    ...(kind === DEPENDENCY && task.threadId ? { threadId: task.threadId } : {}),
    taskRelationship: { kind, targetId, status: 'unlinked' },
    payload: { change: 'unlinked', kind, targetId },
  };
}

function byId(tasks: Map<string, Task>) {
  return (id: string) => tasks.get(id) as Task;
}
