import { oarError, type Task } from '@oar/protocol';
import { bothGuards, retryOnThreadChange, threadUnchanged, withdrawTurns } from '../facts/queue.js';
import {
  attemptEnded,
  DEPENDENCY,
  type TaskOutcome,
  taskAttemptStarted,
  taskEnd,
  tasksUnchanged,
} from '../facts/task-end.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { EventDraft } from '../log/draft.js';
import { bindingOf } from '../read-models/session.js';
import { isTerminalTaskStatus, RETRYABLE_TASK_STATUSES } from '../read-models/task.js';
import type { ThreadView, TurnState } from '../read-models/thread-state.js';
import type { CommandContext } from './command-context.js';
import { activeTask, notStartable, retryOnTaskChange, type TaskAssignee } from './task-graph.js';
import { interruptTurn, submitTurnWith } from './turns.js';

/**
 * The commands that move a task made with create_task through its life (docs/tasks.md): `start_task`,
 * `append_task_progress`, `pause_task`, `resume_task`, `complete_task`, `fail_task`, and the retry of such a task
 * (its cancel, for every kind of task, is in tasks.ts). An agent's task runs as turns of its thread, each turn one
 * attempt; an external one is done outside the runtime and reported through these commands.
 */

export interface StartTaskInput {
  sessionId: string;
  taskId: string;
  /** The thread its agent works in (default: the task's, else a new thread of its own). */
  threadId?: string;
}

export interface StartTaskResult {
  sessionId: string;
  taskId: string;
  /** `queued`: its turn waits for its thread; `blocked`: for its dependencies; `running`: an external task's. */
  status: 'queued' | 'blocked' | 'running';
  attempt: number;
  runId: string;
  threadId?: string;
  turnId?: string;
  /** The dependencies not yet completed. */
  waitsFor: string[];
}

export interface TaskProgressInput {
  sessionId: string;
  taskId: string;
  message?: string;
  percent?: number;
  completed?: number;
  total?: number;
  refs?: string[];
}

export interface PauseTaskInput {
  sessionId: string;
  taskId: string;
  reason?: string;
  /** `children`: the task's descendants (its `child` edges, transitively) are paused and resumed with it. */
  propagate?: 'none' | 'children';
}

export interface CompleteTaskInput {
  sessionId: string;
  taskId: string;
  summary?: string;
}

export interface FailTaskInput {
  sessionId: string;
  taskId: string;
  error: { code?: string; message: string };
}

/** A task whose work may be started: never started, ready after its dependencies, or ended and tried again. */
const STARTABLE = new Set(['accepted', 'queued']);
const RETRYABLE: ReadonlySet<string> = new Set(RETRYABLE_TASK_STATUSES);

export function startTask(ctx: CommandContext, input: StartTaskInput): Promise<StartTaskResult> {
  return startAttempt(ctx, input, STARTABLE);
}

/** Retry a task made with create_task that failed, timed out, was cancelled or lost: a new attempt, old ones kept. */
export function retryOwnTask(ctx: CommandContext, input: { sessionId: string; taskId: string }) {
  return startAttempt(ctx, input, RETRYABLE);
}

async function startAttempt(
  ctx: CommandContext,
  input: StartTaskInput,
  from: ReadonlySet<string>,
): Promise<StartTaskResult> {
  return retryOnTaskChange(async () => {
    const task = (await ctx.tasks(input.sessionId, [input.taskId])).get(input.taskId);
    if (!task) throw notFound('task', input.taskId);
    if (task.taskKind !== 'task') throw notStartable(task, 'started');
    const external = assigneeOf(task).kind === 'external';
    // An agent's task queued is one whose turn waits for its thread: started already.
    if (!from.has(task.status) || (task.status === 'queued' && !external)) throw notFrom(task, from);
    const attempt = (task.attempts?.length ?? 0) + 1;
    const runId = newId('run');
    const open = (task.relationships ?? []).filter((r) => r.kind === DEPENDENCY && r.status !== 'completed');
    const waitsFor = open.map((r) => r.targetId);
    // Says which ended without completing (those wait for a retry of theirs, or an unlink).
    const why = open.map((r) =>
      r.status && r.status !== 'pending' ? `${r.targetId} (ended ${r.status})` : r.targetId,
    );
    const retrying: EventDraft[] = RETRYABLE.has(task.status)
      ? [{ type: 'task.retrying', taskId: task.taskId, payload: { nextAttempt: attempt, reason: 'retry_task' } }]
      : [];
    const blocked = (ids: { threadId?: string; turnId?: string }): EventDraft => ({
      type: 'task.blocked',
      ...ids,
      taskId: task.taskId,
      payload: { blockedBy: 'dependency', dependencies: waitsFor, reason: `waiting for ${why.join(', ')}` },
    });
    const result = { sessionId: input.sessionId, taskId: task.taskId, attempt, runId, waitsFor };
    const guard = tasksUnchanged(input.sessionId, [task]);
    if (external) {
      // Nobody here does the work: the attempt starts now, or the task waits for its dependencies first.
      const drafts =
        waitsFor.length > 0 ? [blocked({})] : taskAttemptStarted({}, { taskId: task.taskId, runId, attempt });
      await ctx.append(input.sessionId, [...retrying, ...drafts], { guard });
      return { ...result, status: waitsFor.length > 0 ? ('blocked' as const) : ('running' as const) };
    }
    const turnTask = { taskId: task.taskId, runId, attempt, acceptance: (task.acceptance?.length ?? 0) > 0, waitsFor };
    const agent = agentOf(task);
    const threadId = input.threadId ?? task.threadId;
    const facts = (ids: { threadId: string; turnId: string }, status: 'accepted' | 'queued'): EventDraft[] => [
      ...retrying,
      ...(threadId === undefined
        ? [{ type: 'task.delegated' as const, taskId: task.taskId, threadId: ids.threadId, payload: { agent } }]
        : []),
      waitsFor.length > 0
        ? blocked(ids)
        : {
            type: 'task.queued',
            ...ids,
            taskId: task.taskId,
            payload: {
              attempt,
              reason: status === 'queued' ? 'waiting for its thread' : 'its turn starts on its thread',
            },
          },
    ];
    const text = taskPrompt(task, attempt);
    if (threadId === undefined) {
      // A thread of its own: nothing else can be in it, so no queue to read.
      const ids = { threadId: newId('thr'), turnId: newId('turn') };
      await ctx.append(
        input.sessionId,
        [
          {
            type: 'thread.started',
            threadId: ids.threadId,
            payload: { agent, title: task.title ?? task.objective?.slice(0, 120) ?? task.taskId, taskId: task.taskId },
          },
          {
            type: 'turn.submitted',
            ...ids,
            status: 'accepted',
            payload: { status: 'accepted', input: text, source: 'task', task: turnTask },
          },
          ...facts(ids, 'accepted'),
        ],
        { guard },
      );
      return { ...result, ...ids, status: waitsFor.length > 0 ? ('blocked' as const) : ('queued' as const) };
    }
    const thread = await ctx.log.thread(input.sessionId, threadId);
    const main = bindingOf(await ctx.session(input.sessionId))?.mainAgent.name ?? 'main';
    const named = (name: string) => (name === 'main' ? main : name);
    if (named(thread.agent) !== named(agent)) {
      throw new OarRuntimeError(
        'invalid_input',
        `thread "${threadId}" runs agent "${thread.agent}"; task "${task.taskId}" is assigned to "${agent}"`,
        { details: { threadId, agent: thread.agent, assignee: agent } },
      );
    }
    const submitted = await submitTurnWith(
      ctx,
      { sessionId: input.sessionId, threadId, input: text, source: 'task', ifBusy: 'enqueue' },
      { task: turnTask, facts, guard },
    );
    return {
      ...result,
      threadId,
      turnId: submitted.turnId,
      status: waitsFor.length > 0 ? ('blocked' as const) : ('queued' as const),
    };
  });
}

/** Why a task cannot start (or be retried) now, with the command that would move it. */
function notFrom(task: Task, from: ReadonlySet<string>): OarRuntimeError {
  const details = { details: { taskId: task.taskId, status: task.status } };
  if (task.status === 'paused') {
    return new OarRuntimeError('task_paused', `task "${task.taskId}" is paused: resume_task lets it go on`, details);
  }
  if (task.status === 'cancelling') return cancelling(task);
  if (from === RETRYABLE) return notRetryable(task);
  if (RETRYABLE.has(task.status)) {
    return new OarRuntimeError(
      'task_not_startable',
      `task "${task.taskId}" ended ${task.status}: retry_task starts a new attempt`,
      details,
    );
  }
  return new OarRuntimeError('task_already_started', `task "${task.taskId}" has started (${task.status})`, details);
}

/** Only a task that ended without its work done is retried. */
export function notRetryable(task: Task): OarRuntimeError {
  return new OarRuntimeError(
    'task_not_retryable',
    `only failed, timed out, cancelled or lost tasks are retried (this one is ${task.status})`,
    { details: { taskId: task.taskId, status: task.status } },
  );
}

/** A task asked to cancel is neither paused nor started again: its work is stopping, then it ends cancelled. */
function cancelling(task: Task): OarRuntimeError {
  return new OarRuntimeError(
    'task_cancelling',
    `task "${task.taskId}" is being cancelled: its work is stopping and it ends cancelled (retry_task then starts it again)`,
    { details: { taskId: task.taskId, status: task.status } },
  );
}

/** Report progress of a task that has not ended: the latest report is the task's `progress`. */
export async function appendTaskProgress(ctx: CommandContext, input: TaskProgressInput): Promise<{ taskId: string }> {
  const task = await activeTask(ctx, input.sessionId, input.taskId);
  if (task.taskKind !== 'task') throw notStartable(task, 'reported on');
  const { sessionId: _s, taskId: _t, ...progress } = input;
  if (Object.keys(progress).length === 0) {
    throw new OarRuntimeError('invalid_input', 'append_task_progress needs a message, a percent, counts or refs');
  }
  // Guarded: a report never lands on a task that ended meanwhile.
  await ctx.append(input.sessionId, [{ type: 'task.progress', taskId: task.taskId, ...ids(task), payload: progress }], {
    guard: tasksUnchanged(input.sessionId, [task]),
  });
  return { taskId: task.taskId };
}

/**
 * Pause a task (and, with `propagate: "children"`, its descendants): a running agent's turn is interrupted and the
 * attempt ends; a turn not yet started is held on its thread; nothing starts until `resume_task`.
 */
export async function pauseTask(ctx: CommandContext, input: PauseTaskInput): Promise<{ paused: string[] }> {
  const reason = input.reason ?? 'paused';
  const targets = await retryOnTaskChange(async () => {
    const root = await activeTask(ctx, input.sessionId, input.taskId);
    if (root.taskKind !== 'task') throw notStartable(root, 'paused');
    if (root.status === 'paused') return [];
    if (root.status === 'cancelling') throw cancelling(root);
    const below = input.propagate === 'children' ? await descendants(ctx, input.sessionId, root) : [];
    const targets = [root, ...below].filter(
      (t) =>
        t.taskKind === 'task' && t.status !== 'paused' && t.status !== 'cancelling' && !isTerminalTaskStatus(t.status),
    );
    await ctx.append(
      input.sessionId,
      targets.map((task) => ({
        type: 'task.paused' as const,
        taskId: task.taskId,
        ...ids(task),
        payload: { pausedFrom: task.status, reason, ...(task !== root ? { propagatedFrom: root.taskId } : {}) },
      })),
      { guard: tasksUnchanged(input.sessionId, targets) },
    );
    return targets;
  });
  // The turn of each task that runs now (the pause held any other): only that one is stopped.
  const running: RunningTurn[] = [];
  for (const task of targets) {
    const turn = await runningTurn(ctx, input.sessionId, task);
    if (turn) running.push(turn);
  }
  await stopTurns(ctx, input.sessionId, running, reason);
  return { paused: targets.map((t) => t.taskId) };
}

/**
 * Resume a paused task (and the descendants its pause paused): back to the status it had; an agent's task that was
 * running starts a new attempt (its turn was stopped by the pause), a held turn may start again.
 */
export async function resumeTask(ctx: CommandContext, input: PauseTaskInput): Promise<{ resumed: string[] }> {
  const { targets, again } = await retryOnTaskChange(() => recordResume(ctx, input));
  // A stopped attempt starts again (a failure here leaves the task ready: start_task starts it).
  for (const task of again) await startTask(ctx, { sessionId: input.sessionId, taskId: task.taskId });
  return { resumed: targets.map((t) => t.taskId) };
}

/** The resume's facts: each task back where it was; the agents' tasks whose running turn the pause stopped. */
async function recordResume(ctx: CommandContext, input: PauseTaskInput): Promise<{ targets: Task[]; again: Task[] }> {
  const root = (await ctx.tasks(input.sessionId, [input.taskId])).get(input.taskId);
  if (!root) throw notFound('task', input.taskId);
  if (root.status !== 'paused') {
    throw new OarRuntimeError('task_not_paused', `task "${root.taskId}" is ${root.status}, not paused`, {
      details: { taskId: root.taskId, status: root.status },
    });
  }
  // Its descendants only with `propagate: children`, and only those its own pause paused (not one paused alone).
  const below = input.propagate === 'children' ? await descendants(ctx, input.sessionId, root) : [];
  const targets = [root, ...below.filter((t) => t.status === 'paused' && t.pausedWith === root.taskId)];
  for (const task of targets) {
    if (await runningTurn(ctx, input.sessionId, task)) {
      throw new OarRuntimeError(
        'task_still_stopping',
        `task "${task.taskId}" is paused and its turn is still stopping: resume it once the turn ended`,
        { retryable: true, details: { taskId: task.taskId } },
      );
    }
  }
  const again: Task[] = [];
  const drafts: EventDraft[] = targets.map((task) => {
    const from = task.pausedFrom ?? 'accepted';
    // Only a running turn was stopped by the pause (a task waiting for acceptance has done its work).
    const wasRunning = from === 'running';
    const external = assigneeOf(task).kind === 'external';
    if (wasRunning && !external) again.push(task);
    return {
      type: 'task.resumed' as const,
      taskId: task.taskId,
      ...ids(task),
      payload: {
        // A stopped agent's attempt is over: the task is ready for the new attempt started below.
        status: wasRunning && !external ? 'accepted' : from,
        reason: input.reason ?? 'resumed',
        ...(task !== root ? { propagatedFrom: root.taskId } : {}),
      },
    };
  });
  await ctx.append(input.sessionId, drafts, { guard: tasksUnchanged(input.sessionId, targets) });
  return { targets, again };
}

/** The owner says the task is done (its acceptance checked, or external work finished). */
export async function completeTask(ctx: CommandContext, input: CompleteTaskInput) {
  return endOwnTask(ctx, input.sessionId, input.taskId, { status: 'completed', summary: input.summary ?? 'completed' });
}

/** The owner says the task failed: a running agent's turn is interrupted, the task ends failed. */
export async function failTask(ctx: CommandContext, input: FailTaskInput) {
  const error = oarError(input.error.code ?? 'task_failed', input.error.message);
  return endOwnTask(ctx, input.sessionId, input.taskId, { status: 'failed', error });
}

/**
 * End a task by its owner's word (`complete_task`, `fail_task`), in one append: the open attempt ends with it, the
 * tasks waiting for it are released when it completed, and a turn of it not yet started is withdrawn (so no worker
 * starts it after the end). A running one is interrupted after; its end then records only the attempt's.
 */
async function endOwnTask(
  ctx: CommandContext,
  sessionId: string,
  taskId: string,
  outcome: TaskOutcome,
): Promise<{ taskId: string; status: string; interrupted: boolean }> {
  const running = await retryOnTaskChange(() =>
    retryOnThreadChange(async () => {
      const task = await activeTask(ctx, sessionId, taskId);
      if (task.taskKind !== 'task') throw notStartable(task, 'ended');
      const thread = task.threadId ? await ctx.log.thread(sessionId, task.threadId) : undefined;
      const running = thread ? runningTurnOf(thread, task) : undefined;
      const open = task.attempts?.at(-1);
      const attemptEnd =
        open?.status === 'running' && !running ? [attemptEnded({ taskId, runId: open.runId }, outcome)] : [];
      const end = await taskEnd(taskLoader(ctx), sessionId, task, outcome);
      const withdrawn = thread ? withdrawal(thread, [task], outcome) : [];
      const guard = bothGuards(end.guard, withdrawn.length > 0 && thread ? threadUnchanged(thread) : undefined);
      await ctx.append(sessionId, [...attemptEnd, ...end.drafts, ...withdrawn], guard ? { guard } : {});
      return running;
    }),
  );
  await stopTurns(ctx, sessionId, running ? [running] : [], `task ${outcome.status}`);
  return { taskId, status: outcome.status, interrupted: running !== undefined };
}

/** The tasks' turns on `thread` that have not started (held or queued) end with them, as cancelled. */
export function withdrawal(thread: ThreadView, tasks: readonly Task[], outcome: TaskOutcome): EventDraft[] {
  const error =
    outcome.status === 'completed' ? oarError('interrupted', 'its task ended before this turn started') : outcome.error;
  const ids = new Set(tasks.map((t) => t.taskId));
  return withdrawTurns(
    thread,
    thread.turns.filter((t) => t.task !== undefined && ids.has(t.task.taskId)),
    error,
  );
}

export const taskLoader = (ctx: CommandContext) => ({
  loadTasks: (sessionId: string, taskIds: readonly string[]) => ctx.tasks(sessionId, taskIds),
});

/** A turn doing a task's work now, on its thread. */
export interface RunningTurn {
  threadId: string;
  turn: TurnState;
}

/** The task's turn running now, if one is. */
async function runningTurn(ctx: CommandContext, sessionId: string, task: Task): Promise<RunningTurn | undefined> {
  return task.threadId ? runningTurnOf(await ctx.log.thread(sessionId, task.threadId), task) : undefined;
}

/**
 * The turn doing a task's work now, if one is: a client's task's turn (start_task); for the runtime's own, the turn
 * it was created in (a delegation's or runner run's turn) or the one its action graph runs in (a retry's too).
 */
export function runningTurnOf(thread: ThreadView, task: Task): RunningTurn | undefined {
  const turn = thread.turns.find((t) => t.turnId === thread.activeTurnId);
  if (!turn) return undefined;
  const own =
    task.taskKind !== 'task' &&
    (turn.turnId === task.turnId || turn.runIds.some((runId) => thread.runs.get(runId)?.taskId === task.taskId));
  return turn.task?.taskId === task.taskId || own ? { threadId: thread.threadId, turn } : undefined;
}

/**
 * Interrupt the turns doing tasks' work (pause, cancel, an owner's end): each once — only that turn, never another
 * of its thread — as a durable request the worker holding the thread acts on (the turns' ends then record what
 * stopped). `waitMs: 0`: the command returns at once.
 */
export async function stopTurns(
  ctx: CommandContext,
  sessionId: string,
  running: readonly RunningTurn[],
  reason: string,
): Promise<void> {
  const seen = new Set<string>();
  for (const { threadId, turn } of running) {
    if (seen.has(turn.turnId)) continue;
    seen.add(turn.turnId);
    await interruptTurn(ctx, { sessionId, threadId, turnId: turn.turnId, reason, waitMs: 0 });
  }
}

/** The task's descendants along its `child` edges (each once). */
export async function descendants(ctx: CommandContext, sessionId: string, root: Task): Promise<Task[]> {
  const found = new Map<string, Task>();
  let frontier = childIds(root);
  while (frontier.length > 0) {
    const tasks = await ctx.tasks(sessionId, frontier);
    frontier = [];
    for (const task of tasks.values()) {
      if (found.has(task.taskId) || task.taskId === root.taskId) continue;
      found.set(task.taskId, task);
      frontier.push(...childIds(task));
    }
  }
  return [...found.values()];
}

const childIds = (task: Task) => (task.relationships ?? []).filter((r) => r.kind === 'child').map((r) => r.targetId);

export function ids(task: Task): { threadId?: string } {
  return task.threadId ? { threadId: task.threadId } : {};
}

function assigneeOf(task: Task): TaskAssignee {
  const assignee = task.assignee as TaskAssignee | undefined;
  return assignee?.kind === 'external'
    ? assignee
    : { kind: 'agent', ...(assignee?.agent ? { agent: assignee.agent } : {}) };
}

/** The agent that runs the task: the one named, else the session's main agent (whose threads' agent is `main`). */
function agentOf(task: Task): string {
  const assignee = assigneeOf(task);
  return (assignee.kind === 'agent' && assignee.agent) || 'main';
}

/** What the agent is asked: the task as defined when this attempt starts. */
function taskPrompt(task: Task, attempt: number): string {
  const lines = [`Task ${task.taskId}${task.title ? `: ${task.title}` : ''}`, '', `Objective: ${task.objective ?? ''}`];
  if (task.scope) lines.push('', `Scope: ${JSON.stringify(task.scope)}`);
  if (task.constraints) lines.push('', `Constraints: ${JSON.stringify(task.constraints)}`);
  if (task.acceptance?.length) {
    lines.push(
      '',
      'Acceptance criteria:',
      ...task.acceptance.map((a) => `- ${String(a.criterion ?? JSON.stringify(a))}`),
    );
  }
  if (attempt > 1) lines.push('', `This is attempt ${attempt}; the earlier attempts are in this thread.`);
  return lines.join('\n');
}
