import type { OarError } from '@oar/protocol';
import { delegationResult } from '../facts/delegation-result.js';
import { endFailedTurn, endTurn, isDelegatedTurn, turnIds } from '../facts/turn-end.js';
import type { EventDraft } from '../log/draft.js';
import type { ThreadView, TurnState } from '../read-models/thread-state.js';
import type { Engine } from '../scheduler/engine.js';
import { atTurnEnd } from './turn-hooks.js';

/**
 * How the loop ends a turn: `completeTurn` with an answer, `failTurn` with an error (or cancelled by an interrupt);
 * the facts are written by facts/turn-end.ts, then the binding's turn-end hooks run.
 */

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

export async function failTurn(
  engine: Pick<Engine, 'append' | 'wake' | 'loadThread' | 'loadTasks' | 'loadJob' | 'revealed'> &
    Partial<Pick<Engine, 'binding' | 'workspaceRoot'>>,
  thread: ThreadView,
  turn: TurnState,
  error: OarError,
  status: 'failed' | 'cancelled' = 'failed',
): Promise<void> {
  if (!(await endFailedTurn(engine, thread, turn, error, status))) return;
  await atTurnEnd(engine, thread, turn, { outcome: status === 'cancelled' ? 'cancelled' : 'failed', error });
}
