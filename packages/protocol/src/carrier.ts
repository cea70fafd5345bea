import { z } from 'zod';
import { EXECUTOR_TYPES, REFERENCE_PATTERN } from './declaration.js';

/**
 * The compatible carrier: the arguments of the runtime-owned `AgentProtocolOutput` tool call.
 * `act` asks the runtime to execute calls, `answer` returns user-visible Markdown, `done` ends the turn.
 */
export const AGENT_PROTOCOL_TOOL_NAME = 'AgentProtocolOutput';

export const CARRIER_RESULT_POLICIES = [
  'summary',
  'full',
  'structured',
  'on_failure',
  'on_demand',
  'adaptive',
] as const;
export const CARRIER_KINDS = ['act', 'answer', 'done'] as const;
export const CALL_FIELDS = [
  'id',
  'type',
  'name',
  'args',
  'depends',
  'result',
  'title',
  'capabilities',
  'prompt',
  'context',
] as const;

/** Call ids become graph node ids, log keys and transcript headings, so they are kept short and plain. */
export const ACTION_ID_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.:-]*$/;
export const MAX_ACTION_ID_LENGTH = 128;

const actionId = z
  .string()
  .min(1)
  .max(MAX_ACTION_ID_LENGTH)
  .regex(ACTION_ID_PATTERN, 'ids use letters, digits, "_", ".", ":" or "-" and start with a letter, digit or "_"');

/** A carrier call's context refs: every reference kind but `md:` (a tool call has no Markdown sections). */
const contextRef = z
  .string()
  .regex(
    REFERENCE_PATTERN,
    'use action:<id>.summary, action:<id>.output, input:user.goal, runtime://… or artifact:<name>',
  )
  .refine((ref) => !ref.startsWith('md:'), 'md: references need the text form (a fenced block with sections)');

export const CarrierCallSchema = z.strictObject({
  id: actionId,
  type: z.enum(EXECUTOR_TYPES),
  name: z.string().min(1),
  args: z.record(z.string(), z.unknown()).optional(),
  depends: z.union([actionId, z.array(actionId)]).optional(),
  result: z.enum(CARRIER_RESULT_POLICIES).optional(),
  title: z.string().optional(),
  /** With name "auto": what the chosen executor must be able to do. */
  capabilities: z.array(z.string().min(1)).optional(),
  /** The task in words: a tool call with a prompt and without a complete input is done by a tool worker. */
  prompt: z.string().optional(),
  /** References resolved into the executor's context (docs/protocol.md "References"). */
  context: z.array(contextRef).optional(),
});
export type CarrierCall = z.infer<typeof CarrierCallSchema>;

export const ProtocolOutputSchema = z
  .strictObject({
    kind: z.enum(CARRIER_KINDS),
    message: z.string().optional(),
    calls: z.array(CarrierCallSchema).optional(),
  })
  .superRefine((value, ctx) => {
    const calls = value.calls ?? [];
    if (value.kind === 'act' && calls.length === 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['calls'],
        message: 'kind "act" needs at least one call',
        params: { oarCode: 'calls_required' },
      });
    }
    if (value.kind !== 'act' && calls.length > 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['calls'],
        message: `kind "${value.kind}" takes no calls`,
        params: { oarCode: 'calls_not_allowed' },
      });
    }
    if (value.kind === 'answer' && (value.message ?? '').trim() === '') {
      ctx.addIssue({
        code: 'custom',
        path: ['message'],
        message: 'kind "answer" needs a non-empty message',
        params: { oarCode: 'message_required' },
      });
    }
  });
export type ProtocolOutput = z.infer<typeof ProtocolOutputSchema>;

/**
 * The provider-facing JSON Schema of the tool's parameters. Written by hand rather than generated because it
 * must be ONE plain object schema: some providers (e.g. DeepSeek) reject a top-level anyOf/oneOf/allOf, and
 * the strict rules that zod expresses with unions and refinements (act needs calls, answer needs a message,
 * depends may be a string) are enforced by `ProtocolOutputSchema` after the call arrives.
 */
export function carrierParametersJsonSchema(): Record<string, unknown> {
  return {
    type: 'object',
    description:
      'Declare what the runtime should do next. kind "act" runs calls; "answer" returns the final Markdown answer; "done" ends the turn.',
    properties: {
      kind: {
        type: 'string',
        enum: [...CARRIER_KINDS],
        description: 'act: execute calls. answer: final user-visible answer in message. done: stop, optional message.',
      },
      message: {
        type: 'string',
        description: 'User-visible Markdown. Required for answer; a short progress note for act.',
      },
      calls: {
        type: 'array',
        description: 'Required for act, omitted otherwise. Calls without mutual depends may run in parallel.',
        items: {
          type: 'object',
          properties: {
            id: { type: 'string', description: 'Unique call id in this thread, e.g. "read_package".' },
            type: { type: 'string', enum: [...EXECUTOR_TYPES] },
            name: {
              type: 'string',
              description: 'Tool, agent, human or runtime operation name from the prompt, or "auto" with capabilities.',
            },
            args: {
              type: 'object',
              description: "Tool input matching the tool's input schema, or the delegation input for an agent.",
              additionalProperties: true,
            },
            depends: {
              type: 'array',
              items: { type: 'string' },
              description: 'Ids of calls that must complete before this one starts.',
            },
            result: {
              type: 'string',
              enum: [...CARRIER_RESULT_POLICIES],
              description: 'What you want back: summary (default), full, structured, on_failure, on_demand, adaptive.',
            },
            title: { type: 'string', description: 'Short label shown to the user.' },
            capabilities: {
              type: 'array',
              items: { type: 'string' },
              description: 'With name "auto": the capabilities the executor needs.',
            },
            prompt: {
              type: 'string',
              description:
                'The task in words; a tool call with a prompt and no complete args is done by a tool worker.',
            },
            context: {
              type: 'array',
              items: { type: 'string' },
              description:
                'References to give the executor: action:<id>.summary|output, input:user.goal, artifact:<name>.',
            },
          },
          required: ['id', 'type', 'name'],
          additionalProperties: false,
        },
      },
    },
    required: ['kind'],
    additionalProperties: false,
  };
}

/** The tool definition a runtime hands to a provider (name + description + parameters). */
export function agentProtocolToolDefinition(): {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
} {
  return {
    name: AGENT_PROTOCOL_TOOL_NAME,
    description:
      'The only way to act: declare tool calls and agent delegations for the runtime to execute, give the final answer, or finish.',
    parameters: carrierParametersJsonSchema(),
  };
}
