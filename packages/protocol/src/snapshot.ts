import { z } from 'zod';
import { OarErrorSchema } from './errors.js';
import { UsageSchema } from './usage.js';

/**
 * Durable snapshots and read models of the Agent Runtime standard (`agentruntime-snapshot.schema.json`), shaped so
 * that every OAR session snapshot also satisfies the stricter Lime profile snapshot: `runtimeId`, `updatedAt`,
 * `tasks`, `taskSummary`, `routingLimitSummary`, `telemetrySummary`, `evidenceRefs` and at least one thread, each
 * thread carrying `turns`, `pendingRequests`, `queuedTurns`, `incidents` and `evidenceSummary`.
 *
 * Unlike events, read models are plain (non-loose) objects: they are always rebuilt by OAR's own projections from
 * the event log, so parsing one is a normalization and an unknown field is a bug, not a fact to preserve.
 * "Object" bags the standard leaves open stay open records.
 */

const Id = z.string().min(1);
const Timestamp = z.iso.datetime({ offset: true });
const Count = z.number().int().min(0);
const Bag = z.record(z.string(), z.unknown());

/** Thread status, the core schema's closed `thread.status` enum. */
export const THREAD_STATUSES = [
  'idle',
  'queued',
  'running',
  'blocked',
  'completed',
  'failed',
  'cancelled',
  'stale',
  'unknown',
] as const;
export const ThreadStatusSchema = z.enum(THREAD_STATUSES);
export type ThreadStatus = z.infer<typeof ThreadStatusSchema>;

/** The core schema's `statusValue` (task attempts, subagents). `unknown`/`unavailable` are honest answers. */
export const STATUS_VALUES = [
  'idle',
  'queued',
  'preparing',
  'running',
  'blocked',
  'streaming',
  'retrying',
  'completed',
  'failed',
  'cancelled',
  'stale',
  'unknown',
  'unavailable',
  'not_applicable',
] as const;
export const StatusValueSchema = z.enum(STATUS_VALUES);
export type StatusValue = z.infer<typeof StatusValueSchema>;

/** The core schema's `taskStatusValue`. */
export const TASK_STATUS_VALUES = [
  'draft',
  'accepted',
  'queued',
  'preparing',
  'running',
  'waiting_input',
  'waiting_permission',
  'waiting_resource',
  'blocked',
  'paused',
  'retrying',
  'cancelling',
  'cancelled',
  'timed_out',
  'failed',
  'lost',
  'completed',
  'archived',
  'stale',
  'unknown',
] as const;
export const TaskStatusValueSchema = z.enum(TASK_STATUS_VALUES);
export type TaskStatusValue = z.infer<typeof TaskStatusValueSchema>;

/**
 * Turn status: the spec's runtime status vocabulary ("Runtime SHOULD 区分") plus `unknown`. The core schema types
 * `turn.status` as a free string; OAR narrows it so a consumer can switch on it exhaustively.
 */
export const TURN_STATUSES = [
  'accepted',
  'queued',
  'preparing',
  'running',
  'waiting_input',
  'waiting_permission',
  'waiting_resource',
  'blocked',
  'streaming',
  'retrying',
  'lost',
  'timed_out',
  'completed',
  'failed',
  'cancelled',
  'stale',
  'unknown',
] as const;
export const TurnStatusSchema = z.enum(TURN_STATUSES);
export type TurnStatus = z.infer<typeof TurnStatusSchema>;

export const TASK_VISIBILITIES = ['foreground', 'background', 'internal', 'hidden', 'unknown'] as const;
export const TaskVisibilitySchema = z.enum(TASK_VISIBILITIES);
export type TaskVisibility = z.infer<typeof TaskVisibilitySchema>;

export const TaskAttemptSchema = z.object({
  runId: Id,
  attemptId: Id.optional(),
  status: StatusValueSchema,
  worker: Bag.optional(),
  inputRefs: z.array(Bag).optional(),
  outputRefs: z.array(Bag).optional(),
  checkpointRefs: z.array(Bag).optional(),
  startedAt: Timestamp.optional(),
  endedAt: Timestamp.optional(),
  attemptCount: Count.optional(),
  retryPolicy: Bag.optional(),
  lastError: OarErrorSchema.optional(),
  completionSummary: z.string().optional(),
});
export type TaskAttempt = z.infer<typeof TaskAttemptSchema>;

/** A task graph edge. `kind` is free in the standard (parent, child, dependency, source, artifact, evidence, subagent…). */
export const TaskRelationshipSchema = z.object({
  kind: Id,
  targetId: Id,
  status: z.string().optional(),
  reason: z.string().optional(),
  createdAt: Timestamp.optional(),
  updatedAt: Timestamp.optional(),
});
export type TaskRelationship = z.infer<typeof TaskRelationshipSchema>;

export const TaskSchema = z.object({
  taskId: Id,
  parentTaskId: Id.optional(),
  rootTaskId: Id.optional(),
  sessionId: Id.optional(),
  threadId: Id.optional(),
  turnId: Id.optional(),
  title: z.string().optional(),
  objective: z.string().optional(),
  taskKind: z.string().optional(),
  taskFamily: z.string().optional(),
  visibility: TaskVisibilitySchema.optional(),
  status: TaskStatusValueSchema,
  nativeStatus: z.string().optional(),
  priority: z.string().optional(),
  requestedBy: Bag.optional(),
  owner: Bag.optional(),
  assignee: Bag.optional(),
  scope: Bag.optional(),
  constraints: Bag.optional(),
  taskProfile: Bag.optional(),
  acceptance: z.array(Bag).optional(),
  progress: Bag.optional(),
  currentRunId: Id.optional(),
  /** Every attempt, oldest first: a retry appends, it never rewrites history. */
  attempts: z.array(TaskAttemptSchema).optional(),
  relationships: z.array(TaskRelationshipSchema).optional(),
  artifacts: z.array(Bag).optional(),
  evidenceRefs: z.array(Id).optional(),
  deliveryState: Bag.optional(),
  lastError: OarErrorSchema.optional(),
  statusReason: z.string().optional(),
  /** While paused (OAR): the status `resume_task` returns the task to. */
  pausedFrom: TaskStatusValueSchema.optional(),
  /** While paused by an ancestor's pause (`propagate: children`, OAR): that ancestor; its resume resumes this. */
  pausedWith: Id.optional(),
  /** Once archived (OAR): how the task had ended, and when it was archived. */
  archivedFrom: TaskStatusValueSchema.optional(),
  archivedAt: Timestamp.optional(),
  createdAt: Timestamp.optional(),
  updatedAt: Timestamp.optional(),
  startedAt: Timestamp.optional(),
  endedAt: Timestamp.optional(),
});
export type Task = z.infer<typeof TaskSchema>;

export const TurnReadModelSchema = z.object({
  turnId: Id,
  status: TurnStatusSchema,
  startedAt: Timestamp.optional(),
  completedAt: Timestamp.optional(),
  steps: z.array(Bag).optional(),
  taskProfile: Bag.optional(),
  routingDecision: Bag.optional(),
  candidateModelSet: Bag.optional(),
  permissionState: Bag.optional(),
  sandboxProfile: Bag.optional(),
  executionEnvironment: Bag.optional(),
  costState: Bag.optional(),
  limitState: Bag.optional(),
  hookRuns: z.array(Bag).optional(),
  /** Files attached to the turn (OAR): `{artifactId, name, mimeType, size, uri}`. */
  attachments: z.array(Bag).optional(),
  processes: z.array(Bag).optional(),
  outputRefs: z.array(Bag).optional(),
  taskId: Id.optional(),
  runId: Id.optional(),
  attemptId: Id.optional(),
  tasks: z.array(TaskSchema).optional(),
});
export type TurnReadModel = z.infer<typeof TurnReadModelSchema>;

/** A durable pending human/policy decision; it leaves this list only through `respond_action`. */
export const PendingRequestSchema = z.object({
  actionId: Id,
  actionType: Id,
  turnId: Id.optional(),
  toolCallId: Id.optional(),
  /** A runner run's question (OAR): the runner that asked and its run, which waits for the answer while it runs. */
  runnerId: Id.optional(),
  runId: Id.optional(),
  prompt: z.string().optional(),
  requestedAt: Timestamp.optional(),
});
export type PendingRequest = z.infer<typeof PendingRequestSchema>;

/**
 * An action a crash left `lost` that nobody has reconciled yet (OAR): it may or may not have taken effect. It leaves
 * this list when someone answers it (`respond_action`: happened, not_happened or retry) or the tool's own
 * `reconcile` step does. Unlike a pending request it does not hold the thread: the model was told, and work went on.
 */
export const UnreconciledActionSchema = z.object({
  /** The id to answer: the `actionId` of its `action.required` (`actionType: reconcile`). */
  actionId: Id,
  turnId: Id.optional(),
  runId: Id,
  /** The graph action that was lost, and its call. */
  graphActionId: Id,
  toolCallId: Id,
  toolName: Id.optional(),
  /** The key the world may have seen it under (a service can be asked by it). */
  idempotencyKey: z.string().optional(),
  prompt: z.string(),
  lostAt: Timestamp,
});
export type UnreconciledAction = z.infer<typeof UnreconciledActionSchema>;

export const QueuedTurnSchema = z.object({
  queuedTurnId: Id,
  position: Count,
  turnId: Id.optional(),
  source: z.string().optional(),
  inputRef: z.string().optional(),
  enqueuedAt: Timestamp.optional(),
});
export type QueuedTurn = z.infer<typeof QueuedTurnSchema>;

/** Something that went wrong on the thread and a reader should see, with the structured error when there is one. */
export const IncidentSchema = z.object({
  severity: z.enum(['warning', 'error']),
  code: Id,
  message: z.string(),
  at: Timestamp.optional(),
  turnId: Id.optional(),
  eventId: Id.optional(),
  error: OarErrorSchema.optional(),
});
export type Incident = z.infer<typeof IncidentSchema>;

export const VerificationOutcomeSchema = z.object({
  name: Id,
  status: Id,
  detail: z.string().optional(),
});
export type VerificationOutcome = z.infer<typeof VerificationOutcomeSchema>;

/** What an export of the runtime (`export_evidence`, `export_replay`, `export_review`) produced. */
export const EVIDENCE_EXPORT_KINDS = ['evidence', 'replay', 'review'] as const;
export type EvidenceExportKind = (typeof EVIDENCE_EXPORT_KINDS)[number];

/**
 * An export as recorded (`evidence.changed`, OAR): its kind and ref, the event that recorded it (`sequence`, `at`),
 * the scope it covers (absent ids: the whole session), the last event it covers and the SHA-256 of its canonical
 * JSON body (`sha256:<hex>`).
 */
export const EvidenceExportSchema = z.object({
  kind: z.enum(EVIDENCE_EXPORT_KINDS),
  exportId: Id,
  ref: Id,
  sequence: Count,
  at: Timestamp,
  threadId: Id.optional(),
  turnId: Id.optional(),
  taskId: Id.optional(),
  throughSequence: Count.optional(),
  digest: Id.optional(),
});
export type EvidenceExport = z.infer<typeof EvidenceExportSchema>;

export const EvidenceSummarySchema = z.object({
  evidenceRefs: z.array(Id).optional(),
  traceIds: z.array(Id).optional(),
  verificationOutcomes: z.array(VerificationOutcomeSchema).optional(),
  replayRefs: z.array(Id).optional(),
  reviewRefs: z.array(Id).optional(),
  auditNotes: z.array(z.string()).optional(),
  /** The recorded exports that cover the thread, oldest first (OAR). */
  exports: z.array(EvidenceExportSchema).optional(),
});
export type EvidenceSummary = z.infer<typeof EvidenceSummarySchema>;

export const ThreadReadModelSchema = z.object({
  threadId: Id,
  status: ThreadStatusSchema,
  title: z.string().optional(),
  activeTurnId: Id.optional(),
  turns: z.array(TurnReadModelSchema),
  pendingRequests: z.array(PendingRequestSchema),
  /** Lost actions nobody has reconciled yet (OAR; absent when there are none). */
  unreconciledActions: z.array(UnreconciledActionSchema).optional(),
  queuedTurns: z.array(QueuedTurnSchema),
  incidents: z.array(IncidentSchema),
  evidenceSummary: EvidenceSummarySchema,
  /** How the last finished turn ended, for a reader that does not want to scan `turns`. */
  lastOutcome: Bag.optional(),
  /**
   * Why the thread is `stale`: the worker that holds it went silent past its lease (`owner`, `since` the lease ran
   * out) and nobody has taken it over yet, so the recorded state may not be what is happening (OAR).
   */
  stale: z.object({ reason: z.string(), owner: z.string(), since: z.string() }).optional(),
  actions: z.array(Bag).optional(),
  toolCalls: z.array(Bag).optional(),
  processes: z.array(Bag).optional(),
  permissionState: Bag.optional(),
  sandboxState: Bag.optional(),
  modelRouting: Bag.optional(),
  limitState: Bag.optional(),
  costState: Bag.optional(),
  subagents: z.array(Bag).optional(),
  jobs: z.array(Bag).optional(),
  channels: z.array(Bag).optional(),
  telemetry: Bag.optional(),
  history: Bag.optional(),
  outputs: z.array(Bag).optional(),
  tasks: z.array(TaskSchema).optional(),
  taskGraph: Bag.optional(),
  blockedTasks: z.array(Bag).optional(),
});
export type ThreadReadModel = z.infer<typeof ThreadReadModelSchema>;

export const TaskSummarySchema = z.object({
  total: Count.optional(),
  active: Count.optional(),
  waiting: Count.optional(),
  blocked: Count.optional(),
  completed: Count.optional(),
  failed: Count.optional(),
  cancelled: Count.optional(),
  timedOut: Count.optional(),
  lost: Count.optional(),
  /** Ended tasks filed away: not in `tasks`, still fetched by id (`get_task`). */
  archived: Count.optional(),
});
export type TaskSummary = z.infer<typeof TaskSummarySchema>;

export const RoutingLimitSummarySchema = z.object({
  candidateCount: Count.optional(),
  singleCandidate: z.boolean().optional(),
  selectedModel: z.string().optional(),
  provider: z.string().optional(),
  taskKind: z.string().optional(),
  /** Why the model was chosen (e.g. the first usable candidate of a chain). */
  reason: z.string().optional(),
  /** What the chosen model lacks of what the call needs (`none`). */
  capabilityGap: z.string().optional(),
  /** The last fallback: from which model to which, on what failure class, after how many attempts. */
  fallback: z.object({ from: z.string(), to: z.string(), trigger: z.string(), attempts: Count.optional() }).optional(),
  costState: Bag.optional(),
  limitState: Bag.optional(),
});
export type RoutingLimitSummary = z.infer<typeof RoutingLimitSummarySchema>;

/** `joinStatus` says whether the trace ids could be joined to the telemetry backend: unknown is an honest answer. */
export const TelemetrySummarySchema = z.object({
  /**
   * Whether the session's facts carry trace ids (OAR): `available` when an event does (tracing on), else
   * `unavailable` with the `reason`.
   */
  status: z.enum(['available', 'unavailable']).optional(),
  reason: z.string().optional(),
  traceIds: z.array(Id).optional(),
  joinStatus: z.enum(['joined', 'partial', 'not_joined', 'unavailable', 'unknown']).optional(),
  /** The session's model usage: the same shape as a call's (`model.completed.usage`), summed. */
  usage: UsageSchema.optional(),
});
export type TelemetrySummary = z.infer<typeof TelemetrySummarySchema>;

/** The session snapshot (`get_session`): OAR's profile of the core snapshot, Lime-profile compatible. */
export const SessionSnapshotSchema = z.object({
  schemaVersion: z.string().min(1),
  runtimeId: Id,
  sessionId: Id,
  workspaceId: z.string().optional(),
  title: z.string().optional(),
  createdAt: Timestamp.optional(),
  updatedAt: Timestamp,
  /** At least one: the Lime profile requires it, so OAR creates a session together with its first thread. */
  threads: z.array(ThreadReadModelSchema).min(1),
  toolInventoryRef: z.string().optional(),
  evidenceRefs: z.array(Id),
  executionEnvironment: Bag.optional(),
  permissionState: Bag.optional(),
  sandboxState: Bag.optional(),
  routingLimitSummary: RoutingLimitSummarySchema,
  subagentJobSummary: Bag.optional(),
  channelSummary: Bag.optional(),
  telemetrySummary: TelemetrySummarySchema,
  outputSummary: Bag.optional(),
  historySummary: Bag.optional(),
  benchmarkSummary: Bag.optional(),
  taskSummary: TaskSummarySchema,
  tasks: z.array(TaskSchema),
  taskGraph: Bag.optional(),
  blockedTasks: z.array(Bag).optional(),
  deliveryState: Bag.optional(),
});
export type SessionSnapshot = z.infer<typeof SessionSnapshotSchema>;

/**
 * Where a session's work runs (the standard's `execution_environment_snapshot`, `get_execution_environment`): the
 * directory its tools and commands start in, its workspace roots, the environment variables its commands get — by
 * name, never a value — the limits of its commands and processes, and the processes it started that are not known
 * to have ended. What the record does not say is `unknown` or `unavailable`, never guessed.
 */
export const ExecutionEnvironmentSchema = z.object({
  sessionId: Id,
  /** The thread the processes are of, when the request named one; else every thread of the session. */
  threadId: Id.optional(),
  /** `unknown`: the session was recorded without a binding, so nothing below it is known. */
  binding: z.enum(['recorded', 'unknown']),
  /** The directory tools resolve relative paths against and commands start in: the workspace root. */
  cwd: z.string().optional(),
  workspaceRoots: z.array(z.string()),
  env: z.object({
    /** Variables of the runtime's environment passed to commands, by name. */
    passed: z.array(z.string()),
    /** Variables named as secrets (the binding's and the commands'): their values are redacted wherever recorded. */
    secrets: z.array(z.string()),
  }),
  processLimits: z.discriminatedUnion('status', [
    z.object({
      status: z.literal('available'),
      /** How commands are confined (`bwrap`, `none`…) and whether they reach the network. */
      sandboxProfile: z.string(),
      network: z.boolean(),
      timeoutMs: z.number().int(),
      maxTimeoutMs: z.number().int(),
      killGraceMs: z.number().int(),
      /** Background processes the session may have running at once. */
      maxBackground: z.number().int(),
    }),
    /** The binding runs no commands (`exec` is off), or is not known. */
    z.object({ status: z.literal('unavailable'), reason: z.string() }),
  ]),
  /** Processes started by the session's commands and not known to have ended, as recorded. */
  activeProcesses: z.array(
    z.object({
      processId: Id,
      threadId: Id,
      command: z.string(),
      background: z.boolean(),
      sandboxProfile: z.string().optional(),
      startedAt: z.string(),
      turnId: Id.optional(),
    }),
  ),
});
export type ExecutionEnvironment = z.infer<typeof ExecutionEnvironmentSchema>;
