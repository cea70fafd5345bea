import {
  ActionResultSchema,
  DeclarationSchema,
  OarErrorSchema,
  type RuntimeEvent,
  type TurnStatus,
  TurnStatusSchema,
  UnreconciledActionSchema,
} from '@oar/protocol';
import { z } from 'zod';
import { HookRunSchema } from './hook-runs.js';

/** A membership test for a fixed subset of a status vocabulary (typed, so a misspelt member does not compile). */
export function memberOf<S extends string>(statuses: readonly S[]): (status: S) => boolean {
  const members: ReadonlySet<S> = new Set(statuses);
  return (status) => members.has(status);
}

/**
 * The engine's projection of one thread: everything the runner needs to continue after a restart, derived
 * only from events (so replay rebuilds it exactly). The public `ThreadReadModel` is computed from it.
 */

export const ENGINE_THREAD_STATUSES = [
  'idle',
  'running',
  'waiting_permission',
  'waiting_input',
  'waiting_resource',
  'completed',
  'failed',
  'closed',
] as const;
export const EngineThreadStatusSchema = z.enum(ENGINE_THREAD_STATUSES);

export const RUN_ACTION_STATUSES = [
  'pending',
  'waiting_permission',
  'waiting_input',
  'running',
  'completed',
  'failed',
  'denied',
  'skipped',
  'cancelled',
  'lost',
] as const;
export const RunActionStatusSchema = z.enum(RUN_ACTION_STATUSES);
export type RunActionStatus = z.infer<typeof RunActionStatusSchema>;

/** The statuses that end an action: its graph is done with it (a retry first records it `pending` again). */
export const TERMINAL_RUN_ACTION_STATUSES = ['completed', 'failed', 'denied', 'skipped', 'cancelled', 'lost'] as const;
export type TerminalActionStatus = (typeof TERMINAL_RUN_ACTION_STATUSES)[number];
export const isTerminalActionStatus = memberOf<RunActionStatus>(TERMINAL_RUN_ACTION_STATUSES);

export const RunActionSchema = z.object({
  id: z.string(),
  status: RunActionStatusSchema,
  toolCallId: z.string(),
  attempt: z.number().int(),
  /** The tool declared itself idempotent when it started: safe to re-run after a crash. */
  idempotent: z.boolean().optional(),
  /** The tool declared the world deduplicates it by its idempotency key: retried after a crash with the same key. */
  idempotentByKey: z.boolean().optional(),
  /** Set by a retry after a crash of a call idempotent by key: the attempt whose key every later start carries. */
  keyAttempt: z.number().int().optional(),
  /** The idempotency key its last start carried (what a lost call may have reached the world under). */
  idempotencyKey: z.string().optional(),
  startedAt: z.string().optional(),
  endedAt: z.string().optional(),
  /**
   * The pending decision (permission or input) this action waits for, by the spec's name for it: the `actionId` of
   * its `action.required`, which `respond_action` answers (not the graph action's own id, which is `id`).
   */
  pendingActionId: z.string().optional(),
  /** Granted by respond_action: run without asking again. */
  approved: z.boolean().optional(),
  /**
   * The paths the approval question showed (its `scope.paths`, real paths of links included): an approval covers a
   * call touching these only — a link retargeted since the question makes it ask again.
   */
  approvalPaths: z.array(z.string()).optional(),
  /** The human's payload for ask_user / confirm actions. */
  response: z.record(z.string(), z.unknown()).optional(),
  subagentId: z.string().optional(),
  childThreadId: z.string().optional(),
  result: ActionResultSchema.optional(),
});
export type RunAction = z.infer<typeof RunActionSchema>;

export const RUN_STATUSES = ['running', 'waiting', 'completed', 'failed', 'blocked', 'cancelled'] as const;
export const RunStatusSchema = z.enum(RUN_STATUSES);
export type RunStatus = z.infer<typeof RunStatusSchema>;

/** The statuses that end a run (observed, or cancelled with its turn); running and waiting runs are still open. */
export const TERMINAL_RUN_STATUSES = ['completed', 'failed', 'blocked', 'cancelled'] as const;
export const isTerminalRunStatus = memberOf<RunStatus>(TERMINAL_RUN_STATUSES);

/** One executed action graph of a turn (the task's current attempt). */
export const RunStateSchema = z.object({
  runId: z.string(),
  threadId: z.string(),
  taskId: z.string(),
  turnId: z.string(),
  declaration: DeclarationSchema,
  status: RunStatusSchema,
  actions: z.record(z.string(), RunActionSchema),
  /** Order actions were declared in (record keys do not carry it reliably across stores). */
  order: z.array(z.string()),
});
export type RunState = z.infer<typeof RunStateSchema>;

/** A file attached to a turn, as recorded (control-plane/attachments.ts): an artifact of the session. */
export const TurnAttachmentSchema = z.object({
  artifactId: z.string(),
  name: z.string(),
  mimeType: z.string(),
  size: z.number().int(),
  uri: z.string(),
});
export type TurnAttachment = z.infer<typeof TurnAttachmentSchema>;

/**
 * The task a turn is an attempt of (`start_task`): the attempt's run id and number, whether its end waits for the
 * task's owner to accept it (`acceptance`: the task has acceptance criteria), and the dependencies not yet completed
 * when it was started — the turn is held until that list is empty. Fixed when the task starts: changing the task
 * later applies to its next attempt.
 */
export const TurnTaskSchema = z.object({
  taskId: z.string(),
  runId: z.string(),
  attempt: z.number().int(),
  acceptance: z.boolean(),
  waitsFor: z.array(z.string()),
  /** Set while the task is paused (`pause_task`): the turn does not start until it is resumed. */
  paused: z.boolean().optional(),
});
export type TurnTask = z.infer<typeof TurnTaskSchema>;

export const TurnStateSchema = z.object({
  turnId: z.string(),
  status: TurnStatusSchema,
  input: z.string(),
  /** Files attached to the turn (artifacts of the session). */
  attachments: z.array(TurnAttachmentSchema).optional(),
  submittedAt: z.string(),
  startedAt: z.string().optional(),
  /**
   * While it runs: when its work began — its first model call or runner run — after the context, the model, the
   * tools and the policy were resolved; until then the turn is `preparing` (read-models/snapshots.ts). Dropped when
   * the turn ends (a finished turn is not preparing, and stored rows from before the field equal a rebuild).
   */
  workingSince: z.string().optional(),
  /**
   * While its model call streams: when the call's first piece arrived (the one durable fact of it,
   * `streamingChange` below); the turn is `streaming` until the call ends. Dropped then, like `workingSince`.
   */
  streamingSince: z.string().optional(),
  completedAt: z.string().optional(),
  answer: z.string().optional(),
  error: OarErrorSchema.optional(),
  /** Model calls made in this turn (the step budget counts them). */
  modelSteps: z.number().int(),
  /** Corrective retries used in a row (reset by a valid declaration). */
  correctiveRetries: z.number().int(),
  /** The fault the next model call must name (set by a protocol violation, cleared by the next model call). */
  pendingCorrection: z.string().optional(),
  runIds: z.array(z.string()),
  /** The session binding the turn runs with (fixed when it starts: a binding update applies to later turns). */
  bindingHash: z.string().optional(),
  /**
   * The span the turn's next part runs under (tracing.ts): the ids `turn.started` carries (its first segment),
   * before that those of `turn.submitted` (the delegating turn, or the submitter's span).
   */
  trace: z.object({ traceId: z.string(), spanId: z.string() }).optional(),
  /** What the turn's model calls spent (budgets, facts/budgets.ts): tokens, approximate USD, calls. */
  spend: z.object({ tokens: z.number(), costUsd: z.number(), modelCalls: z.number().int() }).optional(),
  /** The `quota.low` facts recorded for the turn's limits (each once per limit). */
  quotaLow: z.array(z.string()).optional(),
  /** The candidates the turn's last recorded routing excluded for a missing capability (sorted specs). */
  capabilityExclusions: z.array(z.string()).optional(),
  /** The turn's hook runs, newest last (docs/hooks.md; at most MAX_TURN_HOOK_RUNS). */
  hookRuns: z.array(HookRunSchema).optional(),
  /** Set when the turn is an attempt of a task started through the control plane (`start_task`). */
  task: TurnTaskSchema.optional(),
  /** A job item's retry: the turn does not start before then (its backoff; docs/jobs.md). */
  notBefore: z.string().optional(),
});
export type TurnState = z.infer<typeof TurnStateSchema>;

/**
 * A turn held back by its task: by its dependencies, until each of them completed (each completion is recorded on
 * the waiting thread as `task.dependency.updated`, which is what wakes a worker for it), or by a pause until the
 * task is resumed (`task.paused` / `task.resumed` on the thread).
 */
export function isHeld(turn: TurnState | undefined): boolean {
  return (turn?.task?.waitsFor.length ?? 0) > 0 || turn?.task?.paused === true;
}

/**
 * The turn that starts next on an idle thread: the first accepted one (it was accepted before anything queued
 * behind it), else the first of the queue — either way not one held by its task's dependencies, and none while a
 * rollback is under way.
 */
export function nextTurn(thread: ThreadState): { turnId: string } | undefined {
  if (thread.rollback) return undefined;
  const accepted = thread.turns.find((t) => t.status === 'accepted' && !isHeld(t));
  if (accepted) return accepted;
  if (thread.queue.length === 0) return undefined;
  if (!thread.turns.some(isHeld)) return thread.queue[0];
  return thread.queue.find((q) => !isHeld(thread.turns.find((t) => t.turnId === q.turnId)));
}

/** When the turn the thread would start next may start, if it must wait (a job item's retry backoff). */
export function nextTurnNotBefore(thread: ThreadState): string | undefined {
  const next = nextTurn(thread);
  return next ? thread.turns.find((t) => t.turnId === next.turnId)?.notBefore : undefined;
}

// --- a task's turns on the thread (start_task): what the thread reducer (thread.ts) does with task facts ---

/** The task of a submitted turn (`start_task`), as recorded on `turn.submitted`. */
export function turnTaskOf(value: unknown): { task?: TurnTask } {
  const task = TurnTaskSchema.safeParse(value);
  return task.success ? { task: task.data } : {};
}

/**
 * A dependency of a held turn's task completed, or was unlinked: the turn waits for one fewer (and starts when it
 * waits for none).
 */
export function dependencyCompleted(
  state: ThreadState,
  taskId: string | undefined,
  payload: Record<string, unknown>,
): ThreadState {
  const released =
    payload.dependencyStatus === 'completed' || (payload.change === 'unlinked' && payload.kind === 'dependency');
  const dependency = stringOf(payload.dependencyTaskId) ?? stringOf(payload.targetId);
  if (!dependency || !released || !taskId) return state;
  // Only the turns of the task the fact is about: another task on the thread may wait for the same one.
  const waits = (turn: TurnState) => turn.task?.taskId === taskId && turn.task.waitsFor.includes(dependency);
  if (!state.turns.some(waits)) return state;
  return {
    ...state,
    turns: state.turns.map((turn) =>
      waits(turn) && turn.task
        ? { ...turn, task: { ...turn.task, waitsFor: turn.task.waitsFor.filter((id) => id !== dependency) } }
        : turn,
    ),
  };
}

/** The task's turns that have not started are held while it is paused, and released when it is resumed. */
export function pendingTaskTurns(
  state: ThreadState,
  taskId: string | undefined,
  change: { paused: boolean },
): ThreadState {
  const pending = (t: TurnState) => t.task?.taskId === taskId && (t.status === 'accepted' || t.status === 'queued');
  if (!taskId || !state.turns.some(pending)) return state;
  return {
    ...state,
    turns: state.turns.map((t) => {
      if (!pending(t) || !t.task) return t;
      const { paused: _was, ...task } = t.task;
      return { ...t, task: change.paused ? { ...task, paused: true } : task };
    }),
  };
}

const stringOf = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/**
 * Why a thread waits in `waiting_resource`: a budget (`quota`, durable until a limit is raised) or a provider's
 * in-process limit (`provider`: a concurrency slot, a per-minute window, a 429 pause).
 */
export const ResourceWaitSchema = z.object({
  kind: z.enum(['quota', 'provider']),
  turnId: z.string(),
  /** quota: `scope:dimension:limit:spent` (facts/budgets.ts); provider: the limit's key. */
  key: z.string(),
  reason: z.string(),
  message: z.string().optional(),
  since: z.string(),
  details: z.record(z.string(), z.unknown()).optional(),
});
export type ResourceWait = z.infer<typeof ResourceWaitSchema>;

/**
 * The statuses the engine ends a turn with. `TurnStatusSchema` is @oar/protocol's wider vocabulary, whose other
 * final statuses (lost, timed_out) the engine never records.
 */
export const TERMINAL_TURN_STATUSES = ['completed', 'failed', 'cancelled'] as const;
export const isTerminalTurnStatus = memberOf<TurnStatus>(TERMINAL_TURN_STATUSES);

export const PendingDecisionSchema = z.object({
  actionId: z.string(),
  /** platform_action: a runner's request for a platform action (docs/runners.md "Decisions"). */
  actionType: z.enum(['tool_approval', 'user_input', 'platform_action']),
  turnId: z.string(),
  runId: z.string(),
  /** The graph action that waits; empty for a runner run's decision (a runner run has no graph). */
  graphActionId: z.string(),
  /** A runner run's decision: its task, and the runner that asked (the run is alive while it waits). */
  taskId: z.string().optional(),
  runnerId: z.string().optional(),
  toolCallId: z.string().optional(),
  toolName: z.string().optional(),
  prompt: z.string(),
  /** The decisions offered (an ask rule offers approve|deny only). */
  decisions: z.array(z.string()).optional(),
  requestedAt: z.string(),
});
export type PendingDecision = z.infer<typeof PendingDecisionSchema>;

export const IncidentStateSchema = z.object({
  severity: z.enum(['warning', 'error']),
  code: z.string(),
  message: z.string(),
  at: z.string(),
  turnId: z.string().optional(),
  eventId: z.string(),
});

/**
 * A process a command of the thread started (`exec`) that has no recorded end yet: what the read model shows as
 * running, and what recovery records as lost when the runtime that ran it is gone.
 */
export const ProcessStateSchema = z.object({
  processId: z.string(),
  command: z.string(),
  turnId: z.string().optional(),
  runId: z.string().optional(),
  toolCallId: z.string().optional(),
  background: z.boolean(),
  sandboxProfile: z.string().optional(),
  startedAt: z.string(),
});
export type ProcessState = z.infer<typeof ProcessStateSchema>;

/**
 * What a person or client asked of a running process (`write_process_stdin`, `terminate_process`): recorded on the
 * thread and acted on by the runtime process that runs it, which answers with the fact carrying `requestId`.
 */
export const ProcessRequestSchema = z.object({
  requestId: z.string(),
  processId: z.string(),
  action: z.enum(['write', 'terminate']),
  /** For `write`: the size and digest of the text (the text itself is handed over outside the log). */
  inputBytes: z.number().int().optional(),
  inputDigest: z.string().optional(),
  /** For `write`: close its standard input afterwards. */
  closeStdin: z.boolean().optional(),
  reason: z.string().optional(),
  requestedBy: z.string().optional(),
  requestedAt: z.string(),
});
export type ProcessRequest = z.infer<typeof ProcessRequestSchema>;

/**
 * A tool worker's thread (docs/protocol.md "Semantic tool actions"): the tools it may call and its bounds, fixed when
 * the semantic action started it, and the tokens its model calls used so far.
 */
export const ToolWorkerStateSchema = z.object({
  tools: z.array(z.string()),
  maxToolCalls: z.number().int(),
  maxModelCalls: z.number().int(),
  maxTokens: z.number().int(),
  tokensUsed: z.number().int(),
});
export type ToolWorkerState = z.infer<typeof ToolWorkerStateSchema>;

/**
 * The thread's context boundary (docs/models.md "Compaction"): its turns up to `throughTurnId` are shown to the
 * model as the stored summary (`summaryRef`), never again as themselves. Set by `context.compaction.completed`.
 */
export const CompactionBoundarySchema = z.object({
  compactionId: z.string(),
  trigger: z.string(),
  /** The last turn the summary covers; every turn before it is covered too (a summary includes the one before). */
  throughTurnId: z.string(),
  /** Turns the summary covers in all (earlier compactions included). */
  turnCount: z.number().int(),
  throughSequence: z.number().int().optional(),
  summaryRef: z.string(),
  summaryPreview: z.string(),
  summarySource: z.string(),
  tokensBefore: z.number().int(),
  tokensAfter: z.number().int(),
  at: z.string(),
});
export type CompactionBoundary = z.infer<typeof CompactionBoundarySchema>;

export const ThreadStateSchema = z.object({
  threadId: z.string(),
  sessionId: z.string(),
  agent: z.string(),
  title: z.string().optional(),
  parentThreadId: z.string().optional(),
  /** For a sub-agent's child thread: the delegating parent action. */
  parent: z
    .object({
      threadId: z.string(),
      turnId: z.string(),
      runId: z.string(),
      taskId: z.string(),
      actionId: z.string(),
      subagentId: z.string(),
      delegationTaskId: z.string(),
    })
    .optional(),
  /**
   * For a sub-agent a person or client spawned (`spawn_subagent`): its parent thread and its id there. Its turns
   * report to that parent as a delegation's do, without a delegating action to answer.
   */
  spawnedBy: z.object({ threadId: z.string(), subagentId: z.string() }).optional(),
  /** Set when the thread is a semantic tool action's worker rather than a sub-agent. */
  toolWorker: ToolWorkerStateSchema.optional(),
  /** Set when the thread is a job's item (docs/jobs.md): its turns are the item's attempts, their ends the job's facts. */
  job: z.object({ jobId: z.string(), index: z.number().int(), input: z.string() }).optional(),
  /** Delegation depth: 0 for a session's main thread. */
  depth: z.number().int(),
  status: EngineThreadStatusSchema,
  createdAt: z.string(),
  updatedAt: z.string(),
  activeTurnId: z.string().optional(),
  /**
   * A durable interrupt request for the active turn: whichever worker holds the thread's lease stops the turn's
   * work and records the cancellation (cleared when the turn ends).
   */
  interrupt: z.object({ turnId: z.string(), reason: z.string(), requestedAt: z.string() }).optional(),
  /** Set while the thread waits in `waiting_resource` (cleared when the wait ends or the turn does). */
  resourceWait: ResourceWaitSchema.optional(),
  turns: z.array(TurnStateSchema),
  queue: z.array(z.object({ turnId: z.string(), input: z.string(), enqueuedAt: z.string(), source: z.string() })),
  pending: z.array(PendingDecisionSchema),
  /** Lost actions nobody has reconciled yet (absent: none ever was lost); they do not hold the thread. */
  unreconciled: z.array(UnreconciledActionSchema).optional(),
  /** Model calls in the whole thread: the scripted model's durable cursor. */
  modelCalls: z.number().int(),
  /** Compaction summary calls (attempts) in the whole thread: their own cursor, never a protocol step. */
  compactionCalls: z.number().int().optional(),
  /** The current context boundary, once the thread was compacted. */
  compaction: CompactionBoundarySchema.optional(),
  /** Compactions completed in the whole thread. */
  compactionCount: z.number().int().optional(),
  /** A durable request to compact (`compact`), which the lease holder acts on (cleared when it did). */
  compactionRequest: z
    .object({ requestId: z.string(), reason: z.string().optional(), requestedAt: z.string() })
    .optional(),
  /**
   * A rollback recorded as started and not yet completed (`history.rollback.started`): no turn starts until it
   * completes — the files it restores and the transcript it cuts must not change under a running turn.
   */
  rollback: z
    .object({
      rollbackId: z.string(),
      targetTurnId: z.string(),
      removedTurns: z.array(z.string()),
      /** What it set out to do to each file (and the before-image it writes back): kept until it completes. */
      files: z.array(z.object({ path: z.string(), action: z.string(), beforeRef: z.string().optional() })).optional(),
      startedAt: z.string(),
    })
    .optional(),
  /** Thread-scoped state set through the control plane (`setState`), key → JSON value. */
  state: z.record(z.string(), z.unknown()),
  incidents: z.array(IncidentStateSchema),
  /** Processes started by the thread's commands and not known to have ended (absent: none ever ran). */
  processes: z.array(ProcessStateSchema).optional(),
  /** Requests of its running processes not answered yet (absent: none ever made). */
  processRequests: z.array(ProcessRequestSchema).optional(),
  subagents: z.array(
    z.object({ subagentId: z.string(), agent: z.string(), childThreadId: z.string(), status: z.string() }),
  ),
  lastSequence: z.number().int(),
});
export type ThreadState = z.infer<typeof ThreadStateSchema>;

/**
 * A thread with its runs. Runs are separate read models (one row per run) so that an event about one action
 * rewrites that run only, not the whole history of the thread; the view joins them for the runner.
 */
export type ThreadView = ThreadState & { runs: ReadonlyMap<string, RunState> };

/** The turns a compaction would replace: finished turns after the boundary, before the active or queued ones. */
export function compactionRange(thread: ThreadView, keepTurns: number): TurnState[] {
  const through = thread.compaction ? thread.turns.findIndex((t) => t.turnId === thread.compaction?.throughTurnId) : -1;
  const finished: TurnState[] = [];
  for (const turn of thread.turns.slice(through + 1)) {
    // The range is contiguous: it ends at the first turn still in progress (the active one, a queued one).
    if (turn.turnId === thread.activeTurnId || !isTerminalTurnStatus(turn.status)) break;
    finished.push(turn);
  }
  const kept = finished.slice(0, Math.max(0, finished.length - keepTurns));
  // When keeping the most recent turns would leave nothing to compact, all finished turns are compacted.
  return kept.length > 0 ? kept : finished;
}

// --- a turn's streaming status: what the thread reducer (thread.ts) does with a call's stream ---

/**
 * The standard's `streaming` status of a turn ("model or tool output is being emitted"), from durable facts only.
 *
 * `model.requested` alone cannot say it: it is written before the request is sent, and a call may then wait for its
 * first token a long time (a queued provider, a long prompt, a reasoning model that thinks silently), or never
 * stream at all (`doGenerate`). The pieces that prove output is flowing are live-only (`model.delta`,
 * `reasoning.delta`, `tool.args`) and must stay so: the log never grows per token. So the loop records ONE fact per
 * model call, when its first piece arrives (loop/model/streaming-started.ts): a `thread.updated` with
 * `changed: ["streaming"]`, staged like the step's other facts (usually written in the same transaction as the
 * call's `model.completed`; a call that streams longer than the worker's linger is seen streaming meanwhile).
 *
 * A turn is streaming from that fact until its call ends (`model.completed` / `model.failed`), another call is
 * requested (a restart's repeat, which has not streamed yet) or the turn ends. The thread's own status stays
 * `running`: the standard's thread statuses have no `streaming` (snapshots.ts).
 */
export const STREAMING_CHANGE = 'streaming';

/** What an event changes of the turns' streaming marks: `state` itself when nothing. */
export function streamingChange(state: ThreadState, event: RuntimeEvent): ThreadState {
  switch (event.type) {
    case 'thread.updated': {
      const changed = (event.payload as { changed?: unknown } | undefined)?.changed;
      if (!Array.isArray(changed) || !changed.includes(STREAMING_CHANGE)) return state;
      // Only a turn that runs streams (a late fact of an ended turn changes nothing).
      return withTurn(state, event.turnId, (turn) =>
        turn.status === 'running' && turn.streamingSince === undefined
          ? { ...turn, streamingSince: event.timestamp }
          : turn,
      );
    }
    case 'model.requested':
    case 'model.completed':
    case 'model.failed':
    case 'turn.completed':
    case 'turn.failed':
      return withTurn(state, event.turnId, (turn) => {
        if (turn.streamingSince === undefined) return turn;
        const { streamingSince: _ended, ...rest } = turn;
        return rest;
      });
    default:
      return state;
  }
}

/** `state` with the turn changed, or `state` itself when the turn is not there or is unchanged. */
function withTurn(state: ThreadState, turnId: string | undefined, change: (turn: TurnState) => TurnState): ThreadState {
  const index = state.turns.findIndex((turn) => turn.turnId === turnId);
  const turn = state.turns[index];
  if (!turn) return state;
  const next = change(turn);
  if (next === turn) return state;
  const turns = state.turns.slice();
  turns[index] = next;
  return { ...state, turns };
}
