import {
  type LanguageModelV3,
  type LanguageModelV3CallOptions,
  type LanguageModelV3Content,
  type LanguageModelV3FinishReason,
  type LanguageModelV3FunctionTool,
  type LanguageModelV3Prompt,
  type LanguageModelV3StreamPart,
  type LanguageModelV3Usage,
  type RerankingModelV3,
  UnsupportedFunctionalityError,
} from '@ai-sdk/provider';
import { AGENT_PROTOCOL_TOOL_NAME, agentProtocolToolDefinition } from '@oar/protocol';
import type { ModelPrice } from '../config/prices.js';
import { traceModelCall } from '../log/tracing.js';
import {
  type CompletedToolCall,
  type ModelDelta,
  type ModelDeltaSink,
  PartialOutput,
  type PartialOutputFields,
} from './model-deltas.js';
import { classifyModelError, type ModelFailure, type ModelRetryPolicy } from './model-errors.js';

/**
 * One model call through the AI SDK provider interface (LanguageModelV3). The runner calls the provider directly
 * rather than `generateText` / `streamText`: the protocol package owns parsing and repair of the raw tool-call
 * arguments, and the raw output must be recorded exactly as the model produced it. The call streams (`doStream`)
 * so text, tool arguments and reasoning reach live subscribers as they arrive (`model.delta`, `tool.args`,
 * `reasoning.delta`: worker/thread-deltas.ts); a model that cannot stream
 * (its `doStream` throws `UnsupportedFunctionalityError`, or its handle says `stream: false`) is called with
 * `doGenerate`. Either way the result is the whole output, assembled once the call has finished.
 */

export interface ModelHandle {
  model: LanguageModelV3;
  /** The model as a reranker, where its provider offers reranking (a runner's `models.rerank`). */
  reranker?: RerankingModelV3;
  provider: string;
  modelId: string;
  /** The provider accepts a forced tool choice (tool_choice naming AgentProtocolOutput). */
  supportsForcedToolChoice: boolean;
  /** This model's own retry policy and call timeout (configured per model); the limits' apply otherwise. */
  retry?: Partial<ModelRetryPolicy>;
  timeoutMs?: number;
  /** How long this model's stream may produce nothing before the call fails as `timeout` (limits' otherwise). */
  idleTimeoutMs?: number;
  /** `false`: never stream, call `doGenerate` (for a provider whose streaming is broken). Default: stream. */
  stream?: boolean;
  /** `false`: the model cannot call tools (a chain then excludes it for the tool carrier). Default: it can. */
  toolCalling?: boolean;
  /** USD per million tokens, when configured (config/prices.ts has the defaults of hosted models). */
  price?: ModelPrice;
  /** Tokens of one request and of one answer, when configured (models/windows.ts has the defaults of hosted models). */
  contextWindow?: number;
  maxOutputTokens?: number;
}

export interface ModelRequest {
  system: string;
  transcript: string;
  carrier: 'tool' | 'text';
  signal: AbortSignal;
  /**
   * How many model calls the thread made before this one (durable: it survives a restart). Passed to the
   * provider as `providerOptions.oar.modelCall`, call metadata any model may use (a deterministic model replays
   * by it, a proxy may log it); hosted providers ignore it.
   */
  modelCall: number;
  /**
   * Why the call is made, passed as `providerOptions.oar.purpose`: absent for a protocol step, `compaction` for a
   * context summary (a scripted model answers it from its script's `compaction` steps, by `modelCall`).
   */
  purpose?: 'compaction';
  maxOutputTokens?: number;
  /** One attempt's time limit: past it the request is aborted and the attempt fails as `timeout`. */
  timeoutMs: number;
  /**
   * How long a streamed call may produce no part at all (from its start, then between parts): past it the request
   * is aborted and the attempt fails as `timeout` (details `idle: true`). None: only `timeoutMs` bounds it.
   */
  idleTimeoutMs?: number;
  /**
   * Where the streamed output goes as it arrives (the driven thread's `Engine.deltas`); none: nowhere.
   */
  deltas?: ModelDeltaSink;
  /**
   * A runner's own call (agent-runners/model-proxy.ts): its messages and function tools replace the protocol prompt
   * (`system` + `transcript`) and the protocol tool; the model may answer in text or call any of the tools.
   */
  runnerPrompt?: {
    prompt: LanguageModelV3Prompt;
    tools: LanguageModelV3FunctionTool[];
    /** The runner's vetted generation settings (its `extra_args`, agent-runners/model-proxy.ts). */
    settings?: GenerationSettings;
  };
}

/** Generation settings a runner may set on its own calls (an allow-list: agent-runners/model-proxy.ts). */
export type GenerationSettings = Partial<
  Pick<
    LanguageModelV3CallOptions,
    | 'temperature'
    | 'topP'
    | 'topK'
    | 'maxOutputTokens'
    | 'stopSequences'
    | 'seed'
    | 'presencePenalty'
    | 'frequencyPenalty'
  >
>;

export interface ModelOutput {
  text: string;
  toolCalls: { name: string; arguments: string }[];
  finishReason: string;
  /**
   * Tokens as the provider reported them. The cache and reasoning counts are part of the input and output counts
   * (not added to them); each is present only when the provider reported it.
   */
  usage: {
    inputTokens: number;
    outputTokens: number;
    totalTokens: number;
    cachedInputTokens?: number;
    cacheWriteTokens?: number;
    reasoningTokens?: number;
  };
  durationMs: number;
  /**
   * The provider's reasoning (its reasoning parts in order, a blank line between two), when it sent any. Not
   * output: never parsed, replayed to a model or executed; recorded as the call's `reasoning.summary` (cost.ts).
   */
  reasoning?: string;
}

export type ModelCallResult =
  | { ok: true; output: ModelOutput }
  /** `partial`: what the call streamed before it failed (bounded; empty fields left out). */
  | { ok: false; failure: ModelFailure; durationMs: number; partial?: PartialOutputFields };

const FINISH_REASONS = new Set(['stop', 'length', 'content-filter', 'tool-calls', 'error', 'other']);

function protocolTool(): LanguageModelV3FunctionTool {
  const definition = agentProtocolToolDefinition();
  return {
    type: 'function',
    name: definition.name,
    description: definition.description,
    inputSchema: definition.parameters as LanguageModelV3FunctionTool['inputSchema'],
  };
}

/**
 * The call's result, unless the signal aborts first: a provider that ignores the abort must not hold the step, and
 * its late answer to an abandoned attempt is dropped (the attempt already failed as a timeout or an interrupt).
 */
function settledUnlessAborted<T>(call: PromiseLike<T>, signal: AbortSignal): Promise<T> {
  const pending = Promise.resolve(call);
  if (signal.aborted) {
    pending.catch(() => undefined);
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      pending.catch(() => undefined);
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    pending.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** What a call produced, the same whether it streamed or not. */
interface CallResult {
  content: LanguageModelV3Content[];
  finishReason: LanguageModelV3FinishReason;
  usage: LanguageModelV3Usage;
  response?: { id?: string; modelId?: string };
}

/** A stream that stopped without its `finish` part (a dropped connection): a transient failure, retried. */
class StreamEndedEarly extends Error {
  readonly isRetryable = true;
  constructor() {
    super('the model stream ended before the response was finished (connection dropped)');
  }
}

/** Where a call's pieces go as they arrive: each delta, and each tool call once its arguments are complete. */
interface CallSink {
  emit(delta: ModelDelta): void;
  toolCall(call: CompletedToolCall): void;
}

/**
 * `doStream`, read to its end: every text, tool-argument and reasoning piece goes to `out` as it arrives, and the
 * parts are assembled into what `doGenerate` would have returned. A model whose `doStream` is unsupported is called
 * with `doGenerate` instead (its output then arrives as one delta per part). An abort cancels the stream at once.
 */
async function streamed(
  model: LanguageModelV3,
  options: LanguageModelV3CallOptions,
  out: CallSink,
  /** Called for every part the stream yields (the idle-stream timeout starts over). */
  onPart?: () => void,
): Promise<CallResult> {
  let started: Awaited<ReturnType<LanguageModelV3['doStream']>>;
  try {
    started = await model.doStream(options);
  } catch (error) {
    if (!UnsupportedFunctionalityError.isInstance(error)) throw error;
    return generated(model, options, out);
  }
  const emit = (delta: ModelDelta) => out.emit(delta);
  const reader = started.stream.getReader();
  const signal = options.abortSignal;
  const onAbort = () => void reader.cancel(signal?.reason).catch(() => undefined);
  signal?.addEventListener('abort', onAbort, { once: true });
  const content: LanguageModelV3Content[] = [];
  let text = '';
  /** Tool calls whose arguments are streaming, by id: name and arguments so far. */
  const inputs = new Map<string, { toolName: string; input: string }>();
  /** Reasoning blocks streaming, by id: their text so far (a block becomes a content part at its end). */
  const reasonings = new Map<string, string>();
  /** Whether a reasoning piece came already (a later block is set apart from it). */
  let anyReasoning = false;
  const closeReasoning = (id: string) => {
    const text = reasonings.get(id);
    reasonings.delete(id);
    if (text) content.push({ type: 'reasoning', text });
  };
  let finish: { usage: LanguageModelV3Usage; finishReason: LanguageModelV3FinishReason } | undefined;
  let response: CallResult['response'];
  let ended = false;
  try {
    for (;;) {
      if (signal?.aborted) throw signal.reason;
      const { done, value } = await reader.read();
      onPart?.();
      if (done) {
        ended = true;
        break;
      }
      const part: LanguageModelV3StreamPart = value;
      switch (part.type) {
        case 'text-delta':
          if (part.delta === '') break;
          text += part.delta;
          emit({ channel: 'text', delta: part.delta });
          break;
        case 'tool-input-start':
          inputs.set(part.id, { toolName: part.toolName, input: '' });
          break;
        case 'tool-input-delta': {
          const input = inputs.get(part.id);
          if (!input || part.delta === '') break;
          input.input += part.delta;
          emit({ channel: 'tool_call', delta: part.delta, toolCallId: part.id, toolName: input.toolName });
          break;
        }
        case 'tool-call': {
          // The complete call is authoritative (parsed once, later); a call sent whole, without input deltas, is
          // one delta so that live readers see it too.
          if (!inputs.get(part.toolCallId)?.input && part.input !== '') {
            emit({ channel: 'tool_call', delta: part.input, toolCallId: part.toolCallId, toolName: part.toolName });
          }
          inputs.delete(part.toolCallId);
          out.toolCall({ toolCallId: part.toolCallId, toolName: part.toolName, input: part.input });
          if (text !== '') {
            content.push({ type: 'text', text });
            text = '';
          }
          content.push(part);
          break;
        }
        case 'reasoning-start':
          reasonings.set(part.id, '');
          break;
        case 'reasoning-delta': {
          if (part.delta === '') break;
          // A delta without its start (a lenient provider) opens its block.
          const before = reasonings.get(part.id) ?? '';
          reasonings.set(part.id, before + part.delta);
          // A block after another starts with the blank line the whole reasoning has between them (`reasoning`).
          emit({ channel: 'reasoning', delta: before === '' && anyReasoning ? `\n\n${part.delta}` : part.delta });
          anyReasoning = true;
          break;
        }
        case 'reasoning-end':
          closeReasoning(part.id);
          break;
        case 'response-metadata':
          response = { ...(part.id ? { id: part.id } : {}), ...(part.modelId ? { modelId: part.modelId } : {}) };
          break;
        case 'finish':
          finish = { usage: part.usage, finishReason: part.finishReason };
          break;
        case 'error':
          throw part.error;
        default:
          // Files, sources and raw chunks are dropped: OAR neither records nor replays them.
          break;
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    // A stream left early (an error part, an abort) is cancelled, which closes the provider's connection.
    if (ended) reader.releaseLock();
    else void reader.cancel().catch(() => undefined);
  }
  if (!finish) throw new StreamEndedEarly();
  // A block the stream never ended is kept as it stands: the call finished.
  for (const id of [...reasonings.keys()]) closeReasoning(id);
  if (text !== '') content.push({ type: 'text', text });
  return { content, ...finish, ...(response ? { response } : {}) };
}

/** `doGenerate`: the whole output at once, handed to `out` as one delta per part. */
async function generated(
  model: LanguageModelV3,
  options: LanguageModelV3CallOptions,
  out: CallSink,
): Promise<CallResult> {
  const result = await model.doGenerate(options);
  if (!options.abortSignal?.aborted) {
    let reasoned = false;
    for (const part of result.content) {
      if (part.type === 'text' && part.text !== '') out.emit({ channel: 'text', delta: part.text });
      else if (part.type === 'reasoning' && part.text !== '') {
        out.emit({ channel: 'reasoning', delta: reasoned ? `\n\n${part.text}` : part.text });
        reasoned = true;
      } else if (part.type === 'tool-call') {
        const { toolCallId, toolName, input } = part;
        if (input !== '') out.emit({ channel: 'tool_call', delta: input, toolCallId, toolName });
        out.toolCall({ toolCallId, toolName, input });
      }
    }
  }
  return result;
}

/**
 * One attempt of a model call. Retries are the runner's (`callStep`): each attempt is a recorded fact, so the log
 * shows every failure and wait, and a resumed thread knows how many attempts were made.
 */
export async function callModel(handle: ModelHandle, request: ModelRequest): Promise<ModelCallResult> {
  const started = Date.now();
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(new Error('model call timed out')), request.timeoutMs);
  // The idle-stream timeout: a stream that yields no part for idleTimeoutMs (from the start, then between parts).
  const idle = new AbortController();
  const idleMs = handle.stream === false ? undefined : request.idleTimeoutMs;
  let idleTimer: NodeJS.Timeout | undefined;
  const touch =
    idleMs === undefined
      ? undefined
      : () => {
          clearTimeout(idleTimer);
          idleTimer = setTimeout(() => idle.abort(new Error('model stream idle')), idleMs);
        };
  touch?.();
  const signal = AbortSignal.any([request.signal, timeout.signal, idle.signal]);
  const sink = request.deltas;
  const partial = new PartialOutput();
  // Pieces of an abandoned attempt (a late answer after the abort) are dropped like its result.
  const out: CallSink = {
    emit: (delta) => {
      if (signal.aborted) return;
      partial.add(delta);
      try {
        sink?.delta(delta);
      } catch {
        // A failing live reader must not fail the call.
      }
    },
    toolCall: (call) => {
      if (signal.aborted) return;
      try {
        sink?.toolCall?.(call);
      } catch {
        // As for a delta.
      }
    },
  };
  try {
    const options: LanguageModelV3CallOptions = {
      prompt: request.runnerPrompt?.prompt ?? [
        { role: 'system', content: request.system },
        { role: 'user', content: [{ type: 'text', text: request.transcript }] },
      ],
      ...(request.runnerPrompt
        ? request.runnerPrompt.tools.length
          ? { tools: request.runnerPrompt.tools, toolChoice: { type: 'auto' as const } }
          : {}
        : request.carrier === 'tool'
          ? {
              tools: [protocolTool()],
              toolChoice: handle.supportsForcedToolChoice
                ? { type: 'tool' as const, toolName: AGENT_PROTOCOL_TOOL_NAME }
                : { type: 'required' as const },
            }
          : {}),
      ...(request.maxOutputTokens ? { maxOutputTokens: request.maxOutputTokens } : {}),
      ...request.runnerPrompt?.settings,
      abortSignal: signal,
      providerOptions: {
        oar: { modelCall: request.modelCall, ...(request.purpose ? { purpose: request.purpose } : {}) },
      },
    };
    const result = await settledUnlessAborted(
      // In the attempt's `chat` span (tracing.ts), which records the response's model and id.
      traceModelCall(request, () =>
        handle.stream === false ? generated(handle.model, options, out) : streamed(handle.model, options, out, touch),
      ),
      signal,
    );
    let text = '';
    const toolCalls: ModelOutput['toolCalls'] = [];
    // Reasoning is kept apart from the output: it is recorded, never parsed, replayed or executed.
    const reasoned: string[] = [];
    for (const part of result.content) {
      if (part.type === 'text') text += part.text;
      else if (part.type === 'tool-call') toolCalls.push({ name: part.toolName, arguments: part.input });
      else if (part.type === 'reasoning' && part.text !== '') reasoned.push(part.text);
    }
    const input = result.usage.inputTokens.total ?? 0;
    const output = result.usage.outputTokens.total ?? 0;
    const { cacheRead, cacheWrite } = result.usage.inputTokens;
    const { reasoning } = result.usage.outputTokens;
    const unified = result.finishReason.unified;
    return {
      ok: true,
      output: {
        text,
        toolCalls,
        finishReason: FINISH_REASONS.has(unified) ? unified : 'unknown',
        usage: {
          inputTokens: input,
          outputTokens: output,
          totalTokens: input + output,
          ...(cacheRead !== undefined ? { cachedInputTokens: cacheRead } : {}),
          ...(cacheWrite !== undefined ? { cacheWriteTokens: cacheWrite } : {}),
          ...(reasoning !== undefined ? { reasoningTokens: reasoning } : {}),
        },
        durationMs: Date.now() - started,
        ...(reasoned.length > 0 ? { reasoning: reasoned.join('\n\n') } : {}),
      },
    };
  } catch (error) {
    const failure = classifyModelError(error, {
      model: { provider: handle.provider, modelId: handle.modelId },
      interrupted: request.signal.aborted,
      timedOut: timeout.signal.aborted,
      timeoutMs: request.timeoutMs,
      ...(idle.signal.aborted && !timeout.signal.aborted ? { idleTimeoutMs: idleMs } : {}),
    });
    return {
      ok: false,
      failure,
      durationMs: Date.now() - started,
      ...(partial.empty ? {} : { partial: partial.fields() }),
    };
  } finally {
    clearTimeout(timer);
    clearTimeout(idleTimer);
    try {
      sink?.end();
    } catch {
      // As for a delta.
    }
  }
}
