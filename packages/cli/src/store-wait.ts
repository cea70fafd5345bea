import { isTransientStoreFault } from '@oar/runtime';

/** How a starting process waits for its store: the pause doubles from the first to the maximum. */
export const STORE_WAIT = { firstDelayMs: 200, maxDelayMs: 5_000, defaultSeconds: 300 } as const;

/**
 * Start a long-running process (`oar worker`, `oar serve`) on a store that may be briefly unreachable — a PostgreSQL
 * restart, a failover, its connections terminated while it connects (seen: a worker whose connections were cut as
 * it started exited 74 and left its sessions unstarted). A retryable `store_unavailable` is tried again, the pause
 * doubling from 200 ms to 5 s, until `giveUpMs` has passed; then the last error is thrown as it is (exit 74). Any
 * other error (a refused password, a missing database, a bad configuration) is thrown at once. Resolves to
 * undefined when the process is asked to stop while it waits.
 */
export async function whenStoreReachable<T>(
  start: () => Promise<T>,
  options: { giveUpMs: number; stopped: Promise<void>; log: (line: string) => void },
): Promise<T | undefined> {
  const since = Date.now();
  let stop = false;
  void options.stopped.then(() => {
    stop = true;
  });
  for (let attempt = 0; ; attempt++) {
    try {
      return await start();
    } catch (error) {
      const delay = Math.min(STORE_WAIT.firstDelayMs * 2 ** attempt, STORE_WAIT.maxDelayMs);
      if (!isTransientStoreFault(error) || Date.now() - since + delay > options.giveUpMs) throw error;
      options.log(`store unavailable (${error.message}); trying again in ${delay} ms`);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise((resolve) => {
          timer = setTimeout(resolve, delay);
        }),
        options.stopped,
      ]);
      clearTimeout(timer);
      if (stop) return undefined;
    }
  }
}
