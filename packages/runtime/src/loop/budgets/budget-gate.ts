import type { OarError } from '@oar/protocol';
import { budgetExceeded, checkModelCall, quotaBlockedFact, quotaLowFacts } from '../../facts/budgets.js';
import type { EventDraft } from '../../log/draft.js';
import type { ModelHandle } from '../../models/model-call.js';
import { type EffectiveBudgets, effectiveBudgets, hasBudgets } from '../../read-models/budgets.js';
import type { SessionState } from '../../read-models/session.js';
import type { ThreadView, TurnState } from '../../read-models/thread-state.js';
import type { Engine } from '../../scheduler/engine.js';

/**
 * The budget check before a model call (docs/models.md "Budgets"). `ok`: the call may be made (any `quota.low`
 * reached is recorded with it); `waiting`: a limit stops it and the thread waits in `waiting_resource`
 * (`quota.blocked` recorded, or already recorded for this same limit and spend: nothing new); `failed`: a limit
 * stops it and the policy fails the turn with `error` (`quota.blocked` recorded). Nothing to check, nothing read.
 */
export type BudgetGate = { status: 'ok' } | { status: 'waiting' } | { status: 'failed'; error: OarError };

/**
 * The budgets that bind the session's next model call, and the session whose recorded spend they are checked
 * against; undefined when nothing binds it. Shared by the loop's gate and a runner's proxied call
 * (agent-runners/budget-check.ts).
 */
export async function bindingBudgets(
  engine: Pick<Engine, 'binding' | 'session' | 'append'>,
  sessionId: string,
): Promise<{ budgets: EffectiveBudgets; session: SessionState | undefined } | undefined> {
  let session = await engine.session(sessionId);
  const budgets = effectiveBudgets(engine.binding.budgets, session?.limits);
  if (!hasBudgets(budgets)) return undefined;
  if (Object.keys(budgets.session).length > 0) {
    // The session's spend is read from the store: what the driven thread staged (its last call) is committed first.
    await engine.append(sessionId, [], { durable: true });
    session = await engine.session(sessionId);
  }
  return { budgets, session };
}

export async function budgetGate(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  model: ModelHandle,
  inputTokenEstimate: number,
): Promise<BudgetGate> {
  const ids = { threadId: thread.threadId, turnId: turn.turnId };
  const bound = await bindingBudgets(engine, thread.sessionId);
  if (!bound) return endWait(engine, thread, ids);
  const { budgets, session } = bound;
  const current = thread.turns.find((t) => t.turnId === turn.turnId) ?? turn;
  const { spend, check } = checkModelCall(budgets, current, session, model, inputTokenEstimate);
  const lows = quotaLowFacts(ids, budgets, spend, check.low);
  const { exceeded } = check;
  if (!exceeded) {
    if (lows.length > 0) await engine.append(thread.sessionId, lows);
    return endWait(engine, thread, ids);
  }
  const waiting = budgets.onExceeded === 'wait';
  const wait = thread.resourceWait;
  // Driven again with nothing changed (a resume, a restart): the same wait, recorded once.
  if (waiting && wait?.kind === 'quota' && wait.turnId === turn.turnId && wait.key === exceeded.key) {
    return { status: 'waiting' };
  }
  const blocked = quotaBlockedFact(ids, budgets, spend, exceeded, model);
  await engine.append(thread.sessionId, [...lows, blocked], { durable: true });
  return waiting ? { status: 'waiting' } : { status: 'failed', error: budgetExceeded(exceeded, spend) };
}

/** A thread still marked waiting for a budget that no longer stops it: the wait ends (recorded). */
async function endWait(
  engine: Engine,
  thread: ThreadView,
  ids: { threadId: string; turnId: string },
): Promise<BudgetGate> {
  if (thread.resourceWait?.kind === 'quota') {
    const ended: EventDraft = {
      type: 'thread.updated',
      ...ids,
      status: 'running',
      payload: { changed: ['resourceWait'], resourceWait: null },
    };
    await engine.append(thread.sessionId, [ended]);
  }
  return { status: 'ok' };
}
