import { setRecent } from '../kernel/lru.js';
import { type ChangeCursor, changeCursor, changesSince } from '../store/changes.js';
import { type EventLog, NOTIFY_CHANNEL } from './event-log.js';

/** A session may have new events: `sequence` is the newest known, `fenced` says a worker wrote them (local only). */
export interface SessionChange {
  sessionId: string;
  sequence: number;
  /** Appended by a worker of this process while driving a thread (no other worker needs to act on it). */
  fenced: boolean;
}

export type ChangeListener = (change: SessionChange) => void;

export interface NotifierOptions {
  /** How often the store is polled for other writers' changes (default 200 ms on SQLite, 1 s on PostgreSQL). */
  pollMs?: number;
  /**
   * How many sessions' newest sequences are remembered (default 4,096; least recently changed first out). A
   * forgotten session costs at most one extra hint (its next change is reported even if this process wrote it).
   */
  maxSessions?: number;
  /**
   * Take PostgreSQL LISTEN/NOTIFY hints (default true); without them other processes are heard by the poll only. A
   * lost LISTEN connection is made again with backoff, and a poll then catches up with what was missed.
   */
  listen?: boolean;
}

export const DEFAULT_NOTIFIER_SESSIONS = 4096;

/**
 * The notifier port: tells workers and subscribers that a session changed. Appends in this process are heard at
 * once; other processes' appends arrive by PostgreSQL LISTEN/NOTIFY, and on both dialects a poll of the store's
 * commit order (`changes.ts`: never writers' clocks) catches whatever a lost notification or another SQLite
 * process wrote. A change is a hint: whoever hears it reads the log after its own cursor, so nothing depends on
 * every hint arriving.
 */
export class Notifier {
  private readonly listeners = new Set<ChangeListener>();
  /** Newest sequence seen per session (a bounded LRU), so a change is reported once, not by every path. */
  private readonly known = new Map<string, number>();
  private readonly maxSessions: number;
  private readonly unsubscribeLog: () => void;
  private stopListening: Promise<(() => Promise<void>) | undefined> | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Where the poll continues in the store's commit order (read when listening starts). */
  private cursor: Promise<ChangeCursor | undefined> | undefined;
  private polling = false;
  private closed = false;

  constructor(
    private readonly log: EventLog,
    private readonly options: NotifierOptions = {},
  ) {
    this.maxSessions = Math.max(1, options.maxSessions ?? DEFAULT_NOTIFIER_SESSIONS);
    this.unsubscribeLog = log.subscribe((events, origin) => {
      const first = events[0];
      const last = events.at(-1);
      if (!first || !last) return;
      // Sequences skipped since the last one this process knew were written by someone else (a command of another
      // process). Once this write is known, the poll would not report them: so this change is not just our own.
      const foreign = first.sequence > (this.known.get(first.sessionId) ?? 0) + 1;
      this.seen(last.sessionId, last.sequence);
      this.emit({ sessionId: last.sessionId, sequence: last.sequence, fenced: origin.fenced && !foreign });
    });
  }

  /** Listen for changes; the first listener starts cross-process delivery. Returns the unsubscribe function. */
  listen(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    if (!this.closed) this.start();
    return () => this.listeners.delete(listener);
  }

  /**
   * Wait until `check` holds, re-checking whenever the session changes (and at least every 250 ms, since a hint
   * may be lost). Resolves false when `timeoutMs` passes first, or `signal` aborts (the caller went away).
   */
  async waitFor(
    sessionId: string,
    check: () => Promise<boolean>,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    let wake: (() => void) | undefined;
    const stop = this.listen((change) => {
      if (change.sessionId === sessionId) wake?.();
    });
    const onAbort = () => wake?.();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        if (await check()) return true;
        const left = deadline - Date.now();
        if (left <= 0 || signal?.aborted) return false;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, 250));
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = undefined;
      }
    } finally {
      stop();
      signal?.removeEventListener('abort', onAbort);
    }
  }

  private start(): void {
    if (this.timer) return;
    // Changes committed from here on are the poll's to find (a listener reads the log itself when it starts).
    this.cursor = changeCursor(this.log.store).catch(() => undefined);
    if (this.options.listen !== false) {
      this.stopListening = this.log.store
        .listen(
          NOTIFY_CHANNEL,
          (payload) => {
            // writerId:sequence:sessionId — our own appends were already heard locally.
            const [writer, sequence, ...rest] = payload.split(':');
            const sessionId = rest.join(':');
            if (writer === this.log.writerId || !sessionId) return;
            if (this.seen(sessionId, Number(sequence)))
              this.emit({ sessionId, sequence: Number(sequence), fenced: false });
          },
          {
            // LISTEN was lost and is back: what was notified in between is gone, so catch up from the store now
            // rather than at the next (slow) poll.
            onReconnect: () => void this.poll(),
          },
        )
        .catch(() => undefined);
    }
    const every = this.options.pollMs ?? this.log.store.sql.pollMs;
    this.timer = setInterval(() => void this.poll(), every);
    this.timer.unref();
  }

  /** Record the newest sequence of a session; true when it is newer than what was known. */
  private seen(sessionId: string, sequence: number): boolean {
    const before = this.known.get(sessionId) ?? 0;
    if (sequence <= before) return false;
    setRecent(this.known, sessionId, sequence, this.maxSessions);
    return true;
  }

  private async poll(): Promise<void> {
    if (this.polling || this.listeners.size === 0) return;
    this.polling = true;
    try {
      let cursor = await this.cursor;
      // The start position could not be read (the store was unavailable): from now on, then.
      if (!cursor) {
        cursor = await changeCursor(this.log.store);
        this.cursor = Promise.resolve(cursor);
      }
      for (let more = true; more && !this.closed; ) {
        const polled = await changesSince(this.log.store, cursor);
        cursor = polled.cursor;
        this.cursor = Promise.resolve(cursor);
        more = polled.more;
        for (const { sessionId, sequence } of polled.changes) {
          if (this.seen(sessionId, sequence)) this.emit({ sessionId, sequence, fenced: false });
        }
      }
    } catch {
      // The store is briefly unavailable: the next poll tries again from the same position.
    } finally {
      this.polling = false;
    }
  }

  private emit(change: SessionChange): void {
    for (const listener of this.listeners) {
      try {
        listener(change);
      } catch {
        // One failing listener must not starve the others.
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.unsubscribeLog();
    this.listeners.clear();
    const stop = await this.stopListening;
    await stop?.();
  }
}
