import type { Task } from '@oar/protocol';
import type { RuntimeLimits } from '../config/binding.js';
import type { EventDraft, WriteTiming } from '../log/draft.js';
import type { JobState } from '../read-models/job.js';
import type { ThreadView } from '../read-models/thread-state.js';
import type { ArtifactContent, StoredArtifact } from '../store/artifacts.js';

/**
 * What writing the facts of a thread needs of whoever writes them: the worker's engine (scheduler/engine.ts) or a
 * command's guarded writer (control-plane/command-context.ts). Narrow on purpose: facts know nothing of the loop.
 */
export interface FactWriter {
  append(sessionId: string, drafts: EventDraft[], options?: WriteTiming): Promise<void>;
  /** Another thread of the session has something to do (a parent whose delegation ended). */
  wake(sessionId: string, threadId: string): void;
  loadThread(sessionId: string, threadId: string): Promise<ThreadView>;
  /** Tasks of the session as committed, by id (an unknown id is absent from the map). */
  loadTasks(sessionId: string, taskIds: readonly string[]): Promise<Map<string, Task>>;
  /** A job of the session as committed (a job item's turn end reads it). */
  loadJob(sessionId: string, jobId: string): Promise<JobState | undefined>;
  /** The driven thread's unredacted observations (policy/revealed.ts): they leave memory with the turn. */
  readonly revealed?: { clear(): void };
}

/** A writer that also stores artifacts, shaped by the runtime's limits (a delegated turn's answer). */
export interface ArtifactWriter extends FactWriter {
  readonly limits: RuntimeLimits;
  readonly artifacts: { put(sessionId: string, content: ArtifactContent, maxBytes?: number): Promise<StoredArtifact> };
}
