/** The subset of the published shapes (events, snapshot, read models) the console reads. */

export interface OarEvent {
  type: string;
  sequence: number;
  timestamp: string;
  sessionId: string;
  threadId?: string;
  turnId?: string;
  taskId?: string;
  runId?: string;
  stepId?: string;
  toolCallId?: string;
  actionId?: string;
  subagentId?: string;
  artifactId?: string;
  status?: string;
  phase?: string;
  payload?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface TurnRM {
  turnId: string;
  status: string;
  startedAt?: string;
  completedAt?: string;
  costState?: Record<string, unknown>;
}

export interface PendingRequest {
  actionId: string;
  actionType: string;
  turnId?: string;
  toolCallId?: string;
  prompt?: string;
  requestedAt?: string;
}

/**
 * A non-idempotent call a crash stopped mid-run (`lost`): it may or may not have acted, so the runtime asks whether
 * it did. It holds nothing (the thread went on) and is answered happened / not_happened / retry (docs/reliability.md).
 */
export interface UnreconciledAction {
  /** The id to answer: the `actionId` of its `action.required` (`actionType: reconcile`). */
  actionId: string;
  turnId?: string;
  runId: string;
  graphActionId: string;
  toolCallId: string;
  toolName?: string;
  /** The key the world may have seen the call under: where to look it up. */
  idempotencyKey?: string;
  prompt: string;
  lostAt: string;
}

export interface ThreadRM {
  threadId: string;
  status: string;
  title?: string;
  activeTurnId?: string;
  turns: TurnRM[];
  pendingRequests: PendingRequest[];
  /** Absent when there are none. */
  unreconciledActions?: UnreconciledAction[];
  queuedTurns: { queuedTurnId: string; position: number; turnId?: string }[];
  incidents: { severity: string; code: string; message: string; at?: string; turnId?: string }[];
  actions?: { runId: string; actionId: string; status: string; attempt?: number; summary?: string }[];
  subagents?: { subagentId: string; agent?: string; childThreadId?: string; status?: string }[];
  lastOutcome?: Record<string, unknown>;
  /** The thread's history: a rollback recorded as started and not completed holds it until it is run again. */
  history?: { rollbackInProgress?: { rollbackId: string; targetTurnId: string; removedTurns?: string[] } };
}

/** A file a rollback restores, deletes, finds unchanged or keeps (`rollbackThread`'s answer). */
export interface RollbackFile {
  path: string;
  action: 'restore' | 'delete' | 'unchanged' | 'keep';
  fromVersion?: number;
  throughVersion?: number;
  beforeRef?: string;
}

/** A file that cannot be rolled back: nothing is changed while there is one. */
export interface RollbackConflict {
  path: string;
  reason: string;
  message: string;
}

/** `POST /v1/sessions/{id}/rollback`: the plan (`dryRun`: `planned`) or what was done (`completed`). */
export interface RollbackResult {
  status: 'completed' | 'planned';
  threadId?: string;
  rollbackId?: string;
  targetTurnId?: string;
  keptThroughTurnId: string | null;
  removedTurns: string[];
  files: RollbackFile[];
  conflicts: RollbackConflict[];
  affected?: { commands?: number; fileCalls?: number; subagentThreads?: string[]; runningProcesses?: string[] };
}

/** One version of a workspace file (`GET /v1/sessions/{id}/artifact-checkpoints`). */
export interface FileVersion {
  path: string;
  version: number;
  threadId: string;
  turnId?: string;
  toolCallId: string;
  tool: string;
  sequence: number;
  at: string;
  created: boolean;
  /** The content before the call: absent when the call created the file. */
  before?: { sha256: string; size: number; restorable: boolean; artifactId?: string; uri?: string; reason?: string };
  after: { sha256: string; size: number };
  /** The rollback that undid this version, if one did. */
  rolledBack?: string;
}

export interface ArtifactCheckpoints {
  sessionId: string;
  threadId?: string;
  sequence: number;
  versionCount: number;
  /** `latest`: what OAR last made of the file (null: a rollback removed it). */
  files: { path: string; versions: FileVersion[]; latest: { sha256: string; size: number } | null }[];
}

/** A task of the session (the published task shape): the runtime's own and those made with createTask. */
export interface TaskRM {
  taskId: string;
  status: string;
  title?: string;
  objective?: string;
  taskKind?: string;
  threadId?: string;
  parentTaskId?: string;
  statusReason?: string;
  assignee?: { kind?: string; agent?: string; name?: string };
  progress?: { message?: string; percent?: number; completed?: number; total?: number };
  attempts?: { runId: string; status: string; attemptCount?: number }[];
  relationships?: { kind: string; targetId: string; status?: string }[];
}

export interface Snapshot {
  sessionId: string;
  title?: string;
  createdAt?: string;
  updatedAt: string;
  threads: ThreadRM[];
  tasks?: TaskRM[];
  telemetrySummary?: { usage?: { totalTokens?: number } };
}

export interface SessionSummary {
  sessionId: string;
  workspaceId?: string;
  title?: string;
  createdAt?: string;
  updatedAt?: string;
  events?: number;
}

export interface PendingDecision {
  sessionId: string;
  threadId: string;
  turnId?: string;
  actionId: string;
  actionType?: string;
  toolName?: string;
  prompt?: string;
  reason?: string;
  decisions?: string[];
  requestedAt?: string;
  sessionTitle?: string;
}

/** An unreconciled lost action of the workspace (`GET /v1/decisions` `unreconciled`). */
export interface LostAction extends UnreconciledAction {
  sessionId: string;
  threadId: string;
  sessionTitle?: string;
}

/** Items of a job by how far they are (`retrying` counts as running). */
export interface JobCounts {
  total: number;
  pending: number;
  running: number;
  completed: number;
  failed: number;
  cancelled: number;
}

/** How a job runs its items (docs/jobs.md). */
export interface JobPolicy {
  /** Items running at once. */
  concurrency: number;
  /** Attempts per item in all, the first included (per round: a retry gives a failed item a new round). */
  maxAttempts: number;
  /** The wait before an item's second attempt, doubling for each later one up to `maxBackoffMs`. */
  backoffMs: number;
  maxBackoffMs: number;
  /** A finally failed item fails the job at once. */
  failFast: boolean;
}

export type JobStatus = 'running' | 'completed' | 'failed' | 'cancelled';
export type JobItemStatus = 'pending' | 'running' | 'retrying' | 'completed' | 'failed' | 'cancelled';

/** One item of a job: a thread of the job's session; each attempt is a turn of it. */
export interface JobItem {
  index: number;
  status: JobItemStatus;
  threadId: string;
  /** The start of its filled-in prompt. */
  label?: string;
  /** Attempts started so far (all rounds together). */
  attempts: number;
  /** The turn of the latest attempt. */
  turnId?: string;
  /** Attempts this round may still start. */
  attemptsLeft: number;
  error?: { code: string; message: string };
  summary?: string;
}

/** A job as `GET /v1/jobs` lists it (no items). */
export interface JobSummary {
  jobId: string;
  sessionId: string;
  name?: string;
  template?: string;
  agent?: string;
  policy: JobPolicy;
  status: JobStatus;
  /** Why it failed (`items_failed`, `fail_fast`) or was cancelled. */
  reason?: string;
  /** 1, and one more for each retry. */
  round: number;
  counts: JobCounts;
  createdAt: string;
  updatedAt: string;
  endedAt?: string;
  lastSequence?: number;
}

/** A job as `GET /v1/jobs/{jobId}` answers it (and cancel and retry): with every item. */
export interface Job extends JobSummary {
  items: JobItem[];
}

/** What a schedule's firing starts (docs/schedules.md): a turn in a session, a new session, or a job. */
export interface ScheduleStart {
  kind: 'turn' | 'session' | 'job';
  /** kind turn: the session the turn runs in (and its thread, default the main one). */
  sessionId?: string;
  threadId?: string;
  /** kind turn and session: the turn's text. */
  input?: string;
  title?: string;
  agent?: string;
  /** kind job: its items and prompt template. */
  items?: unknown[];
  prompt?: string;
  name?: string;
  policy?: Record<string, unknown>;
}

export type FiringStatus = 'claimed' | 'started' | 'queued' | 'skipped' | 'failed';

/** One firing: a cron time of a schedule and what became of it. */
export interface ScheduleFiring {
  scheduleId: string;
  /** The cron time (not the moment it ran). */
  fireAt: string;
  status: FiringStatus;
  /** started: what it started. */
  started?: { sessionId: string; threadId?: string; turnId?: string; jobId?: string };
  /** skipped: `missed` or `overlap`; failed: the error's code; claimed: `catch_up` for a catch-up firing. */
  reason?: string;
  /** `count` (missed), `previous` (overlap), `missed` (a catch-up started), `error` (failed). */
  details?: { count?: number; previous?: string; missed?: number; error?: { code?: string; message?: string } };
  createdAt?: string;
  updatedAt?: string;
}

/** A schedule as `GET /v1/schedules` lists it (the last firing) and `GET /v1/schedules/{id}` answers it (20). */
export interface Schedule {
  scheduleId: string;
  cron: string;
  /** An IANA time zone; absent: UTC. */
  timezone?: string;
  start: ScheduleStart;
  catchUp: 'skip' | 'run_once';
  overlap: 'skip' | 'queue' | 'cancel';
  paused: boolean;
  source: 'config' | 'api';
  createdAt?: string;
  updatedAt?: string;
  lastFireAt?: string;
  nextFireAt?: string;
  /** The next cron times (up to 3; none while paused). */
  nextFirings: string[];
  /** The last firings, newest first. */
  lastFirings: ScheduleFiring[];
}
