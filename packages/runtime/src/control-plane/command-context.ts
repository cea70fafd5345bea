import type { Task } from '@oar/protocol';
import type { SessionBinding } from '../config/binding.js';
import type { FactWriter } from '../facts/writer.js';
import { notFound } from '../kernel/errors.js';
import { setRecent } from '../kernel/lru.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import type { AppendOptions, EventLog } from '../log/event-log.js';
import type { Notifier } from '../log/notifier.js';
import type { CallIds } from '../policy/authorize.js';
import type { JobState } from '../read-models/job.js';
import { bindingOf, type SessionState } from '../read-models/session.js';
import type { Redactor } from '../redaction/redactor.js';

/** How many session bindings' redactors commands keep (each scanned its workspace's `.env` files once). */
const MAX_REDACTORS = 64;

export interface CommandDeps {
  log: EventLog;
  notifier: Notifier;
  bindings: Bindings;
  /** How a call would be judged (`evaluate_permission`); absent: the command is unavailable. */
  judge?: PermissionJudge;
  /** The sessions' workspace files (`rollback_thread` restores them); absent: only history can be rolled back. */
  files?: WorkspaceFiles;
}

/**
 * A session's workspace files, through a port the façade implements over the file tools' confined opens
 * (facade/workspace-files.ts): a command names a file by its workspace path and never reaches outside the workspace.
 */
export interface WorkspaceFiles {
  /**
   * The sha256 of the file's bytes now and the workspace path it really is (another one when `path` became a link);
   * null when there is no such file. Throws a structured error for what is not a readable regular file.
   */
  digest(workspaceRoot: string, path: string): Promise<{ sha256: string; path: string; size: number } | null>;
  /**
   * Make `bytes` the file's whole content, or remove the file (`undefined`) — only while its content still has the
   * digest `expected`, checked through the descriptor it writes through. False (nothing changed) when it has not.
   */
  restore(workspaceRoot: string, path: string, bytes: Uint8Array | undefined, expected: string): Promise<boolean>;
}

/**
 * The permission judgement `evaluate_permission` asks for, through a port the façade implements over the tools and
 * the policy (facade/judge.ts): the control plane records what the one authorization decides, it never judges.
 */
export interface PermissionJudge {
  /**
   * `permission.evaluated` (with `ids` and `facts`) for calling the bound tool `toolName` with `input` under the
   * session's binding and grants as they are now. Throws `unknown_tool` or `invalid_tool_input`.
   */
  evaluate(
    session: SessionState,
    call: { toolName: string; input?: unknown },
    ids: CallIds,
    facts: Record<string, unknown>,
  ): Promise<EventDraft>;
}

/**
 * What commands do with a session's binding, through one port the façade implements over `config/`: a binding's
 * schemas, its workspace on disk and the secrets of its environment are the configuration's business, and a command
 * only records bindings, by hash.
 */
export interface Bindings {
  /** The binding a new session gets (the runtime's configuration). */
  template(): SessionBinding;
  /**
   * `base` with `update` applied, and its hash. `update` is a caller's JSON: throws `invalid_binding` when it is
   * not a binding update, `workspace_unavailable` when the workspace it names is not a directory.
   */
  apply(base: SessionBinding, update: unknown): { binding: SessionBinding; hash: string };
  /** Throws when a binding cannot run here (a tool module that does not load, a model that does not resolve). */
  verify(binding: SessionBinding, hash: string): Promise<void>;
  /** The redactor of a binding: the values of the variables it names as secrets and of its workspace's `.env` files. */
  redactor(binding: SessionBinding): Promise<Redactor>;
}

/**
 * What every command stands on: the log, the notifier and the bindings port (`deps`), and the one way a command
 * writes — appended with the session's own redactor, under the command's guard.
 */
export class CommandContext {
  /** Redactors of the session bindings commands recently wrote for, by binding hash. */
  private readonly redactors = new Map<string, Promise<Redactor>>();

  constructor(readonly deps: CommandDeps) {}

  get log(): EventLog {
    return this.deps.log;
  }

  async session(sessionId: string): Promise<SessionState> {
    const session = (await this.log.readModels(sessionId, [])).session;
    if (!session) throw notFound('session', sessionId);
    return session;
  }

  /** Tasks of a session by id, as committed (an unknown id is absent). */
  async tasks(sessionId: string, taskIds: readonly string[]): Promise<Map<string, Task>> {
    const keys = taskIds.map((key) => ({ kind: 'task' as const, key }));
    return (await this.log.readModels(sessionId, keys)).tasks;
  }

  async job(sessionId: string, jobId: string): Promise<JobState | undefined> {
    return (await this.log.readModels(sessionId, [{ kind: 'job', key: jobId }])).jobs.get(jobId);
  }

  async mainThreadId(sessionId: string): Promise<string> {
    const threadId = (await this.session(sessionId)).threadIds[0];
    if (!threadId) throw notFound('session', sessionId);
    return threadId;
  }

  /**
   * Append for a command, cleaned by the session's own redactor: a prompt that pastes a value from the workspace's
   * `.env` or a variable the binding names as secret is recorded redacted, as a worker's facts are. A session
   * without a binding (created before bindings) gets the log's process redactor.
   */
  async append(sessionId: string, drafts: EventDraft[], options: AppendOptions = {}) {
    return this.log.append(sessionId, drafts, { ...options, redactor: await this.redactorFor(sessionId) });
  }

  async redactorFor(sessionId: string): Promise<Redactor> {
    const session = (await this.log.readModels(sessionId, [])).session;
    const binding = session && bindingOf(session);
    if (!session?.bindingHash || !binding) return this.log.redactor;
    return this.redactorOf(session.bindingHash, binding);
  }

  /** The redactor of one binding, kept among the most recently used (`MAX_REDACTORS`). */
  redactorOf(hash: string, binding: SessionBinding): Promise<Redactor> {
    let redactor = this.redactors.get(hash);
    if (!redactor) {
      redactor = this.deps.bindings.redactor(binding);
      // A workspace that cannot be read now is tried again next time, not remembered.
      redactor.catch(() => this.redactors.delete(hash));
      setRecent(this.redactors, hash, redactor, MAX_REDACTORS);
    }
    return redactor;
  }

  /** The runner's turn-ending code, writing as a command: each append also re-checks `guard`. */
  writer(guard: AppendGuard): FactWriter {
    return {
      loadThread: (sessionId, threadId) => this.log.thread(sessionId, threadId),
      loadTasks: (sessionId, taskIds) => this.tasks(sessionId, taskIds),
      loadJob: (sessionId, jobId) => this.job(sessionId, jobId),
      append: (sessionId, drafts, options = {}) =>
        this.append(sessionId, drafts, {
          guard: async (tx) => {
            await guard(tx);
            await options.guard?.(tx);
          },
        }).then(() => undefined),
      // The notifier tells the workers; a command never drives anything itself.
      wake: () => undefined,
    };
  }
}
