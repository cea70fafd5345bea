import { z } from 'zod';

/**
 * The normalized form every accepted model output becomes (carrier, full DSL, or a recovered direct request).
 * Everything downstream — validation, scheduling, execution, logging, UI projection — reads only this shape.
 */

export const EXECUTOR_TYPES = ['tool', 'agent', 'runtime', 'human', 'pipeline', 'service'] as const;
export const ExecutorTypeSchema = z.enum(EXECUTOR_TYPES);
export type ExecutorType = z.infer<typeof ExecutorTypeSchema>;

/** What the model sees of a result. See docs/protocol.md "Result policies" for the meaning of each. */
export const RETURN_TO_MODEL = [
  'none',
  'summary',
  'structured',
  'excerpt',
  'full',
  'on_failure',
  'on_demand',
  'adaptive',
] as const;
export const ReturnToModelSchema = z.enum(RETURN_TO_MODEL);
export type ReturnToModel = z.infer<typeof ReturnToModelSchema>;

/**
 * `if_truncated`: what happens when the output the policy would show exceeds the budget.
 * provide_ref_and_summary (default): a preview plus the ref; fail: the action fails with `output_over_budget`
 * (the full output is still stored); ask_model: the preview, and the observation asks the model to expand a range
 * of the ref or continue. See docs/protocol.md "Budget and truncation".
 */
export const IF_TRUNCATED = ['provide_ref_and_summary', 'fail', 'ask_model'] as const;
export type IfTruncated = (typeof IF_TRUNCATED)[number];

export const ResultPolicySchema = z.object({
  returnToModel: ReturnToModelSchema,
  /** For `adaptive`: what to keep first when the budget is short, e.g. ["errors", "matching_lines"]. */
  priority: z.array(z.string()).optional(),
  /** Upper bound the model asks for; the runtime's own context budget still wins. */
  maxTokens: z.number().int().positive().optional(),
  /**
   * The model's `store_full` request as sent (default true). The runtime keeps every full output in its audit
   * record regardless; when this is false the observation says the request was not applied, and why.
   */
  storeFull: z.boolean(),
  /** What to do when the output exceeds the budget (default `provide_ref_and_summary`): see `IF_TRUNCATED`. */
  ifTruncated: z.enum(IF_TRUNCATED).optional(),
});
export type ResultPolicy = z.infer<typeof ResultPolicySchema>;

export const DEFAULT_RESULT_POLICY: ResultPolicy = { returnToModel: 'summary', storeFull: true };

export const ON_FAILURE = ['continue', 'abort', 'ask_model'] as const;
export const FailurePolicySchema = z.object({
  /** continue: run independent actions, skip dependents; abort: cancel the rest of the graph; ask_model: stop and let the model decide. */
  onFailure: z.enum(ON_FAILURE),
  /** Total attempts including the first (1 = no retry). */
  maxAttempts: z.number().int().min(1).max(10),
});
export type FailurePolicy = z.infer<typeof FailurePolicySchema>;

export const DEFAULT_FAILURE_POLICY: FailurePolicy = { onFailure: 'continue', maxAttempts: 1 };

/**
 * The references the runtime resolves (docs/protocol.md "References"): `md:` sections of the same message (resolved
 * when parsed), and at execution time `action:<id>.summary|output`, `input:user.goal`, `runtime://…` records and
 * `artifact:<name>` / `artifact://<id>` artifacts. Anything else is rejected before execution.
 */
export const REFERENCE_PATTERN =
  /^(md:.+|action:[^.\s]+\.(summary|output)|input:[A-Za-z0-9_.-]+|runtime:\/\/\S+|artifact:\S+)$/;

/** An `action:<id>.summary|output` reference: group 1 is the action id, group 2 the part. */
export const ACTION_REFERENCE_PATTERN = /^action:([^.\s]+)\.(summary|output)$/;

export const ExecutorSchema = z.object({
  type: ExecutorTypeSchema,
  /** A concrete executor name, or "auto" to let the runtime choose by type and capabilities. */
  target: z.string().min(1),
  capabilities: z.array(z.string()),
});
export type Executor = z.infer<typeof ExecutorSchema>;

export const ActionSchema = z.object({
  id: z.string().min(1),
  title: z.string().optional(),
  description: z.string().optional(),
  reason: z.string().optional(),
  operation: z.string().optional(),
  executor: ExecutorSchema,
  input: z.record(z.string(), z.unknown()),
  dependsOn: z.array(z.string()),
  /** Unresolved references the runtime expands at execution time (action:, input:, runtime://, artifact:). md: refs are resolved already. */
  contextRefs: z.array(z.string()),
  /** Context text already resolved from md: references (in the order the refs were given). */
  context: z.array(z.string()).optional(),
  /** The task text, resolved from prompt_ref before anything runs. */
  prompt: z.string().optional(),
  promptRef: z.string().optional(),
  resultPolicy: ResultPolicySchema,
  failurePolicy: FailurePolicySchema,
  persist: z.boolean().optional(),
});
export type Action = z.infer<typeof ActionSchema>;

export const INTENTS = [
  'execute',
  'respond',
  'stop',
  'expand_ref',
  'decide',
  'plan',
  'revise',
  'cancel',
  'report',
] as const;
export const IntentSchema = z.enum(INTENTS);
export type Intent = z.infer<typeof IntentSchema>;

/**
 * How a graph runs (docs/protocol.md "Execution strategy"): `dag` and `parallel` run every action whose
 * dependencies completed, independent ones side by side; `sequential` runs them one at a time in declaration order.
 * `maxConcurrency` bounds how many of its actions run at once (never above the binding's `limits.maxParallel`).
 */
export const ExecutionSchema = z.object({
  mode: z.enum(['ephemeral', 'durable']),
  strategy: z.enum(['dag', 'sequential', 'parallel']),
  maxConcurrency: z.number().int().min(1).max(64).optional(),
});
export type Execution = z.infer<typeof ExecutionSchema>;

export const DecisionSchema = z.object({
  decision: z.enum(['retry', 'skip', 'abort', 'continue', 'replan']),
  runId: z.string().optional(),
  actionIds: z.array(z.string()).optional(),
  reason: z.string().optional(),
});
export type Decision = z.infer<typeof DecisionSchema>;

export const ReportSpecSchema = z.object({
  format: z.string().optional(),
  sections: z.array(z.object({ id: z.string(), title: z.string().optional(), description: z.string().optional() })),
});
export type ReportSpec = z.infer<typeof ReportSpecSchema>;

export const CARRIERS = ['tool', 'text'] as const;
export const CarrierSchema = z.enum(CARRIERS);
export type Carrier = z.infer<typeof CarrierSchema>;

export const DeclarationSchema = z.object({
  intent: IntentSchema,
  title: z.string().optional(),
  /** User-visible Markdown: the answer for respond/stop, a short progress note for execute. */
  message: z.string().optional(),
  /** The `## user.visible` section of a full DSL declaration. */
  userVisible: z.string().optional(),
  persist: z.boolean(),
  execution: ExecutionSchema,
  responsePolicy: z.record(z.string(), z.unknown()).optional(),
  actions: z.array(ActionSchema),
  decision: DecisionSchema.optional(),
  reportSpec: ReportSpecSchema.optional(),
  /** How the declaration reached the runtime. `recovered` marks direct requests turned into a declaration. */
  source: z.object({
    carrier: CarrierSchema,
    form: z.enum(['carrier', 'dsl', 'direct_tool_call', 'text_tool_call', 'plain_text']),
    recovered: z.boolean(),
    /** Markdown sections of a DSL message, by normalized id (stored for audit: "store the parsed sections"). */
    sections: z.record(z.string(), z.string()).optional(),
  }),
});
export type Declaration = z.infer<typeof DeclarationSchema>;
