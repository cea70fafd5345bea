import type { Runtime } from '@oar/runtime';

/**
 * Ctrl-C during `oar run`, from the command's first step to its report. Before the turn is submitted, it ends the
 * command before anything more is recorded (`requested`, checked between the steps); once the turn is submitted,
 * it interrupts the turn (`arm`). One Ctrl-C: the listener is a `once`, so a second one force-quits, as in any
 * terminal program.
 *
 * The lost Ctrl-C (issue 25): the handler used to be installed only after the session was created, and it asked the
 * runtime to interrupt "the running turn" — but a turn that is submitted and not yet started (the worker has not
 * claimed it yet, which on a loaded machine takes a while) is no running turn, so the request was a no-op and the
 * turn ran to its end. `interruptOnceStarted` waits for the turn to start (or end) before asking.
 */
export class CtrlC {
  private received = false;
  private interrupt: (() => Promise<void>) | undefined;
  private interrupting: Promise<void> | undefined;
  private readonly listener = () => this.press();

  constructor() {
    process.once('SIGINT', this.listener);
  }

  /** Ctrl-C was pressed: SIGINT, or at a prompt that read it as a key (`DriveOptions.onCtrlC`). */
  press(): void {
    this.received = true;
    this.start();
  }

  /** Whether Ctrl-C was pressed. */
  get requested(): boolean {
    return this.received;
  }

  /** From now on Ctrl-C runs `interrupt` — at once when it was pressed already. */
  arm(interrupt: () => Promise<void>): void {
    this.interrupt = interrupt;
    this.start();
  }

  /**
   * Follow the armed turn with `drive` (given what a prompt calls on Ctrl-C: `DriveOptions.onCtrlC`). After a
   * Ctrl-C, the interrupt records the cancellation once the running work stops: wait for it, then drive again, so
   * what is reported is the recorded outcome.
   */
  async follow<T>(drive: (onCtrlC: () => void) => Promise<T>): Promise<T> {
    const onCtrlC = () => this.press();
    const result = await drive(onCtrlC);
    if (!this.interrupting) return result;
    await this.interrupting;
    return drive(onCtrlC);
  }

  /** Ctrl-C is the default again (it ends the process). */
  dispose(): void {
    process.off('SIGINT', this.listener);
  }

  private start(): void {
    if (!this.received || !this.interrupt || this.interrupting) return;
    this.interrupting = this.interrupt();
    // Awaited by the command while it runs; one pressed as the command ends must not become an unhandled rejection.
    this.interrupting.catch(() => undefined);
  }
}

const REASON = 'interrupted from the terminal (Ctrl-C)';

/**
 * Interrupt one turn once it has started: the runtime interrupts a thread's running turn, and a turn submitted but
 * not started is not running yet. The session's events after `after` (the log's end before the turn was submitted,
 * then each commit) say when it starts — or that it ended first, and there is nothing to interrupt.
 */
export async function interruptOnceStarted(
  runtime: Runtime,
  sessionId: string,
  turn: { threadId: string; turnId: string },
  after: number,
): Promise<void> {
  const stop = new AbortController();
  let started = false;
  try {
    for await (const event of runtime.subscribe(sessionId, { after, signal: stop.signal })) {
      if (event.turnId !== turn.turnId) continue;
      if (event.type === 'turn.completed' || event.type === 'turn.failed') return;
      if (event.type === 'turn.started') {
        started = true;
        break;
      }
    }
  } finally {
    stop.abort();
  }
  if (started) await runtime.interruptTurn({ sessionId, threadId: turn.threadId, reason: REASON });
}
