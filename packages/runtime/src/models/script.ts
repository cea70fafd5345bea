import {
  APICallError,
  type LanguageModelV3,
  type LanguageModelV3CallOptions,
  type LanguageModelV3Content,
  type LanguageModelV3FinishReason,
  type LanguageModelV3GenerateResult,
  type LanguageModelV3StreamPart,
  type LanguageModelV3StreamResult,
  type LanguageModelV3Usage,
} from '@ai-sdk/provider';
import { AGENT_PROTOCOL_TOOL_NAME } from '@oar/protocol';
import { OarRuntimeError } from '../kernel/errors.js';
import type { ModelScript, ModelScriptStep } from './script-schema.js';

export {
  loadModelScript,
  type ModelScript,
  ModelScriptSchema,
  type ModelScriptStep,
  ModelScriptStepSchema,
  parseModelScript,
} from './script-schema.js';

export const SCRIPT_PROVIDER = 'oar-script';

export interface ScriptedModelOptions {
  /** Replay `agents[agent].steps` instead of the main steps. */
  agent?: string;
  /** Model id and the label used in error messages, usually the script file name without extension. */
  name?: string;
  /** Where the script came from (a path), named in error messages. */
  source?: string;
}

/**
 * The step to replay: the thread's durable model-call count, which the runtime passes to every model as
 * `providerOptions.oar.modelCall`, so a resumed process continues where the script left off instead of replaying
 * from the first step. The runtime keeps no state for the script.
 */
function requestedStep(options: LanguageModelV3CallOptions): number | undefined {
  const value = options.providerOptions?.oar?.modelCall;
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

/** Deterministic token estimate (~4 characters per token) so replays report identical usage. */
function estimateTokens(text: string): number {
  return Math.max(1, Math.ceil(text.length / 4));
}

function abortError(signal: AbortSignal): unknown {
  return signal.reason instanceof Error ? signal.reason : new DOMException('The model call was aborted', 'AbortError');
}

function delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (signal?.aborted) return Promise.reject(abortError(signal));
  if (ms <= 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal as AbortSignal));
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The text of a prompt as the model is shown it: every message's text, other parts as JSON. */
function promptText(prompt: LanguageModelV3CallOptions['prompt']): string {
  return prompt
    .map((message) =>
      typeof message.content === 'string'
        ? message.content
        : message.content.map((part) => (part.type === 'text' ? part.text : JSON.stringify(part))).join('\n'),
    )
    .join('\n');
}

/** The step's first alternative whose `ifPrompt` matches what the model is shown, else the step itself. */
function chosenResponse(step: ModelScriptStep, options: LanguageModelV3CallOptions): ModelScriptStep {
  if (!step.alternatives) return step;
  const text = promptText(options.prompt);
  return step.alternatives.find((alternative) => new RegExp(alternative.ifPrompt).test(text)) ?? step;
}

/** Splits a string into at most `parts` pieces (at least one character each) so streams carry several deltas. */
function chunks(text: string, parts = 3): string[] {
  if (text.length === 0) return [];
  const size = Math.ceil(text.length / parts);
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

interface ScriptedResponse {
  step: ModelScriptStep;
  content: LanguageModelV3Content[];
  finishReason: LanguageModelV3FinishReason;
  usage: LanguageModelV3Usage;
  responseId: string;
}

/**
 * A LanguageModelV3 that replays a model script. Each call consumes one step: the one named by
 * `providerOptions.oar.modelCall` when given, else the next one after the previous call.
 */
export class ScriptedModel implements LanguageModelV3 {
  readonly specificationVersion = 'v3' as const;
  readonly provider = SCRIPT_PROVIDER;
  readonly modelId: string;
  readonly supportedUrls: Record<string, RegExp[]> = {};

  private nextStep = 0;

  constructor(
    private readonly steps: readonly ModelScriptStep[],
    private readonly label: string,
    modelId: string,
    /** The script's answers to compaction requests (`providerOptions.oar.purpose: "compaction"`); none: it fails. */
    private readonly compactionSteps?: readonly ModelScriptStep[],
  ) {
    this.modelId = modelId;
  }

  async doGenerate(options: LanguageModelV3CallOptions): Promise<LanguageModelV3GenerateResult> {
    const response = await this.respond(options);
    return {
      content: response.content,
      finishReason: response.finishReason,
      usage: response.usage,
      response: { id: response.responseId, modelId: this.modelId },
      warnings: [],
    };
  }

  async doStream(options: LanguageModelV3CallOptions): Promise<LanguageModelV3StreamResult> {
    const response = await this.respond(options);
    const parts: LanguageModelV3StreamPart[] = [
      { type: 'stream-start', warnings: [] },
      { type: 'response-metadata', id: response.responseId, modelId: this.modelId },
    ];
    const pieces = response.step.chunks ?? 3;
    response.content.forEach((part, index) => {
      if (part.type === 'reasoning') {
        const id = `reasoning-${index}`;
        parts.push({ type: 'reasoning-start', id });
        for (const delta of chunks(part.text, pieces)) parts.push({ type: 'reasoning-delta', id, delta });
        parts.push({ type: 'reasoning-end', id });
      } else if (part.type === 'text') {
        const id = `text-${index}`;
        parts.push({ type: 'text-start', id });
        for (const delta of chunks(part.text, pieces)) parts.push({ type: 'text-delta', id, delta });
        parts.push({ type: 'text-end', id });
      } else if (part.type === 'tool-call') {
        parts.push({ type: 'tool-input-start', id: part.toolCallId, toolName: part.toolName });
        for (const delta of chunks(part.input, pieces)) {
          parts.push({ type: 'tool-input-delta', id: part.toolCallId, delta });
        }
        parts.push({ type: 'tool-input-end', id: part.toolCallId });
        parts.push(part);
      }
    });
    parts.push({ type: 'finish', usage: response.usage, finishReason: response.finishReason });
    const pause = response.step.chunkDelayMs ?? 0;
    const signal = options.abortSignal;
    let next = 0;
    return {
      stream: new ReadableStream<LanguageModelV3StreamPart>({
        // Pulled one part at a time, so a reader that stops reading (or cancels) stops the "generation".
        async pull(controller) {
          const part = parts[next++];
          if (part === undefined) {
            controller.close();
            return;
          }
          if (
            pause > 0 &&
            (part.type === 'text-delta' || part.type === 'tool-input-delta' || part.type === 'reasoning-delta')
          ) {
            try {
              await delay(pause, signal);
            } catch (error) {
              controller.error(error);
              return;
            }
          }
          controller.enqueue(part);
        },
      }),
    };
  }

  /** Picks the step, waits its delay, then either throws its error or builds its content. */
  private async respond(options: LanguageModelV3CallOptions): Promise<ScriptedResponse> {
    if (options.providerOptions?.oar?.purpose === 'compaction') return this.compaction(options);
    const index = requestedStep(options) ?? this.nextStep;
    const step = this.steps[index];
    if (step === undefined) {
      throw new OarRuntimeError(
        'script_exhausted',
        `script_exhausted: ${this.label} has ${this.steps.length} step(s) but step index ${index} (0-based) was requested; add a step or check why the run made more model calls than scripted`,
        { details: { script: this.label, step: index, steps: this.steps.length } },
      );
    }
    const chosen = chosenResponse(step, options);
    await delay(chosen.delayMs ?? 0, options.abortSignal);
    // Advanced only once the step is delivered: an aborted call never answered, so a retry gets the same step.
    // Error steps do count, which lets "fail once, then succeed" be scripted against the SDK's own retries.
    this.nextStep = index + 1;
    return this.response(chosen, index, options);
  }

  /** A compaction request: the script's compaction step named by the thread's compaction cursor (`modelCall`). */
  private async compaction(options: LanguageModelV3CallOptions): Promise<ScriptedResponse> {
    const index = requestedStep(options) ?? 0;
    const step = this.compactionSteps?.[index];
    if (step === undefined) {
      const count = this.compactionSteps?.length ?? 0;
      throw new OarRuntimeError(
        'script_exhausted',
        `script_exhausted: ${this.label} has ${count} compaction step(s) but compaction ${index} (0-based) was requested; add "compaction": {"steps": [...]} to script the summary (the runtime uses its deterministic summary meanwhile)`,
        { details: { script: this.label, compactionStep: index, steps: count } },
      );
    }
    await delay(step.delayMs ?? 0, options.abortSignal);
    return this.response(step, index, options);
  }

  private response(step: ModelScriptStep, index: number, options: LanguageModelV3CallOptions): ScriptedResponse {
    if (step.error) {
      throw new APICallError({
        message: step.error.message,
        url: `oar-script://${this.modelId}`,
        requestBodyValues: { scriptStep: index },
        statusCode: step.error.statusCode,
        isRetryable: step.error.retryable,
        ...(step.error.headers ? { responseHeaders: step.error.headers } : {}),
        ...(step.error.body !== undefined ? { responseBody: step.error.body } : {}),
      });
    }
    const content = this.content(step, index);
    const hasToolCalls = content.some((part) => part.type === 'tool-call');
    const unified = step.finishReason ?? (hasToolCalls ? 'tool-calls' : 'stop');
    // Reasoning is output the model produced (and a provider bills) too.
    const outputText = content
      .map((part) =>
        part.type === 'text' || part.type === 'reasoning' ? part.text : part.type === 'tool-call' ? part.input : '',
      )
      .join('');
    const inputTokens = step.usage?.inputTokens ?? estimateTokens(JSON.stringify(options.prompt));
    const outputTokens = step.usage?.outputTokens ?? estimateTokens(outputText);
    return {
      step,
      content,
      finishReason: { unified, raw: unified },
      usage: {
        // Cache and reasoning counts only when scripted: a count left out is "not reported", as with a provider.
        inputTokens: {
          total: inputTokens,
          noCache: inputTokens - (step.usage?.cachedInputTokens ?? 0),
          cacheRead: step.usage?.cachedInputTokens,
          cacheWrite: undefined,
        },
        outputTokens: {
          total: outputTokens,
          text: outputTokens - (step.usage?.reasoningTokens ?? 0),
          reasoning: step.usage?.reasoningTokens,
        },
      },
      responseId: `script-${index}`,
    };
  }

  private content(step: ModelScriptStep, index: number): LanguageModelV3Content[] {
    const content: LanguageModelV3Content[] = [];
    // Ids derive from the step index so a replay after resume produces the same ids as the first run.
    const callId = (n: number) => `call_${index}_${n}`;
    // Reasoning first, as a model thinks before it answers.
    if (step.reasoning !== undefined) content.push({ type: 'reasoning', text: step.reasoning });
    if (step.text !== undefined && step.text !== '') content.push({ type: 'text', text: step.text });
    if (step.protocol !== undefined) {
      content.push({
        type: 'tool-call',
        toolCallId: callId(0),
        toolName: AGENT_PROTOCOL_TOOL_NAME,
        input: wireJson(step.protocol),
      });
    }
    const offset = step.protocol !== undefined ? 1 : 0;
    (step.toolCalls ?? []).forEach((call, n) => {
      content.push({
        type: 'tool-call',
        toolCallId: call.id ?? callId(n + offset),
        toolName: call.name,
        input: typeof call.arguments === 'string' ? call.arguments : wireJson(call.arguments),
      });
    });
    return content;
  }
}

/**
 * A scripted model for the main agent, or for `options.agent` from the script's `agents` section. An agent the
 * script does not cover is an error rather than a fallback to the main steps: replaying the main agent's answers
 * as a sub-agent's would make a broken script look like a working run.
 */
export function createScriptedModel(script: ModelScript, options: ScriptedModelOptions = {}): ScriptedModel {
  const name = options.name ?? 'script';
  const source = options.source ?? name;
  const compaction = script.compaction?.steps;
  if (options.agent === undefined) return new ScriptedModel(script.steps, `model script ${source}`, name, compaction);
  const agentScript = script.agents?.[options.agent];
  if (agentScript === undefined) {
    const known = Object.keys(script.agents ?? {});
    throw new OarRuntimeError(
      'script_agent_missing',
      `model script ${source} has no steps for agent "${options.agent}"; add "agents": { "${options.agent}": { "steps": [...] } }${known.length > 0 ? ` (scripted agents: ${known.join(', ')})` : ''}`,
      { details: { source, agent: options.agent, agents: known } },
    );
  }
  return new ScriptedModel(
    agentScript.steps,
    `model script ${source} (agent "${options.agent}")`,
    `${name}:${options.agent}`,
    compaction,
  );
}

/** Literal JSON text in wireJson's work stack (everything else on it is a value still to write). */
class JsonToken {
  constructor(readonly text: string) {}
}

/**
 * The JSON a provider would put on the wire for scripted arguments. JSON.stringify recurses, so arguments nested
 * deeper than the stack allows (a script that exercises the protocol's depth limit) are written iteratively
 * instead of failing the call as a model error: a real model can send such text, and the script stands in for one.
 */
function wireJson(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
  }
  const out: string[] = [];
  const work: unknown[] = [value];
  while (work.length > 0) {
    const item = work.pop();
    if (item instanceof JsonToken) {
      out.push(item.text);
      continue;
    }
    if (item === null || typeof item !== 'object') {
      out.push(JSON.stringify(item) ?? 'null');
      continue;
    }
    const array = Array.isArray(item);
    const parts: unknown[] = [new JsonToken(array ? '[' : '{')];
    const entries = array ? item.map((v) => ['', v] as const) : Object.entries(item).filter(([, v]) => v !== undefined);
    entries.forEach(([key, child], index) => {
      if (index > 0) parts.push(new JsonToken(','));
      if (!array) parts.push(new JsonToken(`${JSON.stringify(key)}:`));
      parts.push(child);
    });
    parts.push(new JsonToken(array ? ']' : '}'));
    for (let i = parts.length - 1; i >= 0; i -= 1) work.push(parts[i]);
  }
  return out.join('');
}
