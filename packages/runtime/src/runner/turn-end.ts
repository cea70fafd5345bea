import type { ActionResult, OarError } from '@oar/protocol';
import type { Engine } from '../engine.js';
import type { AppendGuard, EventDraft } from '../log/event-log.js';
import { atTurnEnd } from '../policy/hooks/turn-hooks.js';
import {
  isTerminalActionStatus,
  isTerminalRunStatus,
  type ThreadView,
  type TurnState,
} from '../read-models/thread-state.js';
import { delegationResult, delegationStructured } from './delegation-result.js';
import { bothGuards, DelegationEndedError, delegationStillOpen, ThreadChangedError, turnStillActive } from './queue.js';

/**
 * How a turn ends: `completeTurn` with an answer, `failTurn` with an error (or cancelled by an interrupt). The loop,
 * the worker, the control plane (an interrupt) and the runner host end turns the same way, so it is one module of its
 * own, below all of them.
 */

export function turnIds(thread: ThreadView, turn: TurnState) {
  return { threadId: thread.threadId, turnId: turn.turnId };
}

/** The turn ends with an answer: for a child thread the parent's delegation ends with it. */
export async function completeTurn(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  payload: { outcome: string; answer?: string; extra?: Record<string, unknown> },
): Promise<void> {
  const drafts: EventDraft[] = [
    {
      type: 'turn.completed',
      ...turnIds(thread, turn),
      status: 'completed',
      payload: {
        outcome: payload.outcome,
        ...(payload.answer !== undefined ? { answer: payload.answer, summary: payload.answer.slice(0, 200) } : {}),
        ...(payload.extra ?? {}),
      },
    },
    { type: 'thread.updated', threadId: thread.threadId, status: 'idle', payload: { status: 'idle' } },
  ];
  const answer = payload.answer ?? '';
  // A delegated turn's answer is its parent action's output: stored and shaped like any (delegation-result.ts).
  const result = isDelegatedTurn(thread, turn) ? await delegationResult(engine, thread, answer) : undefined;
  await endTurn(engine, thread, turn, [...drafts, ...(result?.drafts ?? [])], {
    answer,
    ...(result ? { observation: result.observation } : {}),
  });
  await atTurnEnd(engine, thread, turn, { outcome: 'completed', answer });
}

/** A child thread's first turn is the one its delegation submitted; later turns are its own. */
function isDelegatedTurn(thread: ThreadView, turn: TurnState): boolean {
  return thread.parent !== undefined && thread.turns[0]?.turnId === turn.turnId;
}

export async function failTurn(
  engine: Pick<Engine, 'append' | 'wake' | 'loadThread' | 'revealed'>,
  thread: ThreadView,
  turn: TurnState,
  error: OarError,
  status: 'failed' | 'cancelled' = 'failed',
): Promise<void> {
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
        status === 'cancelled'
          ? { type: 'task.cancelled', ...ids, payload: { reason: error.message, requestedBy: 'interrupt' } }
          : { type: 'task.failed', ...ids, payload: { error } },
      );
    }
  }
  drafts.push(
    { type: 'turn.failed', ...turnIds(thread, turn), status, payload: { error } },
    { type: 'thread.updated', threadId: thread.threadId, status: 'idle', payload: { status: 'idle' } },
  );
  try {
    await endTurn(engine, thread, turn, drafts, { error }, turnStillActive(thread, turn.turnId));
  } catch (error) {
    // Someone else (the driver, another interrupt) ended this turn first: nothing left to record.
    if (error instanceof ThreadChangedError) return;
    throw error;
  }
  await atTurnEnd(engine, thread, turn, { outcome: status === 'cancelled' ? 'cancelled' : 'failed', error });
}

/**
 * Record a turn's end; a child thread's delegated turn also ends the parent's delegation. Whether the parent's
 * action still waits is read first and re-checked when writing: an interrupt of the parent may end that action in
 * between, and then the child's result must not be written to it (a second ending), so the end is written again
 * without it.
 */
async function endTurn(
  engine: Pick<Engine, 'append' | 'wake' | 'loadThread' | 'revealed'>,
  thread: ThreadView,
  turn: TurnState,
  drafts: EventDraft[],
  end: DelegatedEnd,
  guard?: AppendGuard,
): Promise<void> {
  // The turn's unredacted observations are of no use past it: they leave memory with it (runner/revealed.ts).
  engine.revealed?.clear();
  for (let attempt = 1; ; attempt++) {
    const waits = attempt === 1 && (await parentWaits(engine, thread));
    const ended = delegationEnd(thread, turn, end, waits);
    const parentGuard = waits && thread.parent ? delegationStillOpen(thread.sessionId, thread.parent) : undefined;
    const both = bothGuards(guard, parentGuard);
    try {
      await engine.append(thread.sessionId, [...drafts, ...ended], both ? { guard: both } : {});
    } catch (error) {
      if (error instanceof DelegationEndedError && attempt === 1) continue;
      throw error;
    }
    if (thread.parent && ended.some((e) => e.type.startsWith('subagent.')))
      engine.wake(thread.sessionId, thread.parent.threadId);
    return;
  }
}

/**
 * Events that end a delegation on the parent thread when the child thread's delegated turn ends. That turn is the
 * child's first (the delegation submits it with the thread); turns submitted to the child thread later are its own
 * and end nothing on the parent — the delegation already ended, and its parent turn may be long over.
 */
/** How a delegated turn ended: its answer (with the observation made of it, when the worker made one) or error. */
type DelegatedEnd = { answer?: string; error?: OarError; observation?: ActionResult };

function delegationEnd(thread: ThreadView, turn: TurnState, end: DelegatedEnd, parentWaits: boolean): EventDraft[] {
  const parent = thread.parent;
  if (!parent || !isDelegatedTurn(thread, turn)) return [];
  const ids = { threadId: parent.threadId, turnId: parent.turnId, runId: parent.runId };
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
          payload: { error: end.error, graphActionId: parent.actionId, observation },
        }
      : {
          type: 'subagent.completed',
          ...ids,
          subagentId: parent.subagentId,
          payload: { summary: (end.answer ?? '').slice(0, 500), graphActionId: parent.actionId, observation },
        },
  ];
  // The delegation task ends with the child's turn either way; the parent's action only while it still waits (an
  // interrupted parent already ended it, and a second ending would contradict the record).
  return [
    ...(parentWaits ? delegation : []),
    end.error
      ? {
          type: 'task.failed',
          threadId: thread.threadId,
          taskId: parent.delegationTaskId,
          payload: { error: end.error },
        }
      : {
          type: 'task.completed',
          threadId: thread.threadId,
          taskId: parent.delegationTaskId,
          payload: { summary: (end.answer ?? '').slice(0, 500) },
        },
  ];
}

/** Whether the parent's delegating action is still open (the child's result is still its answer). */
async function parentWaits(engine: Pick<Engine, 'loadThread'>, thread: ThreadView): Promise<boolean> {
  const parent = thread.parent;
  if (!parent) return false;
  const view = await engine.loadThread(thread.sessionId, parent.threadId);
  const status = view.runs.get(parent.runId)?.actions[parent.actionId]?.status;
  return status !== undefined && !isTerminalActionStatus(status);
}

/**
 * One model step, in three phases with typed hand-offs: prepare (budget, model, catalog, context, and the facts
 * recorded before the call) → call (the model call and its model.completed / model.failed) → resolve (parse the
 * output, then apply the declaration, or retry correctively, fall back or fail). A phase that ends the step —
 * the turn failed, or the work was interrupted — returns undefined and the next phase does not run.
 */
