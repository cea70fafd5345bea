import { oarError } from '@oar/protocol';
import type { PermissionRequest } from '../config/permission-request.js';
import { actionIds, actionStatusEvent, errorOutput, toolIds } from '../facts/action.js';
import { subagentStatus } from '../facts/subagent-status.js';
import { newId } from '../kernel/ids.js';
import type { EventDraft } from '../log/draft.js';
import { approvalEvaluated, authorize, deniedByUpdatedBinding, permissionEvaluated } from '../policy/authorize.js';
import type { HookVerdict } from '../policy/hooks/hooks.js';
import { approvalScope } from '../policy/permissions.js';
import { normalizeTouchedPath } from '../policy/request.js';
import type { RunActionStatus } from '../read-models/thread-state.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import { beforeExecutorCall } from './tool-hooks.js';

/** The touched paths an approval's question did not show (none when the approval predates recorded paths). */
export function pathsBeyondApproval(
  approvalPaths: readonly string[] | undefined,
  touched: readonly string[],
): string[] {
  if (approvalPaths === undefined) return [];
  const shown = new Set(approvalPaths.map(normalizeTouchedPath));
  return touched.filter((path) => !shown.has(normalizeTouchedPath(path)));
}

/** An action allowed to run: the evaluation to commit with its first fact (its start, for a side effect). */
export interface Authorized {
  allowed: EventDraft[];
  /** An allow rule of the binding let the call run (not the mode, a grant or a person): reveal.ts may apply. */
  byRule?: boolean;
}

/**
 * The permission gate of every action (the executor driver, executors/registry.ts, and a pipeline's steps):
 * `permission.evaluated` precedes every execution. When the action may run, the gate returns the evaluation to write
 * in the same transaction as the action's start (one commit instead of two, and the order is still evaluated →
 * started); otherwise it records why not and returns the status it stopped in (denied, or waiting for a person).
 */
export type GateResult = { stopped: RunActionStatus } | Authorized;

export async function gate(ctx: ExecutorContext, request: PermissionRequest, hooks?: HookVerdict): Promise<GateResult> {
  const { config } = ctx;
  // A before_tool_call hook's deny or ask is folded in as one more restriction (docs/hooks.md), never an allow:
  // a tool action's hooks ran already (they may rewrite its input); other executors' run here.
  const verdict = hooks ?? (request.executor.type === 'tool' ? undefined : await beforeExecutorCall(ctx, request));
  let evaluation = await authorize(ctx.policy, ctx.thread.sessionId, request, verdict);
  // Approved by respond_action: the approval answers an ask, never a deny. It is checked again now, on the request as
  // it is now (a path that became a link to `.env` since the question reaches `.env`): a deny under the binding the
  // action runs with, or under the session's binding if it was updated while the approval waited, wins
  // (docs/permissions.md, "Approvals"). Otherwise still one permission.evaluated per execution (a retry or a
  // re-run included), naming the human decision it rests on.
  // An approval covers the paths its question showed. A call that touches another one now (a link retargeted since)
  // is judged as if unapproved: asked again, with the reason.
  const uncovered = ctx.state.approved ? pathsBeyondApproval(ctx.state.approvalPaths, request.paths) : [];
  const approved = ctx.state.approved === true && uncovered.length === 0;
  if (uncovered.length > 0 && evaluation.decision !== 'deny') {
    evaluation = {
      ...evaluation,
      reason: `${evaluation.reason} (the approval given covered ${ctx.state.approvalPaths?.join(', ') || 'no path'}; the call now also touches ${uncovered.join(', ')})`,
    };
  }
  if (approved && evaluation.decision !== 'deny') {
    const now = await deniedByUpdatedBinding(ctx.policy, ctx.thread.sessionId, request);
    if (now) evaluation = now;
  }
  if (approved && evaluation.decision !== 'deny') {
    const reason = 'approved by respond_action';
    return {
      allowed: [
        approvalEvaluated(toolIds(ctx), { reason, toolName: request.tool?.name }, { graphActionId: ctx.action.id }),
      ],
    };
  }
  const evaluated = permissionEvaluated(toolIds(ctx), evaluation, request, { graphActionId: ctx.action.id });
  if (evaluation.decision === 'allow') return { allowed: [evaluated], byRule: evaluation.source === 'rule' };
  if (evaluation.decision === 'deny') {
    // What denied it (a rule, the mode, a hook, a default rule) in the error the read model shows, not only in its
    // prose: the thread read model explains the cause (the standard's acceptance scenario 11).
    const { rule } = evaluated.payload as { rule?: string };
    const error = oarError('permission_denied', `permission denied: ${evaluation.reason}`, {
      details: {
        reason: evaluation.reason,
        source: evaluation.source,
        mode: evaluation.mode,
        ...(rule ? { rule } : {}),
      },
    });
    await ctx.record([evaluated, actionStatusEvent(ctx, 'denied', errorOutput(error))]);
    return { stopped: 'denied' };
  }
  const actionId = newId('act');
  const name = `${request.tool?.name ?? `${request.executor.type}:${request.executor.target}`}${
    request.operation !== undefined ? ` ${request.operation}` : ''
  }`;
  const prompt = `Allow ${name}${request.paths.length ? ` on ${request.paths.join(', ')}` : ''}? ${evaluation.reason}`;
  await ctx.record([
    evaluated,
    {
      type: 'action.required',
      ...actionIds(ctx),
      actionId,
      toolCallId: ctx.state.toolCallId,
      payload: {
        actionType: 'tool_approval',
        toolName: name,
        prompt,
        decisions: evaluation.decisions ?? ['approve', 'deny'],
        scope: approvalScope(request, config.workspaceRoot),
        graphActionId: ctx.action.id,
        toolCallId: ctx.state.toolCallId,
        input: request.input as Record<string, unknown>,
      },
    },
    {
      type: 'permission.requested',
      ...toolIds(ctx),
      actionId,
      payload: { toolName: name, prompt, reason: evaluation.reason, mode: evaluation.mode },
    },
    { type: 'task.waiting', ...actionIds(ctx), payload: { waitingFor: 'permission', reason: prompt } },
    ...subagentStatus(ctx.thread, ctx.run.turnId, 'blocked', `waiting for a decision: ${prompt}`),
  ]);
  return { stopped: 'waiting_permission' };
}
