import { BUDGET_DIMENSIONS, type BudgetDimension } from '../config/budgets.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import type { EventDraft } from '../log/draft.js';
import { loadReadModels } from '../log/read-model-rows.js';
import { effectiveBudgets } from '../read-models/budgets.js';
import type { ReadModels } from '../read-models/project.js';
import { threadViews } from '../read-models/project.js';
import { bindingOf, type LimitOverrides } from '../read-models/session.js';
import type { CommandContext } from './command-context.js';

/**
 * The `change_limits` command (docs/models.md "Budgets"): validate a change of a session's budget limits, and the
 * facts that record it — one `limit.changed` with the limits before and after, and for every thread that waits for
 * a budget (`waiting_resource`, kind quota) a `thread.updated` that ends the wait, so its worker checks again with
 * the new limits and continues the same turn (or waits again, recorded, when still over).
 */

/** A limit change: a positive number sets a limit, `null` removes it (unbounded); left out, unchanged. */
export type LimitChange = Partial<Record<BudgetDimension, number | null>>;

export interface ChangeLimitsInput {
  sessionId: string;
  turn?: LimitChange;
  session?: LimitChange;
  onExceeded?: 'wait' | 'fail';
  lowAt?: number;
  /** Why (recorded). */
  reason?: string;
  /** Who changed them (recorded; default `control_plane`). */
  changedBy?: string;
}

export interface ChangeLimitsResult {
  /** The session's limit changes now in force (over its binding's budgets). */
  limits: LimitOverrides;
  changes: { scope: string; dimension: string; from: number | string | null; to: number | string | null }[];
  /** Threads whose budget wait ended (their workers check again). */
  resumed: string[];
}

function invalid(message: string, details: Record<string, unknown>): OarRuntimeError {
  return new OarRuntimeError('invalid_limit', message, { details });
}

/** Check a change's shape and values: every limit a positive number (or null), a known dimension, a real fraction. */
export function validateLimitChange(input: ChangeLimitsInput): void {
  let any = false;
  for (const scope of ['turn', 'session'] as const) {
    const change = input[scope];
    if (change === undefined) continue;
    if (change === null || typeof change !== 'object' || Array.isArray(change)) {
      throw invalid(`"${scope}" must be an object of limits`, { scope });
    }
    for (const [dimension, value] of Object.entries(change)) {
      if (!(BUDGET_DIMENSIONS as readonly string[]).includes(dimension)) {
        throw invalid(`unknown limit "${scope}.${dimension}"; limits are ${BUDGET_DIMENSIONS.join(', ')}`, {
          scope,
          dimension,
          known: BUDGET_DIMENSIONS,
        });
      }
      if (value === null) {
        any = true;
        continue;
      }
      const whole = dimension !== 'costUsd';
      if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || (whole && !Number.isInteger(value))) {
        throw invalid(
          `limit "${scope}.${dimension}" must be a positive ${whole ? 'whole ' : ''}number (or null to remove it), not ${JSON.stringify(value)}`,
          { scope, dimension, value: value as unknown },
        );
      }
      any = true;
    }
  }
  if (input.onExceeded !== undefined) {
    if (input.onExceeded !== 'wait' && input.onExceeded !== 'fail') {
      throw invalid('"onExceeded" is "wait" or "fail"', { onExceeded: input.onExceeded as unknown });
    }
    any = true;
  }
  if (input.lowAt !== undefined) {
    if (typeof input.lowAt !== 'number' || !(input.lowAt > 0 && input.lowAt < 1)) {
      throw invalid('"lowAt" is a fraction between 0 and 1 (exclusive)', { lowAt: input.lowAt as unknown });
    }
    any = true;
  }
  if (!any) throw invalid('no limit to change: give a turn or session limit, onExceeded or lowAt', {});
}

/** The facts of a limit change against the session's read models (validated input). */
export function limitChangeFacts(
  models: ReadModels,
  input: ChangeLimitsInput,
): { drafts: EventDraft[]; result: ChangeLimitsResult } {
  const session = models.session;
  if (!session) throw notFound('session', input.sessionId);
  const bound = bindingOf(session)?.budgets;
  const previous = session.limits ?? {};
  const next: LimitOverrides = {
    ...previous,
    ...(input.turn ? { turn: { ...previous.turn, ...input.turn } } : {}),
    ...(input.session ? { session: { ...previous.session, ...input.session } } : {}),
    ...(input.onExceeded ? { onExceeded: input.onExceeded } : {}),
    ...(input.lowAt !== undefined ? { lowAt: input.lowAt } : {}),
  };
  const before = effectiveBudgets(bound, previous);
  const after = effectiveBudgets(bound, next);
  const changes: ChangeLimitsResult['changes'] = [];
  for (const scope of ['turn', 'session'] as const) {
    for (const dimension of BUDGET_DIMENSIONS) {
      const from = before[scope][dimension] ?? null;
      const to = after[scope][dimension] ?? null;
      if (from !== to) changes.push({ scope, dimension, from, to });
    }
  }
  if (before.onExceeded !== after.onExceeded) {
    changes.push({ scope: 'policy', dimension: 'onExceeded', from: before.onExceeded, to: after.onExceeded });
  }
  if (before.lowAt !== after.lowAt) {
    changes.push({ scope: 'policy', dimension: 'lowAt', from: before.lowAt, to: after.lowAt });
  }
  const waiting = threadViews(models).filter(
    (t) => t.status === 'waiting_resource' && t.resourceWait?.kind === 'quota',
  );
  const limits = { turn: after.turn, session: after.session, onExceeded: after.onExceeded, lowAt: after.lowAt };
  const drafts: EventDraft[] = [
    {
      type: 'limit.changed',
      limitEvent: { kind: 'budget', changes },
      limitState: limits,
      payload: {
        limits: next,
        effective: limits,
        changes,
        changedBy: input.changedBy ?? 'control_plane',
        ...(input.reason ? { reason: input.reason } : {}),
        ...(waiting.length > 0 ? { resumes: waiting.map((t) => t.threadId) } : {}),
      },
    },
    ...waiting.map(
      (thread): EventDraft => ({
        type: 'thread.updated',
        threadId: thread.threadId,
        ...(thread.activeTurnId ? { turnId: thread.activeTurnId } : {}),
        payload: { changed: ['limits'], resourceWait: null, resumedBy: 'limit.changed' },
      }),
    ),
  ];
  return { drafts, result: { limits: next, changes, resumed: waiting.map((t) => t.threadId) } };
}

/**
 * Change a session's budget limits (`limit.changed`, docs/models.md "Budgets"): in force at once, for the running
 * turn too. A thread waiting for a budget is woken (its worker checks again and continues the same turn). Two
 * changes computed from the same limits must not drop one another's: the second is refused and retried.
 */
export async function changeLimits(ctx: CommandContext, input: ChangeLimitsInput): Promise<ChangeLimitsResult> {
  validateLimitChange(input);
  for (let attempt = 1; ; attempt++) {
    const models = await ctx.log.allReadModels(input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    const { drafts, result } = limitChangeFacts(models, input);
    const seen = JSON.stringify(models.session.limits ?? null);
    try {
      await ctx.append(input.sessionId, drafts, {
        guard: async (tx) => {
          const now = (await loadReadModels(tx, input.sessionId, [])).session?.limits;
          if (JSON.stringify(now ?? null) !== seen) {
            throw new OarRuntimeError('limits_changed', 'the limits changed while the change was prepared; retry', {
              retryable: true,
            });
          }
        },
      });
      return result;
    } catch (error) {
      if (error instanceof OarRuntimeError && error.code === 'limits_changed' && attempt < 3) continue;
      throw error;
    }
  }
}
