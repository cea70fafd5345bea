import {
  ApprovalDecisionSchema,
  ExecutorTypeSchema,
  PermissionDecisionSchema,
  PermissionSourceSchema,
} from '@oar/protocol';
import { z } from 'zod';
import { PERMISSION_MODES } from '../kernel/constants.js';
import { checkRuleGlob } from '../kernel/match/glob-match.js';
import { type SessionGrant, SessionGrantSchema } from './permission-request.js';

/**
 * The shapes of the permission policy: what a user writes in the config file (`permissions: { mode, rules }`), what
 * the runtime asks about (a request), what an approve_for_session leaves behind (a grant) and the answer (an
 * evaluation). See docs/permissions.md for the meaning of each field and the precedence between them.
 */

export { PERMISSION_MODES };
export const PermissionModeSchema = z.enum(PERMISSION_MODES);
export type PermissionMode = z.infer<typeof PermissionModeSchema>;

const NonEmpty = z.string().min(1);

/** A glob of a rule: refused here when it has no linear-time translation, so it cannot silently never match. */
const Glob = NonEmpty.superRefine((glob, ctx) => {
  const reason = checkRuleGlob(glob);
  if (reason) ctx.addIssue({ code: 'custom', message: `unusable glob "${glob}": ${reason}` });
});

/**
 * One user-written rule. Strict on purpose: a misspelled condition (`tols`, `path`) must be a config error, because
 * silently dropping it would widen the rule — an allow rule without its `paths` would allow every path.
 */
export const PermissionRuleSchema = z.strictObject({
  decision: PermissionDecisionSchema,
  /** Tool name or glob over tool names, e.g. `"read_file"`, `"mcp__*"` (kernel/match/glob-match.ts). */
  tool: Glob.optional(),
  /** Executor type of the action: tool, agent, human, runtime, pipeline, service. */
  executor: ExecutorTypeSchema.optional(),
  /** A capability label the tool declares (exact match), e.g. `"network"`. */
  capability: NonEmpty.optional(),
  /** Matches the tool's `isReadOnly` flag. */
  readOnly: z.boolean().optional(),
  /** Matches the tool's `isDestructive` flag. */
  destructive: z.boolean().optional(),
  /** Globs against the workspace-relative paths a call touches (dotfiles included; kernel/match/glob-match.ts). */
  paths: z.array(Glob).min(1).optional(),
  /**
   * The operation a call performs, exact or a glob: a business CLI's `module.method` (`"calendar.delete"`,
   * `"calendar.*"`). Never holds for a call without an operation.
   */
  operation: Glob.optional(),
  /**
   * A command prefix (`"git status"`, `"rm -rf"`): holds for an `exec` call whose argv starts with its words and
   * carries its flags, or whose shell string is exactly it (kernel/match/command-match.ts). Never holds for a call
   * without a command.
   */
  command: z
    .string()
    .trim()
    .min(1)
    .regex(/^\S+( \S+)*$/, 'a command prefix is words separated by single spaces, e.g. "git status"')
    .optional(),
  /** Why the rule exists; shown in the permission record and the approval prompt. */
  reason: z.string().optional(),
});
export type PermissionRule = z.infer<typeof PermissionRuleSchema>;

/** A rule together with its position in the config, so a decision can name the rule that made it. */
export const IndexedPermissionRuleSchema = PermissionRuleSchema.extend({ index: z.number().int().min(0) });
export type IndexedPermissionRule = z.infer<typeof IndexedPermissionRuleSchema>;

/** The `permissions` section of the config file. */
export const PermissionsConfigSchema = z.strictObject({
  mode: PermissionModeSchema.default('default'),
  rules: z.array(PermissionRuleSchema).default([]),
});
export type PermissionsConfig = z.infer<typeof PermissionsConfigSchema>;

/**
 * One of the runtime's default deny rules (policy/sensitive-paths.ts): files that hold credentials. Not written by
 * users; lifted for a path only by a user allow rule that names it.
 */
export const DefaultDenyRuleSchema = z.object({
  /** Stable name, shown in the record as `defaults.<name>`. */
  name: NonEmpty,
  paths: z.array(NonEmpty).readonly(),
  /** Globs the rule leaves alone (`.env.example`, `*.pub`). */
  except: z.array(NonEmpty).readonly().optional(),
  reason: z.string(),
});
export type DefaultDenyRule = z.infer<typeof DefaultDenyRuleSchema>;

/** What the evaluator reads: the mode, the config rules and the grants approved earlier in the session. */
export interface PermissionPolicy {
  mode: PermissionMode;
  rules: readonly PermissionRule[];
  grants?: readonly SessionGrant[];
  /** The workspace root the call runs in: only grants given for this root apply (see `SessionGrant.workspaceRoot`). */
  workspaceRoot?: string;
  /** The runtime's default deny rules; `DEFAULT_DENY_RULES` when omitted, none with `[]` (tests, trusted hosts). */
  defaultRules?: readonly DefaultDenyRule[];
}

/**
 * The evaluator's sources are the subset of the protocol's PERMISSION_SOURCES it can produce; a session grant is
 * recorded as `human` (a human approved it for the session) with the grant itself alongside.
 */
export const EvaluationSourceSchema = PermissionSourceSchema.extract(['rule', 'mode', 'default', 'human', 'hook']);
export type EvaluationSource = z.infer<typeof EvaluationSourceSchema>;

export const PermissionEvaluationSchema = z.object({
  decision: PermissionDecisionSchema,
  source: EvaluationSourceSchema,
  /** The rule that decided, when `source` is `rule`. */
  rule: IndexedPermissionRuleSchema.optional(),
  /** The session grant that allowed the call, when `source` is `human`. */
  grant: SessionGrantSchema.optional(),
  /** The default deny rule that denied the call (`source` is `default`), and the path it names. */
  defaultRule: DefaultDenyRuleSchema.extend({ path: NonEmpty }).optional(),
  mode: PermissionModeSchema,
  reason: z.string(),
  /**
   * For `ask`: the answers the approval may offer. An ask rule means "ask every time", so it does not offer
   * approve_for_session (the grant would never be consulted: ask rules beat grants).
   */
  decisions: z.array(ApprovalDecisionSchema).optional(),
});
export type PermissionEvaluation = z.infer<typeof PermissionEvaluationSchema>;
