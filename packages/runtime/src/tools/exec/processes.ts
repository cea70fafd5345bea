import type { ProcessGroup } from './process-group.js';
import type { SandboxProfile } from './sandbox.js';

/**
 * The background processes this OS process runs (`exec` with `background: true`). They live in memory only: a
 * process belongs to the runtime process that spawned it, so after a crash its ids are unknown here and its
 * `process.started` without an end is recorded as lost by recovery, never re-attached.
 */
export interface BackgroundProcess {
  processId: string;
  sessionId: string;
  /** The runtime that started it (its id): closing it stops the process. */
  owner: string;
  /** The thread that started it: the only one whose turns may use it. */
  threadId: string;
  command: string;
  group: ProcessGroup;
  startedAt: number;
  profile: SandboxProfile;
  network: boolean;
  /** Bytes of its kept output already returned by a `read`. */
  read: number;
  /** Its end was recorded (`process.completed`, `process.failed` or `process.terminated`). */
  recorded?: boolean;
}

class BackgroundProcesses {
  private readonly byId = new Map<string, BackgroundProcess>();
  private hooked = false;

  add(entry: BackgroundProcess): void {
    this.byId.set(entry.processId, entry);
    // The runtime's process exiting takes its background processes along (a sandboxed one dies with bwrap
    // anyway; an unsandboxed group would otherwise outlive it). Synchronous: nothing else runs at `exit`.
    if (!this.hooked) {
      this.hooked = true;
      process.once('exit', () => {
        for (const running of this.byId.values()) {
          const pid = running.group.pid;
          if (pid === undefined || !running.group.running) continue;
          try {
            process.kill(-pid, 'SIGKILL');
          } catch {
            // already gone
          }
        }
      });
    }
  }

  get(processId: string): BackgroundProcess | undefined {
    return this.byId.get(processId);
  }

  /** Whether this OS process started the process (running or ended): recovery leaves such ones alone. */
  knows(processId: string): boolean {
    return this.byId.has(processId);
  }

  /** How many of the session's background processes are still running. */
  running(sessionId: string): number {
    let count = 0;
    for (const entry of this.byId.values()) if (entry.sessionId === sessionId && entry.group.running) count++;
    return count;
  }

  /** Forget an ended process whose end is recorded. */
  forget(processId: string): void {
    const entry = this.byId.get(processId);
    if (entry && !entry.group.running && entry.recorded) this.byId.delete(processId);
  }

  /** Whether this OS process has a process of the session whose end is not recorded (or a foreground command now). */
  runsFor(sessionId: string): boolean {
    for (const entry of this.byId.values()) if (entry.sessionId === sessionId && !entry.recorded) return true;
    for (const entry of foregroundProcesses.values()) if (entry.sessionId === sessionId) return true;
    return false;
  }

  /**
   * Stop every running process a runtime started (it closes); those whose end is not recorded yet (stopped now, or
   * exited by themselves unobserved).
   */
  async stopAll(owner: string, reason: string): Promise<BackgroundProcess[]> {
    const unrecorded = [...this.byId.values()].filter((e) => e.owner === owner && !e.recorded);
    await Promise.all(unrecorded.filter((e) => e.group.running).map((e) => e.group.stop(reason)));
    return unrecorded;
  }
}

/** The table of this OS process. */
export const backgroundProcesses = new BackgroundProcesses();

/**
 * The commands running in the foreground of a tool call in this OS process, while they run: only a
 * `terminate_process` request reaches them here (their call records how they ended).
 */
export interface ForegroundProcess {
  processId: string;
  sessionId: string;
  threadId: string;
  group: ProcessGroup;
  /** The request that stopped it (its id and who asked), recorded with its end by its call. */
  answers?: Record<string, unknown>;
}

export const foregroundProcesses = new Map<string, ForegroundProcess>();
