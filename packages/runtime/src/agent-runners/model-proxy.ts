import type { LanguageModelV3FunctionTool, LanguageModelV3Prompt } from '@ai-sdk/provider';
import {
  type ChatMessage,
  MODEL_EXTRA_ARGS,
  ModelExtraArgsSchema,
  type ModelInvokeArgs,
  ModelInvokeArgsSchema,
  type ModelInvokeResult,
  ModelRerankArgsSchema,
  type ModelRerankResult,
  type RequestStream,
} from '@oar/runner-sdk';
import { MODEL_CALL_DEFAULTS } from '../config/binding.js';
import { modelCompleted, rerankCompleted } from '../models/cost.js';
import { callModel, type GenerationSettings, type ModelHandle } from '../models/model-call.js';
import { classifyModelError } from '../models/model-errors.js';
import { checkRunnerBudget } from './budget-check.js';
import type { AuditTarget } from './run-session.js';
import { apiError, type RunSession } from './run-session.js';

/** The model resource id of the agent's own bound model. */
export const DEFAULT_MODEL_RESOURCE = 'default';

/**
 * models.invoke / models.stream: one call through OAR's model layer (`callModel`: timeouts, retries' classification,
 * tracing), bracketed by `model.requested` … `model.completed` / `model.failed` with usage and cost, like any model
 * call of the thread — so budgets, cost and the scripted model's cursor see it. The model is one of the run's
 * model resources (`default` is the agent's bound model, other ids the binding's configured models).
 */
export async function modelCall(
  session: RunSession,
  payload: Record<string, unknown>,
  stream: RequestStream | undefined,
  audit: AuditTarget,
): Promise<ModelInvokeResult | null> {
  const op = stream ? 'stream' : 'invoke';
  const parsed = ModelInvokeArgsSchema.safeParse(payload);
  if (!parsed.success) {
    throw apiError('invalid_argument', `models.${op} takes {model_id, messages, tools?, extra_args?}`, {
      issues: parsed.error.issues.slice(0, 5).map((i) => ({ path: i.path.join('.'), message: i.message })),
    });
  }
  const args = parsed.data;
  const settings = generationSettings(args.extra_args, op);
  const handle = await grantedModel(session, op, args.model_id, audit);
  const ids = { threadId: session.ids.threadId, turnId: session.ids.turnId };
  const prompt = { ...toPrompt(args), settings };
  // About four characters a token, as the protocol loop's estimate before a call.
  await checkRunnerBudget(session, handle, Math.ceil(JSON.stringify(payload).length / 4));
  await session.record(
    [
      {
        type: 'model.requested',
        ...ids,
        payload: {
          modelId: handle.modelId,
          provider: handle.provider,
          attempt: 1,
          messageCount: args.messages.length,
          toolCount: args.tools?.length ?? 0,
          runner: { runId: session.ids.runId, runnerId: session.runnerId, op },
        },
      },
    ],
    true,
  );
  const modelCallIndex = session.thread.modelCalls + session.modelCalls++;
  const result = await callModel(handle, {
    system: '',
    transcript: '',
    carrier: 'text',
    signal: session.signal,
    modelCall: modelCallIndex,
    timeoutMs: Math.max(
      1,
      Math.min(handle.timeoutMs ?? MODEL_CALL_DEFAULTS.timeoutMs, session.deadlineAt - Date.now()),
    ),
    runnerPrompt: prompt,
    ...(stream
      ? {
          deltas: {
            delta: (d) => {
              if (d.channel === 'text') void stream.send({ type: 'delta', content: d.delta }).catch(() => undefined);
            },
            end: () => undefined,
          },
        }
      : {}),
  });
  if (!result.ok) {
    await session.record([
      {
        type: 'model.failed',
        ...ids,
        payload: {
          modelId: handle.modelId,
          provider: handle.provider,
          error: result.failure.error,
          durationMs: result.durationMs,
          failureClass: result.failure.failureClass,
          attempt: 1,
        },
      },
    ]);
    const retryable = result.failure.error.retryable;
    throw apiError(
      'runtime_error',
      `the model call failed: ${result.failure.error.message}`,
      {
        failure_class: result.failure.failureClass,
      },
      retryable,
    );
  }
  const output = result.output;
  await session.record(modelCompleted(ids, handle, output));
  const message: ChatMessage = {
    role: 'assistant',
    content: output.text,
    ...(output.toolCalls.length
      ? {
          tool_calls: output.toolCalls.map((call, index) => ({
            id: `call_${modelCallIndex}_${index}`,
            name: call.name,
            arguments: call.arguments,
          })),
        }
      : {}),
  };
  const answer: ModelInvokeResult = {
    message,
    finish_reason: output.finishReason,
    usage: { input_tokens: output.usage.inputTokens, output_tokens: output.usage.outputTokens },
  };
  if (stream) {
    await stream.send({ type: 'result', result: answer });
    return null;
  }
  return answer;
}

/**
 * `extra_args` → the provider call's generation settings. Only the allow-list of ModelExtraArgsSchema passes
 * (temperature, top_p, top_k, max_tokens / max_output_tokens, stop, seed, presence_penalty, frequency_penalty): an
 * unknown key is `invalid_argument` naming it, so a runner never reaches provider options the host did not vet.
 */
export function generationSettings(extra: Record<string, unknown> | null | undefined, op: string): GenerationSettings {
  if (!extra) return {};
  const unknown = Object.keys(extra).filter((key) => !(MODEL_EXTRA_ARGS as string[]).includes(key));
  if (unknown.length) {
    throw apiError(
      'invalid_argument',
      `models.${op} extra_args does not take ${unknown.map((k) => `"${k.slice(0, 64)}"`).join(', ')}`,
      {
        keys: unknown.map((k) => k.slice(0, 64)),
        allowed: MODEL_EXTRA_ARGS,
      },
    );
  }
  const parsed = ModelExtraArgsSchema.safeParse(extra);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw apiError('invalid_argument', `models.${op} extra_args.${issue?.path.join('.')}: ${issue?.message}`, {
      keys: [String(issue?.path[0] ?? '')],
    });
  }
  const x = parsed.data;
  const max = x.max_output_tokens ?? x.max_tokens;
  return {
    ...(x.temperature !== undefined ? { temperature: x.temperature } : {}),
    ...(x.top_p !== undefined ? { topP: x.top_p } : {}),
    ...(x.top_k !== undefined ? { topK: x.top_k } : {}),
    ...(max !== undefined ? { maxOutputTokens: max } : {}),
    ...(x.stop !== undefined ? { stopSequences: typeof x.stop === 'string' ? [x.stop] : x.stop } : {}),
    ...(x.seed !== undefined ? { seed: x.seed } : {}),
    ...(x.presence_penalty !== undefined ? { presencePenalty: x.presence_penalty } : {}),
    ...(x.frequency_penalty !== undefined ? { frequencyPenalty: x.frequency_penalty } : {}),
  };
}

/**
 * models.rerank: the documents ranked against the query by a model whose provider offers reranking (a `cohere`
 * entry, or a server speaking its API), bracketed by `model.requested` … `model.completed` / `model.failed` like
 * the other model calls. A reranker reports no tokens, so the usage is empty ("not reported"), never zeros.
 */
export async function modelRerank(
  session: RunSession,
  payload: Record<string, unknown>,
  audit: AuditTarget,
): Promise<ModelRerankResult> {
  const parsed = ModelRerankArgsSchema.safeParse(payload);
  if (!parsed.success) {
    throw apiError('invalid_argument', 'models.rerank takes {model_id, query, documents (1–1000), top_k?}', {
      issues: parsed.error.issues.slice(0, 5).map((i) => ({ path: i.path.join('.'), message: i.message })),
    });
  }
  const args = parsed.data;
  const handle = await grantedModel(session, 'rerank', args.model_id, audit);
  if (!handle.reranker) {
    throw apiError('not_found', `model ${args.model_id} (${handle.provider}) offers no reranking`, {
      model_id: args.model_id,
      provider: handle.provider,
    });
  }
  const ids = { threadId: session.ids.threadId, turnId: session.ids.turnId };
  const model = { modelId: handle.modelId, provider: handle.provider };
  const runner = { runId: session.ids.runId, runnerId: session.runnerId, op: 'rerank' };
  await session.record(
    [
      {
        type: 'model.requested',
        ...ids,
        payload: { ...model, attempt: 1, documentCount: args.documents.length, runner },
      },
    ],
    true,
  );
  const started = Date.now();
  const timeoutMs = Math.max(
    1,
    Math.min(handle.timeoutMs ?? MODEL_CALL_DEFAULTS.timeoutMs, session.deadlineAt - started),
  );
  const timer = AbortSignal.timeout(timeoutMs);
  try {
    // The provider interface itself (as the loop calls language models): one call, no retry behind the runner's back.
    const { ranking } = await handle.reranker.doRerank({
      query: args.query,
      // As text: a mixed list is one kind for the provider (Cohere ranks JSON objects as their text anyway).
      documents: { type: 'text', values: args.documents.map((d) => (typeof d === 'string' ? d : JSON.stringify(d))) },
      ...(args.top_k ? { topN: args.top_k } : {}),
      abortSignal: AbortSignal.any([session.signal, timer]),
    });
    const results = [...ranking]
      .sort((a, b) => b.relevanceScore - a.relevanceScore)
      .filter((r) => Number.isInteger(r.index) && r.index >= 0 && r.index < args.documents.length)
      .map((r) => ({ index: r.index, score: r.relevanceScore, document: args.documents[r.index] }));
    await session.record(
      rerankCompleted(
        ids,
        model,
        results.map(({ index, score }) => ({ index, score })),
        Date.now() - started,
      ),
    );
    return { results };
  } catch (error) {
    const failure = classifyModelError(error, {
      timedOut: timer.aborted,
      interrupted: session.signal.aborted,
      timeoutMs,
      model,
    });
    await session.record([
      {
        type: 'model.failed',
        ...ids,
        payload: {
          ...model,
          error: failure.error,
          durationMs: Date.now() - started,
          failureClass: failure.failureClass,
          attempt: 1,
        },
      },
    ]);
    throw apiError(
      'runtime_error',
      `the rerank call failed: ${failure.error.message}`,
      { failure_class: failure.failureClass },
      failure.error.retryable,
    );
  }
}

/** A model resource of the run for one op: granted by the manifest ∩ binding, among the run's models, resolved. */
async function grantedModel(
  session: RunSession,
  op: 'invoke' | 'stream' | 'rerank',
  modelId: string,
  audit: AuditTarget,
): Promise<ModelHandle> {
  audit.resource = modelId;
  audit.scope = 'model';
  const { access } = session;
  if (!access.modelOps.includes(op)) throw apiError('unauthorized', `models.${op} is not granted to this run`);
  if (!access.models.includes(modelId)) {
    throw apiError('unauthorized', `model ${modelId} is not among this run's resources`, { model_id: modelId });
  }
  return resolveModel(session, modelId);
}

async function resolveModel(session: RunSession, modelId: string): Promise<ModelHandle> {
  const { engine, agent } = session;
  try {
    // `default` is the agent's own model (or the binding's default); another id names one of the binding's models.
    return await engine.model(modelId === DEFAULT_MODEL_RESOURCE ? agent : { ...agent, model: modelId });
  } catch (error) {
    throw apiError('not_found', `model ${modelId} cannot be resolved: ${(error as Error).message}`);
  }
}

/** The runner's chat messages as the provider interface's prompt; its tools as function tools. */
function toPrompt(args: ModelInvokeArgs): { prompt: LanguageModelV3Prompt; tools: LanguageModelV3FunctionTool[] } {
  const names = new Map<string, string>();
  const prompt: LanguageModelV3Prompt = args.messages.map((m) => {
    if (m.role === 'system') return { role: 'system', content: m.content };
    if (m.role === 'user') return { role: 'user', content: [{ type: 'text', text: m.content }] };
    if (m.role === 'assistant') {
      for (const call of m.tool_calls ?? []) names.set(call.id, call.name);
      return {
        role: 'assistant',
        content: [
          ...(m.content ? [{ type: 'text' as const, text: m.content }] : []),
          ...(m.tool_calls ?? []).map((call) => ({
            type: 'tool-call' as const,
            toolCallId: call.id,
            toolName: call.name,
            input: parseArguments(call.arguments),
          })),
        ],
      };
    }
    const toolCallId = m.tool_call_id ?? '';
    return {
      role: 'tool',
      content: [
        {
          type: 'tool-result',
          toolCallId,
          toolName: m.name ?? names.get(toolCallId) ?? 'tool',
          output: { type: 'text', value: m.content },
        },
      ],
    };
  });
  const tools: LanguageModelV3FunctionTool[] = (args.tools ?? []).map((tool) => ({
    type: 'function',
    name: tool.name,
    ...(tool.description ? { description: tool.description } : {}),
    inputSchema: (tool.parameters ?? { type: 'object' }) as LanguageModelV3FunctionTool['inputSchema'],
  }));
  return { prompt, tools };
}

function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
