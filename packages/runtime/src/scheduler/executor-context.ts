import type { Action } from '@oar/protocol';
import type { ActionScope } from '../facts/action.js';
import type { EventDraft, WriteTiming } from '../log/draft.js';
import type { LiveDelta } from '../log/live.js';
import type { PolicySource } from '../policy/authorize.js';
import type { RevealedObservations } from '../policy/revealed.js';
import type { JobState } from '../read-models/job.js';
import type { SessionState } from '../read-models/session.js';
import type { RunAction, RunState, ThreadView } from '../read-models/thread-state.js';
import type { ArtifactContent, StoredArtifact } from '../store/artifacts.js';
import type { BoundConfig, Engine } from './engine.js';

/**
 * The configuration one action runs under, read only: the session's binding, what this process loaded for it (its
 * tools and agents), its limits and redactor. No model, no limiter, no store.
 */
export type ExecutorConfig = Pick<
  BoundConfig,
  'binding' | 'bindingHash' | 'workspaceRoot' | 'tools' | 'agents' | 'mainAgent' | 'permissions' | 'limits' | 'redactor'
> & {
  /** The process running the action (a command's process owner). */
  readonly runtimeId: string;
};

/** The artifacts of the action's session: store one (at most `maxBytes`), read one back. */
export interface SessionArtifacts {
  put(content: ArtifactContent, maxBytes?: number): Promise<StoredArtifact>;
  text(artifactId: string): Promise<string | undefined>;
}

/**
 * Everything an executor may use while it runs one action, and nothing else (the executor port, executors/executor.ts):
 * the action and its run, the configuration, the abort signal, and a small door onto its own session — record facts
 * (fenced by the worker's lease), store and read artifacts, read and wake a thread. Every door is bound to the
 * action's session: an executor cannot write into another session, call a model, or reach the store. The scheduler
 * builds it over the worker's engine (`executorContext`); the runner host's tool proxy builds one over a run.
 */
export interface ExecutorContext extends ActionScope {
  readonly config: ExecutorConfig;
  /** The driven thread's interrupt (a `block` tool ignores it; the runtime closing is `isClosing`). */
  readonly signal: AbortSignal;
  /**
   * Record facts of the session, fenced by the lease of the driven thread: staged until the step's next commit,
   * or a durable commit point (`{durable: true}`) — before and after a side effect that must not run twice.
   */
  record(drafts: EventDraft[], timing?: WriteTiming): Promise<void>;
  readonly artifacts: SessionArtifacts;
  /** A thread of the session as committed and staged (the action's own as it is now, after its dependencies). */
  loadThread(threadId: string): Promise<ThreadView>;
  /** A job of the session as committed (a `start_job` action waits for its job). */
  loadJob(jobId: string): Promise<JobState | undefined>;
  /** Another thread of the session has work to do (a child was delegated to). */
  wake(threadId: string): void;
  /** Hand live-only output of a running command to the session's subscribers; absent: nobody can listen. */
  publishLive?(delta: LiveDelta): void;
  /** The driven thread's unredacted observations of reads a rule explicitly allows (policy/revealed.ts). */
  readonly revealed?: RevealedObservations;
  /** The session as committed: who it acts for (a tool's caller). */
  session(): Promise<SessionState | undefined>;
  /** Where authorization looks: the bound permissions and workspace, the session's grants, an updated binding. */
  readonly policy: PolicySource;
}

/** What an executor may use beyond its action: the same for every action of a run, so built once per run. */
export type SessionDoors = Omit<ExecutorContext, 'thread' | 'run' | 'action' | 'state' | 'signal'>;

/**
 * The engine's doors bound to one session. Only the scheduler (and the runner host's tool proxy) holds the engine;
 * what it hands an executor is these, with the action (`executorContext`).
 */
export function sessionDoors(engine: Engine, sessionId: string): SessionDoors {
  return {
    config: {
      binding: engine.binding,
      bindingHash: engine.bindingHash,
      workspaceRoot: engine.workspaceRoot,
      tools: engine.tools,
      agents: engine.agents,
      mainAgent: engine.mainAgent,
      permissions: engine.permissions,
      limits: engine.limits,
      redactor: engine.redactor,
      runtimeId: engine.runtimeId,
    },
    record: (drafts, timing) => engine.append(sessionId, drafts, timing),
    artifacts: {
      put: (content, maxBytes) => engine.artifacts.put(sessionId, content, maxBytes),
      text: (artifactId) => engine.artifacts.text(sessionId, artifactId),
    },
    loadThread: (threadId) => engine.loadThread(sessionId, threadId),
    loadJob: (jobId) => engine.loadJob(sessionId, jobId),
    wake: (threadId) => engine.wake(sessionId, threadId),
    ...(engine.publishLive ? { publishLive: (delta: LiveDelta) => engine.publishLive?.(delta) } : {}),
    ...(engine.revealed ? { revealed: engine.revealed } : {}),
    session: () => engine.session(sessionId),
    policy: {
      permissions: engine.permissions,
      workspaceRoot: engine.workspaceRoot,
      // Bound like every other door: whatever session id a judgement names, it reads the action's session.
      grants: () => engine.grants(sessionId),
      updatedPermissions: () => engine.updatedPermissions(sessionId),
    },
  };
}

/** The context of one action: its scope and signal beside the doors of its session. */
export function executorContext(
  doors: SessionDoors,
  scope: { thread: ThreadView; run: RunState; action: Action; state: RunAction },
  signal: AbortSignal,
): ExecutorContext {
  return { ...scope, ...doors, signal };
}
