/**
 * A promise of the first SIGTERM or SIGINT, for a long-running command (`oar serve`, `oar worker`). Its handlers are
 * in place when this returns: call it before printing the banner that says the process is up, so a signal sent as
 * soon as the banner is read is a drain, never Node's default kill (seen: a worker stopped right after its banner
 * exited by the signal, not 0).
 */
export function stopSignal(): Promise<void> {
  return new Promise<void>((done) => {
    const stop = () => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      done();
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}
