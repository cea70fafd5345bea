import { type ChildProcess, spawn } from 'node:child_process';
import {
  LineSplitter,
  Peer,
  type PeerLimits,
  type RequestHandler,
  type Runner,
  type WireError,
  wireError,
} from '@oar/runner-sdk';

/**
 * How the host reaches a runner: a connection carrying the NDJSON wire (`@oar/runner-sdk` rpc.ts) both ways. The
 * host only ever sees this interface, so a child process (the default), an in-process runner (tests, built-in
 * runners) and, later, HTTP or WebSocket runners are interchangeable.
 */
export interface RunnerConnection {
  /** Host → runner requests (LIST_AGENT_RUNNERS, RUN_AGENT, CANCEL_AGENT_RUN); runner → host requests reach the handler. */
  readonly peer: Peer;
  /** The runner's process id, which is also its process group id (none in-process). */
  readonly pid?: number;
  /** Settles when the runner is gone: how it ended, and a protocol fault of its output if there was one. */
  readonly exited: Promise<RunnerExit>;
  /** The tail of what the runner wrote to stderr, at most the transport's bound (not yet redacted). */
  stderr(): string;
  /** End the connection: stop talking, give the runner `graceMs` to exit, then kill it (its whole process group). */
  close(graceMs?: number): Promise<RunnerExit>;
  /**
   * Notes about the runners' manifests that are not reasons to skip them (a wire whose manifests OAR reads
   * liberally, such as LangBot's, says what it read differently), once they were listed.
   */
  notes?(): { runner?: string; pointer: string; reason: string }[];
}

export interface RunnerExit {
  code: number | null;
  signal: string | null;
  /** The runner broke the wire (garbage on stdout, an oversized frame). */
  fault?: WireError;
  /** The host killed it (after the grace period of a close, or at once). */
  killed: boolean;
}

export interface RunnerTransport {
  connect(handler: RequestHandler, limits?: Partial<PeerLimits>): Promise<RunnerConnection>;
}

/** How much of a runner's stderr is kept: the last STDERR_LIMIT characters (the record holds the last 4 KiB). */
export const STDERR_LIMIT = 64 * 1024;

export interface ProcessSpec {
  command: string;
  args: string[];
  cwd: string;
  /** The whole environment of the child: only what the binding allows (plus PATH), never the host's. */
  env: Record<string, string>;
}

/**
 * A runner as a child process in its own process group (detached), speaking NDJSON on stdin/stdout. Cancel, a
 * timeout or a fault kills the whole group, so helpers the runner started die with it. The SDK's runner exits when
 * its stdin closes, which is also what happens when the host itself dies.
 */
export function processTransport(spec: ProcessSpec): RunnerTransport {
  return {
    async connect(handler, limits) {
      const child = spawn(spec.command, spec.args, {
        cwd: spec.cwd,
        env: spec.env,
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let stderr = '';
      let fault: WireError | undefined;
      let killed = false;
      const exited = new Promise<RunnerExit>((resolve) => {
        child.once('exit', (code, signal) => {
          peer.close(fault ?? wireError('runner_exited', `the runner exited (code ${code}, signal ${signal})`));
          resolve({ code, signal, killed, ...(fault ? { fault } : {}) });
        });
        child.once('error', (error) => {
          fault ??= wireError('runner_spawn_failed', error.message);
          peer.close(fault);
          resolve({ code: null, signal: null, killed, fault });
        });
      });
      const killGroup = () => {
        killed = true;
        killProcessGroup(child);
      };
      const peer = new Peer(
        (line) =>
          new Promise<void>((resolve, reject) => {
            if (!child.stdin || child.stdin.destroyed) {
              reject(new Error('the runner closed its stdin'));
              return;
            }
            child.stdin.write(`${line}\n`, (error) => (error ? reject(error) : resolve()));
          }),
        handler,
        limits,
        (error) => {
          // The runner broke the wire: nothing it says can be trusted any more.
          fault = error;
          killGroup();
        },
      );
      child.stdin?.on('error', () => undefined);
      const splitter = new LineSplitter(
        peer.limits.maxFrameBytes,
        (line) => peer.receive(line),
        () => peer.fault(wireError('frame_too_large', `a line of more than ${peer.limits.maxFrameBytes} bytes`)),
      );
      child.stdout?.setEncoding('utf8');
      child.stdout?.on('data', (chunk: string) => splitter.push(chunk));
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (chunk: string) => {
        // A rolling tail: a runner's last words (why it failed) matter more than its first.
        stderr = (stderr + chunk).slice(-STDERR_LIMIT);
      });
      return {
        peer,
        ...(child.pid !== undefined ? { pid: child.pid } : {}),
        exited,
        stderr: () => stderr,
        close: (graceMs = 2_000) => closeChild(child, exited, killGroup, graceMs),
      };
    },
  };
}

/**
 * End a runner child's connection: close its stdin (a runner exits when it reaches EOF), give it `graceMs` to exit,
 * then kill its group (`killGroup`) — and whatever it left behind in the group goes too, whichever way it ended.
 */
export async function closeChild(
  child: ChildProcess,
  exited: Promise<RunnerExit>,
  killGroup: () => void,
  graceMs: number,
): Promise<RunnerExit> {
  child.stdin?.end();
  if (child.exitCode === null && child.signalCode === null) {
    const timer = setTimeout(killGroup, graceMs);
    await exited;
    clearTimeout(timer);
  }
  killProcessGroup(child);
  return exited;
}

/** Kill a detached child's whole process group (its helpers too); a group already gone is fine. */
export function killProcessGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // The group is already gone.
  }
}

/**
 * A runner in this process, over the same framed wire (every line is serialized and parsed, with the same limits),
 * so it passes the same protocol suite as a child process. For tests and built-in runners.
 */
export function inProcessTransport(runner: Runner): RunnerTransport {
  return {
    async connect(handler, limits) {
      let resolveExit: (exit: RunnerExit) => void = () => undefined;
      const exited = new Promise<RunnerExit>((resolve) => {
        resolveExit = resolve;
      });
      let fault: WireError | undefined;
      let ended = false;
      const end = (killed: boolean) => {
        if (ended) return;
        ended = true;
        const error = fault ?? wireError('runner_exited', 'the in-process runner was closed');
        hostPeer.close(error);
        runnerPeer.close(error);
        resolveExit({
          code: killed ? null : 0,
          signal: killed ? 'SIGKILL' : null,
          killed,
          ...(fault ? { fault } : {}),
        });
      };
      // Delivered on a later tick, as a pipe would: neither side runs inside the other's write.
      const hostPeer: Peer = new Peer(
        (line) => {
          if (!ended) setImmediate(() => runnerPeer.receive(line));
        },
        handler,
        limits,
        (error) => {
          fault = error;
          end(true);
        },
      );
      const runnerPeer = runner.connect((line) => {
        if (!ended) setImmediate(() => hostPeer.receive(line));
      }, limits);
      return {
        peer: hostPeer,
        exited,
        stderr: () => '',
        async close() {
          end(false);
          return exited;
        },
      };
    },
  };
}
