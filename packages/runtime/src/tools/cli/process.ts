import { spawn } from 'node:child_process';

/**
 * One run of a business CLI as a subprocess: no shell (argv goes to execve as it is), its own process group (so a
 * timeout or an interrupt kills the CLI and everything it started), a fixed working directory, exactly the
 * environment given, the input on stdin, stdout capped. Nothing of the parent's is inherited: no variable, and of
 * OAR's own descriptors (the store included, all close-on-exec) only the three pipes. A descriptor OAR itself
 * inherited without close-on-exec from whatever started it would pass through (Node cannot close it before exec):
 * docs/tool-protocol.md says so.
 */

export interface CliProcessRequest {
  argv: readonly string[];
  cwd: string;
  env: Record<string, string>;
  stdin: string;
  /** Aborted on timeout or interrupt: the group gets SIGTERM, then SIGKILL after `graceMs`. */
  signal: AbortSignal;
  maxStdoutBytes: number;
  graceMs?: number;
}

export interface CliProcessResult {
  /** The exit code, or null when a signal ended it. */
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  /** The first 64 KiB of stderr, for diagnostics (redacted wherever it is recorded). */
  stderr: string;
  /** stdout went over `maxStdoutBytes`: the process was killed and `stdout` holds the part read. */
  oversize: boolean;
  /** The signal aborted it (timeout or interrupt) before it exited. */
  aborted: boolean;
  /** It could not start (ENOENT, EACCES): the message. */
  spawnError?: string;
}

const STDERR_CAP = 64 * 1024;
const DEFAULT_GRACE_MS = 2_000;

/** Signal the whole process group; a group that is already gone is fine. */
function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: nothing left in the group.
  }
}

export function runCliProcess(request: CliProcessRequest): Promise<CliProcessResult> {
  const [file, ...args] = request.argv;
  if (!file) return Promise.resolve(failed('empty command'));
  return new Promise((resolvePromise) => {
    const child = spawn(file, args, {
      cwd: request.cwd,
      env: request.env,
      shell: false,
      // Its own process group: `kill(-pid)` reaches its children and grandchildren too.
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
      windowsHide: true,
    });
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let stderr = '';
    let oversize = false;
    let aborted = false;
    let spawnError: string | undefined;
    let escalate: NodeJS.Timeout | undefined;

    const stop = () => {
      killGroup(child.pid, 'SIGTERM');
      escalate ??= setTimeout(() => killGroup(child.pid, 'SIGKILL'), request.graceMs ?? DEFAULT_GRACE_MS);
      escalate.unref();
    };
    const onAbort = () => {
      aborted = true;
      stop();
    };
    if (request.signal.aborted) onAbort();
    else request.signal.addEventListener('abort', onAbort, { once: true });

    child.stdout.on('data', (chunk: Buffer) => {
      if (oversize) return;
      const room = request.maxStdoutBytes - stdoutBytes;
      if (chunk.length > room) {
        stdout.push(chunk.subarray(0, Math.max(0, room)));
        stdoutBytes = request.maxStdoutBytes;
        oversize = true;
        stop();
        return;
      }
      stdout.push(chunk);
      stdoutBytes += chunk.length;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      if (stderr.length < STDERR_CAP) stderr += chunk.toString('utf8').slice(0, STDERR_CAP - stderr.length);
    });
    child.on('error', (error) => {
      spawnError = error.message;
    });
    // A CLI that exits without reading its stdin closes the pipe under us: that is its business, not a crash.
    child.stdin.on('error', () => undefined);
    child.stdin.end(request.stdin);

    child.on('close', (exitCode, signal) => {
      request.signal.removeEventListener('abort', onAbort);
      if (escalate) clearTimeout(escalate);
      // Whatever it left running (a daemonised grandchild) does not outlive the call.
      killGroup(child.pid, 'SIGKILL');
      resolvePromise({
        exitCode,
        signal,
        stdout: Buffer.concat(stdout).toString('utf8'),
        stderr,
        oversize,
        aborted,
        ...(spawnError !== undefined ? { spawnError } : {}),
      });
    });
  });
}

function failed(spawnError: string): CliProcessResult {
  return {
    exitCode: null,
    signal: null,
    stdout: '',
    stderr: '',
    oversize: false,
    aborted: false,
    spawnError,
  };
}
