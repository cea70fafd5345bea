import { CommandContext, type CommandDeps } from './command-context.js';
import {
  awaitCompaction,
  type CompactionRequest,
  type CompactionRequestInput,
  requestCompaction,
} from './compaction.js';
import { type RespondActionInput, respondAction } from './decisions.js';
import { exportEvidence, exportReplay } from './exports.js';
import { type ForkSessionInput, forkSession } from './fork.js';
import {
  cancelJob,
  getJob,
  type JobIdInput,
  type ListJobsInput,
  listJobs,
  retryJob,
  type StartJobInput,
  startJob,
} from './jobs.js';
import { type ChangeLimitsInput, changeLimits } from './limits.js';
import {
  type EvaluatePermissionInput,
  evaluatePermission,
  type ResolvePermissionInput,
  resolvePermission,
} from './permissions.js';
import {
  type ProcessRequestInput,
  terminateProcess,
  type WriteProcessStdinInput,
  writeProcessStdin,
} from './processes.js';
import { repairSession } from './replay.js';
import { type ExportReviewInput, exportReview } from './review.js';
import { type RollbackInput, rollbackThread } from './rollback.js';
import {
  type CreateSessionInput,
  createSession,
  type SetStateInput,
  setState,
  type UpdateBindingInput,
  updateBinding,
} from './sessions.js';
import {
  type CloseSubagentInput,
  closeSubagent,
  type ResumeSubagentInput,
  resumeSubagent,
  type SpawnSubagentInput,
  type SubagentInput,
  sendSubagentInput,
  spawnSubagent,
  type WaitSubagentsInput,
  waitSubagents,
} from './subagents.js';
import {
  type CreateTaskInput,
  createTask,
  type LinkTasksInput,
  linkTasks,
  type UpdateTaskInput,
  unlinkTasks,
  updateTask,
} from './task-graph.js';
import {
  appendTaskProgress,
  type CompleteTaskInput,
  completeTask,
  type FailTaskInput,
  failTask,
  type PauseTaskInput,
  pauseTask,
  resumeTask,
  type StartTaskInput,
  startTask,
  type TaskProgressInput,
} from './task-lifecycle.js';
import { type CancelTaskInput, cancelTask, type RetryTaskInput, retryTask } from './tasks.js';
import {
  type InterruptTurnInput,
  interruptTurn,
  promoteQueuedTurn,
  type QueuedTurnRef,
  removeQueuedTurn,
  type SubmitTurnInput,
  submitTurn,
} from './turns.js';

/**
 * The control plane's commands (the spec's names): each reads, validates, and appends its facts in one
 * transaction under a guard. None runs a model or a tool or touches a worker: whichever worker holds a thread's
 * lease hears of the change (the notifier) and acts on it. Each command lives with its resource (sessions.ts,
 * turns.ts, decisions.ts, tasks.ts, compaction.ts, limits.ts, permissions.ts, processes.ts…); this class binds them to one `CommandContext`,
 * which keeps the redactors of the sessions they write for.
 */
export class Commands {
  private readonly ctx: CommandContext;

  constructor(deps: CommandDeps) {
    this.ctx = new CommandContext(deps);
  }

  createSession(input: CreateSessionInput = {}) {
    return createSession(this.ctx, input);
  }

  updateBinding(input: UpdateBindingInput) {
    return updateBinding(this.ctx, input);
  }

  forkSession(input: ForkSessionInput) {
    return forkSession(this.ctx, input);
  }

  rollbackThread(input: RollbackInput) {
    return rollbackThread(this.ctx, input);
  }

  startJob(input: StartJobInput) {
    return startJob(this.ctx, input);
  }

  getJob(input: JobIdInput) {
    return getJob(this.ctx, input);
  }

  listJobs(input: ListJobsInput = {}) {
    return listJobs(this.ctx, input);
  }

  cancelJob(input: JobIdInput & { reason?: string }) {
    return cancelJob(this.ctx, input);
  }

  retryJob(input: JobIdInput) {
    return retryJob(this.ctx, input);
  }

  mainThreadId(sessionId: string) {
    return this.ctx.mainThreadId(sessionId);
  }

  submitTurn(input: SubmitTurnInput) {
    return submitTurn(this.ctx, input);
  }

  removeQueuedTurn(input: QueuedTurnRef) {
    return removeQueuedTurn(this.ctx, input);
  }

  promoteQueuedTurn(input: QueuedTurnRef) {
    return promoteQueuedTurn(this.ctx, input);
  }

  interruptTurn(input: InterruptTurnInput) {
    return interruptTurn(this.ctx, input);
  }

  requestCompaction(input: CompactionRequestInput) {
    return requestCompaction(this.ctx, input);
  }

  awaitCompaction(request: CompactionRequest, waitMs?: number) {
    return awaitCompaction(this.ctx, request, waitMs);
  }

  respondAction(input: RespondActionInput) {
    return respondAction(this.ctx, input);
  }

  closeSubagent(input: CloseSubagentInput) {
    return closeSubagent(this.ctx, input);
  }

  spawnSubagent(input: SpawnSubagentInput) {
    return spawnSubagent(this.ctx, input);
  }

  sendSubagentInput(input: SubagentInput) {
    return sendSubagentInput(this.ctx, input);
  }

  waitSubagents(input: WaitSubagentsInput, signal?: AbortSignal) {
    return waitSubagents(this.ctx, input, signal);
  }

  resumeSubagent(input: ResumeSubagentInput) {
    return resumeSubagent(this.ctx, input);
  }

  cancelTask(input: CancelTaskInput) {
    return cancelTask(this.ctx, input);
  }

  retryTask(input: RetryTaskInput) {
    return retryTask(this.ctx, input);
  }

  createTask(input: CreateTaskInput) {
    return createTask(this.ctx, input);
  }

  updateTask(input: UpdateTaskInput) {
    return updateTask(this.ctx, input);
  }

  linkTasks(input: LinkTasksInput) {
    return linkTasks(this.ctx, input);
  }

  unlinkTasks(input: LinkTasksInput) {
    return unlinkTasks(this.ctx, input);
  }

  startTask(input: StartTaskInput) {
    return startTask(this.ctx, input);
  }

  appendTaskProgress(input: TaskProgressInput) {
    return appendTaskProgress(this.ctx, input);
  }

  pauseTask(input: PauseTaskInput) {
    return pauseTask(this.ctx, input);
  }

  resumeTask(input: PauseTaskInput) {
    return resumeTask(this.ctx, input);
  }

  completeTask(input: CompleteTaskInput) {
    return completeTask(this.ctx, input);
  }

  failTask(input: FailTaskInput) {
    return failTask(this.ctx, input);
  }

  evaluatePermission(input: EvaluatePermissionInput) {
    return evaluatePermission(this.ctx, input);
  }

  resolvePermission(input: ResolvePermissionInput) {
    return resolvePermission(this.ctx, input);
  }

  writeProcessStdin(input: WriteProcessStdinInput, signal?: AbortSignal) {
    return writeProcessStdin(this.ctx, input, signal);
  }

  terminateProcess(input: ProcessRequestInput, signal?: AbortSignal) {
    return terminateProcess(this.ctx, input, signal);
  }

  changeLimits(input: ChangeLimitsInput) {
    return changeLimits(this.ctx, input);
  }

  /**
   * The stored read models rewritten from a replay of the log where they differ (`oar replay --repair`), recorded
   * as `history.reconstructed` and `snapshot.repaired` (replay.ts).
   */
  repairSession(sessionId: string) {
    return repairSession(this.ctx, sessionId);
  }

  /** The replay export (events and snapshot), recorded as `evidence.changed`. */
  exportReplay(sessionId: string) {
    return exportReplay(this.ctx, sessionId);
  }

  /** The evidence pack, recorded as `evidence.changed`. */
  exportEvidence(sessionId: string) {
    return exportEvidence(this.ctx, sessionId);
  }

  /** The review pack of a session, thread, turn or task, recorded as `evidence.changed` (review.ts). */
  exportReview(input: ExportReviewInput) {
    return exportReview(this.ctx, input);
  }

  setState(input: SetStateInput) {
    return setState(this.ctx, input);
  }
}
