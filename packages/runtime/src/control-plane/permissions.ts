import type { ActionDecision } from '@oar/protocol';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { threadViews } from '../read-models/project.js';
import type { CommandContext } from './command-context.js';
import { respondAction } from './decisions.js';

/**
 * The standard's `evaluate_permission` and `resolve_permission` (docs/permissions.md "Permission commands"): how
 * the policy would judge a call now, recorded as `permission.evaluated`; and the answer to a pending tool approval,
 * recorded as `permission.resolved` (with the `action.resolved` that lets the call go on or fail).
 */

export interface EvaluatePermissionInput {
  sessionId: string;
  /** The thread whose call it would be (default: the session's main thread). */
  threadId?: string;
  /** The turn the evaluation is recorded on (default: the thread's running turn, else its last one). */
  turnId?: string;
  /** A tool bound to the session: `exec` with `{command}` asks about a command. */
  toolName: string;
  input?: unknown;
  /** Who asks (`api_key:key_1`, `user`): recorded with the evaluation. */
  requestedBy?: string;
}

export interface EvaluatePermissionResult {
  sessionId: string;
  threadId: string;
  decision: 'allow' | 'ask' | 'deny';
  /** The evaluation as recorded: mode, source, reason, rule, executor, paths, operation, command, decisions. */
  evaluation: Record<string, unknown>;
  /** The `permission.evaluated` event, or why none was recorded (a thread without a turn to record it on). */
  recorded: { eventId: string; turnId: string } | { eventId: null; reason: string };
}

export async function evaluatePermission(
  ctx: CommandContext,
  input: EvaluatePermissionInput,
): Promise<EvaluatePermissionResult> {
  const judge = ctx.deps.judge;
  if (!judge) throw new OarRuntimeError('unavailable', 'evaluate_permission needs the runtime (no judge here)');
  const session = await ctx.session(input.sessionId);
  const threadId = input.threadId ?? (await ctx.mainThreadId(input.sessionId));
  const thread = await ctx.log.thread(input.sessionId, threadId);
  if (input.turnId !== undefined && !thread.turns.some((t) => t.turnId === input.turnId)) {
    throw notFound('turn', input.turnId);
  }
  // Permission facts are about a turn (the standard's profile requires threadId and turnId on them).
  const turnId = input.turnId ?? thread.activeTurnId ?? thread.turns.at(-1)?.turnId;
  const facts = { evaluatedFor: 'client', requestedBy: input.requestedBy ?? 'user' };
  const fact = await judge.evaluate(
    session,
    { toolName: input.toolName, input: input.input },
    // Without a turn the draft is answered, not recorded (below).
    { threadId, turnId: turnId ?? '' },
    facts,
  );
  const evaluation = fact.payload as Record<string, unknown>;
  const base = { sessionId: input.sessionId, threadId, decision: evaluation.decision as 'allow' | 'ask' | 'deny' };
  if (turnId === undefined) {
    const reason = 'the thread has no turn yet: a permission fact is recorded on a turn';
    return { ...base, evaluation, recorded: { eventId: null, reason } };
  }
  const [event] = await ctx.append(input.sessionId, [fact]);
  return { ...base, evaluation, recorded: { eventId: event?.eventId ?? '', turnId } };
}

export interface ResolvePermissionInput {
  sessionId: string;
  /** The pending tool approval (`permission.requested` / `action.required`). */
  actionId: string;
  decision: 'allow' | 'deny';
  /** How far an allow reaches: this call (`once`, the default) or the rest of the session (`session`). */
  scope?: 'once' | 'session';
  reason?: string;
  resolvedBy?: string;
}

/** Answer a pending tool approval: `respond_action` restricted to permission requests, in the permission's terms. */
export async function resolvePermission(ctx: CommandContext, input: ResolvePermissionInput) {
  const models = await ctx.log.allReadModels(input.sessionId);
  if (!models.session) throw notFound('session', input.sessionId);
  const pending = threadViews(models)
    .flatMap((thread) => thread.pending)
    .find((p) => p.actionId === input.actionId);
  if (!pending) throw notFound('action', input.actionId);
  if (pending.actionType !== 'tool_approval') {
    throw new OarRuntimeError(
      'not_a_permission_request',
      `action ${input.actionId} is a ${pending.actionType}, not a permission request: answer it with respond_action`,
      { details: { actionId: input.actionId, actionType: pending.actionType } },
    );
  }
  if (input.scope === 'session' && input.decision === 'deny') {
    throw new OarRuntimeError('invalid_decision', 'scope "session" applies to allow; a deny is for this call');
  }
  const decision: ActionDecision =
    input.decision === 'deny' ? 'deny' : input.scope === 'session' ? 'approve_for_session' : 'approve';
  const resolved = await respondAction(ctx, {
    sessionId: input.sessionId,
    actionId: input.actionId,
    decision,
    ...(input.reason !== undefined ? { reason: input.reason } : {}),
    ...(input.resolvedBy !== undefined ? { resolvedBy: input.resolvedBy } : {}),
  });
  return {
    sessionId: input.sessionId,
    threadId: resolved.threadId,
    actionId: input.actionId,
    decision: input.decision,
    scope: input.decision === 'deny' ? 'once' : (input.scope ?? 'once'),
    toolName: pending.toolName,
  };
}
