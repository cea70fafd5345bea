import { z } from 'zod';
import { ACTION_ID_PATTERN, MAX_ACTION_ID_LENGTH } from './carrier.js';
import { EXECUTOR_TYPES, IF_TRUNCATED, INTENTS, RETURN_TO_MODEL } from './declaration.js';

/**
 * The full DSL: one fenced ```json agent-protocol block holding the envelope, plus Markdown sections that
 * `md:` references point at. Field names are snake_case exactly as the specification writes them.
 */
export const DSL_TYPE = 'agent.protocol';
export const DSL_VERSION = '1';

const actionId = z.string().min(1).max(MAX_ACTION_ID_LENGTH).regex(ACTION_ID_PATTERN, 'invalid action id');

export const DslExecutorSchema = z.strictObject({
  // "auto" is a target, never a type; it gets its own error code so the model is told exactly that.
  type: z.enum(EXECUTOR_TYPES, {
    error: (issue) =>
      issue.input === 'auto'
        ? { message: 'executor.type may not be "auto"; "auto" is allowed only as executor.target' }
        : { message: `executor.type must be one of ${EXECUTOR_TYPES.join(', ')}` },
  }),
  target: z.string().min(1).optional(),
  capabilities: z.array(z.string()).optional(),
});

export const DslResultPolicySchema = z.strictObject({
  return_to_model: z.enum(RETURN_TO_MODEL),
  priority: z.array(z.string()).optional(),
  max_tokens: z.number().int().positive().optional(),
  store_full: z.boolean().optional(),
  /** "ask-model" is accepted as in `failure_policy` (the specification's spelling there). */
  if_truncated: z
    .enum([...IF_TRUNCATED, 'ask-model'], {
      error: () => ({ message: `if_truncated must be one of ${IF_TRUNCATED.join(', ')}` }),
    })
    .optional(),
});

/** "ask-model" is the specification's own spelling; "retry" means one more attempt, then continue. */
export const DslFailurePolicySchema = z.union([
  z.enum(['continue', 'abort', 'ask_model', 'ask-model', 'retry']),
  z.strictObject({
    on_failure: z.enum(['continue', 'abort', 'ask_model', 'ask-model']).optional(),
    max_attempts: z.number().int().min(1).max(10).optional(),
  }),
]);

export const DslActionSchema = z.strictObject({
  type: z.literal('action'),
  id: actionId,
  title: z.string().optional(),
  description: z.string().optional(),
  reason: z.string().optional(),
  operation: z.string().optional(),
  executor: DslExecutorSchema,
  /** OAR extension: the structured input (tool arguments, delegation input). The spec leaves it open. */
  input: z.record(z.string(), z.unknown()).optional(),
  depends_on: z.array(actionId).optional(),
  context_refs: z.array(z.string()).optional(),
  prompt_ref: z.string().optional(),
  result_policy: DslResultPolicySchema.optional(),
  persist: z.boolean().optional(),
  failure_policy: DslFailurePolicySchema.optional(),
});
export type DslAction = z.infer<typeof DslActionSchema>;

export const DslRangeSchema = z.strictObject({
  start_line: z.number().int().min(1).optional(),
  end_line: z.number().int().min(1).optional(),
  around_matches: z.boolean().optional(),
  pattern: z.string().optional(),
  context_lines: z.number().int().min(0).max(500).optional(),
  max_tokens: z.number().int().positive().optional(),
});

export const DslPayloadSchema = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('action_graph'), actions: z.array(DslActionSchema) }),
  z.strictObject({
    type: z.literal('expand_ref'),
    refs: z
      .array(
        z.strictObject({ ref: z.string().min(1), reason: z.string().optional(), range: DslRangeSchema.optional() }),
      )
      .min(1),
  }),
  z.strictObject({
    type: z.literal('decision'),
    decision: z.enum(['retry', 'skip', 'abort', 'continue', 'replan']),
    run_id: z.string().optional(),
    action_ids: z.array(z.string()).optional(),
    reason: z.string().optional(),
  }),
  z.strictObject({
    type: z.literal('final_report_spec'),
    format: z.string().optional(),
    sections: z
      .array(z.strictObject({ id: z.string(), title: z.string().optional(), description: z.string().optional() }))
      .default([]),
  }),
]);
export type DslPayload = z.infer<typeof DslPayloadSchema>;

/** Which payload types each intent accepts: a declaration whose payload contradicts its intent is rejected. */
export const PAYLOADS_BY_INTENT: Record<(typeof INTENTS)[number], ReadonlyArray<DslPayload['type']>> = {
  execute: ['action_graph'],
  plan: ['action_graph'],
  revise: ['action_graph'],
  expand_ref: ['expand_ref'],
  decide: ['decision'],
  report: ['final_report_spec'],
  respond: ['final_report_spec'],
  stop: ['final_report_spec', 'action_graph'],
  cancel: ['decision', 'action_graph'],
};

export const DslEnvelopeSchema = z
  .strictObject({
    type: z.literal(DSL_TYPE),
    version: z.literal(DSL_VERSION, { error: `version must be "${DSL_VERSION}"` }),
    intent: z.enum(INTENTS),
    persist: z.boolean().optional(),
    title: z.string().optional(),
    execution: z
      .strictObject({
        mode: z.enum(['ephemeral', 'durable']).optional(),
        strategy: z.enum(['dag', 'sequential', 'parallel']).optional(),
        max_concurrency: z.number().int().min(1).max(64).optional(),
      })
      .optional(),
    response_policy: z.record(z.string(), z.unknown()).optional(),
    payload: DslPayloadSchema,
  })
  .superRefine((value, ctx) => {
    const allowed = PAYLOADS_BY_INTENT[value.intent];
    if (!allowed.includes(value.payload.type)) {
      ctx.addIssue({
        code: 'custom',
        path: ['payload', 'type'],
        message: `intent "${value.intent}" takes a payload of type ${allowed.map((t) => `"${t}"`).join(' or ')}`,
        params: { oarCode: 'intent_payload_mismatch' },
      });
    }
  });
export type DslEnvelope = z.infer<typeof DslEnvelopeSchema>;
