import type { PermissionRequest, SessionGrant } from '../config/permission-request.js';
import type { PermissionEvaluation, PermissionsConfig } from '../config/permissions.js';
import type { EventDraft } from '../log/draft.js';
import type { HookVerdict } from './hooks/hooks.js';
import { evaluatePermission, toPermissionEvaluatedPayload } from './permissions.js';

/**
 * Authorization: the one place a request is judged and the one producer of `permission.evaluated`. Every executor
 * (a tool action, a pipeline's steps, a service, a delegation…) and the runner host's tool proxy come here; what they
 * do with an `ask` differs (a durable question the action waits on, a refusal inside a running pipeline, a question
 * a runner's call waits on), what is decided and what is recorded does not.
 */

/** Where a judgement looks: the bound permissions and workspace, the session's grants, the binding as updated since. */
export interface PolicySource {
  readonly permissions: PermissionsConfig;
  readonly workspaceRoot: string;
  grants(sessionId: string): Promise<SessionGrant[]>;
  /** The permissions of the session's binding when it was updated after this one was bound; undefined otherwise. */
  updatedPermissions(sessionId: string): Promise<PermissionsConfig | undefined>;
}

/** The correlation ids of the call a `permission.evaluated` is about (a tool call's step and call ids). */
export interface CallIds {
  threadId: string;
  turnId: string;
  taskId?: string | undefined;
  runId?: string | undefined;
  stepId?: string | undefined;
  toolCallId?: string | undefined;
}

/**
 * Judge a request under the binding's rules and mode, the session's grants and the workspace it runs in. A
 * before-call hook's deny or ask is folded in as one more restriction, never an allow (`withHookVerdict`).
 */
export async function authorize(
  source: Pick<PolicySource, 'permissions' | 'workspaceRoot' | 'grants'>,
  sessionId: string,
  request: PermissionRequest,
  hooks?: HookVerdict,
): Promise<PermissionEvaluation> {
  const grants = await source.grants(sessionId);
  return withHookVerdict(
    evaluatePermission(request, { ...source.permissions, grants, workspaceRoot: source.workspaceRoot }),
    hooks,
  );
}

/**
 * The binding as it is now denies an approved call, if it does: it was updated while the approval waited. An approval
 * never outlives a rule added since.
 */
export async function deniedByUpdatedBinding(
  source: Pick<PolicySource, 'updatedPermissions' | 'workspaceRoot'>,
  sessionId: string,
  request: PermissionRequest,
): Promise<PermissionEvaluation | undefined> {
  const updated = await source.updatedPermissions(sessionId);
  const now = updated && evaluatePermission(request, { ...updated, workspaceRoot: source.workspaceRoot });
  if (now?.decision !== 'deny') return undefined;
  return { ...now, reason: `${now.reason} (the session's binding was updated while the approval waited)` };
}

/**
 * The permission evaluation with the hooks' verdict folded in: a hook's deny denies what the rules would allow or
 * ask; a hook's ask asks where the rules would allow — with approve and deny only (like an ask rule, it asks every
 * time, so a session grant is not offered). A hook's allow changes nothing: it is no objection, never a permission,
 * so the rules and the mode still decide.
 */
export function withHookVerdict(
  evaluation: PermissionEvaluation,
  verdict: HookVerdict | undefined,
): PermissionEvaluation {
  if (!verdict || verdict.decision === 'allow' || evaluation.decision === 'deny') return evaluation;
  const reason = verdict.reason ?? `hook "${verdict.hook}" decided`;
  if (verdict.decision === 'deny') return { decision: 'deny', source: 'hook', mode: evaluation.mode, reason };
  if (evaluation.decision === 'ask') {
    return { ...evaluation, reason: `${evaluation.reason}; ${reason}`, decisions: ['approve', 'deny'] };
  }
  return { decision: 'ask', source: 'hook', mode: evaluation.mode, reason, decisions: ['approve', 'deny'] };
}

/**
 * `permission.evaluated` for an evaluation; `facts` ride along (the graph action, the runner, a pipeline's step) and
 * may override a field (a pipeline's authorization covering a step's mode-default ask records an allow).
 */
export function permissionEvaluated(
  ids: CallIds,
  evaluation: PermissionEvaluation,
  request: PermissionRequest,
  facts: Record<string, unknown> = {},
): EventDraft {
  return {
    type: 'permission.evaluated',
    ...ids,
    payload: { ...toPermissionEvaluatedPayload(evaluation, request), ...facts },
  };
}

/** `permission.evaluated` for a call a person approved (`respond_action`): the human decision it rests on. */
export function approvalEvaluated(
  ids: CallIds,
  approval: { reason: string; toolName?: string | undefined },
  facts: Record<string, unknown> = {},
): EventDraft {
  return {
    type: 'permission.evaluated',
    ...ids,
    payload: {
      decision: 'allow',
      source: 'human',
      reason: approval.reason,
      ...(approval.toolName ? { toolName: approval.toolName } : {}),
      ...facts,
    },
  };
}
