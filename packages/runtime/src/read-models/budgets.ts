import { BUDGET_DIMENSIONS, type BudgetLimits, type Budgets } from '../config/budgets.js';
import type { LimitOverrides } from './session.js';

/** A session's budgets as they stand: the binding's, with its recorded `limit.changed` facts applied. */

export const DEFAULT_LOW_AT = 0.8;
export type BudgetScope = 'turn' | 'session';

export interface EffectiveBudgets {
  turn: BudgetLimits;
  session: BudgetLimits;
  onExceeded: 'wait' | 'fail';
  lowAt: number;
}

/** The binding's budgets with the session's recorded limit changes applied (a `null` limit is unbounded). */
export function effectiveBudgets(bound: Budgets | undefined, overrides: LimitOverrides | undefined): EffectiveBudgets {
  const scope = (name: BudgetScope): BudgetLimits => {
    const merged: Record<string, number> = {};
    for (const dimension of BUDGET_DIMENSIONS) {
      const changed = overrides?.[name]?.[dimension];
      const value = changed === undefined ? bound?.[name]?.[dimension] : changed;
      if (typeof value === 'number') merged[dimension] = value;
    }
    return merged as BudgetLimits;
  };
  return {
    turn: scope('turn'),
    session: scope('session'),
    onExceeded: overrides?.onExceeded ?? bound?.onExceeded ?? 'wait',
    lowAt: overrides?.lowAt ?? bound?.lowAt ?? DEFAULT_LOW_AT,
  };
}

/** Whether any limit is set at all (no budgets: no check, no extra reads). */
export function hasBudgets(budgets: EffectiveBudgets): boolean {
  return Object.keys(budgets.turn).length > 0 || Object.keys(budgets.session).length > 0;
}
