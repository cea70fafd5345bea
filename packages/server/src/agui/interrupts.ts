import type { Interrupt } from '@ag-ui/core';
import { ACTION_DECISIONS, type ActionDecision, APPROVAL_DECISIONS } from '@oar/protocol';
import { OarRuntimeError } from '@oar/runtime';
import type { ResumeEntryBody } from './input.js';

/**
 * OAR's pending decisions as AG-UI 1.0 interrupts, and AG-UI resume entries as OAR decisions.
 *
 * One interrupt per pending decision: its `id` is the decision's id (the `actionId` of its `action.required`
 * event), so a resume entry names the decision to answer. A tool approval is a `tool_call` interrupt bound to the
 * tool call of the graph action (`toolCallId` = `<runId>.<actionId>`, as announced by TOOL_CALL_START); an
 * ask-user question is `input_required`, a yes/no `confirm` is `confirmation`. The `responseSchema` describes the
 * resume payload: `{decision, reason?, text?}`.
 */

/** What the stream knows of a pending decision: its `action.required` facts. */
export interface PendingDecisionFacts {
  actionId: string;
  actionType: string;
  threadId: string;
  turnId?: string;
  runId?: string;
  graphActionId?: string;
  toolCallId?: string;
  toolName?: string;
  prompt?: string;
  decisionKind?: string;
  decisions?: string[];
  inputSchema?: Record<string, unknown>;
  expiresAt?: string;
  /** The sub-agent invocation whose thread asks (absent: the main thread). */
  subagentRunId?: string;
}

function reasonOf(facts: PendingDecisionFacts): string {
  if (facts.actionType === 'tool_approval') return 'tool_call';
  if (facts.actionType === 'user_input') return facts.decisionKind === 'confirm' ? 'confirmation' : 'input_required';
  return `oar:${facts.actionType}`;
}

/**
 * The decisions a request takes: a tool approval's offered ones (default the three approval answers); approve/deny for
 * a question; a lost action's happened / not_happened / retry (its `decisions`).
 */
export function offeredDecisions(facts: Pick<PendingDecisionFacts, 'actionType' | 'decisions'>): ActionDecision[] {
  // A question is answered (approve, with its text) or declined (deny); a session grant means nothing to it.
  if (facts.actionType === 'user_input') return ['approve', 'deny'];
  const offered = (facts.decisions ?? []).filter((d): d is ActionDecision =>
    (ACTION_DECISIONS as readonly string[]).includes(d),
  );
  return offered.length > 0 ? offered : [...APPROVAL_DECISIONS];
}

/** The JSON Schema of a resume payload answering this decision. */
export function responseSchemaOf(facts: PendingDecisionFacts): Record<string, unknown> {
  const question = facts.actionType === 'user_input';
  const answer = question ? (facts.inputSchema?.properties as Record<string, unknown> | undefined) : undefined;
  return {
    type: 'object',
    properties: {
      decision: {
        type: 'string',
        enum: offeredDecisions(facts),
        description: question ? 'approve answers the question; deny declines it' : 'the answer to the request',
      },
      reason: { type: 'string', description: 'why (recorded with the decision)' },
      ...(question ? { text: { type: 'string', description: 'the answer to the question' }, ...answer } : {}),
    },
    required: question && facts.decisionKind !== 'confirm' ? ['text'] : ['decision'],
  };
}

export function toInterrupt(facts: PendingDecisionFacts): Interrupt & { subagentRunId?: string } {
  const toolCallId =
    facts.toolCallId ?? (facts.runId && facts.graphActionId ? `${facts.runId}.${facts.graphActionId}` : undefined);
  return {
    id: facts.actionId,
    reason: reasonOf(facts),
    ...(facts.prompt ? { message: facts.prompt } : {}),
    ...(toolCallId ? { toolCallId } : {}),
    responseSchema: responseSchemaOf(facts),
    ...(facts.expiresAt ? { expiresAt: facts.expiresAt } : {}),
    metadata: {
      oar: {
        actionId: facts.actionId,
        actionType: facts.actionType,
        threadId: facts.threadId,
        ...(facts.turnId ? { turnId: facts.turnId } : {}),
        ...(facts.graphActionId ? { graphActionId: facts.graphActionId } : {}),
        ...(facts.toolName ? { toolName: facts.toolName } : {}),
        ...(facts.decisionKind ? { decisionKind: facts.decisionKind } : {}),
      },
    },
    ...(facts.subagentRunId !== undefined ? { subagentRunId: facts.subagentRunId } : {}),
  };
}

/** What `respondAction` is called with for one resume entry. */
export interface ResumeDecision {
  actionId: string;
  decision: ActionDecision;
  reason?: string;
  payload?: Record<string, unknown>;
}

/**
 * A resume entry as an OAR decision: `cancelled` is deny; `resolved` takes `payload.decision` (or AG-UI's
 * conventional `payload.approved` boolean), `payload.reason`, and `payload.text` for a question's answer (a
 * question answered with text alone is approved). Anything else is `invalid_decision`.
 */
export function resumeDecision(entry: ResumeEntryBody): ResumeDecision {
  const actionId = entry.interruptId;
  if (entry.status === 'cancelled') {
    return { actionId, decision: 'deny', reason: 'cancelled by the AG-UI client' };
  }
  const payload = entry.payload;
  const invalid = (message: string) =>
    new OarRuntimeError('invalid_decision', message, { details: { interruptId: actionId, payload: payload ?? null } });
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw invalid(
      `the resume payload of interrupt ${actionId} must be an object {"decision": ${ACTION_DECISIONS.map((d) => `"${d}"`).join('|')}, "reason"?, "text"?}`,
    );
  }
  const p = payload as Record<string, unknown>;
  const text = p.text;
  if (text !== undefined && typeof text !== 'string') throw invalid(`"text" of interrupt ${actionId} must be a string`);
  const reason = p.reason;
  if (reason !== undefined && typeof reason !== 'string') {
    throw invalid(`"reason" of interrupt ${actionId} must be a string`);
  }
  let decision: ActionDecision;
  if (p.decision !== undefined) {
    if (!(ACTION_DECISIONS as readonly unknown[]).includes(p.decision)) {
      throw invalid(`"decision" of interrupt ${actionId} must be one of ${ACTION_DECISIONS.join(', ')}`);
    }
    decision = p.decision as ActionDecision;
  } else if (typeof p.approved === 'boolean') {
    decision = p.approved ? 'approve' : 'deny';
  } else if (typeof text === 'string') {
    decision = 'approve';
  } else {
    throw invalid(`the resume payload of interrupt ${actionId} names no "decision"`);
  }
  return {
    actionId,
    decision,
    ...(typeof reason === 'string' && reason !== '' ? { reason } : {}),
    ...(typeof text === 'string' ? { payload: { text } } : {}),
  };
}
