import { threadUnchanged } from '../facts/queue.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { threadView } from '../read-models/project.js';
import { isTerminalTaskStatus } from '../read-models/task.js';
import type { CommandContext } from './command-context.js';
import { graphTurn } from './graph-turn.js';
import { cancelOwnTask, retryOwnTask } from './task-lifecycle.js';
import { type InterruptResult, interruptTurn } from './turns.js';

/** The commands about any task, the runtime's own included: cancel a running one, retry a failed one. */

export interface CancelTaskInput {
  sessionId: string;
  taskId: string;
  reason?: string;
}

export interface RetryTaskInput {
  sessionId: string;
  taskId: string;
}

/**
 * Cancel a task: a task made with create_task ends cancelled (its running turn interrupted, a turn not yet started
 * withdrawn); the runtime's own is the active graph of a turn (interrupt it) or a delegation (interrupt the child).
 */
export async function cancelTask(ctx: CommandContext, input: CancelTaskInput): Promise<InterruptResult> {
  const models = await ctx.log.allReadModels(input.sessionId);
  const task = models.tasks.get(input.taskId);
  if (!task) throw notFound('task', input.taskId);
  if (isTerminalTaskStatus(task.status)) {
    throw new OarRuntimeError('task_not_active', `task "${input.taskId}" already ended (${task.status})`);
  }
  if (task.taskKind === 'task') return cancelOwnTask(ctx, input);
  if (!task.threadId) throw notFound('task', input.taskId);
  return interruptTurn(ctx, {
    sessionId: input.sessionId,
    threadId: task.threadId,
    reason: input.reason ?? 'task cancelled',
  });
}

/** A retry's new attempt: its run, its turn (none for an external task's), its number and where it stands. */
export interface RetryTaskResult {
  runId: string;
  turnId?: string;
  attempt: number;
  status: 'running' | 'queued' | 'blocked';
}

/**
 * Retry a failed, cancelled or lost task. A task made with create_task starts a new attempt (task-lifecycle.ts). An
 * action-graph task's new attempt (new run id) re-runs the actions that did not complete, keeps the failed attempt
 * on record, and starts a turn so the model sees the new results.
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
  if (!['failed', 'cancelled', 'lost'].includes(task.status)) {
    throw new OarRuntimeError(
      'task_not_retryable',
      `only failed, cancelled or lost tasks are retried (this one is ${task.status})`,
    );
  }
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
