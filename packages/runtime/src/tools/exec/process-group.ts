import { type ChildProcess, spawn } from 'node:child_process';

/**
 * One command running in its own process group: its output collected (bounded) and streamed to listeners, its
 * stdin writable, and the whole group stopped on demand — SIGTERM, a grace period, then SIGKILL — so a child it
 * forked does not outlive it. Under bubblewrap the group's leader is bwrap: killing it ends its PID namespace, and
 * every process in it, whatever they did to their own groups.
 */

export type OutputStream = 'stdout' | 'stderr';

export interface ProcessEnd {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the runtime stopped it: `timeout`, `interrupted`, `terminated` (by a call), `lease_lost`… */
  stoppedBy?: string;
  /** The process could not be started at all (ENOENT, EACCES…). */
  spawnError?: { code: string; message: string };
}

export interface ProcessGroupOptions {
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  /** Bytes of output kept (both streams, in arrival order); later output is counted, not kept. */
  maxBytes: number;
  killGraceMs: number;
}

export type OutputListener = (stream: OutputStream, chunk: Buffer) => void;

export class ProcessGroup {
  readonly child: ChildProcess;
  readonly ended: Promise<ProcessEnd>;
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  /** Bytes the process wrote, kept or not. */
  totalBytes = 0;
  private readonly stderrTail: string[] = [];
  private stderrPartial = '';
  private readonly listeners = new Set<OutputListener>();
  private stoppedBy: string | undefined;
  private exited = false;
  private killTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: ProcessGroupOptions) {
    const [file, ...args] = options.argv as [string, ...string[]];
    // detached: a new process group (and session) whose id is the child's pid, so the group can be killed whole.
    this.child = spawn(file, args, {
      cwd: options.cwd,
      env: options.env,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stdout?.on('data', (chunk: Buffer) => this.take('stdout', chunk));
    this.child.stderr?.on('data', (chunk: Buffer) => this.take('stderr', chunk));
    // A process that exits without reading its stdin makes writes fail with EPIPE: not our failure.
    this.child.stdin?.on('error', () => undefined);
    // A process stopped by the runtime whose pipes stay open (a descendant that left the group still holds them)
    // would keep `close` from coming: once the leader exited, the pipes are cut after the grace period.
    this.child.once('exit', () => {
      if (!this.stoppedBy) return;
      setTimeout(() => {
        this.child.stdout?.destroy();
        this.child.stderr?.destroy();
      }, this.options.killGraceMs).unref?.();
    });
    this.ended = new Promise((resolve) => {
      this.child.once('error', (error: NodeJS.ErrnoException) => {
        this.exited = true;
        resolve({
          exitCode: null,
          signal: null,
          spawnError: { code: error.code ?? 'spawn_failed', message: error.message },
        });
      });
      // `close`: the process exited AND its streams ended, so every byte of output is in.
      this.child.once('close', (code, signal) => {
        this.exited = true;
        if (this.killTimer) clearTimeout(this.killTimer);
        // The leader is gone; anything left in its group (a child that ignored SIGTERM) goes now.
        if (this.stoppedBy) this.signalGroup('SIGKILL');
        resolve({ exitCode: code, signal, ...(this.stoppedBy ? { stoppedBy: this.stoppedBy } : {}) });
      });
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return !this.exited;
  }

  onOutput(listener: OutputListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The output kept so far, both streams in arrival order. */
  output(): Buffer {
    return Buffer.concat(this.chunks);
  }

  /** Whether output was dropped because it went over `maxBytes`. */
  get truncated(): boolean {
    return this.totalBytes > this.kept;
  }

  /**
   * `output.truncated` for a process whose output went over `maxBytes` (what was written, what was kept: its head),
   * with the artifact that holds the kept part when there is one; none when nothing was dropped.
   */
  truncation(processId: string, artifactId?: string) {
    if (!this.truncated) return [];
    const payload = {
      processId,
      originalBytes: this.totalBytes,
      keptBytes: this.kept,
      strategy: 'head',
      ...(artifactId ? { artifactId } : {}),
    };
    return [{ type: 'output.truncated' as const, processId, payload }];
  }

  /** The last lines of stderr, the unfinished one included (the sandbox's refusals are read from them). */
  stderrLines(): string[] {
    return this.stderrPartial.trim() === '' ? [...this.stderrTail] : [...this.stderrTail, this.stderrPartial];
  }

  private keepStderrLine(line: string): void {
    if (line.trim() === '') return;
    this.stderrTail.push(line.slice(0, 500));
    if (this.stderrTail.length > 50) this.stderrTail.shift();
  }

  /** Write to the process's stdin; `end` closes it (EOF) afterwards. False when stdin is already closed. */
  write(text: string, end = false): boolean {
    const stdin = this.child.stdin;
    if (!stdin || stdin.destroyed || stdin.writableEnded) return false;
    if (text !== '') stdin.write(text);
    if (end) stdin.end();
    return true;
  }

  /**
   * Stop the whole group: SIGTERM now, SIGKILL after the grace period if the leader has not exited (and at its
   * exit in any case, for what it left behind). Resolves once the leader has exited.
   */
  stop(reason: string): Promise<ProcessEnd> {
    if (!this.exited) {
      this.stoppedBy ??= reason;
      this.signalGroup('SIGTERM');
      this.killTimer ??= setTimeout(() => this.signalGroup('SIGKILL'), this.options.killGraceMs);
      this.killTimer.unref?.();
    }
    return this.ended;
  }

  private signalGroup(signal: NodeJS.Signals): void {
    const pid = this.child.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, signal);
    } catch (error) {
      // ESRCH: the group is already gone. Where groups cannot be signalled (Windows), the leader at least.
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH' && !this.exited) this.child.kill(signal);
    }
  }

  private take(stream: OutputStream, chunk: Buffer): void {
    this.totalBytes += chunk.length;
    const room = this.options.maxBytes - this.kept;
    if (room > 0) {
      const piece = chunk.length > room ? chunk.subarray(0, room) : chunk;
      this.chunks.push(piece);
      this.kept += piece.length;
    }
    if (stream === 'stderr') {
      // Whole lines only: a chunk may end mid-line (a refusal split in two would match no pattern).
      const lines = (this.stderrPartial + chunk.toString('utf8')).split('\n');
      this.stderrPartial = (lines.pop() ?? '').slice(-4_096);
      for (const line of lines) this.keepStderrLine(line);
    }
    for (const listener of this.listeners) {
      try {
        listener(stream, chunk);
      } catch {
        // A failing listener must not stop the output.
      }
    }
  }
}
