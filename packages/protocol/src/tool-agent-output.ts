import { z } from 'zod';

/**
 * The Agent Tool Protocol's canonical record of one business-tool call (`ToolAgentOutput`, spec §7–8), and the
 * UI hints a per-method post-processor derives from its result. The model never sees this record: it sees the
 * compact JSON text of `result` with its status (the observation). The record rides on `tool.result` /
 * `tool.failed` (`payload.toolAgentOutput`), is stored as a JSON artifact, and is what history, AG-UI and replay
 * read back. Hints are internal: the wire carries `ui_schema`, compiled from them (ui-schema.ts).
 */

const Scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);

/** A declarative follow-up the UI may offer: another call of the same tool (it goes through the model and the
 * runtime's permissions like any call), or a link. Never code. */
export const UiActionSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('call'),
    label: z.string().min(1),
    module: z.string().min(1),
    method: z.string().min(1),
    input: z.record(z.string(), z.unknown()),
  }),
  z.strictObject({ type: z.literal('open_url'), label: z.string().min(1), url: z.url() }),
]);
export type UiAction = z.infer<typeof UiActionSchema>;

const Field = z.strictObject({ label: z.string(), value: Scalar });

/** One UI hint: what a post-processor says is worth showing, in terms of the business data. */
export const UiHintSchema = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('card'),
    title: z.string(),
    body: z.string().optional(),
    fields: z.array(Field).optional(),
    actions: z.array(UiActionSchema).optional(),
  }),
  z.strictObject({
    type: z.literal('list'),
    title: z.string().optional(),
    items: z.array(
      z.strictObject({
        id: z.string().optional(),
        title: z.string(),
        subtitle: z.string().optional(),
        meta: z.string().optional(),
      }),
    ),
    empty: z.string().optional(),
  }),
  z.strictObject({
    type: z.literal('table'),
    title: z.string().optional(),
    columns: z.array(z.strictObject({ key: z.string(), label: z.string() })).min(1),
    rows: z.array(z.record(z.string(), Scalar)),
  }),
  z.strictObject({ type: z.literal('key_value'), title: z.string().optional(), entries: z.array(Field) }),
  z.strictObject({
    type: z.literal('calendar_event'),
    event: z.strictObject({
      id: z.string(),
      title: z.string(),
      start_at: z.string(),
      end_at: z.string().optional(),
      location: z.string().optional(),
      attendees: z.array(z.string()).optional(),
      status: z.string().optional(),
    }),
    actions: z.array(UiActionSchema).optional(),
  }),
  z.strictObject({
    type: z.literal('contact'),
    contact: z.strictObject({
      id: z.string(),
      name: z.string(),
      email: z.string().optional(),
      phone: z.string().optional(),
      organization: z.string().optional(),
    }),
  }),
  z.strictObject({
    type: z.literal('confirmation'),
    title: z.string(),
    message: z.string(),
    outcome: z.enum(['done', 'partial', 'failed']),
    actions: z.array(UiActionSchema).optional(),
  }),
]);
export type UiHint = z.infer<typeof UiHintSchema>;

/** `status` of a call: the CLI's success, a partial success (it names what was not done), or a failure. */
export const TOOL_CALL_STATUSES = ['success', 'failure', 'partial'] as const;

/** The structured error of a failed call: the spec's code (`INVALID_ACTION_INPUT`, …), never a bare message. */
export const ToolAgentErrorSchema = z.object({
  code: z.string().min(1),
  message: z.string(),
  module: z.string().optional(),
  method: z.string().optional(),
  /** INVALID_ACTION_INPUT: the method's input as compact text (`start_at: datetime with offset`). */
  input_schema: z.record(z.string(), z.string()).optional(),
  details: z.record(z.string(), z.unknown()).optional(),
});
export type ToolAgentError = z.infer<typeof ToolAgentErrorSchema>;

export const ToolAgentResultSchema = z.object({
  module: z.string(),
  method: z.string(),
  /** JSON-native, with the ids, counts and outcomes later calls need. */
  data: z.unknown(),
  /** A partial success: what was not done, and why. */
  partial: z.object({ not_done: z.array(z.unknown()), reason: z.string() }).optional(),
});
export type ToolAgentResult = z.infer<typeof ToolAgentResultSchema>;

export const ToolAgentOutputSchema = z.object({
  tool_name: z.string().min(1),
  tool_call_id: z.string().min(1),
  tool_call_args: z.object({ module: z.string(), method: z.string(), input: z.record(z.string(), z.unknown()) }),
  status: z.enum(TOOL_CALL_STATUSES),
  result: ToolAgentResultSchema.nullable(),
  error: ToolAgentErrorSchema.nullable(),
  /** From per-method post-processors only (never the model, never the CLI's text); none when a method has none. */
  ui_hints: z.array(UiHintSchema),
});
export type ToolAgentOutput = z.infer<typeof ToolAgentOutputSchema>;

/**
 * What the model sees of a call (spec §6): the compact JSON text of `result` with its status — equal information,
 * never a summary — or of the structured error. Content stays a string.
 */
export function toolAgentProjection(output: Pick<ToolAgentOutput, 'status' | 'result' | 'error'>): string {
  if (output.status === 'failure' || !output.result) {
    return JSON.stringify({ status: 'failure', error: output.error });
  }
  return JSON.stringify({ status: output.status, ...output.result });
}
