import { type OarError, oarError } from '@oar/protocol';
import { BUDGET_DIMENSIONS, type BudgetDimension } from '../config/budgets.js';
import { costOf, type ModelPrice, priceOf } from '../config/prices.js';
import type { EventDraft } from '../log/draft.js';
import type { BudgetScope, EffectiveBudgets } from '../read-models/budgets.js';
import type { SessionState } from '../read-models/session.js';
import type { TurnState } from '../read-models/thread-state.js';

/**
 * Budgets per turn and per session (docs/models.md "Budgets"): what the binding allows, as changed since by
 * `limit.changed`; what was spent (from the read models: the turn's and the session's usage, cost, calls, time);
 * and the check made before every model call. A call that would exceed a limit is not made: `quota.blocked`, then
 * the thread waits in `waiting_resource` or the turn fails with `budget_exceeded`. `quota.low` is recorded once
 * per limit when the spend reaches its low fraction.
 */

export type Spend = Record<BudgetDimension, number>;

const round6 = (n: number) => Math.round(n * 1e6) / 1e6;

/** What the turn spent so far (`now` for its wall time). */
export function turnSpend(turn: TurnState, now: number): Spend {
  const started = turn.startedAt ? Date.parse(turn.startedAt) : now;
  return {
    tokens: turn.spend?.tokens ?? 0,
    costUsd: round6(turn.spend?.costUsd ?? 0),
    modelCalls: turn.spend?.modelCalls ?? 0,
    wallTimeMs: Math.max(0, now - started),
  };
}

/** What the session spent so far: every thread's calls, and the time of its turns (the running ones until now). */
export function sessionSpend(session: SessionState | undefined, now: number): Spend {
  const running = Object.values(session?.budget?.runningTurns ?? {}).reduce(
    (sum, startedAt) => sum + Math.max(0, now - Date.parse(startedAt)),
    0,
  );
  return {
    tokens: session?.usage.totalTokens ?? 0,
    costUsd: round6(session?.cost?.amount ?? 0),
    modelCalls: session?.budget?.modelCalls ?? 0,
    wallTimeMs: (session?.budget?.turnTimeMs ?? 0) + running,
  };
}

/** A limit the next call would exceed. */
export interface Exceeded {
  scope: BudgetScope;
  dimension: BudgetDimension;
  limit: number;
  spent: number;
  /** What the call would add (its estimate; wall time adds nothing: it is exceeded once it is used up). */
  requested: number;
  projected: number;
  /** Identifies this block: the same limit and spend, seen again, is the same wait. */
  key: string;
}

/** A limit whose low fraction the spend has reached, not yet recorded. */
export interface Low {
  scope: BudgetScope;
  dimension: BudgetDimension;
  limit: number;
  spent: number;
  key: string;
}

export interface BudgetCheck {
  exceeded?: Exceeded;
  low: Low[];
}

/** The key that makes `quota.low` a once-per-limit fact: the scope, the dimension and the limit's value. */
export const lowKey = (scope: BudgetScope, dimension: BudgetDimension, limit: number) =>
  `${scope}:${dimension}:${limit}`;

/**
 * Check the next call: `request` is its estimate (tokens of its prompt, the estimated cost of them). `recorded`
 * are the `quota.low` keys already recorded for the turn and the session.
 */
export function checkBudgets(
  budgets: EffectiveBudgets,
  spend: { turn: Spend; session: Spend },
  request: { tokens: number; costUsd: number },
  recorded: { turn: readonly string[]; session: readonly string[] },
): BudgetCheck {
  const low: Low[] = [];
  let exceeded: Exceeded | undefined;
  for (const scope of ['turn', 'session'] as const) {
    for (const dimension of BUDGET_DIMENSIONS) {
      const limit = budgets[scope][dimension];
      if (limit === undefined) continue;
      const spent = spend[scope][dimension];
      const requested =
        dimension === 'tokens'
          ? request.tokens
          : dimension === 'costUsd'
            ? request.costUsd
            : dimension === 'modelCalls'
              ? 1
              : 0;
      const projected = dimension === 'costUsd' ? round6(spent + requested) : spent + requested;
      const over = dimension === 'wallTimeMs' ? spent >= limit : projected > limit;
      if (over && !exceeded) {
        exceeded = {
          scope,
          dimension,
          limit,
          spent,
          requested,
          projected,
          key: `${scope}:${dimension}:${limit}:${dimension === 'wallTimeMs' ? 'elapsed' : spent}`,
        };
      }
      const key = lowKey(scope, dimension, limit);
      if (spent >= limit * budgets.lowAt && !recorded[scope].includes(key)) {
        low.push({ scope, dimension, limit, spent, key });
      }
    }
  }
  return { ...(exceeded ? { exceeded } : {}), low };
}

/**
 * Check a model call about to be made, whoever makes it (the protocol loop's budget gate, a runner's proxied call):
 * the turn's and the session's recorded spend, and the call's estimate — its prompt tokens and what they cost.
 */
export function checkModelCall(
  budgets: EffectiveBudgets,
  turn: TurnState,
  session: SessionState | undefined,
  model: { provider: string; modelId: string; price?: ModelPrice },
  inputTokens: number,
  now = Date.now(),
): { spend: { turn: Spend; session: Spend }; check: BudgetCheck } {
  const spend = { turn: turnSpend(turn, now), session: sessionSpend(session, now) };
  const price = priceOf(model);
  const request = { tokens: inputTokens, costUsd: price ? costOf(price, { inputTokens, outputTokens: 0 }) : 0 };
  const check = checkBudgets(budgets, spend, request, {
    turn: turn.quotaLow ?? [],
    session: session?.budget?.quotaLow ?? [],
  });
  return { spend, check };
}

/** The limit state events and read models carry: the limits, the spend, the policy. */
export function limitState(budgets: EffectiveBudgets, spend: { turn: Spend; session: Spend }) {
  return {
    turn: { limits: budgets.turn, spent: spend.turn },
    session: { limits: budgets.session, spent: spend.session },
    onExceeded: budgets.onExceeded,
    lowAt: budgets.lowAt,
  };
}

const UNITS: Record<BudgetDimension, string> = {
  tokens: 'tokens',
  costUsd: 'USD',
  modelCalls: 'model calls',
  wallTimeMs: 'ms of wall time',
};

function describeExceeded(e: Exceeded): string {
  const what = `the ${e.scope} budget of ${e.limit} ${UNITS[e.dimension]}`;
  if (e.dimension === 'wallTimeMs') return `${what} is used up (${e.spent} ms)`;
  return `the next model call would exceed ${what} (spent ${e.spent}, the call needs about ${e.requested})`;
}

type TurnIds = { threadId: string; turnId: string };

export function quotaLowFacts(
  ids: TurnIds,
  budgets: EffectiveBudgets,
  spend: { turn: Spend; session: Spend },
  low: readonly Low[],
): EventDraft[] {
  const state = limitState(budgets, spend);
  return low.map((l) => ({
    type: 'quota.low' as const,
    ...ids,
    status: 'running',
    limitState: state,
    payload: {
      scope: l.scope,
      dimension: l.dimension,
      limit: l.limit,
      spent: l.spent,
      remaining: Math.max(0, round6(l.limit - l.spent)),
      lowAt: budgets.lowAt,
      key: l.key,
      ...(l.dimension === 'costUsd' ? { currency: 'USD', approximate: true } : {}),
    },
  }));
}

export function quotaBlockedFact(
  ids: TurnIds,
  budgets: EffectiveBudgets,
  spend: { turn: Spend; session: Spend },
  exceeded: Exceeded,
  model: { modelId: string; provider: string },
): EventDraft {
  const waiting = budgets.onExceeded === 'wait';
  return {
    type: 'quota.blocked',
    ...ids,
    status: waiting ? 'waiting_resource' : 'failed',
    statusReason: 'quota',
    limitState: limitState(budgets, spend),
    payload: {
      scope: exceeded.scope,
      dimension: exceeded.dimension,
      limit: exceeded.limit,
      spent: exceeded.spent,
      requested: exceeded.requested,
      projected: exceeded.projected,
      policy: budgets.onExceeded,
      modelId: model.modelId,
      provider: model.provider,
      key: exceeded.key,
      message: describeExceeded(exceeded),
      ...(exceeded.dimension === 'costUsd' ? { currency: 'USD', approximate: true } : {}),
      ...(waiting ? { resume: 'raise the limit: oar limit / runtime.changeLimits (limit.changed)' } : {}),
    },
  };
}

/** The error of a turn a budget stopped (`onExceeded: "fail"`): what was exceeded and the spend. */
export function budgetExceeded(exceeded: Exceeded, spend: { turn: Spend; session: Spend }): OarError {
  return oarError('budget_exceeded', describeExceeded(exceeded), {
    details: {
      scope: exceeded.scope,
      dimension: exceeded.dimension,
      limit: exceeded.limit,
      spent: exceeded.spent,
      requested: exceeded.requested,
      projected: exceeded.projected,
      spend,
    },
  });
}
