/**
 * What the server is still doing: requests being handled and event streams still sending. A graceful shutdown
 * waits for it to drain before it cuts the remaining connections — which by then are only idle keep-alives and
 * sockets a client abandoned mid-stream (Node counts those as busy until the client's own timeout, seconds later).
 */
export class Inflight {
  private count = 0;
  private waiters: (() => void)[] = [];

  enter(): void {
    this.count++;
  }

  exit(): void {
    this.count--;
    if (this.count === 0) for (const wake of this.waiters.splice(0)) wake();
  }

  /** Resolves once nothing is in flight (at once if nothing is). */
  drained(): Promise<void> {
    return this.count === 0 ? Promise.resolve() : new Promise((resolve) => this.waiters.push(resolve));
  }
}
