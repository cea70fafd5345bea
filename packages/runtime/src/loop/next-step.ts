/**
 * What one call of `advance` (loop/thread-runner.ts) did, and so what its driver does next — the loop's typed
 * answer in the manner of openai-agents-js's `NextStep`, for one thread of a durable log.
 */
export type NextStep =
  /** A fact was recorded (a turn started, a step ran, a graph was observed): read the thread and advance again. */
  | { readonly type: 'again' }
  /** Nothing to do until an event moves the thread on; `reason` says what it waits for. */
  | { readonly type: 'wait'; readonly reason: WaitReason };

export type WaitReason =
  /** The thread is closed. */
  | 'closed'
  /** No turn is active and none is queued. */
  | 'idle'
  /** The driven work was interrupted (or the process is closing): the interrupt records how it ended. */
  | 'interrupted'
  /** The action graph waits: for a decision, a child agent, an answer, or a dependency. */
  | 'actions'
  /** A budget or limit holds the next model call (`waiting_resource`) until a limit changes. */
  | 'resource'
  /** The agent's runner run made no progress to record. */
  | 'runner';

export const AGAIN: NextStep = { type: 'again' };

export function waitFor(reason: WaitReason): NextStep {
  return { type: 'wait', reason };
}
