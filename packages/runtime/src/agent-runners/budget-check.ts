import { budgetExceeded, checkModelCall, quotaBlockedFact, quotaLowFacts } from '../facts/budgets.js';
import type { EventDraft } from '../log/draft.js';
import { bindingBudgets } from '../loop/budgets/budget-gate.js';
import type { ModelHandle } from '../models/model-call.js';
import { apiError, type RunSession } from './run-session.js';

/**
 * The session's budgets (docs/models.md "Budgets") before a runner's model call: the same check as the protocol
 * loop's, on the turn's and the session's recorded spend. A runner cannot wait inside a call for a higher limit,
 * so a call that would exceed one is refused (`rate_limited`, not retryable, `details.reason: budget_exceeded`)
 * with `quota.blocked` recorded, whatever `onExceeded` says; `quota.low` is recorded as for any call.
 */
export async function checkRunnerBudget(session: RunSession, model: ModelHandle, inputTokenEstimate: number) {
  const { engine } = session;
  const ids = { threadId: session.ids.threadId, turnId: session.ids.turnId };
  const bound = await bindingBudgets(engine, session.sessionId);
  if (!bound) return;
  const { budgets, session: state } = bound;
  const thread = await engine.loadThread(session.sessionId, session.ids.threadId);
  const turn = thread.turns.find((t) => t.turnId === session.ids.turnId);
  if (!turn) return;
  const { spend, check } = checkModelCall(budgets, turn, state, model, inputTokenEstimate);
  const facts: EventDraft[] = quotaLowFacts(ids, budgets, spend, check.low);
  if (!check.exceeded) {
    if (facts.length) await session.record(facts);
    return;
  }
  // Recorded as a refusal (policy fail), never as a wait: the runner goes on, and so does the thread.
  const blocked = quotaBlockedFact(ids, { ...budgets, onExceeded: 'fail' }, spend, check.exceeded, model);
  await session.record([...facts, blocked], true);
  const error = budgetExceeded(check.exceeded, spend);
  throw apiError('rate_limited', error.message, { reason: 'budget_exceeded', ...(error.details ?? {}) });
}
