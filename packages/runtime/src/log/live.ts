import { randomUUID } from 'node:crypto';
import { createEvent, type EventPayload, type RuntimeEvent, type RuntimeEventOf } from '@oar/protocol';
import { setRecent } from '../kernel/lru.js';
import type { EventLog } from './event-log.js';
import type { Notifier } from './notifier.js';

/**
 * The live-only event types: a model call's streamed output (`model.delta`), its tool calls' streamed arguments
 * (`tool.args`: always live-only, as `model.completed` records the whole arguments), its streamed reasoning
 * (`reasoning.delta`: the call's `reasoning.summary` is the durable record), a running command's output (`exec`).
 */
export const LIVE_EVENT_TYPES = ['model.delta', 'tool.args', 'reasoning.delta', 'process.output'] as const;
export type LiveEventType = (typeof LIVE_EVENT_TYPES)[number];

/** A live-only event as subscribers get it. */
export type LiveEvent = { [T in LiveEventType]: RuntimeEventOf<T> }[LiveEventType];

export type LiveListener = (event: LiveEvent) => void;

/** What the publisher says about a delta; the channel adds the envelope and the position. */
export interface LiveDelta {
  /** Default `model.delta`. */
  type?: LiveEventType;
  threadId: string;
  turnId: string;
  /** The tool call's step (`tool.args`: the profile asks every `tool.*` event for one; OAR's is the call's id). */
  stepId?: string;
  toolCallId?: string;
  /** The process whose output this is (`process.output`). */
  processId?: string;
  traceId?: string;
  spanId?: string;
  /** `delta`: the piece (absent only from the `tool.args` that says a call's arguments are complete). */
  payload: { delta?: string; channel?: EventPayload<'model.delta'>['channel'] } & Record<string, unknown>;
}

/** How many sessions' newest sequences are remembered (least recently changed first out). */
const MAX_SESSIONS = 4096;

/**
 * The live channel of one process: events that are delivered to the session's subscribers as they happen and
 * never stored — `model.delta`, `tool.args` and `reasoning.delta`, the streamed output of a model call this process
 * makes, and `process.output`, the output of a command it runs (`exec`). Nothing here is durable: a subscriber that
 * is not listening when a delta is published never sees it (`model.completed` keeps the whole output,
 * `reasoning.summary` the reasoning).
 *
 * Position: a live event has the `sequence` of the newest durable event of its session this process knows when it
 * is published, and a sub-index (`payload.index`, 1, 2, 3… after each durable sequence), so `(sequence, index)`
 * orders it among the durable events (which are `(sequence, 0)`) and the other live events of the session.
 */
export class LiveChannel {
  private readonly listeners = new Map<string, Set<LiveListener>>();
  /** Per session: the newest durable sequence known, and the last sub-index given after it. */
  private readonly positions = new Map<string, { sequence: number; index: number }>();
  private readonly unsubscribeLog: () => void;
  private unlistenNotifier: (() => void) | undefined;

  constructor(
    log: EventLog,
    private readonly notifier: Notifier,
    private readonly runtimeId: string,
  ) {
    // This process's own appends, at once (the durable facts a call's deltas follow are written here).
    this.unsubscribeLog = log.subscribe((events) => {
      const last = events.at(-1);
      if (last) this.seen(last.sessionId, last.sequence);
    });
  }

  /** A durable sequence of the session is known (a subscriber read it, or it was written or notified). */
  seen(sessionId: string, sequence: number): void {
    const position = this.positions.get(sessionId);
    if (position && position.sequence >= sequence) return;
    setRecent(this.positions, sessionId, { sequence, index: 0 }, MAX_SESSIONS);
  }

  /** Someone listens to the session: publishing its live events is worth the work. */
  listening(sessionId: string): boolean {
    return (this.listeners.get(sessionId)?.size ?? 0) > 0;
  }

  /** Hear the session's live events from now on. Returns the unsubscribe function. */
  listen(sessionId: string, listener: LiveListener): () => void {
    let set = this.listeners.get(sessionId);
    if (!set) {
      set = new Set();
      this.listeners.set(sessionId, set);
    }
    set.add(listener);
    // Other processes' appends move the position too (the session's other threads may run elsewhere).
    this.unlistenNotifier ??= this.notifier.listen((change) => this.seen(change.sessionId, change.sequence));
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(sessionId);
      if (this.listeners.size === 0) {
        this.unlistenNotifier?.();
        this.unlistenNotifier = undefined;
      }
    };
  }

  /**
   * Hand a delta to the session's listeners (nothing is built when nobody listens). A `tool.args` without its step
   * and call ids is not sent: the profile asks every `tool.*` event for them.
   */
  publish(sessionId: string, delta: LiveDelta): void {
    const listeners = this.listeners.get(sessionId);
    if (!listeners || listeners.size === 0) return;
    const type = delta.type ?? 'model.delta';
    const { stepId, toolCallId } = delta;
    if (type === 'tool.args' && (stepId === undefined || toolCallId === undefined)) return;
    const known = this.positions.get(sessionId) ?? { sequence: 0, index: 0 };
    const position = { sequence: known.sequence, index: known.index + 1 };
    setRecent(this.positions, sessionId, position, MAX_SESSIONS);
    const fields = {
      runtimeId: this.runtimeId,
      sessionId,
      threadId: delta.threadId,
      turnId: delta.turnId,
      sequence: position.sequence,
      ...(delta.processId !== undefined ? { processId: delta.processId } : {}),
      ...(delta.traceId !== undefined ? { traceId: delta.traceId } : {}),
      ...(delta.spanId !== undefined ? { spanId: delta.spanId } : {}),
      payload: { ...delta.payload, index: position.index },
    };
    // Not validated: one is built per streamed piece, from the fields above only.
    const options = { newId: randomUUID, validate: false };
    const event: LiveEvent =
      type === 'tool.args' && stepId !== undefined && toolCallId !== undefined
        ? createEvent('tool.args', { ...fields, stepId, toolCallId }, options)
        : (createEvent(
            type as Exclude<LiveEventType, 'tool.args'>,
            {
              ...fields,
              ...(stepId !== undefined ? { stepId } : {}),
              ...(toolCallId !== undefined ? { toolCallId } : {}),
            },
            options,
          ) as LiveEvent);
    for (const listener of [...listeners]) {
      try {
        listener(event);
      } catch {
        // One failing listener must not starve the others.
      }
    }
  }

  close(): void {
    this.unsubscribeLog();
    this.unlistenNotifier?.();
    this.unlistenNotifier = undefined;
    this.listeners.clear();
  }
}

const LIVE_TYPES: ReadonlySet<string> = new Set(LIVE_EVENT_TYPES);

/** Is this a live-only event (never in the log)? */
export function isLiveEvent(event: RuntimeEvent): event is LiveEvent {
  return LIVE_TYPES.has(event.type);
}
