import {
  type Action,
  type ActionResult,
  oarError,
  RECONCILE_ACTION_TYPE,
  RECONCILE_DECISIONS,
  type ReconcileDecision,
  type UnreconciledAction,
} from '@oar/protocol';
import { OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import { loadReadModels } from '../log/read-model-rows.js';
import { type ActionIds, actionStatusChange } from './action.js';

/**
 * The facts of reconciling a lost action (docs/reliability.md "Reconciling a lost action"): the question recovery
 * asks when a call that may have acted on the world was left in flight, and the answer — a person's
 * (`respond_action`), or the tool's own `reconcile` step's. The answer is an `action.resolved` of that question; an
 * answer that settles what happened also ends the action `completed` or `failed`, with the evidence in its
 * observation, so the model's history says what the world says.
 */

/** What was lost: the call, as recovery knows it. */
export interface LostCall {
  ids: ActionIds;
  action: Pick<Action, 'id' | 'title'>;
  toolCallId: string;
  toolName: string;
  idempotencyKey?: string;
}

/** The question recovery records beside a lost call's `tool.failed`: did it take effect? */
export function reconcileRequest(lost: LostCall): EventDraft {
  const subject = lost.action.title ? `"${lost.action.title}" (${lost.toolName})` : `"${lost.toolName}"`;
  return {
    type: 'action.required',
    ...lost.ids,
    actionId: newId('act'),
    toolCallId: lost.toolCallId,
    payload: {
      actionType: RECONCILE_ACTION_TYPE,
      decisionKind: 'happened_or_not',
      prompt: `The runtime stopped while ${subject} was running. Did it take effect?`,
      decisions: [...RECONCILE_DECISIONS],
      toolName: lost.toolName,
      graphActionId: lost.action.id,
      toolCallId: lost.toolCallId,
      ...(lost.idempotencyKey ? { idempotencyKey: lost.idempotencyKey } : {}),
    },
  };
}

export interface ReconcileAnswer {
  decision: ReconcileDecision;
  /** Who decided: `user` (or a named actor) for a person, `tool:<name>` for the tool's reconcile step. */
  resolvedBy: string;
  reason?: string;
  /** What the answer rests on (the service's reply to a GET by key, a person's note): recorded, and shown. */
  evidence?: Record<string, unknown>;
}

/**
 * The answer's facts: the question resolved and, for happened / not_happened, the action ended with it. `retry` ends
 * nothing: the action stays lost on record and its re-run is a new call (the control plane starts it).
 */
export function reconcileAnswer(
  request: UnreconciledAction,
  ids: ActionIds,
  action: Pick<Action, 'id' | 'title'>,
  answer: ReconcileAnswer,
): EventDraft[] {
  const resolved: EventDraft = {
    type: 'action.resolved',
    ...ids,
    actionId: request.actionId,
    toolCallId: request.toolCallId,
    payload: {
      decision: answer.decision,
      actionType: RECONCILE_ACTION_TYPE,
      resolvedBy: answer.resolvedBy,
      graphActionId: request.graphActionId,
      toolCallId: request.toolCallId,
      ...(answer.reason ? { reason: answer.reason } : {}),
      ...(answer.evidence ? { evidence: answer.evidence } : {}),
    },
  };
  if (answer.decision === 'retry') return [resolved];
  const happened = answer.decision === 'happened';
  const because = `${answer.resolvedBy}${answer.reason ? `: ${answer.reason}` : ''}`;
  const observation: ActionResult = {
    id: action.id,
    ...(action.title ? { title: action.title } : {}),
    status: happened ? 'completed' : 'failed',
    artifacts: [],
    summary: happened
      ? `Reconciled after a crash: it took effect (${because}).`
      : `Reconciled after a crash: it did not take effect (${because}).`,
    ...(answer.evidence ? { structured: { evidence: answer.evidence } } : {}),
    ...(happened
      ? {}
      : { error: oarError('not_happened', `"${request.toolName ?? action.id}" did not take effect (${because})`) }),
  };
  const status = happened ? 'completed' : 'failed';
  const reconciled = { actionId: request.actionId, decision: answer.decision, resolvedBy: answer.resolvedBy };
  return [resolved, actionStatusChange(ids, action, status, { observation, reconciled }, status)];
}

/** Answer at most once: a concurrent answer (a person's, or the tool's reconcile step's) may have committed since. */
export function stillUnreconciled(sessionId: string, threadId: string, actionId: string): AppendGuard {
  return async (tx) => {
    const current = await loadReadModels(tx, sessionId, [{ kind: 'thread', key: threadId }]);
    if (!current.threads.get(threadId)?.unreconciled?.some((u) => u.actionId === actionId)) {
      throw new OarRuntimeError('decision_already_resolved', `lost action "${actionId}" was answered meanwhile`, {
        details: { actionId },
      });
    }
  };
}
