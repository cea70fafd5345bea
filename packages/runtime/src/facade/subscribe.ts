import type { RuntimeEvent } from '@oar/protocol';
import type { EventLog } from '../log/event-log.js';
import type { LiveChannel, LiveEvent } from '../log/live.js';
import type { Notifier } from '../log/notifier.js';

/** Where a subscription reads: the log, the notifier that says when to read it again, the live deltas, the end. */
export interface SubscriptionSource {
  readonly log: EventLog;
  readonly notifier: Notifier;
  readonly live: LiveChannel;
  closed(): boolean;
}

/** How many live events one subscriber may have waiting before the newest are dropped (live events are lossy). */
const LIVE_BUFFER = 10_000;

/** The events of `Runtime.subscribe` (see there): catch-up from the log, notifications only say when to read again. */
export async function* subscription(
  source: SubscriptionSource,
  sessionId: string,
  options: { after?: number; signal?: AbortSignal; deltas?: boolean },
): AsyncGenerator<RuntimeEvent> {
  let cursor = options.after ?? 0;
  let changed = true;
  let wake: (() => void) | undefined;
  const stop = source.notifier.listen((change) => {
    if (change.sessionId !== sessionId) return;
    changed = true;
    wake?.();
  });
  // Live events wait here until the durable event they follow has been delivered.
  const live: LiveEvent[] = [];
  const stopLive = options.deltas
    ? source.live.listen(sessionId, (event) => {
        if (live.length >= LIVE_BUFFER) return;
        live.push(event);
        wake?.();
      })
    : undefined;
  function* liveUpTo(sequence: number): Generator<LiveEvent> {
    while (live.length > 0 && (live[0] as LiveEvent).sequence <= sequence) yield live.shift() as LiveEvent;
  }
  const onAbort = () => wake?.();
  options.signal?.addEventListener('abort', onAbort);
  try {
    while (!options.signal?.aborted && !source.closed()) {
      if (live.length > 0 && (live[0] as LiveEvent).sequence <= cursor) {
        yield* liveUpTo(cursor);
        continue;
      }
      if (changed) {
        changed = false;
        const events: RuntimeEvent[] = await source.log.read(sessionId, { after: cursor, limit: 500 });
        for (const event of events) {
          yield* liveUpTo(event.sequence - 1);
          cursor = event.sequence;
          source.live.seen(sessionId, cursor);
          yield event;
        }
        if (events.length === 500) changed = true;
        continue;
      }
      let backstop = false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          backstop = true;
          resolve();
        }, 1000);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
      // Woken by a live event: the log is read when a notification says so (or the 1 s backstop fires).
      if (backstop || live.length === 0) changed = true;
    }
  } finally {
    stop();
    stopLive?.();
    options.signal?.removeEventListener('abort', onAbort);
  }
}
