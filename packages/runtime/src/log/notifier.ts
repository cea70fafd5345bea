import { type EventLog, NOTIFY_CHANNEL } from './event-log.js';

/** A session may have new events: `sequence` is the newest known, `fenced` says a worker wrote them (local only). */
export interface SessionChange {
  sessionId: string;
  sequence: number;
  /** Appended by a worker of this process while driving a thread (no other worker needs to act on it). */
  fenced: boolean;
}

export type ChangeListener = (change: SessionChange) => void;

/**
 * The notifier port: tells workers and subscribers that a session changed. Appends in this process are heard at
 * once; other processes' appends arrive by PostgreSQL LISTEN/NOTIFY, and on both dialects a poll of the sessions
 * table catches whatever a lost notification or another SQLite process wrote. A change is a hint: whoever hears it
 * reads the log after its own cursor, so nothing depends on every hint arriving.
 */
export class Notifier {
  private readonly listeners = new Set<ChangeListener>();
  /** Newest sequence seen per session, so the poll reports only what is new. */
  private readonly known = new Map<string, number>();
  private readonly unsubscribeLog: () => void;
  private stopListening: Promise<(() => Promise<void>) | undefined> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private polledAt = new Date().toISOString();
  private polling = false;
  private closed = false;

  constructor(
    private readonly log: EventLog,
    private readonly options: { pollMs?: number } = {},
  ) {
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
   * may be lost). Resolves false when `timeoutMs` passes first.
   */
  async waitFor(sessionId: string, check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    let wake: (() => void) | undefined;
    const stop = this.listen((change) => {
      if (change.sessionId === sessionId) wake?.();
    });
    try {
      for (;;) {
        if (await check()) return true;
        const left = deadline - Date.now();
        if (left <= 0) return false;
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
    }
  }

  private start(): void {
    if (this.timer) return;
    this.polledAt = new Date().toISOString();
    this.stopListening = this.log.store
      .listen(NOTIFY_CHANNEL, (payload) => {
        // writerId:sequence:sessionId — our own appends were already heard locally.
        const [writer, sequence, ...rest] = payload.split(':');
        const sessionId = rest.join(':');
        if (writer === this.log.writerId || !sessionId) return;
        if (this.seen(sessionId, Number(sequence))) this.emit({ sessionId, sequence: Number(sequence), fenced: false });
      })
      .catch(() => undefined);
    const every = this.options.pollMs ?? (this.log.store.dialect === 'postgres' ? 1000 : 200);
    this.timer = setInterval(() => void this.poll(), every);
    this.timer.unref();
  }

  /** Record the newest sequence of a session; true when it is newer than what was known. */
  private seen(sessionId: string, sequence: number): boolean {
    const before = this.known.get(sessionId) ?? 0;
    if (sequence <= before) return false;
    this.known.set(sessionId, sequence);
    return true;
  }

  private async poll(): Promise<void> {
    if (this.polling || this.listeners.size === 0) return;
    this.polling = true;
    try {
      // Sessions touched since the last poll (a second of overlap: writers' clocks and commit order differ).
      const since = new Date(Date.parse(this.polledAt) - 1000).toISOString();
      this.polledAt = new Date().toISOString();
      const rows = await this.log.store.db
        .selectFrom('oar_sessions')
        .select(['id', 'last_sequence'])
        .where('updated_at', '>=', since)
        .execute();
      for (const row of rows) {
        const sequence = Number(row.last_sequence);
        if (this.seen(row.id, sequence)) this.emit({ sessionId: row.id, sequence, fenced: false });
      }
    } catch {
      // The store is briefly unavailable: the next poll tries again.
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
