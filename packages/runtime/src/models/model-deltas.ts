/**
 * Streamed model output as it arrives (`model.delta`, `tool.args`, `reasoning.delta`). Deltas are live-only: the
 * process that makes the call hands them to the session's subscribers (log/live.ts) and never stores them;
 * `model.completed` keeps the whole output and `reasoning.summary` the whole reasoning.
 */

/**
 * One piece of streamed output: visible text, a piece of a native tool call's JSON arguments, or a piece of the
 * provider's reasoning (never part of the output: not parsed, not replayed, not executed).
 */
export interface ModelDelta {
  channel: 'text' | 'tool_call' | 'reasoning';
  delta: string;
  /** The provider's id of the tool call the arguments belong to (`tool_call` only). */
  toolCallId?: string;
  toolName?: string;
}

/** A tool call whose arguments are complete: the provider's id, the tool, the whole arguments as the model sent them. */
export interface CompletedToolCall {
  toolCallId: string;
  toolName: string;
  input: string;
}

/** Where `callModel` puts the deltas of a call. `end` says the call's stream is over (flush what is held back). */
export interface ModelDeltaSink {
  delta(delta: ModelDelta): void;
  /** A tool call's arguments are complete (after its last `tool_call` delta); optional: a sink may not care. */
  toolCall?(call: CompletedToolCall): void;
  end(): void;
}

/** How many characters of an unfinished call's output `model.failed` keeps (text and tool arguments together). */
export const PARTIAL_OUTPUT_LIMIT = 16_384;

export interface PartialOutputFields {
  /** The text streamed before the call ended (bounded by `PARTIAL_OUTPUT_LIMIT`). */
  partialText?: string;
  /** The tool calls' arguments streamed before the call ended (bounded together with the text). */
  partialToolCalls?: { toolCallId?: string; name?: string; arguments: string }[];
  /** Set when the output was longer than the limit: the fields keep its beginning. */
  partialTruncated?: true;
}

/** The output of a call so far, bounded: what an interrupted or failed call records as its partial output. */
export class PartialOutput {
  private text = '';
  private readonly calls = new Map<string, { toolCallId?: string; name?: string; arguments: string }>();
  private size = 0;
  private truncated = false;

  add(delta: ModelDelta): void {
    // Reasoning is not output: a failed call's partial output is what it said, not what it thought.
    if (delta.channel === 'reasoning') return;
    const room = PARTIAL_OUTPUT_LIMIT - this.size;
    if (room <= 0) {
      if (delta.delta.length > 0) this.truncated = true;
      return;
    }
    const piece = delta.delta.length > room ? delta.delta.slice(0, room) : delta.delta;
    if (piece.length < delta.delta.length) this.truncated = true;
    this.size += piece.length;
    if (delta.channel === 'text') {
      this.text += piece;
      return;
    }
    const key = delta.toolCallId ?? '';
    const call = this.calls.get(key) ?? {
      ...(delta.toolCallId !== undefined ? { toolCallId: delta.toolCallId } : {}),
      ...(delta.toolName !== undefined ? { name: delta.toolName } : {}),
      arguments: '',
    };
    call.arguments += piece;
    this.calls.set(key, call);
  }

  get empty(): boolean {
    return this.size === 0;
  }

  fields(): PartialOutputFields {
    return {
      ...(this.text !== '' ? { partialText: this.text } : {}),
      ...(this.calls.size > 0 ? { partialToolCalls: [...this.calls.values()] } : {}),
      ...(this.truncated ? { partialTruncated: true as const } : {}),
    };
  }
}
