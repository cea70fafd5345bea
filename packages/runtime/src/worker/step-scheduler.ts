/**
 * Fair turns on the event loop for the threads of one process. A step's SQLite calls are synchronous and its
 * promises resolve without I/O, so a thread can keep the event loop busy for a whole step. With `setImmediate`
 * alone every waiting thread would run in the same loop iteration — a thousand threads, a thousand steps, and no
 * timer, socket or lease renewal served for seconds. Here the threads wait in one queue and one is let go per
 * loop iteration: timers and I/O are served between any two steps, whatever the number of threads, and the
 * threads take turns in arrival order.
 */
const waiting: (() => void)[] = [];
let pumping = false;

function next(): void {
  // The released thread runs its step as soon as this callback returns (promise continuations run before the
  // next immediate); an immediate queued from here runs in the next loop iteration, after timers and I/O.
  waiting.shift()?.();
  if (waiting.length > 0) setImmediate(next);
  else pumping = false;
}

/** Wait for this thread's turn to run a step. */
export function stepTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (!pumping) {
      pumping = true;
      setImmediate(next);
    }
  });
}
