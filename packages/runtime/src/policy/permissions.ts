import {
  APPROVAL_DECISIONS,
  type ApprovalDecision,
  type PermissionDecision,
  type PermissionEvaluatedPayloadSchema,
} from '@oar/protocol';
import type { z } from 'zod';
import type { PermissionRequest } from '../config/permission-request.js';
import type {
  EvaluationSource,
  IndexedPermissionRule,
  PermissionEvaluation,
  PermissionMode,
  PermissionPolicy,
  PermissionRule,
} from '../config/permissions.js';
import { grantCovers, ruleMatches } from './permission-match.js';
import { normalizeTouchedPath, requestToolName } from './request.js';
import { DEFAULT_DENY_RULES, defaultDenial, describeDefaultRule } from './sensitive-paths.js';

/**
 * The permission evaluator: pure, synchronous, no I/O. Precedence (docs/permissions.md "Precedence"):
 *
 *   1. a matching deny rule            → deny   (in every mode, bypass included)
 *   2. the read-only mode ceiling      → deny   (anything not known to be read-only; no rule or grant lifts it)
 *   3. a default deny rule             → deny   (credential files: .env*, *.pem, id_*, .ssh/; lifted only by an
 *                                               allow rule that names the path — never by a grant or the mode)
 *   4. a matching ask rule             → ask    (beats grants, allow rules and the mode, bypass included)
 *   5. a session grant covering it     → allow
 *   6. a matching allow rule           → allow
 *   7. the mode's default for the kind of action
 *
 * Restrictions (1–4) come before permissions (5–7) so that adding a grant can never loosen a deny, and a user's
 * deny/ask rule always overrides an automatic allow (the spec's "deny/ask 规则需要可覆盖自动 allow"). The one
 * deny an allow rule can lift is the default one (3), and only for a path the rule names: that is what makes it a
 * default rather than a user's decision.
 */

/** What an action is, for the mode table. A tool with no facts has unknown effects and is treated as destructive. */
type ActionKind = 'read' | 'write' | 'destructive' | 'delegation' | 'human' | 'runtime' | 'external';

function actionKind(request: PermissionRequest): ActionKind {
  switch (request.executor.type) {
    case 'tool': {
      const tool = request.tool;
      // Destructive wins over a contradictory read-only flag: a wrong flag should cost a prompt, not a file.
      if (!tool || tool.isDestructive) return 'destructive';
      return tool.isReadOnly ? 'read' : 'write';
    }
    case 'agent':
      return 'delegation';
    case 'human':
      return 'human';
    case 'runtime':
      return 'runtime';
    case 'pipeline':
    case 'service':
      return 'external';
  }
}

const KIND_LABEL: Record<ActionKind, string> = {
  read: 'read-only tools',
  write: 'tools that write',
  destructive: 'destructive tools',
  delegation: 'agent delegation',
  human: 'human input',
  runtime: 'runtime actions',
  external: 'pipelines and services',
};

/**
 * The mode table. Agent delegation is allowed because the child's own actions are evaluated one by one under the
 * same policy; human input and runtime actions have no side effect of their own. Pipelines and services have
 * effects the runtime cannot see, so they are treated like writes.
 */
const MODE_TABLE: Record<PermissionMode, Record<ActionKind, PermissionDecision>> = {
  default: {
    read: 'allow',
    write: 'ask',
    destructive: 'ask',
    delegation: 'allow',
    human: 'allow',
    runtime: 'allow',
    external: 'ask',
  },
  'read-only': {
    read: 'allow',
    write: 'deny',
    destructive: 'deny',
    delegation: 'allow',
    human: 'allow',
    runtime: 'allow',
    external: 'deny',
  },
  'accept-edits': {
    read: 'allow',
    write: 'allow',
    destructive: 'ask',
    delegation: 'allow',
    human: 'allow',
    runtime: 'allow',
    external: 'ask',
  },
  bypass: {
    read: 'allow',
    write: 'allow',
    destructive: 'allow',
    delegation: 'allow',
    human: 'allow',
    runtime: 'allow',
    external: 'allow',
  },
};

/** An ask rule means "ask every time": a session grant would never be consulted, so it is not offered. */
const RULE_ASK_DECISIONS: ApprovalDecision[] = ['approve', 'deny'];
const MODE_ASK_DECISIONS: readonly ApprovalDecision[] = APPROVAL_DECISIONS;

function firstMatching(
  rules: readonly PermissionRule[],
  decision: PermissionDecision,
  request: PermissionRequest,
): IndexedPermissionRule | undefined {
  const index = rules.findIndex((rule) => rule.decision === decision && ruleMatches(rule, request));
  const rule = rules[index];
  return rule ? { index, ...rule } : undefined;
}

/**
 * A person counts rules from 1 ("rule #1" is the first of `permissions.rules`); the recorded `rule.index` stays the
 * rule's 0-based array position, the `rules[N]` of describeRule and of a config path.
 */
function ruleReason(rule: IndexedPermissionRule, verb: string): string {
  return `rule #${rule.index + 1} ${verb} this call${rule.reason ? `: ${rule.reason}` : ''}`;
}

function subject(request: PermissionRequest): string {
  const name = requestToolName(request);
  const operation = request.operation !== undefined ? ` ${request.operation}` : '';
  return name ? `'${name}'${operation}` : `${request.executor.type} '${request.executor.target}'`;
}

/** Decide one action. Never throws for a schema-valid request and policy. */
export function evaluatePermission(request: PermissionRequest, policy: PermissionPolicy): PermissionEvaluation {
  const { mode, rules } = policy;
  const kind = actionKind(request);
  const modeDecision = MODE_TABLE[mode][kind];
  const modeSource: EvaluationSource = mode === 'default' ? 'default' : 'mode';

  const deny = firstMatching(rules, 'deny', request);
  if (deny) return { decision: 'deny', source: 'rule', rule: deny, mode, reason: ruleReason(deny, 'denies') };

  // A mode that forbids writes is a ceiling, not a default: otherwise one broad allow rule (or a grant from an
  // earlier accept-edits phase) would quietly turn read-only into read-write.
  if (mode === 'read-only' && modeDecision === 'deny') {
    const reason = `read-only mode forbids ${KIND_LABEL[kind]} (${subject(request)})`;
    return { decision: 'deny', source: 'mode', mode, reason };
  }

  const denial = defaultDenial(request, rules, policy.defaultRules ?? DEFAULT_DENY_RULES);
  if (denial) {
    const reason = `default rule "${denial.rule.name}" denies ${denial.path}: ${denial.rule.reason} (an allow rule naming the path lifts it)`;
    return { decision: 'deny', source: 'default', defaultRule: { ...denial.rule, path: denial.path }, mode, reason };
  }

  const ask = firstMatching(rules, 'ask', request);
  if (ask) {
    const reason = ruleReason(ask, 'requires approval for');
    return { decision: 'ask', source: 'rule', rule: ask, mode, reason, decisions: [...RULE_ASK_DECISIONS] };
  }

  // A grant is for the workspace it was given in: a binding moved to another root asks again (and a grant given
  // there applies again when the session comes back).
  const grant = policy.grants?.find(
    (candidate) => candidate.workspaceRoot === policy.workspaceRoot && grantCovers(candidate, request),
  );
  if (grant) {
    const reason = `approved for this session earlier (${subject(request)})`;
    return { decision: 'allow', source: 'human', grant, mode, reason };
  }

  const allow = firstMatching(rules, 'allow', request);
  if (allow) return { decision: 'allow', source: 'rule', rule: allow, mode, reason: ruleReason(allow, 'allows') };

  const verb = modeDecision === 'allow' ? 'allows' : modeDecision === 'ask' ? 'asks before' : 'forbids';
  const reason = `${mode} mode ${verb} ${KIND_LABEL[kind]} (${subject(request)})`;
  const evaluation: PermissionEvaluation = { decision: modeDecision, source: modeSource, mode, reason };
  return modeDecision === 'ask' ? { ...evaluation, decisions: [...MODE_ASK_DECISIONS] } : evaluation;
}

/**
 * What a question about this request records (`action.required.scope`): the executor, the touched paths, the
 * operation and the workspace — what the person is shown, so an approval (and a session grant) covers exactly that.
 */
export function approvalScope(request: PermissionRequest, workspaceRoot: string): Record<string, unknown> {
  return {
    paths: request.paths,
    executor: request.executor,
    workspaceRoot,
    ...(request.operation !== undefined ? { operation: request.operation } : {}),
  };
}

/** The rule in the policy's own notation for the `rule` field of permission events: `rules[2] {"decision":…}`. */
export function describeRule(rule: IndexedPermissionRule): string {
  const { index, ...written } = rule;
  return `rules[${index}] ${JSON.stringify(written)}`;
}

export type PermissionEvaluatedPayload = z.input<typeof PermissionEvaluatedPayloadSchema>;

/**
 * The `permission.evaluated` payload for an evaluation. The typed fields are the protocol's; the executor, the
 * touched paths and the grant ride along (payloads are loose) so the record alone explains the decision.
 */
export function toPermissionEvaluatedPayload(
  evaluation: PermissionEvaluation,
  request: PermissionRequest,
): PermissionEvaluatedPayload {
  const toolName = requestToolName(request);
  return {
    decision: evaluation.decision,
    ...(toolName ? { toolName } : {}),
    ...(evaluation.rule ? { rule: describeRule(evaluation.rule) } : {}),
    ...(evaluation.defaultRule ? { rule: describeDefaultRule(evaluation.defaultRule) } : {}),
    mode: evaluation.mode,
    source: evaluation.source,
    reason: evaluation.reason,
    executor: request.executor,
    ...(request.operation !== undefined ? { operation: request.operation } : {}),
    ...(request.paths.length > 0 ? { paths: request.paths.map(normalizeTouchedPath) } : {}),
    ...(evaluation.grant ? { grant: evaluation.grant } : {}),
  };
}
