import type { LanguageModelV3, LanguageModelV3FunctionTool } from '@ai-sdk/provider';
import { AGENT_PROTOCOL_TOOL_NAME, agentProtocolToolDefinition } from '@oar/protocol';
import { traceModelCall } from '../tracing.js';
import { classifyModelError, type ModelFailure, type ModelRetryPolicy } from './model-errors.js';

/**
 * One model call through the AI SDK provider interface (LanguageModelV3). The runner calls `doGenerate`
 * directly rather than `generateText`: the protocol package owns parsing and repair of the raw tool-call
 * arguments, and the raw output must be recorded exactly as the model produced it.
 */

export interface ModelHandle {
  model: LanguageModelV3;
  provider: string;
  modelId: string;
  /** The provider accepts a forced tool choice (tool_choice naming AgentProtocolOutput). */
  supportsForcedToolChoice: boolean;
  /** This model's own retry policy and call timeout (configured per model); the limits' apply otherwise. */
  retry?: Partial<ModelRetryPolicy>;
  timeoutMs?: number;
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
  maxOutputTokens?: number;
  /** One attempt's time limit: past it the request is aborted and the attempt fails as `timeout`. */
  timeoutMs: number;
}

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
}

export type ModelCallResult =
  | { ok: true; output: ModelOutput }
  | { ok: false; failure: ModelFailure; durationMs: number };

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

/**
 * One attempt of a model call. Retries are the runner's (`callStep`): each attempt is a recorded fact, so the log
 * shows every failure and wait, and a resumed thread knows how many attempts were made.
 */
export async function callModel(handle: ModelHandle, request: ModelRequest): Promise<ModelCallResult> {
  const started = Date.now();
  const timeout = new AbortController();
  const timer = setTimeout(() => timeout.abort(new Error('model call timed out')), request.timeoutMs);
  const signal = AbortSignal.any([request.signal, timeout.signal]);
  try {
    const result = await settledUnlessAborted(
      // In the attempt's `chat` span (tracing.ts), which records the response's model and id.
      traceModelCall(request, () =>
        handle.model.doGenerate({
          prompt: [
            { role: 'system', content: request.system },
            { role: 'user', content: [{ type: 'text', text: request.transcript }] },
          ],
          ...(request.carrier === 'tool'
            ? {
                tools: [protocolTool()],
                toolChoice: handle.supportsForcedToolChoice
                  ? { type: 'tool' as const, toolName: AGENT_PROTOCOL_TOOL_NAME }
                  : { type: 'required' as const },
              }
            : {}),
          ...(request.maxOutputTokens ? { maxOutputTokens: request.maxOutputTokens } : {}),
          abortSignal: signal,
          providerOptions: { oar: { modelCall: request.modelCall } },
        }),
      ),
      signal,
    );
    let text = '';
    const toolCalls: ModelOutput['toolCalls'] = [];
    for (const part of result.content) {
      // Reasoning parts are deliberately dropped: private reasoning is never replayed or executed.
      if (part.type === 'text') text += part.text;
      else if (part.type === 'tool-call') toolCalls.push({ name: part.toolName, arguments: part.input });
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
      },
    };
  } catch (error) {
    const failure = classifyModelError(error, {
      interrupted: request.signal.aborted,
      timedOut: timeout.signal.aborted,
      timeoutMs: request.timeoutMs,
    });
    return { ok: false, failure, durationMs: Date.now() - started };
  } finally {
    clearTimeout(timer);
  }
}
