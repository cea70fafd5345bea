import type { LanguageModelV3, LanguageModelV3CallOptions } from '@ai-sdk/provider';
import type { RuntimeEvent, ThreadReadModel } from '@oar/protocol';
import { expect } from 'vitest';
import { z } from 'zod';
import {
  type AgentConfig,
  type AnyTool,
  defineTool,
  type ModelHandle,
  type ModelScript,
  OarRuntimeError,
  ToolError,
  ToolRegistry,
  workspaceTools,
} from '../../src/index.js';
import { createScriptedModel } from '../../src/models/testing.js';
import { abortedError } from '../../src/tools/errors.js';
import type { Harness } from './harness.js';

/** The flags of a test tool that only reads: safe to run in parallel, to re-run after a crash, and to cancel. */
export const READ_ONLY_TEST_TOOL = {
  isReadOnly: true,
  isConcurrencySafe: true,
  isDestructive: false,
  isIdempotent: true,
  interruptBehavior: 'cancel',
  capabilities: ['read'],
} as const satisfies Partial<AnyTool>;

/** Every event of the session, in sequence order. */
export function allEvents(h: Harness, sessionId: string): Promise<RuntimeEvent[]> {
  return h.runtime.log.read(sessionId);
}

export const ofType = (events: RuntimeEvent[], type: string) => events.filter((e) => e.type === type);
export const types = (events: RuntimeEvent[]) => events.map((e) => e.type);
export const payload = (event: RuntimeEvent | undefined) => (event?.payload ?? {}) as Record<string, unknown>;

/** Poll until `check` returns a value (the drivers run in the background). */
export async function waitFor<T>(check: () => Promise<T | undefined | false>, timeoutMs = 5000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('waitFor timed out');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Wait until an event of `type` (matching `where`) is in the log. */
export function waitForEvent(
  h: Harness,
  sessionId: string,
  type: string,
  where: (e: RuntimeEvent) => boolean = () => true,
): Promise<RuntimeEvent> {
  return waitFor(async () => (await allEvents(h, sessionId)).find((e) => e.type === type && where(e)));
}

/** The thrown value's OarRuntimeError code. */
export async function errorCode(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(OarRuntimeError);
    return (error as OarRuntimeError).code;
  }
  throw new Error('expected the command to throw');
}

/** The full DSL in a fenced block (snake_case fields), as a text step. */
export function dsl(actions: Record<string, unknown>[], extra: Record<string, unknown> = {}): { text: string } {
  const block = {
    type: 'agent.protocol',
    version: '1',
    intent: 'execute',
    payload: { type: 'action_graph', actions: actions.map((a) => ({ type: 'action', ...a })) },
    ...extra,
  };
  return { text: `Working on it.\n\n\`\`\`json agent-protocol\n${JSON.stringify(block, null, 2)}\n\`\`\`\n` };
}

export const answer = (message: string) => ({ protocol: { kind: 'answer', message } });
export const act = (calls: Record<string, unknown>[], message = 'Working.') => ({
  protocol: { kind: 'act', message, calls },
});

/** A timeline of tool executions, shared by the test tools. */
export type Timeline = string[];

/**
 * A read-only, concurrency-safe tool that waits `ms` (honouring its signal) and records start/end in `timeline`.
 */
export function slowReadTool(timeline: Timeline, name = 'slow_read', ms = 80): AnyTool {
  return defineTool<{ label: string }>({
    name,
    description: 'Waits a little, then returns its label.',
    input: z.strictObject({ label: z.string() }),
    isReadOnly: true,
    isConcurrencySafe: true,
    isDestructive: false,
    isIdempotent: true,
    interruptBehavior: 'cancel',
    capabilities: ['read', 'slow'],
    async execute(input, context) {
      timeline.push(`start:${input.label}`);
      await sleep(ms, context.signal);
      timeline.push(`end:${input.label}`);
      return { text: `label ${input.label}`, summary: `label ${input.label}` };
    },
  });
}

/** A slow tool that honours its AbortSignal (interrupt `cancel`). */
export function cancellableTool(timeline: Timeline, ms = 10_000): AnyTool {
  return defineTool<{ label: string }>({
    name: 'slow_cancel',
    description: 'Waits a long time unless cancelled.',
    input: z.strictObject({ label: z.string() }),
    ...READ_ONLY_TEST_TOOL,
    async execute(input, context) {
      timeline.push(`start:${input.label}`);
      await sleep(ms, context.signal);
      timeline.push(`end:${input.label}`);
      return { text: 'finished' };
    },
  });
}

/** A slow write-like tool with interrupt behaviour `block`: it ignores the interrupt and finishes. */
export function blockingTool(timeline: Timeline, ms = 150): AnyTool {
  return defineTool<{ label: string }>({
    name: 'slow_block',
    description: 'Waits, then records that it finished (cannot be cancelled).',
    input: z.strictObject({ label: z.string() }),
    isReadOnly: false,
    isConcurrencySafe: false,
    isDestructive: false,
    isIdempotent: true,
    interruptBehavior: 'block',
    capabilities: ['write'],
    async execute(input, context) {
      timeline.push(`start:${input.label}`);
      await sleep(ms, context.signal);
      timeline.push(`end:${input.label}`);
      return { text: `wrote ${input.label}` };
    },
  });
}

/** A write that must not run twice (not idempotent, not cancellable): `effect` is what it does. */
export function sideEffectTool(
  name: string,
  description: string,
  effect: (input: { label: string }) => Promise<string>,
): AnyTool {
  return defineTool<{ label: string }>({
    name,
    description,
    input: z.strictObject({ label: z.string() }),
    isReadOnly: false,
    isConcurrencySafe: false,
    isDestructive: false,
    isIdempotent: false,
    interruptBehavior: 'block',
    capabilities: ['write'],
    async execute(input) {
      return { text: await effect(input) };
    },
  });
}

/** A tool that fails the first `failures` calls, then succeeds. */
export function flakyTool(counter: { calls: number }, failures: number): AnyTool {
  return defineTool<{ label: string }>({
    name: 'flaky',
    description: 'Fails a few times, then succeeds.',
    input: z.strictObject({ label: z.string() }),
    ...READ_ONLY_TEST_TOOL,
    async execute(input) {
      counter.calls++;
      if (counter.calls <= failures) {
        throw new ToolError('upstream_failed', `attempt ${counter.calls} failed`, { retryable: true });
      }
      return { text: `ok ${input.label} after ${counter.calls} calls` };
    },
  });
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortedError());
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortedError());
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export function registryWith(...tools: AnyTool[]): ToolRegistry {
  return new ToolRegistry([...workspaceTools(), ...tools]);
}

/** The scripted model, one instance per agent, recording the prompt of every call (what the model saw). */
export function recordingModel(
  script: ModelScript,
  beforeCall?: (call: { index: number; agent: string; text: string }) => void,
): {
  model: (agent: AgentConfig) => ModelHandle;
  prompts: { agent: string; text: string }[];
} {
  const prompts: { agent: string; text: string }[] = [];
  const models = new Map<string, LanguageModelV3>();
  const model = (agent: AgentConfig): ModelHandle => {
    let wrapped = models.get(agent.name);
    const record = (options: LanguageModelV3CallOptions) => {
      const text = JSON.stringify(options.prompt);
      beforeCall?.({ index: prompts.length, agent: agent.name, text });
      prompts.push({ agent: agent.name, text });
    };
    if (!wrapped) {
      const inner = createScriptedModel(script, agent.name === 'main' ? {} : { agent: agent.name });
      wrapped = {
        ...inner,
        specificationVersion: inner.specificationVersion,
        provider: inner.provider,
        modelId: inner.modelId,
        supportedUrls: inner.supportedUrls,
        doGenerate: (options: LanguageModelV3CallOptions) => {
          record(options);
          return inner.doGenerate(options);
        },
        // The runtime streams: a call is recorded whichever way it is made.
        doStream: (options: LanguageModelV3CallOptions) => {
          record(options);
          return inner.doStream(options);
        },
      };
      models.set(agent.name, wrapped);
    }
    return { model: wrapped, provider: 'oar-script', modelId: wrapped.modelId, supportsForcedToolChoice: true };
  };
  return { model, prompts };
}

/** One row of the thread read model's `actions` (the schema keeps them open-ended). */
export interface ActionRow {
  runId: string;
  actionId: string;
  status: string;
  attempt?: number;
  error?: { code: string; message: string; retryable: boolean };
  summary?: string;
}

export function actionRows(read: ThreadReadModel): ActionRow[] {
  return (read.actions ?? []) as unknown as ActionRow[];
}
