import { ExecutorTypeSchema } from '@oar/protocol';
import { z } from 'zod';

/**
 * What the permission policy is asked about (a request: one action about to run) and what an `approve_for_session`
 * leaves behind (a grant). Apart from the rules' schemas (./permissions.ts) because these need no glob checking:
 * the control plane records grants and checks requests without loading the rule matcher.
 */

const NonEmpty = z.string().min(1);

/**
 * What an earlier `approve_for_session` allows from then on. Deliberately narrow: one exact executor target and, if
 * the approved call touched paths, exactly those paths — never a directory glob the human did not see.
 */
export const SessionGrantSchema = z.strictObject({
  /** Executor type the grant is for; absent means `tool`. */
  executor: ExecutorTypeSchema.optional(),
  /** Exact tool name (or, for other executors, the exact target name). */
  tool: NonEmpty,
  /** Exact workspace-relative paths; absent means the approved call touched none. */
  paths: z.array(NonEmpty).optional(),
  /** The exact operation approved (`calendar.delete`); absent means the approved call had none. */
  operation: NonEmpty.optional(),
  /**
   * The workspace root (absolute real path) the grant was given in: it covers calls only while the session works
   * there. A grant recorded without one (before grants were scoped) covers nothing under a policy that names a root.
   */
  workspaceRoot: NonEmpty.optional(),
});

export type SessionGrant = z.infer<typeof SessionGrantSchema>;

/** The flags of the tool being called, as its definition states them (see tools/tool.ts). */
export const PermissionToolFactsSchema = z.object({
  name: NonEmpty,
  isReadOnly: z.boolean(),
  isDestructive: z.boolean(),
  isConcurrencySafe: z.boolean(),
  capabilities: z.array(z.string()),
});

export type PermissionToolFacts = z.infer<typeof PermissionToolFactsSchema>;

/** One action the runtime is about to execute. */
export const PermissionRequestSchema = z.object({
  executor: z.object({ type: ExecutorTypeSchema, target: NonEmpty }),
  /** Present for tool executors the registry knows; absent means the effects are unknown (treated as destructive). */
  tool: PermissionToolFactsSchema.optional(),
  /** Workspace-relative paths the call touches (from the tool's `paths(input)`). */
  paths: z.array(z.string()),
  /** The operation the call performs (the tool's `operationOf(input)`: `calendar.delete`), when it has one. */
  operation: z.string().optional(),
  /** The command the call runs (`exec`): an argv, or a shell string matched only whole. */
  command: z.union([z.object({ argv: z.array(z.string()).readonly() }), z.object({ shell: z.string() })]).optional(),
  /** The call's input, for hooks and classifiers layered on top; the rule evaluator does not read it. */
  input: z.unknown().optional(),
});

export type PermissionRequest = z.infer<typeof PermissionRequestSchema>;
