import { oarError, type Task } from '@oar/protocol';
import { bothGuards, retryOnThreadChange, threadUnchanged } from '../facts/queue.js';
import { attemptEnded, taskEnd, tasksUnchanged } from '../facts/task-end.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import { threadView } from '../read-models/project.js';
import { isRetryableTaskStatus, isTerminalTaskStatus } from '../read-models/task.js';
import type { ThreadView } from '../read-models/thread-state.js';
import type { CommandContext } from './command-context.js';
import { graphTurn } from './graph-turn.js';
import { notActive, retryOnTaskChange } from './task-graph.js';
import {
  descendants,
  ids,
  notRetryable,
  type RunningTurn,
  retryOwnTask,
  runningTurnOf,
  stopTurns,
  taskLoader,
  withdrawal,
} from './task-lifecycle.js';

/** The commands about any task, the runtime's own included: cancel a running one, retry a failed one. */

export interface CancelTaskInput {
  sessionId: string;
  taskId: string;
  reason?: string;
  /** `children`: the task's open descendants (its `child` edges, transitively) are cancelled with it. */
  propagate?: 'none' | 'children';
}

export interface CancelTaskResult {
  taskId: string;
  /**
   * The task's status once the command returned: `cancelled` when nothing of it was running (or its interrupted
   * turn was ended here, no worker holding it); `cancelling` while its running work stops — it ends `cancelled` then.
   */
  status: Task['status'];
  /** Whether running work of it (or of a descendant it reached) was interrupted. */
  interrupted: boolean;
  /** Each task the cancel reached, the task first, with its status then. */
  tasks: { taskId: string; status: Task['status'] }[];
}

/**
 * Cancel a task (and, with `propagate: "children"`, its open descendants). A task with work running — its turn, the
 * turn its action graph runs in, a runner run, a delegated child — is asked first: `task.cancel_requested` (durable;
 * the task is `cancelling`), then that turn is interrupted, and the task ends `task.cancelled` when its work has
 * stopped (facts/task-end.ts, facts/turn-end.ts, the runner host). A task made with create_task with nothing running
 * ends `cancelled` at once, its turns not yet started withdrawn in the same write. Cancelling a task being cancelled
 * records nothing again and interrupts its work again (a worker that died before acting on it is replaced by this).
 */
export async function cancelTask(ctx: CommandContext, input: CancelTaskInput): Promise<CancelTaskResult> {
  const reason = input.reason ?? 'task cancelled';
  const { reached, running } = await retryOnTaskChange(() =>
    retryOnThreadChange(() => recordCancel(ctx, input, reason)),
  );
  await stopTurns(ctx, input.sessionId, running, reason);
  // What is true now: a turn no worker held was cancelled by the interrupt itself, its task with it.
  const now = await ctx.tasks(
    input.sessionId,
    reached.map((t) => t.taskId),
  );
  const tasks = reached.map((t) => ({ taskId: t.taskId, status: now.get(t.taskId)?.status ?? t.status }));
  return {
    taskId: input.taskId,
    status: tasks[0]?.status ?? 'cancelled',
    interrupted: running.length > 0,
    tasks,
  };
}

/**
 * The cancel's facts, in one append guarded by the tasks and threads they were computed from: whether a task's
 * work runs is read from its thread, so a turn ending in between makes the command read again.
 */
async function recordCancel(
  ctx: CommandContext,
  input: CancelTaskInput,
  reason: string,
): Promise<{ reached: Task[]; running: RunningTurn[] }> {
  const { sessionId } = input;
  const root = (await ctx.tasks(sessionId, [input.taskId])).get(input.taskId);
  if (!root) throw notFound('task', input.taskId);
  if (isTerminalTaskStatus(root.status)) throw notActive(root);
  const below = input.propagate === 'children' ? await descendants(ctx, sessionId, root) : [];
  const open = [root, ...below.filter((t) => !isTerminalTaskStatus(t.status))];
  const threads = new Map<string, ThreadView>();
  for (const threadId of new Set(open.flatMap((t) => (t.threadId ? [t.threadId] : [])))) {
    threads.set(threadId, await ctx.log.thread(sessionId, threadId));
  }
  const error = oarError('interrupted', reason);
  const drafts: EventDraft[] = [];
  const reached: Task[] = [];
  const running: RunningTurn[] = [];
  const withdrawn: Task[] = [];
  let guard: AppendGuard | undefined = tasksUnchanged(sessionId, open);
  for (const task of open) {
    const thread = task.threadId ? threads.get(task.threadId) : undefined;
    const work = thread ? runningTurnOf(thread, task) : undefined;
    const propagatedFrom = task === root ? undefined : root.taskId;
    if (work) running.push(work);
    if (task.taskKind === 'task') withdrawn.push(task);
    if (task.status === 'cancelling' && (work || task.taskKind !== 'task')) {
      // Asked already: nothing new to record; its work is interrupted again below. (A client's task asked to cancel
      // whose turn is gone without ending it — nothing is left to say it stopped — ends below.)
      reached.push(task);
      continue;
    }
    if (work) {
      drafts.push({
        type: 'task.cancel_requested',
        taskId: task.taskId,
        ...ids(task),
        payload: { reason, requestedBy: 'owner', ...(propagatedFrom ? { propagatedFrom } : {}) },
      });
    } else if (task.taskKind === 'task') {
      // Nothing of it runs: it ends now, an attempt still open (an external task's) with it.
      const attempt = task.attempts?.at(-1);
      if (attempt?.status === 'running') {
        drafts.push(attemptEnded({ taskId: task.taskId, runId: attempt.runId }, { status: 'cancelled', error }));
      }
      const end = await taskEnd(
        taskLoader(ctx),
        sessionId,
        task,
        { status: 'cancelled', error },
        {},
        'owner',
        propagatedFrom,
      );
      drafts.push(...end.drafts);
      guard = bothGuards(guard, end.guard);
    } else if (task === root) {
      throw notRunning(task);
    } else {
      // The runtime's own descendant with no work running ends with the turn it belongs to.
      continue;
    }
    reached.push(task);
  }
  // The client tasks' turns not yet started (held, queued) are withdrawn: no worker starts them after the cancel.
  for (const thread of threads.values()) {
    drafts.push(
      ...withdrawal(
        thread,
        withdrawn.filter((t) => t.threadId === thread.threadId),
        { status: 'cancelled', error },
      ),
    );
    guard = bothGuards(guard, threadUnchanged(thread));
  }
  if (drafts.length > 0) await ctx.append(sessionId, drafts, guard ? { guard } : {});
  return { reached, running };
}

/** The runtime's own task is cancelled through its running work; none runs now. */
function notRunning(task: Task): OarRuntimeError {
  return new OarRuntimeError(
    'task_not_running',
    `task "${task.taskId}" is the runtime's own (${task.taskKind ?? 'task'}) and none of its work runs now: it ends with the turn it belongs to`,
    { details: { taskId: task.taskId, taskKind: task.taskKind, status: task.status } },
  );
}

export interface RetryTaskInput {
  sessionId: string;
  taskId: string;
}

/** A retry's new attempt: its run, its turn (none for an external task's), its number and where it stands. */
export interface RetryTaskResult {
  runId: string;
  turnId?: string;
  attempt: number;
  status: 'running' | 'queued' | 'blocked';
}

/**
 * Retry a failed, timed out, cancelled or lost task. A task made with create_task starts a new attempt
 * (task-lifecycle.ts). An action-graph task's new attempt (new run id) re-runs the actions that did not complete,
 * keeps the failed attempt on record, and starts a turn so the model sees the new results.
 */
export async function retryTask(ctx: CommandContext, input: RetryTaskInput): Promise<RetryTaskResult> {
  const models = await ctx.log.allReadModels(input.sessionId);
  const task = models.tasks.get(input.taskId);
  if (task?.taskKind === 'task') return retryOwnTask(ctx, input);
  if (!task?.threadId) throw notFound('task', input.taskId);
  const thread = threadView(models, task.threadId);
  const lastRun = thread ? [...thread.runs.values()].filter((r) => r.taskId === input.taskId).at(-1) : undefined;
  if (!thread || !lastRun)
    throw new OarRuntimeError('task_not_retryable', `task "${input.taskId}" has no action graph to retry`);
  if (!isRetryableTaskStatus(task.status)) throw notRetryable(task);
  const retry = lastRun.order.filter((id) => lastRun.actions[id]?.status !== 'completed');
  const declaration = {
    ...lastRun.declaration,
    actions: lastRun.declaration.actions.filter((a) => retry.includes(a.id)),
  };
  const attempt = (task.attempts?.length ?? 1) + 1;
  const title = lastRun.declaration.title ?? task.title ?? 'retry';
  const turn = graphTurn(models, thread, {
    input: `Retry of task "${title}" (attempt ${attempt}).`,
    source: 'retry',
    taskId: input.taskId,
  });
  const ids = { threadId: thread.threadId, turnId: turn.turnId, taskId: input.taskId, runId: turn.runId };
  await ctx.append(
    input.sessionId,
    [
      ...turn.started,
      { type: 'task.retrying', ...ids, payload: { nextAttempt: attempt, reason: 'retry_task' } },
      { type: 'task.attempt.started', ...ids, payload: { attempt, status: 'running' } },
      turn.declared({ title, declaration, retryOf: lastRun.runId }),
    ],
    { guard: threadUnchanged(thread) },
  );
  return { runId: turn.runId, turnId: turn.turnId, attempt, status: 'running' };
}
