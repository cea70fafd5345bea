import { z } from 'zod';

/** What a budget bounds (docs/models.md "Budgets"): tokens, US dollars, model calls, wall time. */
export const BUDGET_DIMENSIONS = ['tokens', 'costUsd', 'modelCalls', 'wallTimeMs'] as const;

export type BudgetDimension = (typeof BUDGET_DIMENSIONS)[number];

/** The limits of one scope (a turn, or the whole session); a dimension left out is unbounded. */
export const BudgetLimitsSchema = z.strictObject({
  /** Tokens (input + output) the model calls may use. */
  tokens: z.number().int().positive().optional(),
  /** US dollars the priced model calls may cost (approximate: config/prices.ts). */
  costUsd: z.number().positive().optional(),
  /** Model calls (attempts, retries included). */
  modelCalls: z.number().int().positive().optional(),
  /** Wall time in milliseconds: of the turn since it started, or of all the session's turns together. */
  wallTimeMs: z.number().int().positive().optional(),
});

export type BudgetLimits = z.infer<typeof BudgetLimitsSchema>;

/**
 * Spending limits per turn and per session. Before a model call that would exceed one the call is not made
 * (`quota.blocked`); then the thread waits in `waiting_resource` until a limit is raised (`limit.changed`), or the
 * turn fails with `budget_exceeded` (`onExceeded: "fail"`). `quota.low` is recorded once when the spend reaches
 * `lowAt` of a limit.
 */
export const BudgetsSchema = z.strictObject({
  turn: BudgetLimitsSchema.optional(),
  session: BudgetLimitsSchema.optional(),
  /** What a call that would exceed a limit does: wait for a higher limit (default) or fail the turn. */
  onExceeded: z.enum(['wait', 'fail']).optional(),
  /** The fraction of a limit at which `quota.low` is recorded (default 0.8). */
  lowAt: z.number().gt(0).lt(1).optional(),
});

export type Budgets = z.infer<typeof BudgetsSchema>;
