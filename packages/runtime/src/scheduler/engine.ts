import type { ActionDecision, RuntimeEvent, Task } from '@oar/protocol';
import type { AgentConfig, RuntimeLimits, SessionBinding } from '../config/binding.js';
import type { SessionGrant } from '../config/permission-request.js';
import type { PermissionsConfig } from '../config/permissions.js';
import type { EventDraft, WriteTiming } from '../log/draft.js';
import type { LiveDelta } from '../log/live.js';
import type { ModelHandle } from '../models/model-call.js';
import type { ModelDeltaSink } from '../models/model-deltas.js';
import type { Limiter } from '../models/provider-limits.js';
import type { RevealedObservations } from '../policy/revealed.js';
import type { JobState } from '../read-models/job.js';
import type { SessionState } from '../read-models/session.js';
import type { ThreadView } from '../read-models/thread-state.js';
import type { Redactor } from '../redaction/redactor.js';
import type { ArtifactContent, StoredArtifact } from '../store/artifacts.js';
import type { RunnerStorage } from '../store/runner-storage.js';
import type { ToolRegistry } from '../tools/registry.js';

export type { AgentConfig, RuntimeLimits } from '../config/binding.js';
export { DEFAULT_LIMITS } from '../config/binding.js';

/**
 * A session's binding made runnable in this process: tools loaded, models resolvable. Built once per binding hash
 * by the worker, shared by every thread of every session with the same binding.
 */
export interface BoundConfig {
  readonly binding: SessionBinding;
  readonly bindingHash: string;
  readonly workspaceRoot: string;
  readonly tools: ToolRegistry;
  readonly agents: readonly AgentConfig[];
  readonly mainAgent: AgentConfig;
  readonly permissions: PermissionsConfig;
  readonly limits: RuntimeLimits;
  readonly onProtocolFailure: 'fail' | 'plain_text';
  /** What never enters the record under this binding: its secret variables' values, its `.env*` values, key shapes. */
  readonly redactor: Redactor;
  model(agent: AgentConfig): Promise<ModelHandle>;
}

/**
 * What the runner and the executors get while a worker drives one thread: the bound configuration, the thread's
 * durable state, artifacts, and a writer fenced by the worker's lease. Nothing here reaches the store directly,
 * so a runner host or a CLI-tool boundary is just another executor behind the same narrow door.
 */
export interface Engine extends BoundConfig {
  readonly runtimeId: string;
  /** The abort signal of the driven thread's current work (replaced after each interrupt). */
  signal(threadId: string): AbortSignal;
  /**
   * Where the driven thread's model calls stream their output (live-only `model.delta`, `tool.args`,
   * `reasoning.delta`); none: nobody listens.
   * Passed explicitly, not through an AsyncLocalStorage: on Node 20 one active store turns on a hook for every
   * promise of the process (about 5% of a step).
   */
  readonly deltas?: ModelDeltaSink;
  /**
   * Hand a live-only event of the driven thread (a command's `process.output`) to the session's subscribers,
   * redacted; nothing is built when nobody listens. Absent: nobody can listen.
   */
  publishLive?(delta: LiveDelta): void;
  /**
   * The driven thread's unredacted observations of reads a rule explicitly allows (policy/revealed.ts): memory
   * only, read by the model's context and nothing else. Absent: the model sees every observation as recorded.
   */
  readonly revealed?: RevealedObservations;
  /** Another thread of the session has something to do (a child was delegated, a child ended). */
  wake(sessionId: string, threadId: string): void;
  loadThread(sessionId: string, threadId: string): Promise<ThreadView>;
  /** Tasks of the session as committed (a task's end reads the task and those that wait for it). */
  loadTasks(sessionId: string, taskIds: readonly string[]): Promise<Map<string, Task>>;
  /** A job of the session as committed (a job item's turn end reads it). */
  loadJob(sessionId: string, jobId: string): Promise<JobState | undefined>;
  /**
   * The session's events as committed, after a sequence (optionally of one thread): what a runner's `events.*` reads
   * (agent-runners/context-apis.ts). Optional: an engine without it answers no event queries.
   */
  readEvents?(
    sessionId: string,
    options: { after?: number; limit?: number; threadId?: string },
  ): Promise<RuntimeEvent[]>;
  /**
   * The committed answer to a decision (`action.resolved` of `actionId`), from this process or any other on the store:
   * what a runner call waiting for an approval polls (agent-runners/decisions.ts). Optional: without it nothing is answered.
   */
  resolvedDecision?(
    sessionId: string,
    actionId: string,
  ): Promise<{ decision: ActionDecision; reason?: string; resolvedBy?: string } | undefined>;
  /** The session's read model as committed (budgets read its spend and its recorded limit changes). */
  session(sessionId: string): Promise<SessionState | undefined>;
  /** This process's limits per provider and model, shared by every session it drives (models/provider-limits.ts). */
  readonly limiter: Limiter;
  /** The session's approve_for_session grants. */
  grants(sessionId: string): Promise<SessionGrant[]>;
  /**
   * The permissions of the session's current binding when it is not the one this engine runs with (the binding was
   * updated during the turn); undefined otherwise. An approved action is checked against both before it runs.
   */
  updatedPermissions(sessionId: string): Promise<PermissionsConfig | undefined>;
  readonly artifacts: {
    put(sessionId: string, content: ArtifactContent, maxBytes?: number): Promise<StoredArtifact>;
    text(sessionId: string, artifactId: string): Promise<string | undefined>;
    /**
     * An artifact of the session with its bytes and metadata (a runner's `artifacts.*` read binary ones too);
     * another session's id resolves to nothing.
     */
    read(
      sessionId: string,
      artifactId: string,
    ): Promise<(StoredArtifact & { bytes: Uint8Array; createdAt?: string }) | undefined>;
  };
  /** Runner `storage.*` values (agent-runners/storage.ts); absent: the host keeps no runner storage. */
  readonly runnerStorage?: RunnerStorage;
  /**
   * Record facts, fenced by the lease of the driven thread. Facts about the driven thread are staged: part of what
   * `loadThread` returns at once, written together at the next commit point (one transaction per step). `durable`
   * makes this a commit point flushed to disk: the facts (and all staged before them) are in the store when it
   * returns — required before and after a side effect that must not run twice; `commit` is the step boundary before
   * a model call, flushed only when a fact in it needs the disk (log/durability.ts). A `guard` and facts about
   * other threads are always written at once.
   */
  append(sessionId: string, drafts: EventDraft[], options?: WriteTiming): Promise<void>;
}
