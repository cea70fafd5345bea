/**
 * A read/write lock with a concurrency bound: concurrency-safe read-only actions share the lock (up to
 * `maxReaders` at once); every other action holds it alone. Writers are not starved: once a writer waits, new
 * readers queue behind it.
 */
export class ReadWriteLock {
  private readers = 0;
  private writer = false;
  private readonly queue: { exclusive: boolean; resolve: () => void }[] = [];

  constructor(private readonly maxReaders: number) {}

  acquire(exclusive: boolean): Promise<() => void> {
    return new Promise((resolve) => {
      this.queue.push({ exclusive, resolve: () => resolve(() => this.release(exclusive)) });
      this.drain();
    });
  }

  private release(exclusive: boolean): void {
    if (exclusive) this.writer = false;
    else this.readers--;
    this.drain();
  }

  private drain(): void {
    while (this.queue.length > 0) {
      const next = this.queue[0];
      if (!next) return;
      if (next.exclusive) {
        if (this.writer || this.readers > 0) return;
        this.writer = true;
      } else {
        if (this.writer || this.readers >= this.maxReaders) return;
        this.readers++;
      }
      this.queue.shift();
      next.resolve();
    }
  }
}
