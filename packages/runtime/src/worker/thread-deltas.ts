import type { EventDraft } from '../log/draft.js';
import type { LiveChannel, LiveDelta, LiveEventType } from '../log/live.js';
import { type CompletedToolCall, type ModelDelta, type ModelDeltaSink, PartialOutput } from '../models/model-deltas.js';
import type { Redactor } from '../redaction/redactor.js';

/** Where held-back streamed text may be cut: after whitespace, a quote or a separator (never inside a token). */
const BOUNDARY = /[\s"'`,;:()[\]{}<>]/;

/** The most characters held back waiting for a boundary: a longer run is published anyway. */
const MAX_HELD = 1024;

interface Held {
  channel: ModelDelta['channel'];
  toolCallId?: string;
  toolName?: string;
  text: string;
}

/**
 * The delta sink of one driven thread (`Engine.deltas`): the streamed output of its model calls goes to the
 * session's live subscribers, redacted like everything else OAR shows, and the partial output of a call that does
 * not complete is kept in its `model.failed`. What a subscriber gets, all live-only:
 * - `model.delta` for each piece of text and of a tool call's arguments (channel `text` / `tool_call`);
 * - `tool.args` for each piece of a tool call's arguments too (the same redacted piece, with the call's `stepId` and
 *   `toolCallId`: the standard's tool-invocation view of it), then one `{complete: true, input}` once the call's
 *   arguments are whole. None of them is stored: `model.completed` records every call's whole arguments, and the
 *   actions they declare are recorded with their inputs (`run.status`, `tool.started`), so a durable `tool.args`
 *   would only repeat them;
 * - `reasoning.delta` for each piece of the provider's reasoning (its durable record is the call's
 *   `reasoning.summary`, written with `model.completed`: models/reasoning.ts).
 *
 * Redaction works on whole tokens: a secret split across two deltas would pass a per-delta check, so each stream
 * (the text, the reasoning, each tool call's arguments) is cut only at a boundary a secret does not span
 * (whitespace, quotes, separators) and the rest is held back until the next boundary or the end of the call.
 */
export class ThreadDeltas implements ModelDeltaSink {
  /** The running call: the ids of its `model.requested`, the envelope of its deltas. */
  private call: { turnId: string; traceId?: string; spanId?: string } | undefined;
  private partial = new PartialOutput();
  private readonly held = new Map<string, Held>();

  constructor(
    private readonly live: LiveChannel | undefined,
    private readonly sessionId: string,
    private readonly threadId: string,
    private readonly redactor: () => Redactor,
  ) {}

  /**
   * The facts the thread's engine records, seen before they are staged: a `model.requested` starts a call, a
   * `model.completed` ends it, a `model.failed` ends it keeping what it streamed (`partialText`,
   * `partialToolCalls`, bounded; unless the writer already set them).
   */
  observe(drafts: EventDraft[]): EventDraft[] {
    if (!drafts.some((d) => d.type.startsWith('model.') && d.threadId === this.threadId)) return drafts;
    return drafts.map((draft) => {
      if (draft.threadId !== this.threadId) return draft;
      if (draft.type === 'model.requested') {
        this.call = {
          turnId: draft.turnId,
          ...(draft.traceId !== undefined ? { traceId: draft.traceId } : {}),
          ...(draft.spanId !== undefined ? { spanId: draft.spanId } : {}),
        };
        this.partial = new PartialOutput();
        this.held.clear();
        return draft;
      }
      if (draft.type === 'model.completed') {
        this.partial = new PartialOutput();
        return draft;
      }
      if (draft.type === 'model.failed') {
        const partial = this.partial;
        this.partial = new PartialOutput();
        if (partial.empty || 'partialText' in draft.payload || 'partialToolCalls' in draft.payload) return draft;
        return { ...draft, payload: { ...draft.payload, ...partial.fields() } };
      }
      return draft;
    });
  }

  delta(delta: ModelDelta): void {
    this.partial.add(delta);
    if (!this.call || !this.live?.listening(this.sessionId)) return;
    const key = heldKey(delta.channel, delta.toolCallId);
    let held = this.held.get(key);
    if (!held) {
      held = {
        channel: delta.channel,
        ...(delta.toolCallId !== undefined ? { toolCallId: delta.toolCallId } : {}),
        ...(delta.toolName !== undefined ? { toolName: delta.toolName } : {}),
        text: '',
      };
      this.held.set(key, held);
    }
    held.text += delta.delta;
    let cut = -1;
    for (let i = held.text.length - 1; i >= 0; i--) {
      if (BOUNDARY.test(held.text.charAt(i))) {
        cut = i + 1;
        break;
      }
    }
    if (cut < 0 && held.text.length > MAX_HELD) cut = held.text.length;
    if (cut <= 0) return;
    const ready = held.text.slice(0, cut);
    held.text = held.text.slice(cut);
    this.publish(held, ready);
  }

  /**
   * A tool call's arguments are complete: what is held back of them goes out, then the `tool.args` that says so,
   * with the whole input (redacted) when it is a JSON object — arguments that are not (a model's broken JSON) are
   * the protocol's to repair, and only `complete` is said.
   */
  toolCall(done: CompletedToolCall): void {
    if (!this.call || !this.live?.listening(this.sessionId)) return;
    const key = heldKey('tool_call', done.toolCallId);
    const held = this.held.get(key);
    if (held && held.text !== '') this.publish(held, held.text);
    this.held.delete(key);
    const input = objectOf(done.input);
    this.send('tool.args', done.toolCallId, {
      complete: true,
      toolName: done.toolName,
      ...(input ? { input: this.redactor().redactJson(input) } : {}),
    });
  }

  /** The call's stream is over: what is held back goes out. */
  end(): void {
    for (const held of this.held.values()) if (held.text !== '') this.publish(held, held.text);
    this.held.clear();
  }

  private publish(held: Held, text: string): void {
    const delta = this.redactor().redactText(text);
    const named = held.toolName !== undefined ? { toolName: held.toolName } : {};
    if (held.channel === 'reasoning') {
      this.send('reasoning.delta', undefined, { delta });
      return;
    }
    this.send('model.delta', held.toolCallId, { delta, channel: held.channel, ...named });
    // The profile wants a step and a call id on every `tool.*` event: a piece without a call id stays a model.delta.
    if (held.channel === 'tool_call' && held.toolCallId !== undefined) {
      this.send('tool.args', held.toolCallId, { delta, ...named });
    }
  }

  private send(type: LiveEventType, toolCallId: string | undefined, payload: LiveDelta['payload']): void {
    const call = this.call;
    if (!call || !this.live) return;
    this.live.publish(this.sessionId, {
      type,
      threadId: this.threadId,
      turnId: call.turnId,
      // A tool call's step is the call itself (as for the tool calls the runtime runs: facts/action.ts).
      ...(toolCallId !== undefined ? { toolCallId, ...(type === 'tool.args' ? { stepId: toolCallId } : {}) } : {}),
      ...(call.traceId !== undefined ? { traceId: call.traceId } : {}),
      ...(call.spanId !== undefined ? { spanId: call.spanId } : {}),
      payload,
    });
  }
}

/** The held-back stream a delta belongs to: the text, the reasoning, or one tool call's arguments. */
function heldKey(channel: ModelDelta['channel'], toolCallId: string | undefined): string {
  return `${channel}\u0000${toolCallId ?? ''}`;
}

/** The arguments as a JSON object, when they are one. */
function objectOf(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : undefined;
  } catch {
    return undefined;
  }
}
