import { type ModelInvokeResult, ModelStreamChunkSchema } from '@oar/runner-sdk';
import { z } from 'zod';
import { type Call, type Data, fail, Int, type LangbotRunInfo, parse, Text } from './action-support.js';
import {
  LangbotMessageSchema,
  LangbotToolSchema,
  modelIdOf,
  toLangbotMessage,
  toLangbotToolCalls,
  toLangbotUsage,
  toOarMessages,
  toOarTools,
} from './llm-shapes.js';

/** LangBot's model actions → models.invoke / models.stream / models.rerank / tokens.count (shapes: llm-shapes.ts). */

const LlmArgsSchema = z.looseObject({
  llm_model_uuid: Text,
  messages: z.array(LangbotMessageSchema).min(1),
  funcs: z.array(LangbotToolSchema).nullable().optional(),
  // Passed on as OAR's extra_args, whose allow-list the host enforces (an unknown key is refused by name).
  extra_args: z.record(z.string(), z.unknown()).nullable().optional(),
  // LangBot's per-call timeout and think-stripping: the run's deadline bounds every call on OAR, and OAR's answers
  // carry no reasoning text to strip.
  timeout: z.number().nullable().optional(),
  remove_think: z.boolean().nullable().optional(),
});

function modelPayload(args: z.infer<typeof LlmArgsSchema>, run: LangbotRunInfo): Data {
  const tools = toOarTools(args.funcs ?? []);
  return {
    model_id: modelIdOf(args.llm_model_uuid, run.models ?? []),
    messages: toOarMessages(args.messages),
    ...(tools.length ? { tools } : {}),
    ...(args.extra_args && Object.keys(args.extra_args).length ? { extra_args: args.extra_args } : {}),
  };
}

async function invokeLlm({ data, host, run }: Call): Promise<Data> {
  const args = parse(LlmArgsSchema, data, 'invoke_llm');
  const result = (await host.call('models.invoke', modelPayload(args, run))) as ModelInvokeResult;
  return {
    message: toLangbotMessage(result.message),
    usage: toLangbotUsage(result.usage),
    finish_reason: result.finish_reason,
  };
}

/**
 * invoke_llm_stream: OAR's `{type: "delta"}` chunks become LangBot MessageChunks (`content` the piece, `all_content`
 * the text so far), the result a final chunk (`is_final`, its tool calls, whatever text the deltas did not carry),
 * then a usage-only event — LangBot's host sends the same sequence. With `onData` every chunk goes there in order
 * and the answer is `{}` (the stream's end); without it the answer is the final chunk with the usage.
 */
async function invokeLlmStream({ data, host, run, onData }: Call): Promise<Data> {
  const args = parse(LlmArgsSchema, data, 'invoke_llm_stream');
  let text = '';
  let sequence = 0;
  let result: ModelInvokeResult | undefined;
  // The host's chunk callback is synchronous; the runner's writes are not: chained so they keep their order, and a
  // failed write (the connection closed) is kept to be thrown once the call is done, never left unhandled.
  let sent: Promise<void> = Promise.resolve();
  let sendFailure: { error: unknown } | undefined;
  const send = (out: Data) => {
    sent = sent
      .then(() => (sendFailure ? undefined : onData?.(out)))
      .catch((error: unknown) => {
        sendFailure ??= { error };
      });
  };
  await host.call('models.stream', modelPayload(args, run), (raw) => {
    const chunk = ModelStreamChunkSchema.safeParse(raw);
    if (!chunk.success) return;
    if (chunk.data.type === 'result') {
      result = chunk.data.result;
      return;
    }
    text += chunk.data.content;
    send({
      chunk: {
        role: 'assistant',
        content: chunk.data.content,
        all_content: text,
        tool_calls: null,
        is_final: false,
        msg_sequence: sequence++,
      },
    });
  });
  await sent;
  if (sendFailure) throw sendFailure.error;
  if (!result) throw fail('runtime_error', 'the model stream ended without its result', { action: 'models.stream' });
  const whole = result.message.content;
  const final = {
    chunk: {
      role: 'assistant',
      content: whole.startsWith(text) ? whole.slice(text.length) : '',
      all_content: whole,
      tool_calls: toLangbotToolCalls(result.message.tool_calls),
      is_final: true,
      msg_sequence: sequence,
    },
  };
  const usage = { usage: toLangbotUsage(result.usage), finish_reason: result.finish_reason };
  if (!onData) return { ...final, ...usage };
  await onData(final);
  await onData(usage);
  return {};
}

async function countTokens({ data, host, run }: Call): Promise<Data> {
  const args = parse(LlmArgsSchema, data, 'count_tokens');
  const { model_id, messages, tools } = modelPayload(args, run);
  const counted = (await host.call('tokens.count', { model_id, messages, ...(tools ? { tools } : {}) })) as Data;
  // LangBot reads `tokens`; the rest says plainly that it is OAR's estimate, not the provider's tokenizer.
  return { tokens: counted.tokens, estimate: true, method: counted.method };
}

const RerankArgsSchema = z.looseObject({
  rerank_model_uuid: Text,
  query: Text,
  documents: z.array(Text).min(1),
  top_k: Int.nullable().optional(),
  // LangBot's SDK always sends `extra_args` (usually {}); OAR's models.rerank takes none.
  extra_args: z.record(z.string(), z.unknown()).nullable().optional(),
  timeout: z.number().nullable().optional(),
});

async function invokeRerank({ data, host, run }: Call): Promise<Data> {
  const args = parse(RerankArgsSchema, data, 'invoke_rerank');
  // Refused by name rather than dropped: a provider option the runner asked for would silently not apply.
  const extra = Object.keys(args.extra_args ?? {});
  if (extra.length) {
    throw fail('invalid_argument', "OAR's models.rerank takes no extra_args", { extra_args: extra.slice(0, 10) });
  }
  const answer = (await host.call('models.rerank', {
    model_id: modelIdOf(args.rerank_model_uuid, run.models ?? []),
    query: args.query,
    documents: args.documents,
    ...(args.top_k ? { top_k: args.top_k } : {}),
  })) as { results?: { index: number; score: number }[] };
  return { results: (answer.results ?? []).map((r) => ({ index: r.index, relevance_score: r.score })) };
}

export const MODEL_ACTIONS: Record<string, (call: Call) => Promise<Data>> = {
  invoke_llm: invokeLlm,
  invoke_llm_stream: invokeLlmStream,
  count_tokens: countTokens,
  invoke_rerank: invokeRerank,
};
