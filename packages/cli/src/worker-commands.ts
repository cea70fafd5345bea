import type { Command } from 'commander';
import type { GlobalOptions } from './options.js';
import { globals } from './runtime-commands.js';
import { stopSignal } from './stop-signal.js';

/**
 * The scale-out processes (docs/deployment.md): `oar worker` executes turns of every session of the store, and
 * `oar wait` follows a session that some worker runs (after `oar run --detach` or an HTTP submit) to its outcome.
 */

interface WorkerCommandOptions extends GlobalOptions {
  concurrency?: string;
  id?: string;
  drainSeconds?: string;
  storeWaitSeconds?: string;
}

/** What the commands below need when they run; imported then, not when `oar --help` lists them. */
async function load() {
  const [{ oarError }, runtime, io, actions, driver, storeWait] = await Promise.all([
    import('@oar/protocol'),
    import('@oar/runtime'),
    import('./io.js'),
    import('./runtime-actions.js'),
    import('./session-driver.js'),
    import('./store-wait.js'),
  ]);
  return { oarError, ...runtime, ...io, ...actions, ...driver, ...storeWait };
}

/** The default of `--drain-seconds`: how long SIGTERM lets running steps reach a durable point. */
const DRAIN_SECONDS = 30;

async function worker(options: WorkerCommandOptions): Promise<number> {
  const { buildRuntime, loadConfig, oarError, ownerName, positiveOption, STORE_WAIT, UsageError, whenStoreReachable } =
    await load();
  const cwd = process.cwd();
  const { config, baseDir } = await loadConfig(options.config, cwd);
  const concurrency = positiveOption('--concurrency', options.concurrency, config.worker.concurrency ?? 16);
  const drainMs = positiveOption('--drain-seconds', options.drainSeconds, DRAIN_SECONDS) * 1000;
  const storeWaitSeconds = positiveOption('--store-wait-seconds', options.storeWaitSeconds, STORE_WAIT.defaultSeconds);
  if (options.id !== undefined && !/^[A-Za-z0-9_.-]{1,64}$/.test(options.id)) {
    throw new UsageError(oarError('invalid_option', '--id is 1-64 letters, digits, "_", "." or "-"'));
  }
  const store = options.store ?? process.env.OAR_STORE;
  const stopped = stopSignal();
  const built = await whenStoreReachable(
    () =>
      buildRuntime(config, baseDir, {
        cwd,
        env: process.env,
        worker: {
          sessions: 'all',
          concurrency: concurrency,
          // A store that goes away later is ridden out as long as one that is not there yet.
          storeGiveUpMs: storeWaitSeconds * 1000,
          // Still `NAME@host:pid`: a lease of this worker is taken over at once when its process is seen gone.
          ...(options.id ? { owner: ownerName(options.id) } : {}),
          // A long-lived worker sweeps artifacts by the configured retention policy (docs/reliability.md).
          ...(config.retention.artifacts ? { artifactRetention: config.retention.artifacts } : {}),
        },
        ...(store ? { store } : {}),
      }),
    { giveUpMs: storeWaitSeconds * 1000, stopped, log: (line) => process.stderr.write(`${line}\n`) },
  );
  // Asked to stop before the store could be reached: nothing was started.
  if (!built) return 0;
  const { runtime } = built;
  const owner = runtime.worker?.owner ?? '';
  process.stderr.write(
    `OAR worker ${owner}\n  store:       ${runtime.store.location}\n  concurrency: ${concurrency} threads\n  SIGTERM drains (${drainMs / 1000} s), SIGINT too\n`,
  );
  // Its timers are unref'd and SQLite's notifier is in-process: without this the process would end at once.
  const alive = setInterval(() => undefined, 60_000);
  await stopped;
  clearInterval(alive);
  process.stderr.write('draining: no new threads; running steps finish and are handed back\n');
  const drained = (await runtime.worker?.drain(drainMs)) ?? true;
  if (!drained) process.stderr.write('drain deadline passed: the rest is stopped and resumes on another worker\n');
  await runtime.close();
  await runtime.store.close();
  return 0;
}

interface WaitOptions extends GlobalOptions {
  timeout?: string;
  json?: boolean;
}

async function wait(sessionId: string, options: WaitOptions): Promise<number> {
  const { driveSession, mainTurnId, OarRuntimeError, openForSessions, positiveOption, report, sessionNotInStore } =
    await load();
  const timeoutMs = options.timeout === undefined ? undefined : positiveOption('--timeout', options.timeout, 1) * 1000;
  // A control plane only: this process drives nothing, it waits for whichever worker runs the session.
  const { runtime, store } = await openForSessions(options, false);
  try {
    const turnId = await mainTurnId(runtime, sessionId);
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<undefined>((resolve) => {
      if (timeoutMs !== undefined) timer = setTimeout(() => resolve(undefined), timeoutMs);
    });
    // Settled, then read as `oar run` reports a turn: completed, failed (with the error), cancelled, or waiting.
    const drive = driveSession(runtime, sessionId, turnId, { json: options.json === true, approvals: 'leave' });
    const result = await Promise.race([drive, expired]).finally(() => clearTimeout(timer));
    if (!result) {
      // Not a usage mistake: exit 75 (try again later), from the error table.
      throw new OarRuntimeError('wait_timeout', `session ${sessionId} is still running after ${options.timeout} s`, {
        retryable: true,
        details: { sessionId, timeoutSeconds: Number(options.timeout) },
      });
    }
    return report(result, sessionId, options, store.location);
  } catch (error) {
    throw sessionNotInStore(error, store.location);
  } finally {
    await runtime.close();
    await store.close();
  }
}

export function registerWorkerCommands(program: Command, setExit: (code: number) => void): void {
  globals(program.command('worker'))
    .description(
      'execute turns of every session of the store (claims thread leases, renews them, releases them when idle); run several, on several machines, against PostgreSQL',
    )
    .option('--concurrency <n>', 'the most threads this worker drives at once (default 16)')
    .option('--id <name>', "this worker's name in lease rows (default: a fresh wrk_… id)")
    .option('--drain-seconds <s>', 'on SIGTERM: how long running steps may take to reach a durable point (default 30)')
    .option(
      '--store-wait-seconds <s>',
      'how long to keep trying a store that cannot be reached at start before exiting 74 (default 300)',
    )
    .action(async (options: WorkerCommandOptions) => setExit(await worker(options)));

  globals(program.command('wait'))
    .description(
      'block until the session is settled (nothing running, nothing left to pick up); exit 0 if its last turn completed, 1 if it failed, 3 if it waits for a decision, 130 if cancelled',
    )
    .argument('<session>', 'session id')
    .option('--timeout <seconds>', 'give up after this long (exit 75, wait_timeout)')
    .option('--json', 'print the outcome as JSON')
    .action(async (sessionId: string, options: WaitOptions) => setExit(await wait(sessionId, options)));
}
