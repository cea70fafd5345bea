import { createHash } from 'node:crypto';
import type { ChatMessage, ModelInvokeResult, ModelTool } from '@oar/runner-sdk';
import { z } from 'zod';
import { fail } from './action-support.js';

/**
 * LangBot's model shapes (its plugin SDK's `provider.message.Message`, `LLMTool`, `LLMTokenUsage`) ↔ OAR's runner
 * model API (`ChatMessage`, `ModelTool`, `usage.input_tokens`). The runner's data is untrusted: it is parsed with
 * zod, and what OAR cannot carry is refused by name instead of dropped (a dropped image or role would change what
 * the model is asked without anyone knowing).
 */

const Dict = z.record(z.string(), z.unknown());

/** One part of a list content: LangBot's ContentElement (`text`, `image_url`, `image_base64`, `file_url`, …). */
const ContentPartSchema = z.looseObject({ type: z.string(), text: z.string().nullable().optional() });

/** LangBot's ToolCall: `{id, type: "function", function: {name, arguments}}` (arguments a JSON string). */
const LangbotToolCallSchema = z.looseObject({
  id: z.string(),
  type: z.string().nullable().optional(),
  function: z.looseObject({
    name: z.string(),
    // A JSON string in LangBot's model; an object is taken too (some runners build it by hand) and encoded.
    arguments: z.union([z.string(), Dict]).nullable().optional(),
  }),
});

export const LangbotMessageSchema = z.looseObject({
  role: z.string(),
  name: z.string().nullable().optional(),
  content: z
    .union([z.string(), z.array(ContentPartSchema)])
    .nullable()
    .optional(),
  tool_calls: z.array(LangbotToolCallSchema).nullable().optional(),
  tool_call_id: z.string().nullable().optional(),
});
export type LangbotMessage = z.infer<typeof LangbotMessageSchema>;

/** LangBot's LLMTool as its SDK dumps it (`func` is excluded): name, description, JSON-schema parameters. */
export const LangbotToolSchema = z.looseObject({
  name: z.string(),
  description: z.string().nullable().optional(),
  human_desc: z.string().nullable().optional(),
  parameters: Dict.nullable().optional(),
});

const OAR_ROLES = new Set(['system', 'user', 'assistant', 'tool']);

/**
 * A message's content as OAR's text: a string as it is, null as empty, a list as its text parts in order (joined
 * without a separator, as LangBot renders a list to plain text). A part that is not text (an image, a file) is
 * `invalid_argument`: OAR's runner model API carries text only.
 */
function textOf(content: LangbotMessage['content'], index: number): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  return content
    .map((part, at) => {
      if (part.type !== 'text') {
        throw fail(
          'invalid_argument',
          `messages[${index}].content[${at}] is a ${part.type.slice(0, 32)} part: OAR's model API carries text only`,
          { index, part: at, type: part.type.slice(0, 32) },
        );
      }
      return part.text ?? '';
    })
    .join('');
}

/**
 * LangBot messages → OAR chat messages: roles `system` / `user` / `assistant` / `tool` (LangBot's internal
 * `command` and `plugin` roles are `invalid_argument`), content lists and null reshaped to text, tool calls
 * `{id, function: {name, arguments}}` → `{id, name, arguments}` (provider_specific_fields are not carried).
 */
export function toOarMessages(messages: readonly LangbotMessage[]): ChatMessage[] {
  return messages.map((m, index) => {
    if (!OAR_ROLES.has(m.role)) {
      throw fail('invalid_argument', `messages[${index}].role ${m.role.slice(0, 32)} is not a model message role`, {
        index,
        role: m.role.slice(0, 32),
      });
    }
    const message: ChatMessage = { role: m.role as ChatMessage['role'], content: textOf(m.content, index) };
    if (m.tool_calls?.length) {
      message.tool_calls = m.tool_calls.map((call) => ({
        id: call.id,
        name: call.function.name,
        arguments:
          typeof call.function.arguments === 'string'
            ? call.function.arguments
            : JSON.stringify(call.function.arguments ?? {}),
      }));
    }
    if (m.tool_call_id) message.tool_call_id = m.tool_call_id;
    if (m.name) message.name = m.name;
    return message;
  });
}

/** LangBot `funcs` → OAR model tools (`human_desc` is LangBot's UI text, not sent to the model there either). */
export function toOarTools(funcs: readonly z.infer<typeof LangbotToolSchema>[]): ModelTool[] {
  return funcs.map((f) => ({
    name: f.name,
    ...(f.description ? { description: f.description } : {}),
    ...(f.parameters ? { parameters: f.parameters } : {}),
  }));
}

/** OAR tool calls → LangBot's `{id, type: "function", function: {name, arguments}}`, or null when there are none. */
export function toLangbotToolCalls(calls: ChatMessage['tool_calls']) {
  return calls?.length
    ? calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }))
    : null;
}

/**
 * An OAR model answer → LangBot's Message: the assistant's text (null when it only called tools, as LangBot's
 * providers answer), its tool calls in LangBot's shape.
 */
export function toLangbotMessage(message: ChatMessage): Record<string, unknown> {
  const toolCalls = toLangbotToolCalls(message.tool_calls);
  return {
    role: message.role,
    name: null,
    content: message.content === '' && toolCalls ? null : message.content,
    tool_calls: toolCalls,
    tool_call_id: null,
  };
}

/** OAR usage → LangBot's LLMTokenUsage (OpenAI's names). */
export function toLangbotUsage(usage: ModelInvokeResult['usage']): Record<string, number> {
  return {
    prompt_tokens: usage.input_tokens,
    completion_tokens: usage.output_tokens,
    total_tokens: usage.input_tokens + usage.output_tokens,
  };
}

/**
 * The stable `llm_model_uuid` of one OAR model resource id: UUID-shaped (version 5 and variant bits set) from the
 * sha256 of the id, so the same configured model has the same uuid in every run and on every host, and a runner that
 * treats it as opaque (as LangBot's protocol says it must) never sees OAR's ids change shape.
 */
export function langbotModelUuid(modelId: string): string {
  const hex = createHash('sha256').update(`oar-model:${modelId}`).digest('hex').slice(0, 32).split('');
  hex[12] = '5';
  hex[16] = ((Number.parseInt(hex[16] as string, 16) & 0x3) | 0x8).toString(16);
  const h = hex.join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/**
 * The OAR model id a runner's `llm_model_uuid` names: the run's model whose uuid it is, or a run's model id given
 * as it is. Anything else is passed on unchanged, so the host refuses it (`unauthorized`: not among the run's
 * resources) and audits the refusal like any other.
 */
export function modelIdOf(llmModelUuid: string, models: readonly string[]): string {
  if (models.includes(llmModelUuid)) return llmModelUuid;
  return models.find((id) => langbotModelUuid(id) === llmModelUuid) ?? llmModelUuid;
}

/**
 * The run context's `resources.models` for a LangBot runner: each model of the run by its uuid (LangBot's SDK checks
 * `llm_model_uuid` against these ids before it calls), with the granted operations — `count_tokens` with `invoke` or
 * `stream`, as tokens.count is granted (the SDK checks the operation too).
 */
export function langbotModelResources(
  models: readonly string[],
  operations: readonly string[],
): { model_id: string; operations: string[] }[] {
  const ops = [...operations];
  if (ops.includes('invoke') || ops.includes('stream')) ops.push('count_tokens');
  return models.map((id) => ({ model_id: langbotModelUuid(id), operations: ops }));
}
