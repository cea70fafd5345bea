import type { ActionResult, OarError } from '@oar/protocol';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import {
  isTerminalActionStatus,
  isTerminalRunStatus,
  type ThreadState,
  type ThreadView,
  type TurnState,
} from '../read-models/thread-state.js';
import { delegationStructured } from './delegation-result.js';
import { JobChangedError, jobItemEnd, jobRaceBackoff, MAX_JOB_RETRIES } from './job-items.js';
import { bothGuards, DelegationEndedError, delegationStillOpen, ThreadChangedError, turnStillActive } from './queue.js';
import {
  failureOutcome,
  MAX_TASK_RETRIES,
  TaskChangedError,
  type TaskOutcome,
  taskEnded,
  taskTurnEnd,
} from './task-end.js';
import type { FactWriter } from './writer.js';

/**
 * The facts of a turn's end, and their writing: a failed or cancelled turn's runs and tasks, the turn, the thread
 * idle again, and — for a child thread's delegated turn — the end of the parent's delegation. The loop (which also
 * runs the turn-end hooks, loop/turn-end.ts), the worker, the runner host and the control plane (cancelling an
 * interrupted turn no worker holds) all end turns through here.
 */

export function turnIds(thread: ThreadView, turn: TurnState) {
  return { threadId: thread.threadId, turnId: turn.turnId };
}

/** A child thread's first turn is the one its delegation submitted; later turns are its own. */
export function isDelegatedTurn(thread: ThreadState, turn: TurnState): boolean {
  return thread.parent !== undefined && thread.turns[0]?.turnId === turn.turnId;
}

/** Record a failed (or cancelled) turn; false when someone else ended it first. No hooks run here. */
export async function endFailedTurn(
  engine: FactWriter,
  thread: ThreadView,
  turn: TurnState,
  error: OarError,
  status: 'failed' | 'cancelled' = 'failed',
): Promise<boolean> {
  const drafts: EventDraft[] = [];
  for (const runId of turn.runIds) {
    const run = thread.runs.get(runId);
    if (run && !isTerminalRunStatus(run.status)) {
      const ids = { threadId: thread.threadId, turnId: turn.turnId, taskId: run.taskId, runId };
      drafts.push(
        {
          type: 'run.status',
          ...ids,
          status: 'cancelled',
          payload: { phase: 'cancelled', title: 'cancelled', reason: error.message },
        },
        // A graph's task ends with its turn: cancelled by the interrupt, timed out by a time budget, else failed.
        taskEnded(ids, failureOutcome(error, status === 'cancelled'), 'interrupt'),
      );
    }
  }
  drafts.push(
    { type: 'turn.failed', ...turnIds(thread, turn), status, payload: { error } },
    { type: 'thread.updated', threadId: thread.threadId, status: 'idle', payload: { status: 'idle' } },
  );
  try {
    await endTurn(
      engine,
      thread,
      turn,
      drafts,
      { error, cancelled: status === 'cancelled' },
      turnStillActive(thread, turn.turnId),
    );
  } catch (error) {
    // Someone else (the driver, another interrupt) ended this turn first: nothing left to record.
    if (error instanceof ThreadChangedError) return false;
    throw error;
  }
  return true;
}

/**
 * Record a turn's end; a child thread's delegated turn also ends the parent's delegation. Whether the parent's
 * action still waits is read first and re-checked when writing: an interrupt of the parent may end that action in
 * between, and then the child's result must not be written to it (a second ending), so the end is written again
 * without it.
 */
export async function endTurn(
  engine: FactWriter,
  thread: ThreadView,
  turn: TurnState,
  drafts: EventDraft[],
  end: DelegatedEnd,
  guard?: AppendGuard,
): Promise<void> {
  // The turn's unredacted observations are of no use past it: they leave memory with it (policy/revealed.ts).
  engine.revealed?.clear();
  let waits = await parentWaits(engine, thread);
  for (let attempt = 1; ; attempt++) {
    const ended = [...delegationEnd(thread, turn, end, waits), ...subagentTurnEnded(thread, turn, end)];
    const parentGuard = waits && thread.parent ? delegationStillOpen(thread.sessionId, thread.parent) : undefined;
    // A task's turn (start_task) ends its attempt, and the task with it (facts/task-end.ts).
    const task = turn.task ? await taskTurnEnd(engine, thread, turn, taskOutcome(end)) : undefined;
    // A job item's turn ends its attempt, and moves its job along (facts/job-items.ts).
    const job = await jobItemEnd(engine, thread, turn, end);
    const guards = bothGuards(bothGuards(bothGuards(guard, parentGuard), task?.guard), job?.guard);
    try {
      await engine.append(
        thread.sessionId,
        [...drafts, ...ended, ...(task?.drafts ?? []), ...(job?.drafts ?? [])],
        guards ? { guard: guards } : {},
      );
    } catch (error) {
      // The parent's action ended meanwhile (an interrupt): the end is written again without the child's result.
      if (error instanceof DelegationEndedError && waits) {
        waits = false;
        continue;
      }
      // The task or one waiting for it changed meanwhile (a dependency linked, a pause): computed again.
      if (error instanceof TaskChangedError && attempt < MAX_TASK_RETRIES) continue;
      // Another item of the job ended (or a command changed it) meanwhile: its facts are computed again.
      if (error instanceof JobChangedError && attempt < MAX_JOB_RETRIES) {
        await jobRaceBackoff(attempt);
        continue;
      }
      throw error;
    }
    const parentThread = reportsTo(thread)?.threadId;
    if (parentThread && ended.some((e) => e.type.startsWith('subagent.'))) engine.wake(thread.sessionId, parentThread);
    // A task this one's end released may wait on another thread (its held turn): that thread has work now. (A
    // worker does not hear of its own drivers' writes; they wake what they affect.)
    for (const threadId of otherThreads([...(task?.drafts ?? []), ...(job?.drafts ?? [])], thread.threadId)) {
      engine.wake(thread.sessionId, threadId);
    }
    return;
  }
}

/**
 * How a turn ended: its answer (with the observation made of it, when the worker made one) or error, and whether
 * an interrupt cancelled it — what its delegation (a child's first turn) and its task (start_task) end with.
 */
type DelegatedEnd = { answer?: string; error?: OarError; observation?: ActionResult; cancelled?: boolean };

/** The threads other than `own` that some of `drafts` are about. */
function otherThreads(drafts: readonly EventDraft[], own: string): Set<string> {
  const threads = new Set<string>();
  for (const draft of drafts) if (draft.threadId !== undefined && draft.threadId !== own) threads.add(draft.threadId);
  return threads;
}

function taskOutcome(end: DelegatedEnd): TaskOutcome {
  if (!end.error) return { status: 'completed', summary: (end.answer ?? '').slice(0, 500) };
  return failureOutcome(end.error, end.cancelled);
}

/**
 * Events that end a delegation on the parent thread when the child thread's delegated turn ends. That turn is the
 * child's first (the delegation submits it with the thread); turns submitted to the child thread later are its own
 * and end no delegation — it already ended, and its parent turn may be long over: they report to the parent as
 * the sub-agent's own (`subagentTurnEnded`).
 */
function delegationEnd(thread: ThreadView, turn: TurnState, end: DelegatedEnd, parentWaits: boolean): EventDraft[] {
  const parent = thread.parent;
  if (!parent || !isDelegatedTurn(thread, turn)) return [];
  const ids = { threadId: parent.threadId, turnId: parent.turnId, runId: parent.runId };
  // The child named on the parent's facts, as a spawned sub-agent's are: no reader has to go through the sub-agent id.
  const child = { childThreadId: thread.threadId, childTurnId: turn.turnId };
  // A failed tool worker still reports the calls it made: their results are in the record either way.
  const structured = delegationStructured(thread, end.error?.message ?? '');
  const observation: ActionResult = end.error
    ? { id: parent.actionId, status: 'failed', artifacts: [], error: end.error, ...(structured ? { structured } : {}) }
    : (end.observation ?? {
        id: parent.actionId,
        status: 'completed',
        artifacts: [],
        summary: end.answer ?? '',
        content: end.answer ?? '',
      });
  const delegation: EventDraft[] = [
    end.error
      ? {
          type: 'subagent.failed',
          ...ids,
          subagentId: parent.subagentId,
          payload: { error: end.error, graphActionId: parent.actionId, ...child, observation },
        }
      : {
          type: 'subagent.completed',
          ...ids,
          subagentId: parent.subagentId,
          payload: { summary: (end.answer ?? '').slice(0, 500), graphActionId: parent.actionId, ...child, observation },
        },
  ];
  // The delegation task ends with the child's turn either way — as that turn ended: completed, failed, timed out,
  // cancelled —; the parent's action only while it still waits (an interrupted parent already ended it, and a
  // second ending would contradict the record).
  return [
    ...(parentWaits ? delegation : []),
    taskEnded({ threadId: thread.threadId, taskId: parent.delegationTaskId }, taskOutcome(end), 'interrupt'),
  ];
}

/** Whether the parent's delegating action is still open (the child's result is still its answer). */
async function parentWaits(engine: Pick<FactWriter, 'loadThread'>, thread: ThreadView): Promise<boolean> {
  const parent = thread.parent;
  if (!parent) return false;
  const view = await engine.loadThread(thread.sessionId, parent.threadId);
  const status = view.runs.get(parent.runId)?.actions[parent.actionId]?.status;
  return status !== undefined && !isTerminalActionStatus(status);
}

/** The parent thread and sub-agent id a child thread reports to, if it is a sub-agent (delegated or spawned). */
export function reportsTo(thread: ThreadState): { threadId: string; subagentId: string } | undefined {
  return thread.parent ?? thread.spawnedBy;
}

/**
 * The end of a sub-agent's turn on its parent thread, for every turn but a delegation's first (whose end answers the
 * delegating action: `delegationEnd`). A spawned sub-agent's first turn ends it as a delegation's does
 * (`subagent.completed` / `.failed`, once per sub-agent); a later turn of any sub-agent — more input — is a
 * `subagent.status` of its own (`completed` / `failed`, with the turn), so a sub-agent's end is never recorded twice.
 */
export function subagentTurnEnded(
  thread: ThreadState,
  turn: TurnState,
  end: { answer?: string; error?: OarError },
): EventDraft[] {
  const parent = reportsTo(thread);
  if (!parent || isDelegatedTurn(thread, turn)) return [];
  const ids = { threadId: parent.threadId, subagentId: parent.subagentId };
  const child = { childThreadId: thread.threadId, childTurnId: turn.turnId };
  if (thread.spawnedBy && thread.turns[0]?.turnId === turn.turnId) {
    return [
      end.error
        ? { type: 'subagent.failed', ...ids, payload: { error: end.error, ...child } }
        : { type: 'subagent.completed', ...ids, payload: { summary: (end.answer ?? '').slice(0, 500), ...child } },
    ];
  }
  const detail = end.error ? `its turn failed: ${end.error.message}` : (end.answer ?? '').slice(0, 500);
  return [
    {
      type: 'subagent.status',
      ...ids,
      payload: { status: end.error ? 'failed' : 'completed', detail, ...child },
    },
  ];
}
