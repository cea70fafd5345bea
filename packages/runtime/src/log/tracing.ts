import { AsyncLocalStorage } from 'node:async_hooks';
import type { OarError } from '@oar/protocol';
import {
  type Attributes,
  type Context,
  context,
  isSpanContextValid,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  type Tracer,
  type TracerProvider,
  trace,
} from '@opentelemetry/api';
import type { ThreadView } from '../read-models/thread-state.js';
import type { Redactor } from '../redaction/redactor.js';
import type { EventDraft } from './draft.js';

/**
 * OpenTelemetry spans for what a worker does, in the GenAI semantic conventions: `invoke_agent {agent}` per turn
 * (a sub-agent's turn under its parent's), `chat {model}` per model call attempt, `execute_tool {tool}` per tool
 * run. Only `@opentelemetry/api` is used: without an SDK registered (or a `tracerProvider` given) every span is a
 * no-op and no event carries a trace id.
 *
 * Spans follow the recorded facts: a span starts with the fact that starts its work (`turn.started`,
 * `model.requested`, `tool.started`) and ends with the fact that ends it, and every fact written while a span is
 * open carries its `traceId` / `spanId`. A turn may outlive the process that started it (an approval, a restart):
 * a span cannot, so each process that works on a turn has its own `invoke_agent` span for its part (a segment).
 * The first segment starts at `turn.started`; a later one (another process, after a restart or a decision) is a
 * child of the first, found through the ids `turn.started` carries (`TurnState.trace`). A segment ends with the
 * turn, or when its runtime closes (`oar.turn.suspended`). See docs/tracing.md.
 */

export interface TracingOptions {
  /** Where spans go (default: the global provider — a no-op until an SDK registers one). */
  tracerProvider?: TracerProvider;
  /**
   * Record prompts, model outputs and tool arguments and results on spans (`gen_ai.input.messages`,
   * `gen_ai.output.messages`, `gen_ai.system_instructions`, `gen_ai.tool.call.arguments`,
   * `gen_ai.tool.call.result`), redacted like the log. Off by default (they may hold personal data); the default
   * follows `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`, as OpenTelemetry's GenAI instrumentations do.
   */
  captureContent?: boolean;
}

export const TRACER_NAME = '@oar/runtime';
const TRACER_VERSION = '0.1.0';

/** The thread a worker drives during one step (`Tracing.drive`): what spans are named and attributed from. */
export interface TraceScope {
  readonly runtimeId: string;
  readonly sessionId: string;
  readonly threadId: string;
  /** The thread as read at the start of the step. */
  readonly thread: ThreadView;
  /** What a span's attributes need of the driving engine: tool descriptions and the binding's redactor. */
  readonly engine: {
    readonly tools: { get(name: string): { readonly description?: string } | undefined };
    readonly redactor: Pick<Redactor, 'redactText'>;
  };
}

interface TurnSpan {
  span: Span;
  sessionId: string;
  threadId: string;
  turnId: string;
  agent: string;
  inputTokens: number;
  outputTokens: number;
}

interface OpenSpan {
  span: Span;
  /** The turn it belongs to (`turnKey`): its end ends what is still open of it. */
  turn: string;
}

/** The step being driven, and the tracing of the worker driving it (set by `Tracing.drive`). */
const current = new AsyncLocalStorage<{ tracing: Tracing; scope: TraceScope }>();

/**
 * A provider call of the current model call attempt (see `Tracing.modelCall`); outside a traced step, just the
 * call.
 */
export function traceModelCall<T extends { response?: { id?: string; modelId?: string } }>(
  prompt: { system: string; transcript: string },
  call: () => PromiseLike<T>,
): PromiseLike<T> {
  const step = current.getStore();
  return step ? step.tracing.modelCall(step.scope, prompt, call) : call();
}

/** What the global tracer provider delegates to while no SDK is registered (a fresh proxy has no delegate). */
const NO_SDK = new ProxyTracerProvider().getDelegate();

/** How many ended turns' span contexts are kept, to stamp a fact written again after its turn's span ended. */
const ENDED_TURNS_KEPT = 256;

const threadKey = (sessionId: string, threadId: string) => `${sessionId}\u0000${threadId}`;
const turnKey = (sessionId: string, threadId: string, turnId: string) => `${sessionId}\u0000${threadId}\u0000${turnId}`;

type Payload = Record<string, unknown>;
const payloadOf = (draft: EventDraft): Payload => (draft.payload ?? {}) as Payload;
const str = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);
const num = (value: unknown): number | undefined => (typeof value === 'number' ? value : undefined);

/**
 * The `gen_ai.provider.name` of an AI SDK provider id: `openai.responses` → `openai`, `anthropic.messages` →
 * `anthropic`, an OpenAI-compatible entry `deepseek.chat` → `deepseek`, the scripted model `oar-script`.
 */
export function genAiProviderName(provider: string): string {
  return provider.split('.')[0] || provider;
}

/**
 * The process's tracing state: the spans open for the turns, model calls and tool runs its worker drives. One per
 * worker; `record` sees every fact the worker writes.
 */
export class Tracing {
  private readonly provider: TracerProvider;
  private readonly tracer: Tracer;
  readonly captureContent: boolean;
  /** The open turn segment of each thread (a thread runs one turn at a time). */
  private readonly turns = new Map<string, TurnSpan>();
  /** The open model call attempt of each thread. */
  private readonly chats = new Map<string, OpenSpan>();
  /** Open tool runs by session and tool call id. */
  private readonly tools = new Map<string, OpenSpan>();
  private readonly ended = new Map<string, SpanContext>();

  constructor(options: TracingOptions = {}) {
    this.provider = options.tracerProvider ?? trace.getTracerProvider();
    this.tracer = this.provider.getTracer(TRACER_NAME, TRACER_VERSION);
    this.captureContent =
      options.captureContent ??
      process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT?.toLowerCase() === 'true';
  }

  /**
   * Run one step of a thread (`advance`) in its scope: facts it writes are attributed to the thread's spans, and
   * the turn's span is the active OpenTelemetry context (with a context manager registered, spans of libraries the
   * step calls nest under it). A span left open for a turn the thread no longer runs (it was ended by another
   * process) is ended here.
   */
  drive<T>(scope: TraceScope, step: () => Promise<T>): Promise<T> {
    // Untraced, a step runs as it is: no AsyncLocalStorage store (on Node 20 one active store puts a hook on every
    // promise of the process, about 5% of a step) and no work per fact.
    if (this.idle()) return step();
    const key = threadKey(scope.sessionId, scope.threadId);
    const open = this.turns.get(key);
    if (open && open.turnId !== scope.thread.activeTurnId) this.endTurn(key, { endedElsewhere: true });
    const turn = this.turns.get(key);
    // A worker's steps are its own work, not that of whoever woke it (a command's caller): a context of their own.
    const active = turn ? trace.setSpan(ROOT_CONTEXT, turn.span) : ROOT_CONTEXT;
    return current.run({ tracing: this, scope }, () => context.with(active, step));
  }

  /**
   * Nothing to trace: the global provider has no SDK behind it (checked each time: an SDK may be registered after
   * the runtime started) and no span of this process is open.
   */
  private idle(): boolean {
    const untraced = this.provider instanceof ProxyTracerProvider && this.provider.getDelegate() === NO_SDK;
    return untraced && this.turns.size === 0 && this.chats.size === 0 && this.tools.size === 0;
  }

  /**
   * A provider call of the current model call attempt: run inside its `chat` span's context; the response's id and
   * model, and (on opt-in) the prompt, are recorded on the span.
   */
  modelCall<T extends { response?: { id?: string; modelId?: string } }>(
    scope: TraceScope,
    prompt: { system: string; transcript: string },
    call: () => PromiseLike<T>,
  ): PromiseLike<T> {
    const chat = this.chats.get(threadKey(scope.sessionId, scope.threadId));
    if (!chat?.span.isRecording()) return call();
    const { span } = chat;
    if (this.captureContent) {
      const redact = (text: string) => scope.engine.redactor.redactText(text);
      span.setAttributes({
        'gen_ai.system_instructions': JSON.stringify([{ type: 'text', content: redact(prompt.system) }]),
        'gen_ai.input.messages': JSON.stringify([
          { role: 'user', parts: [{ type: 'text', content: redact(prompt.transcript) }] },
        ]),
      });
    }
    return context.with(trace.setSpan(context.active(), span), call).then((result) => {
      const response = result.response;
      if (response?.id) span.setAttribute('gen_ai.response.id', response.id);
      if (response?.modelId) span.setAttribute('gen_ai.response.model', response.modelId);
      return result;
    });
  }

  /**
   * Every fact a worker writes passes here before it is staged or written: spans start and end with the facts
   * that start and end their work, and each fact is returned with the `traceId` / `spanId` of the span it belongs
   * to (when that span is recording). `driven` is the thread the writing worker drives.
   */
  record(drafts: EventDraft[], driven: { sessionId: string; threadId: string }): EventDraft[] {
    if (this.idle()) return drafts;
    const step = current.getStore();
    const scope = step?.tracing === this ? step.scope : undefined;
    const inScope =
      scope && scope.sessionId === driven.sessionId && scope.threadId === driven.threadId ? scope : undefined;
    const { sessionId } = driven;
    // A fact without a tool call id written with a tool's end (its artifact) belongs to that tool's span.
    const batchTool = drafts
      .map((d) => (d.toolCallId ? this.tools.get(`${sessionId}\u0000${d.toolCallId}`) : undefined))
      .find((open) => open !== undefined);
    const stamped = drafts.map((draft) => {
      if (inScope) this.begin(draft, inScope);
      if (draft.traceId !== undefined) return draft;
      const span = this.spanFor(draft, driven, batchTool);
      return span ? { ...draft, traceId: span.traceId, spanId: span.spanId } : draft;
    });
    for (const draft of drafts) this.finish(draft, sessionId, inScope);
    return stamped;
  }

  /** End every open span (the runtime is closing): a turn's segment ends suspended, the turn goes on elsewhere. */
  endAll(): void {
    for (const open of [...this.chats.values(), ...this.tools.values()]) {
      open.span.setAttribute('oar.abandoned', true);
      open.span.end();
    }
    this.chats.clear();
    this.tools.clear();
    for (const key of [...this.turns.keys()]) this.endTurn(key, { suspended: true });
  }

  // ---- spans from facts ----

  private begin(draft: EventDraft, scope: TraceScope): void {
    const { sessionId, thread } = scope;
    if (draft.threadId !== scope.threadId || !draft.turnId) return;
    const key = threadKey(sessionId, scope.threadId);
    if (draft.type === 'turn.started') {
      if (this.turns.has(key)) this.endTurn(key, { endedElsewhere: true });
      this.startTurn(scope, draft.turnId, false);
    } else if (!this.turns.has(key) && draft.turnId === thread.activeTurnId) {
      // This process takes part in a turn another one started: a new segment.
      this.startTurn(scope, draft.turnId, true);
    }
    const turn = this.turns.get(key);
    if (!turn || turn.turnId !== draft.turnId) return;
    const parent = trace.setSpan(ROOT_CONTEXT, turn.span);
    const payload = payloadOf(draft);
    if (draft.type === 'model.requested') {
      this.chats.get(key)?.span.end();
      const model = str(payload.modelId) ?? 'unknown';
      const provider = genAiProviderName(str(payload.provider) ?? 'unknown');
      turn.span.setAttributes({ 'gen_ai.provider.name': provider, 'gen_ai.request.model': model });
      const span = this.tracer.startSpan(
        `chat ${model}`,
        {
          kind: SpanKind.CLIENT,
          attributes: {
            'gen_ai.operation.name': 'chat',
            'gen_ai.provider.name': provider,
            'gen_ai.request.model': model,
            'gen_ai.conversation.id': sessionId,
            'gen_ai.agent.name': turn.agent,
            ...this.ids(turn),
            ...optional({
              'oar.model.attempt': num(payload.attempt),
              'oar.model.retry_of': str(payload.retryOf),
              'oar.model.corrective': payload.corrective === true ? true : undefined,
            }),
          },
        },
        parent,
      );
      this.chats.set(key, { span, turn: turnKey(sessionId, turn.threadId, turn.turnId) });
    } else if (draft.type === 'tool.started' && draft.toolCallId) {
      const toolName = str(payload.toolName) ?? 'unknown';
      const description = scope.engine.tools.get(toolName)?.description;
      const span = this.tracer.startSpan(
        `execute_tool ${toolName}`,
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            'gen_ai.operation.name': 'execute_tool',
            'gen_ai.tool.name': toolName,
            'gen_ai.tool.call.id': draft.toolCallId,
            'gen_ai.tool.type': 'function',
            'gen_ai.conversation.id': sessionId,
            'gen_ai.agent.name': turn.agent,
            ...this.ids(turn),
            ...optional({
              'gen_ai.tool.description': description,
              'oar.action.id': str(payload.graphActionId),
              'oar.run.id': draft.runId,
              'oar.tool.attempt': num(payload.attempt),
              'gen_ai.tool.call.arguments':
                this.captureContent && payload.input !== undefined
                  ? scope.engine.redactor.redactText(JSON.stringify(payload.input))
                  : undefined,
            }),
          },
        },
        parent,
      );
      this.tools.set(`${sessionId}\u0000${draft.toolCallId}`, {
        span,
        turn: turnKey(sessionId, turn.threadId, turn.turnId),
      });
    }
  }

  private startTurn(scope: TraceScope, turnId: string, resumed: boolean): void {
    const { sessionId, thread } = scope;
    const parentThread = thread.parent;
    const inProcessParent =
      !resumed && parentThread ? this.turns.get(threadKey(sessionId, parentThread.threadId)) : undefined;
    const recorded = thread.turns.find((t) => t.turnId === turnId)?.trace;
    const parent: Context =
      inProcessParent && inProcessParent.turnId === parentThread?.turnId
        ? trace.setSpan(ROOT_CONTEXT, inProcessParent.span)
        : recorded
          ? trace.setSpanContext(ROOT_CONTEXT, {
              traceId: recorded.traceId,
              spanId: recorded.spanId,
              traceFlags: TraceFlags.SAMPLED,
              isRemote: true,
            })
          : ROOT_CONTEXT;
    const turn: TurnSpan = {
      span: this.tracer.startSpan(
        `invoke_agent ${thread.agent}`,
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            'gen_ai.operation.name': 'invoke_agent',
            'gen_ai.agent.name': thread.agent,
            'gen_ai.conversation.id': sessionId,
            'oar.runtime.id': scope.runtimeId,
            'oar.session.id': sessionId,
            'oar.thread.id': thread.threadId,
            'oar.turn.id': turnId,
            'oar.turn.resumed': resumed,
            ...(parentThread
              ? {
                  'oar.parent.thread.id': parentThread.threadId,
                  'oar.parent.turn.id': parentThread.turnId,
                  'oar.subagent.id': parentThread.subagentId,
                }
              : {}),
          },
        },
        parent,
      ),
      sessionId,
      threadId: thread.threadId,
      turnId,
      agent: thread.agent,
      inputTokens: 0,
      outputTokens: 0,
    };
    this.turns.set(threadKey(sessionId, thread.threadId), turn);
  }

  private finish(draft: EventDraft, sessionId: string, scope: TraceScope | undefined): void {
    if (!draft.threadId) return;
    const key = threadKey(sessionId, draft.threadId);
    const payload = payloadOf(draft);
    switch (draft.type) {
      case 'model.completed':
      case 'model.failed': {
        const chat = this.chats.get(key);
        if (!chat) return;
        this.chats.delete(key);
        const usage = (payload.usage ?? {}) as Payload;
        const input = num(usage.inputTokens);
        const output = num(usage.outputTokens);
        chat.span.setAttributes(
          optional({
            'gen_ai.usage.input_tokens': input,
            'gen_ai.usage.output_tokens': output,
            'gen_ai.usage.cache_read.input_tokens': num(usage.cachedInputTokens),
            'gen_ai.usage.cache_creation.input_tokens': num(usage.cacheWriteTokens),
            'oar.usage.reasoning_tokens': num(usage.reasoningTokens),
          }),
        );
        const turn = this.turns.get(key);
        if (turn) {
          turn.inputTokens += input ?? 0;
          turn.outputTokens += output ?? 0;
        }
        if (draft.type === 'model.completed') {
          chat.span.setAttributes(
            optional({
              'gen_ai.response.finish_reasons': str(payload.finishReason)
                ? [str(payload.finishReason) ?? '']
                : undefined,
              'gen_ai.output.messages':
                this.captureContent && scope ? outputMessages(payload, scope, str(payload.finishReason)) : undefined,
            }),
          );
        } else {
          chat.span.setAttributes(
            optional({
              'oar.model.failure_class': str(payload.failureClass),
              'http.response.status_code': num(payload.statusCode),
              'oar.model.retry_in_ms': num(payload.retryInMs),
            }),
          );
          failed(chat.span, payload.error as OarError | undefined);
        }
        chat.span.end();
        return;
      }
      case 'tool.result':
      case 'tool.failed': {
        const toolKey = `${sessionId}\u0000${draft.toolCallId}`;
        const tool = this.tools.get(toolKey);
        if (!tool) return;
        this.tools.delete(toolKey);
        if (draft.type === 'tool.failed') failed(tool.span, payload.error as OarError | undefined);
        else {
          if (payload.isError === true) tool.span.setStatus({ code: SpanStatusCode.ERROR });
          if (this.captureContent && scope) {
            const summary = str(payload.summary);
            if (summary) tool.span.setAttribute('gen_ai.tool.call.result', scope.engine.redactor.redactText(summary));
          }
        }
        tool.span.end();
        return;
      }
      case 'turn.completed':
      case 'turn.failed': {
        const turn = this.turns.get(key);
        if (!turn || turn.turnId !== draft.turnId) return;
        turn.span.setAttributes(optional({ 'oar.turn.outcome': str(payload.outcome) ?? str(draft.status) }));
        if (draft.type === 'turn.failed') failed(turn.span, payload.error as OarError | undefined);
        this.endTurn(key, {});
        return;
      }
      default:
        return;
    }
  }

  /** End a thread's turn segment, and whatever of its turn is still open. */
  private endTurn(key: string, how: { suspended?: boolean; endedElsewhere?: boolean }): void {
    const turn = this.turns.get(key);
    if (!turn) return;
    this.turns.delete(key);
    const ofTurn = turnKey(turn.sessionId, turn.threadId, turn.turnId);
    for (const [k, open] of [...this.chats, ...this.tools]) {
      if (open.turn !== ofTurn) continue;
      open.span.setAttribute('oar.abandoned', true);
      open.span.end();
      this.chats.delete(k);
      this.tools.delete(k);
    }
    turn.span.setAttributes({
      'gen_ai.usage.input_tokens': turn.inputTokens,
      'gen_ai.usage.output_tokens': turn.outputTokens,
      ...(how.suspended ? { 'oar.turn.suspended': true } : {}),
      ...(how.endedElsewhere ? { 'oar.turn.ended_elsewhere': true } : {}),
    });
    turn.span.end();
    this.ended.delete(ofTurn);
    this.ended.set(ofTurn, turn.span.spanContext());
    if (this.ended.size > ENDED_TURNS_KEPT) this.ended.delete(this.ended.keys().next().value as string);
  }

  /** The span a fact belongs to: its tool run, its model call, its turn, else the turn of the driven thread. */
  private spanFor(
    draft: EventDraft,
    driven: { sessionId: string; threadId: string },
    batchTool: OpenSpan | undefined,
  ): SpanContext | undefined {
    const { sessionId } = driven;
    const candidates: (Span | SpanContext | undefined)[] = [];
    if (draft.toolCallId) candidates.push(this.tools.get(`${sessionId}\u0000${draft.toolCallId}`)?.span);
    else if (batchTool && draft.runId !== undefined) candidates.push(batchTool.span);
    // A call's reasoning (`reasoning.summary`, written with its `model.completed`) belongs to the call's span too.
    const ofCall = draft.type.startsWith('model.') || draft.type.startsWith('reasoning.');
    if (draft.threadId && (ofCall || draft.type === 'rate_limit.hit')) {
      candidates.push(this.chats.get(threadKey(sessionId, draft.threadId))?.span);
    }
    const threadId = draft.threadId ?? driven.threadId;
    const turn = this.turns.get(threadKey(sessionId, threadId));
    if (draft.turnId) {
      candidates.push(
        turn?.turnId === draft.turnId ? turn.span : this.ended.get(turnKey(sessionId, threadId, draft.turnId)),
      );
    } else candidates.push(turn?.span);
    // A fact about another thread (a child the step delegated to) belongs to the step that wrote it.
    if (threadId !== driven.threadId) candidates.push(this.turns.get(threadKey(sessionId, driven.threadId))?.span);
    for (const candidate of candidates) {
      const spanContext = recordedContext(candidate);
      if (spanContext) return spanContext;
    }
    return undefined;
  }

  private ids(turn: TurnSpan): Attributes {
    return { 'oar.session.id': turn.sessionId, 'oar.thread.id': turn.threadId, 'oar.turn.id': turn.turnId };
  }
}

/** The context of a span that is recorded (a no-op span carries no ids worth joining on). */
function recordedContext(candidate: Span | SpanContext | undefined): SpanContext | undefined {
  if (!candidate) return undefined;
  if ('spanContext' in candidate) {
    if (!candidate.isRecording()) return undefined;
    const spanContext = candidate.spanContext();
    return isSpanContextValid(spanContext) ? spanContext : undefined;
  }
  return isSpanContextValid(candidate) ? candidate : undefined;
}

/** A span that ended with a structured error: `error.type` is its code (docs/errors.md). */
function failed(span: Span, error: OarError | undefined): void {
  span.setAttribute('error.type', error?.code ?? '_OTHER');
  span.setStatus({ code: SpanStatusCode.ERROR, ...(error?.message ? { message: error.message } : {}) });
}

function outputMessages(payload: Payload, scope: TraceScope, finishReason: string | undefined): string | undefined {
  const output = payload.output as { text?: string; toolCalls?: { name: string; arguments: string }[] } | undefined;
  if (!output) return undefined;
  const redact = (text: string) => scope.engine.redactor.redactText(text);
  const parts = [
    ...(output.text ? [{ type: 'text', content: redact(output.text) }] : []),
    ...(output.toolCalls ?? []).map((call) => ({
      type: 'tool_call',
      name: call.name,
      arguments: redact(call.arguments),
    })),
  ];
  return JSON.stringify([{ role: 'assistant', parts, ...(finishReason ? { finish_reason: finishReason } : {}) }]);
}

/** The attributes that have a value. */
function optional(attributes: Record<string, string | number | boolean | string[] | undefined>): Attributes {
  const out: Attributes = {};
  for (const [key, value] of Object.entries(attributes)) if (value !== undefined) out[key] = value;
  return out;
}

/**
 * Make `provider` the process's global tracer provider — the one a runtime uses when `tracing.tracerProvider` is not
 * given (the CLI's, for instance). Returns how to undo it (after the provider shut down).
 */
export function setGlobalTracerProvider(provider: TracerProvider): () => void {
  trace.setGlobalTracerProvider(provider);
  return () => trace.disable();
}

/**
 * Facts a command writes (not a worker) carry the caller's active span, when it records: a turn submitted while
 * an application's request span is active then runs under it (its first segment's parent).
 */
export function withActiveSpan(drafts: EventDraft[]): EventDraft[] {
  const spanContext = recordedContext(trace.getActiveSpan());
  if (!spanContext) return drafts;
  return drafts.map((draft) =>
    draft.traceId === undefined ? { ...draft, traceId: spanContext.traceId, spanId: spanContext.spanId } : draft,
  );
}
