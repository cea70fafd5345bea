/*
 * The work of `oar task …` (task-commands.ts), imported when one runs. Commands over a session's tasks: the ones that
 * start work (start, resume, retry) drive the session here until it settles unless `--detach`; the rest record and
 * return.
 */
import { oarError, type Task } from '@oar/protocol';
import { EXIT, notFound, type Runtime } from '@oar/runtime';
import { printJson, UsageError } from './io.js';
import type { GlobalOptions } from './options.js';
import { openForSessions, withRuntime } from './runtime-actions.js';

export interface TaskOptions extends GlobalOptions {
  json?: boolean;
  detach?: boolean;
  reason?: string;
  children?: boolean;
  thread?: string;
  archived?: boolean;
}

const out = (line: string) => process.stdout.write(`${line}\n`);

/** A command that records and returns (no worker in this process). */
async function recording(
  options: TaskOptions,
  command: (runtime: Runtime) => Promise<unknown>,
  say: (result: never) => string,
): Promise<number> {
  return withRuntime(await openForSessions(options, false), async (runtime) => {
    const result = await command(runtime);
    if (options.json) printJson(result);
    else out(say(result as never));
    return EXIT.ok;
  });
}

/**
 * A command that starts work: recorded, then (unless `--detach`) this process drives the session until it settles
 * and prints the task as it is then. Exit 3 when the session waits for a decision (`oar respond`).
 */
async function working(
  sessionId: string,
  taskId: string,
  options: TaskOptions,
  command: (runtime: Runtime) => Promise<unknown>,
): Promise<number> {
  const opened = await openForSessions(options, options.detach ? false : [sessionId]);
  return withRuntime(opened, async (runtime) => {
    const result = await command(runtime);
    if (!options.detach) await runtime.settled(sessionId);
    const task = options.detach ? undefined : await taskOf(runtime, sessionId, taskId);
    if (options.json) printJson(task ? { ...(result as object), task } : result);
    else {
      out(describeStart(result as Record<string, unknown>));
      if (task) out(`task ${task.taskId}: ${task.status}${task.statusReason ? ` (${task.statusReason})` : ''}`);
    }
    const { snapshot } = await runtime.getSession({ sessionId, limit: 0 });
    return snapshot.threads.some((t) => (t.pendingRequests ?? []).length > 0) ? EXIT.waiting : EXIT.ok;
  });
}

function describeStart(result: Record<string, unknown>): string {
  if (result.status === 'blocked') return `blocked: waits for ${(result.waitsFor as string[]).join(', ')}`;
  if (typeof result.runId === 'string') {
    return `attempt ${String(result.attempt ?? '')} ${String(result.status ?? 'started')} (run ${result.runId}${result.threadId ? `, thread ${String(result.threadId)}` : ''})`;
  }
  if (Array.isArray(result.resumed)) return `resumed: ${(result.resumed as string[]).join(', ') || 'nothing'}`;
  return JSON.stringify(result);
}

/** The task by id, archived or not (get_task). */
async function taskOf(runtime: Runtime, sessionId: string, taskId: string): Promise<Task | undefined> {
  return (await runtime.listTasks({ sessionId, archived: true })).find((t) => t.taskId === taskId);
}

function number(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n)) throw new UsageError(oarError('invalid_option', `${flag} takes a number, not "${value}"`));
  return n;
}

const criteria = (values?: string[]) => values?.map((criterion) => ({ criterion }));

export function createTask(
  sessionId: string,
  options: TaskOptions & {
    objective: string;
    title?: string;
    id?: string;
    parent?: string;
    dependsOn?: string[];
    agent?: string;
    external?: string;
    acceptance?: string[];
    priority?: string;
  },
): Promise<number> {
  if (options.agent && options.external) {
    throw new UsageError(oarError('invalid_option', '--agent and --external exclude each other'));
  }
  return recording(
    options,
    (runtime) =>
      runtime.createTask({
        sessionId,
        objective: options.objective,
        ...(options.title ? { title: options.title } : {}),
        ...(options.id ? { taskId: options.id } : {}),
        ...(options.parent ? { parentTaskId: options.parent } : {}),
        ...(options.dependsOn ? { dependsOn: options.dependsOn } : {}),
        ...(options.external !== undefined ? { assignee: { kind: 'external' as const, name: options.external } } : {}),
        ...(options.agent ? { assignee: { kind: 'agent' as const, agent: options.agent } } : {}),
        ...(options.acceptance ? { acceptance: criteria(options.acceptance) } : {}),
        ...(options.priority ? { priority: options.priority } : {}),
        ...(options.thread ? { threadId: options.thread } : {}),
      }),
    (r: { taskId: string; duplicate: boolean }) =>
      `task ${r.taskId} ${r.duplicate ? 'exists (same definition)' : 'accepted'}`,
  );
}

export function updateTask(
  sessionId: string,
  taskId: string,
  options: TaskOptions & { objective?: string; title?: string; acceptance?: string[]; priority?: string },
): Promise<number> {
  return recording(
    options,
    (runtime) =>
      runtime.updateTask({
        sessionId,
        taskId,
        ...(options.objective !== undefined ? { objective: options.objective } : {}),
        ...(options.title !== undefined ? { title: options.title } : {}),
        ...(options.acceptance ? { acceptance: criteria(options.acceptance) } : {}),
        ...(options.priority !== undefined ? { priority: options.priority } : {}),
      }),
    (r: { changed: string[] }) => `task ${taskId}: changed ${r.changed.join(', ')}`,
  );
}

export function startTask(sessionId: string, taskId: string, options: TaskOptions): Promise<number> {
  return working(sessionId, taskId, options, (runtime) =>
    runtime.startTask({ sessionId, taskId, ...(options.thread ? { threadId: options.thread } : {}) }),
  );
}

export function resumeTask(sessionId: string, taskId: string, options: TaskOptions): Promise<number> {
  return working(sessionId, taskId, options, (runtime) =>
    runtime.resumeTask({
      sessionId,
      taskId,
      ...(options.reason ? { reason: options.reason } : {}),
      ...(options.children ? { propagate: 'children' as const } : {}),
    }),
  );
}

export function retryTask(sessionId: string, taskId: string, options: TaskOptions): Promise<number> {
  return working(sessionId, taskId, options, (runtime) => runtime.retryTask({ sessionId, taskId }));
}

export function progressTask(
  sessionId: string,
  taskId: string,
  options: TaskOptions & { message?: string; percent?: string; completed?: string; total?: string },
): Promise<number> {
  const counts = {
    percent: number('--percent', options.percent),
    completed: number('--completed', options.completed),
    total: number('--total', options.total),
  };
  return recording(
    options,
    (runtime) =>
      runtime.appendTaskProgress({
        sessionId,
        taskId,
        ...(options.message !== undefined ? { message: options.message } : {}),
        ...Object.fromEntries(Object.entries(counts).filter(([, v]) => v !== undefined)),
      }),
    () => `task ${taskId}: progress recorded`,
  );
}

export function pauseTask(sessionId: string, taskId: string, options: TaskOptions): Promise<number> {
  return recording(
    options,
    (runtime) =>
      runtime.pauseTask({
        sessionId,
        taskId,
        ...(options.reason ? { reason: options.reason } : {}),
        ...(options.children ? { propagate: 'children' as const } : {}),
      }),
    (r: { paused: string[] }) => `paused: ${r.paused.join(', ') || 'nothing (already paused)'}`,
  );
}

export function completeTask(sessionId: string, taskId: string, options: TaskOptions & { summary?: string }) {
  return recording(
    options,
    (runtime) => runtime.completeTask({ sessionId, taskId, ...(options.summary ? { summary: options.summary } : {}) }),
    () => `task ${taskId}: completed`,
  );
}

export function failTask(sessionId: string, taskId: string, options: TaskOptions & { message: string; code?: string }) {
  return recording(
    options,
    (runtime) =>
      runtime.failTask({
        sessionId,
        taskId,
        error: { message: options.message, ...(options.code ? { code: options.code } : {}) },
      }),
    () => `task ${taskId}: failed`,
  );
}

export function cancelTask(sessionId: string, taskId: string, options: TaskOptions) {
  return recording(
    options,
    (runtime) =>
      runtime.cancelTask({
        sessionId,
        taskId,
        ...(options.reason ? { reason: options.reason } : {}),
        ...(options.children ? { propagate: 'children' as const } : {}),
      }),
    // A task whose work runs is `cancelling` until the worker holding it stopped the work (oar task show).
    (r: { tasks: { taskId: string; status: string }[] }) =>
      r.tasks
        .map((t) => `task ${t.taskId}: ${t.status === 'cancelling' ? 'cancelling (its work is stopping)' : t.status}`)
        .join('\n'),
  );
}

export function archiveTask(sessionId: string, taskId: string, options: TaskOptions) {
  return recording(
    options,
    (runtime) => runtime.updateTask({ sessionId, taskId, archived: true }),
    (r: { changed: string[] }) => `task ${taskId}: ${r.changed.length > 0 ? 'archived' : 'already archived'}`,
  );
}

export function linkTasks(sessionId: string, taskId: string, kind: string, targetId: string, options: TaskOptions) {
  return recording(
    options,
    (runtime) =>
      runtime.linkTasks({ sessionId, taskId, kind, targetId, ...(options.reason ? { reason: options.reason } : {}) }),
    (r: { linked: boolean }) => `${taskId} ${kind} ${targetId}: ${r.linked ? 'linked' : 'already linked'}`,
  );
}

export function unlinkTasks(sessionId: string, taskId: string, kind: string, targetId: string, options: TaskOptions) {
  return recording(
    options,
    (runtime) => runtime.unlinkTasks({ sessionId, taskId, kind, targetId }),
    () => `${taskId} ${kind} ${targetId}: unlinked`,
  );
}

export async function listTasks(sessionId: string, options: TaskOptions): Promise<number> {
  return withRuntime(await openForSessions(options, false), async (runtime) => {
    const tasks = await runtime.listTasks({ sessionId, ...(options.archived ? { archived: true } : {}) });
    if (options.json) printJson(tasks);
    else if (tasks.length === 0) out('no tasks');
    else for (const task of tasks) out(taskLine(task));
    return EXIT.ok;
  });
}

export async function showTask(sessionId: string, taskId: string, options: TaskOptions): Promise<number> {
  return withRuntime(await openForSessions(options, false), async (runtime) => {
    const task = await taskOf(runtime, sessionId, taskId);
    if (!task) throw notFound('task', taskId);
    if (options.json) {
      printJson(task);
      return EXIT.ok;
    }
    out(taskLine(task));
    if (task.objective) out(`  objective: ${task.objective}`);
    if (task.assignee) out(`  assignee: ${JSON.stringify(task.assignee)}`);
    if (task.threadId) out(`  thread: ${task.threadId}`);
    for (const a of task.acceptance ?? []) out(`  acceptance: ${String(a.criterion ?? JSON.stringify(a))}`);
    if (task.progress) out(`  progress: ${JSON.stringify(task.progress)}`);
    for (const r of task.relationships ?? []) out(`  ${r.kind} → ${r.targetId}${r.status ? ` (${r.status})` : ''}`);
    for (const a of task.attempts ?? []) {
      out(
        `  attempt ${a.attemptCount ?? '?'}: ${a.status} (run ${a.runId})${a.lastError ? ` ${a.lastError.code}: ${a.lastError.message}` : ''}`,
      );
    }
    return EXIT.ok;
  });
}

function taskLine(task: Task): string {
  const edges = (task.relationships ?? []).filter((r) => r.kind !== 'parent').length;
  const status = task.archivedFrom ? `${task.status} (ended ${task.archivedFrom})` : task.status;
  return `${task.taskId}  ${status}  ${task.taskKind ?? ''}  ${task.title ?? task.objective ?? ''}${task.attempts?.length ? `  attempts ${task.attempts.length}` : ''}${edges ? `  edges ${edges}` : ''}`;
}
