import { z } from 'zod';
import { CarrierSchema, IntentSchema } from '../declaration.js';
import { OarErrorSchema, ProtocolIssueSchema, RepairSchema } from '../errors.js';
import {
  QueuedTurnSchema,
  StatusValueSchema,
  TaskStatusValueSchema,
  ThreadStatusSchema,
  VerificationOutcomeSchema,
} from '../snapshot.js';
import { UsageSchema } from '../usage.js';
import { EVENT_TYPES, type EventType } from './catalog.js';
import { JsonObjectSchema } from './envelope.js';
import {
  HistoryReconstructedPayloadSchema,
  HistoryWindowLoadedPayloadSchema,
  SnapshotRepairedPayloadSchema,
} from './history-payloads.js';
import {
  JobCancelledPayloadSchema,
  JobCompletedPayloadSchema,
  JobCreatedPayloadSchema,
  JobFailedPayloadSchema,
  JobItemCompletedPayloadSchema,
  JobItemFailedPayloadSchema,
  JobItemStartedPayloadSchema,
  JobProgressPayloadSchema,
  JobStartedPayloadSchema,
} from './job-payloads.js';
import { OutputExpiredPayloadSchema } from './output-payloads.js';

/**
 * Typed payloads for the events the engine emits first. Every payload is a loose object on purpose: the published
 * schemas let producers add payload fields, and a relayed or replayed event must keep them. The typed fields are
 * what OAR promises to write; consumers may rely on their types.
 *
 * Large things (inputs, outputs, provider payloads, declarations) travel as refs, never copied into events.
 */

const Id = z.string().min(1);
const Ref = z.string().min(1);
const Count = z.number().int().min(0);
const DurationMs = z.number().min(0);

export { type Usage, UsageSchema } from '../usage.js';

/** Normalized provider finish reasons (the AI SDK's vocabulary); adapters map anything else to `other`. */
export const FINISH_REASONS = ['stop', 'length', 'content-filter', 'tool-calls', 'error', 'other', 'unknown'] as const;
export const FinishReasonSchema = z.enum(FINISH_REASONS);
export type FinishReason = z.infer<typeof FinishReasonSchema>;

/**
 * The answers to an action a crash left `lost` (it may or may not have taken effect): it did, it did not, or run it
 * again under a new idempotency key (OAR; docs/reliability.md "Reconciling a lost action").
 */
export const RECONCILE_DECISIONS = ['happened', 'not_happened', 'retry'] as const;
export type ReconcileDecision = (typeof RECONCILE_DECISIONS)[number];
export const isReconcileDecision = (value: unknown): value is ReconcileDecision =>
  (RECONCILE_DECISIONS as readonly unknown[]).includes(value);
/** The `actionType` of the `action.required` that asks whether a lost action took effect. */
export const RECONCILE_ACTION_TYPE = 'reconcile';
/** The answers to a tool approval (a question takes approve, with its answer, or deny). */
export const APPROVAL_DECISIONS = ['approve', 'deny', 'approve_for_session'] as const;
export const ACTION_DECISIONS = [...APPROVAL_DECISIONS, ...RECONCILE_DECISIONS] as const;
export const ActionDecisionSchema = z.enum(ACTION_DECISIONS);
export const ApprovalDecisionSchema = z.enum(APPROVAL_DECISIONS);
export type ApprovalDecision = z.infer<typeof ApprovalDecisionSchema>;
export type ActionDecision = z.infer<typeof ActionDecisionSchema>;

export const PERMISSION_DECISIONS = ['allow', 'ask', 'deny'] as const;
export const PermissionDecisionSchema = z.enum(PERMISSION_DECISIONS);
export type PermissionDecision = z.infer<typeof PermissionDecisionSchema>;

/** Who or what decided a permission question, so every allow/deny can be explained afterwards. */
export const PERMISSION_SOURCES = ['mode', 'rule', 'hook', 'classifier', 'human', 'host_policy', 'default'] as const;
export const PermissionSourceSchema = z.enum(PERMISSION_SOURCES);

// --- session / thread -------------------------------------------------------------------------------------------

export const SessionCreatedPayloadSchema = z.looseObject({
  title: z.string().optional(),
  workspaceId: z.string().optional(),
  metadata: JsonObjectSchema.optional(),
});
export const SessionUpdatedPayloadSchema = z.looseObject({
  title: z.string().optional(),
  metadata: JsonObjectSchema.optional(),
  /** Names of the fields that changed, so a projection need not diff. */
  changed: z.array(z.string()).optional(),
});
export const ThreadStartedPayloadSchema = z.looseObject({
  title: z.string().optional(),
  parentThreadId: Id.optional(),
  metadata: JsonObjectSchema.optional(),
});
export const ThreadUpdatedPayloadSchema = z.looseObject({
  status: ThreadStatusSchema.optional(),
  title: z.string().optional(),
  activeTurnId: Id.optional(),
  changed: z.array(z.string()).optional(),
});

// --- turn -------------------------------------------------------------------------------------------------------

export const TurnSubmittedPayloadSchema = z.looseObject({
  /** `accepted` runs now; `queued` waits behind another turn or a policy gate. */
  status: z.enum(['accepted', 'queued']),
  inputRef: Ref.optional(),
  /** Where the input came from (workspace, cli, api, channel…). */
  source: z.string().optional(),
  queuedTurnId: Id.optional(),
  queuePosition: Count.optional(),
});
export const TurnStartedPayloadSchema = z.looseObject({
  inputRef: Ref.optional(),
  /** True when the turn continues after a restart or a resolved action rather than starting fresh. */
  resumed: z.boolean().optional(),
});
export const TurnCompletedPayloadSchema = z.looseObject({
  /** How the model ended the turn (answer, done, stop…); completion itself is the runtime's fact. */
  outcome: z.string().optional(),
  summary: z.string().optional(),
  messageRef: Ref.optional(),
  usage: UsageSchema.optional(),
  durationMs: DurationMs.optional(),
});
export const TurnFailedPayloadSchema = z.looseObject({
  error: OarErrorSchema,
  usage: UsageSchema.optional(),
  durationMs: DurationMs.optional(),
});

// --- model ------------------------------------------------------------------------------------------------------

export const ModelRequestedPayloadSchema = z.looseObject({
  modelId: Id,
  provider: Id,
  /** 1 for the first request of a step; a corrective retry after a protocol error increments it. */
  attempt: z.number().int().min(1).optional(),
  corrective: z.boolean().optional(),
  messageCount: Count.optional(),
  toolCount: Count.optional(),
  inputTokenEstimate: Count.optional(),
  requestRef: Ref.optional(),
  /** A provider retry: the failure class of the attempt before it (`model.failed.failureClass`). */
  retryOf: z.string().optional(),
  /** Why the call is made: absent for a protocol step; `compaction` for a context summary (docs/models.md). */
  purpose: z.enum(['compaction']).optional(),
});
export const ModelDeltaPayloadSchema = z.looseObject({
  delta: z.string(),
  /** Which stream the delta belongs to: visible text, tool-call arguments, or structured output. */
  channel: z.enum(['text', 'tool_call', 'structured']).optional(),
  index: Count.optional(),
});
/**
 * A piece of a model call's reasoning (provider reasoning or thinking, outside the final text), live-only like
 * `model.delta`: never stored; the call's `reasoning.summary` keeps the whole of it.
 */
export const ReasoningDeltaPayloadSchema = z.looseObject({
  delta: z.string(),
  index: Count.optional(),
});
/**
 * The reasoning one model call produced, recorded once, with the call's end: its text as the provider sent it (a
 * reasoning summary or thinking), capped by the runtime (`truncated` when cut) and redacted like every fact. Never
 * replayed to a model and never executed.
 */
export const ReasoningSummaryPayloadSchema = z.looseObject({
  summary: z.string(),
  modelId: Id.optional(),
  provider: Id.optional(),
  /** The whole reasoning's length in characters (more than `summary`'s when it was cut). */
  chars: Count.optional(),
  truncated: z.boolean().optional(),
});
export const ModelCompletedPayloadSchema = z.looseObject({
  modelId: Id,
  provider: Id,
  finishReason: FinishReasonSchema,
  usage: UsageSchema,
  responseRef: Ref.optional(),
  durationMs: DurationMs.optional(),
});
export const ModelFailedPayloadSchema = z.looseObject({
  modelId: Id,
  provider: Id,
  error: OarErrorSchema,
  usage: UsageSchema.optional(),
  durationMs: DurationMs.optional(),
  /** transient, timeout, rate_limited, context_overflow, auth, invalid_request, content_filtered, cancelled, unknown. */
  failureClass: z.string().optional(),
  /** Which attempt of the call failed (1 for the first). */
  attempt: z.number().int().min(1).optional(),
  statusCode: z.number().int().optional(),
  /** Present when the call is retried: the wait before the next attempt. */
  retryInMs: DurationMs.optional(),
});
/** A provider's rate limit answered a call (HTTP 429): what it said, joined to the turn by the envelope's ids. */
export const RateLimitHitPayloadSchema = z.looseObject({
  modelId: Id,
  provider: Id,
  attempt: z.number().int().min(1).optional(),
  statusCode: z.number().int().optional(),
  /** The wait the provider asked for (`retry-after`, `retry-after-ms`). */
  retryAfterMs: DurationMs.optional(),
  /** The provider's rate-limit headers (`x-ratelimit-*`, `anthropic-ratelimit-*`) as sent. */
  limits: z.record(z.string(), z.string()).optional(),
  providerRequestId: z.string().optional(),
});

// --- tools ------------------------------------------------------------------------------------------------------

export const ToolDescriptorSchema = z.looseObject({
  name: Id,
  description: z.string().optional(),
  /** Where the tool comes from: built-in, function, mcp, cli, agent… */
  source: z.string().optional(),
  capabilities: z.array(z.string()).optional(),
  /** Whether calls may run concurrently with other calls (read-only tools usually can). */
  concurrencySafe: z.boolean().optional(),
});
export type ToolDescriptor = z.infer<typeof ToolDescriptorSchema>;

export const ToolCatalogResolvedPayloadSchema = z.looseObject({
  tools: z.array(ToolDescriptorSchema),
  agents: z.array(ToolDescriptorSchema).optional(),
  inventoryRef: Ref.optional(),
});
export const ToolStartedPayloadSchema = z.looseObject({
  toolName: Id,
  inputRef: Ref.optional(),
  attempt: z.number().int().min(1).optional(),
  /** Whether running it again is harmless; a non-idempotent call interrupted by a crash becomes `lost`. */
  idempotent: z.boolean().optional(),
});
export const ToolArgsPayloadSchema = z.looseObject({
  /** A streamed fragment of the arguments, or the complete `input` once known. */
  delta: z.string().optional(),
  input: JsonObjectSchema.optional(),
  complete: z.boolean().optional(),
  /** The tool the arguments are for (OAR). */
  toolName: Id.optional(),
  /** A live-only piece's sub-index after its durable sequence (OAR, as `model.delta`'s). */
  index: Count.optional(),
});
export const ToolProgressPayloadSchema = z.looseObject({
  message: z.string().optional(),
  /** Fraction done, 0..1, when the tool can tell. */
  fraction: z.number().min(0).max(1).optional(),
  completed: Count.optional(),
  total: Count.optional(),
  outputRef: Ref.optional(),
});
export const ToolResultPayloadSchema = z.looseObject({
  toolName: Id,
  /** A result the tool itself reports as an error (e.g. non-zero exit); the call still ran to completion. */
  isError: z.boolean().optional(),
  summary: z.string().optional(),
  outputRef: Ref.optional(),
  artifactIds: z.array(Id).optional(),
  truncated: z.boolean().optional(),
  durationMs: DurationMs.optional(),
});
export const ToolFailedPayloadSchema = z.looseObject({
  toolName: Id,
  error: OarErrorSchema,
  /** Failure category (invalid_input, denied, timeout, crashed, lost…), for policies and benchmarks. */
  failureCategory: z.string().optional(),
  durationMs: DurationMs.optional(),
});

// --- actions and permissions ------------------------------------------------------------------------------------

export const ActionRequiredPayloadSchema = z.looseObject({
  /** What kind of decision is pending: tool_permission, user_input, human_task, plan_approval… */
  actionType: Id,
  prompt: z.string().optional(),
  /** The shape of the expected answer (allow_or_deny, structured_input…). */
  decisionKind: z.string().optional(),
  toolName: Id.optional(),
  scope: JsonObjectSchema.optional(),
  decisions: z.array(ActionDecisionSchema).optional(),
  /** JSON Schema of the structured answer, for user_input actions. */
  inputSchema: JsonObjectSchema.optional(),
  expiresAt: z.iso.datetime({ offset: true }).optional(),
});
export const ActionResolvedPayloadSchema = z.looseObject({
  decision: ActionDecisionSchema,
  reason: z.string().optional(),
  /** The structured answer of a user_input action. */
  payload: JsonObjectSchema.optional(),
  resolvedBy: z.string().optional(),
});

const PermissionFacts = {
  toolName: Id.optional(),
  /** The rule that matched, in the policy's own notation. */
  rule: z.string().optional(),
  /** The permission mode in force (e.g. default, plan, accept_edits, bypass). */
  mode: z.string().optional(),
  source: PermissionSourceSchema.optional(),
  reason: z.string().optional(),
};
export const PermissionEvaluatedPayloadSchema = z.looseObject({
  decision: PermissionDecisionSchema,
  ...PermissionFacts,
});
export const PermissionRequestedPayloadSchema = z.looseObject({ ...PermissionFacts, prompt: z.string().optional() });
export const PermissionResolvedPayloadSchema = z.looseObject({
  decision: PermissionDecisionSchema,
  ...PermissionFacts,
  /** How far an allow reaches: this call only, or the rest of the session. */
  grantScope: z.enum(['once', 'session']).optional(),
});

// --- hooks (docs/hooks.md) --------------------------------------------------------------------------------------

export const HOOK_POINT_NAMES = ['before_tool_call', 'after_tool_call', 'before_model_call', 'turn_end'] as const;
const HookFacts = {
  /** The hook's name in the binding. */
  hookName: Id,
  point: z.enum(HOOK_POINT_NAMES),
  /** The tool call it ran for (before/after_tool_call); the envelope carries its `toolCallId`. */
  toolName: z.string().optional(),
};
export const HookStartedPayloadSchema = z.looseObject({
  ...HookFacts,
  kind: z.enum(['command', 'module']).optional(),
  timeoutMs: Count.optional(),
});
/** A rewrite as the record shows it: the value before and after, and the changes between them (JSON pointers). */
export const HookRewriteSchema = z.looseObject({
  target: z.enum(['input', 'messages']),
  before: z.unknown().optional(),
  after: z.unknown().optional(),
  changes: z.array(
    z.looseObject({
      path: z.string(),
      op: z.enum(['add', 'remove', 'replace']),
      before: z.unknown().optional(),
      after: z.unknown().optional(),
    }),
  ),
  truncated: z.boolean().optional(),
});
export const HookCompletedPayloadSchema = z.looseObject({
  ...HookFacts,
  decision: z.enum(['allow', 'deny', 'ask', 'rewrite']),
  reason: z.string().optional(),
  durationMs: DurationMs.optional(),
  rewrite: HookRewriteSchema.optional(),
});
export const HookFailedPayloadSchema = z.looseObject({
  ...HookFacts,
  error: OarErrorSchema,
  durationMs: DurationMs.optional(),
  /** The failure policy that decided instead of the hook: `deny` (fail closed) or `allow` (fail open). */
  onFailure: z.enum(['deny', 'allow']),
});

// --- context and routing ----------------------------------------------------------------------------------------

export const ContextRefSchema = z.looseObject({
  ref: Ref,
  kind: z.string().optional(),
  title: z.string().optional(),
  tokenEstimate: Count.optional(),
});
export const ContextOmissionSchema = z.looseObject({
  ref: Ref,
  /** Why it was left out: budget, policy, missing, stale… */
  reason: Id,
});
export const ContextResolvedPayloadSchema = z.looseObject({
  refs: z.array(ContextRefSchema),
  omissions: z.array(ContextOmissionSchema).optional(),
  /** All omissions, when `omissions` lists only the most recent ones. */
  omissionCount: Count.optional(),
  tokenEstimate: Count.optional(),
  tokenBudget: Count.optional(),
});

/**
 * Context compaction (docs/events.md "Compaction"): the standard's boundary lifecycle. Field names follow the
 * standard's compaction contract — trigger, affected turns, summary ref and preview, continuation ref, tokens
 * before and after, preserved pending actions, incidents and artifact/evidence refs.
 */
export const COMPACTION_TRIGGERS = ['threshold', 'context_overflow', 'manual'] as const;
export const CompactionTriggerSchema = z.enum(COMPACTION_TRIGGERS);
/** The turns (and their sequence span) a compaction replaces with its summary. */
export const CompactionRangeSchema = z.looseObject({
  fromTurnId: Id,
  toTurnId: Id,
  turnCount: Count,
  fromSequence: Count.optional(),
  toSequence: Count.optional(),
});
/** Something the compaction kept in view whatever the summary says. */
export const PreservedItemSchema = z.looseObject({
  /** pending_action, incident, artifact_ref, evidence_ref, current_request, current_declaration. */
  kind: Id,
  ref: Ref,
  turnId: Id.optional(),
  title: z.string().optional(),
});
export const ContextCompactionStartedPayloadSchema = z.looseObject({
  compactionId: Id,
  trigger: CompactionTriggerSchema,
  affectedTurns: z.array(Id),
  range: CompactionRangeSchema,
  tokensBefore: Count,
  tokenBudget: Count.optional(),
  /** The fraction of the budget past which compaction triggers. */
  threshold: z.number().min(0).max(1).optional(),
  /** A manual compaction: the request it answers (`thread.updated` `compactionRequest`). */
  requestId: Id.optional(),
});
export const ContextCompactionCompletedPayloadSchema = z.looseObject({
  compactionId: Id,
  trigger: CompactionTriggerSchema,
  affectedTurns: z.array(Id),
  range: CompactionRangeSchema,
  tokensBefore: Count,
  tokensAfter: Count,
  /** The stored summary (an artifact) and its first characters. */
  summaryRef: Ref,
  summaryPreview: z.string(),
  /** model: the agent's model wrote it; extractive: the deterministic fallback (the model call failed). */
  summarySource: z.enum(['model', 'extractive']),
  /** Where the context continues: the thread's transcript, now the summary and the turns after the range. */
  continuationRef: Ref.optional(),
  preserved: z.array(PreservedItemSchema),
  requestId: Id.optional(),
});
export const ContextCompactionFailedPayloadSchema = z.looseObject({
  compactionId: Id,
  trigger: CompactionTriggerSchema,
  error: OarErrorSchema,
  affectedTurns: z.array(Id).optional(),
  requestId: Id.optional(),
});

const RoutingFacts = {
  taskKind: z.string().optional(),
  /** Why the candidate was chosen: explicit_default, user_choice, policy, fallback… */
  decisionSource: z.string().optional(),
  capabilityGap: z.string().optional(),
};
export const RoutingSingleCandidatePayloadSchema = z.looseObject({
  candidateCount: z.literal(1),
  selectedModel: Id,
  provider: Id.optional(),
  ...RoutingFacts,
});
export const RoutingNotPossiblePayloadSchema = z.looseObject({
  candidateCount: Count.optional(),
  reason: Id,
  ...RoutingFacts,
});
export const RoutingDecidedPayloadSchema = z.looseObject({
  selectedModel: Id,
  provider: Id.optional(),
  candidateCount: Count.optional(),
  fallback: z.boolean().optional(),
  reason: z.string().optional(),
  ...RoutingFacts,
});

// --- subagents --------------------------------------------------------------------------------------------------

export const SubagentSpawnedPayloadSchema = z.looseObject({
  agentName: Id,
  childThreadId: Id.optional(),
  objective: z.string().optional(),
  promptRef: Ref.optional(),
  /** How the child is isolated from the parent (shared, worktree, sandbox…). */
  isolation: z.string().optional(),
});
export const SubagentStatusPayloadSchema = z.looseObject({ status: StatusValueSchema, detail: z.string().optional() });
export const SubagentCompletedPayloadSchema = z.looseObject({
  summary: z.string().optional(),
  outputRef: Ref.optional(),
  artifactIds: z.array(Id).optional(),
  usage: UsageSchema.optional(),
});
export const SubagentFailedPayloadSchema = z.looseObject({ error: OarErrorSchema });
export const SubagentClosedPayloadSchema = z.looseObject({ reason: z.string().optional() });

// --- tasks ------------------------------------------------------------------------------------------------------

const TaskFacts = {
  /** The task's status after this event, so a projection need not know the transition table. */
  status: TaskStatusValueSchema.optional(),
  reason: z.string().optional(),
};
/**
 * What a person or client says a task is (`create_task`, `update_task`): each field, when given, replaces the one
 * before. `assignee` is who does the work: an agent of the session (`{kind: "agent", agent}`: it runs as turns of
 * the task's thread) or someone outside the runtime (`{kind: "external", name}`: they report through the commands).
 */
const TaskDefinition = {
  title: z.string().optional(),
  objective: z.string().optional(),
  visibility: z.enum(['foreground', 'background', 'internal', 'hidden', 'unknown']).optional(),
  scope: JsonObjectSchema.optional(),
  constraints: JsonObjectSchema.optional(),
  taskProfile: JsonObjectSchema.optional(),
  priority: z.string().optional(),
  assignee: JsonObjectSchema.optional(),
  /** Criteria the owner checks: a task with any completes only through `complete_task`. */
  acceptance: z.array(JsonObjectSchema).optional(),
};
export const TaskCreatedPayloadSchema = z.looseObject({
  ...TaskFacts,
  ...TaskDefinition,
  taskKind: z.string().optional(),
  /** Who asked for it (the session's actor, or the caller of `create_task`). */
  requestedBy: JsonObjectSchema.optional(),
});
export const TaskAcceptedPayloadSchema = z.looseObject({ ...TaskFacts, requestedBy: JsonObjectSchema.optional() });
export const TaskUpdatedPayloadSchema = z.looseObject({
  ...TaskFacts,
  ...TaskDefinition,
  /** The fields this update set. */
  changed: z.array(z.string()),
});
/** The task waits for its thread (its turn is queued or held by dependencies), or is ready to be started again. */
export const TaskQueuedPayloadSchema = z.looseObject({ ...TaskFacts, attempt: z.number().int().min(1).optional() });
export const TaskStartedPayloadSchema = z.looseObject({ ...TaskFacts, attempt: z.number().int().min(1).optional() });
export const TaskProgressPayloadSchema = z.looseObject({
  ...TaskFacts,
  message: z.string().optional(),
  percent: z.number().min(0).max(100).optional(),
  completed: z.number().int().min(0).optional(),
  total: z.number().int().min(0).optional(),
  refs: z.array(Ref).optional(),
});
export const TaskPausedPayloadSchema = z.looseObject({
  ...TaskFacts,
  /** The status the task had: what `resume_task` returns it to (a running one starts a new attempt). */
  pausedFrom: TaskStatusValueSchema,
  /** Set when the pause came down from an ancestor task (`propagate: "children"`). */
  propagatedFrom: Id.optional(),
});
export const TaskResumedPayloadSchema = z.looseObject({ ...TaskFacts, propagatedFrom: Id.optional() });
/**
 * The task is asked to stop: its running work (a turn, a runner run, a delegated child) is interrupted, and the task
 * ends `task.cancelled` once that work stopped. Set `propagatedFrom` when the cancel came down from an ancestor.
 */
export const TaskCancelRequestedPayloadSchema = z.looseObject({
  ...TaskFacts,
  requestedBy: z.string().optional(),
  propagatedFrom: Id.optional(),
});
/** A task graph edge changed: linked, unlinked, or the task it depends on ended (`dependencyStatus`). */
export const TaskDependencyUpdatedPayloadSchema = z.looseObject({
  ...TaskFacts,
  change: z.enum(['linked', 'unlinked', 'dependency_ended']),
  kind: Id.optional(),
  targetId: Id.optional(),
  dependencyTaskId: Id.optional(),
  dependencyStatus: TaskStatusValueSchema.optional(),
});
/** The task was handed to an agent: it runs as turns of `threadId` (the event's thread). */
export const TaskDelegatedPayloadSchema = z.looseObject({ ...TaskFacts, agent: Id });
export const TaskCompletedPayloadSchema = z.looseObject({
  ...TaskFacts,
  summary: z.string().optional(),
  outputRefs: z.array(Ref).optional(),
  artifactIds: z.array(Id).optional(),
});
export const TaskFailedPayloadSchema = z.looseObject({ ...TaskFacts, error: OarErrorSchema });
export const TaskCancelledPayloadSchema = z.looseObject({
  ...TaskFacts,
  requestedBy: z.string().optional(),
  propagatedFrom: Id.optional(),
});
/** A time budget ended the task's work: its turn's wall time (`budget_exceeded`), a runner's deadline. */
export const TaskTimedOutPayloadSchema = z.looseObject({ ...TaskFacts, error: OarErrorSchema });
/** An ended task filed away: it leaves the lists of recent tasks; fetched by id it is still all there. */
export const TaskArchivedPayloadSchema = z.looseObject({
  ...TaskFacts,
  /** How the task had ended. */
  archivedFrom: TaskStatusValueSchema,
  requestedBy: z.string().optional(),
});
export const TaskLostPayloadSchema = z.looseObject({
  ...TaskFacts,
  /** Last moment the worker was known alive; after it nothing can be proven either way. */
  lastSeenAt: z.iso.datetime({ offset: true }).optional(),
});
export const TaskRetryingPayloadSchema = z.looseObject({
  ...TaskFacts,
  nextAttempt: z.number().int().min(1).optional(),
  delayMs: DurationMs.optional(),
});
export const TaskWaitingPayloadSchema = z.looseObject({
  ...TaskFacts,
  waitingFor: z.enum(['input', 'permission', 'resource']),
});
export const TaskBlockedPayloadSchema = z.looseObject({
  ...TaskFacts,
  /** What is missing: action, credential, policy, context, dependency, tool or quota. */
  blockedBy: z.string().optional(),
});

const AttemptFacts = {
  status: StatusValueSchema.optional(),
  attempt: z.number().int().min(1).optional(),
};
export const TaskAttemptStartedPayloadSchema = z.looseObject({ ...AttemptFacts, worker: JsonObjectSchema.optional() });
export const TaskAttemptCompletedPayloadSchema = z.looseObject({
  ...AttemptFacts,
  summary: z.string().optional(),
  outputRefs: z.array(Ref).optional(),
});
export const TaskAttemptFailedPayloadSchema = z.looseObject({
  ...AttemptFacts,
  retryable: z.boolean(),
  failureCategory: z.string().optional(),
  /** What happens next: automatic_retry, manual_or_policy_retry, none… */
  nextAttemptPolicy: z.string().optional(),
  error: OarErrorSchema.optional(),
});

// --- artifacts, outputs, evidence -------------------------------------------------------------------------------

export const ArtifactChangedPayloadSchema = z.looseObject({
  change: z.enum(['created', 'updated', 'deleted']).optional(),
  name: z.string().optional(),
  mime: Id,
  /** Size in bytes of the full stored content. */
  size: Count,
  /** Content hash, `<algorithm>:<hex>` (e.g. `sha256:…`). */
  hash: Id,
  uri: Id,
  /** A short excerpt for UIs; never the full content. */
  preview: z.string().optional(),
});
/** A large output moved to an artifact; the event stream and the model only see the ref and a preview. */
export const OutputSpilledPayloadSchema = z.looseObject({
  artifactId: Id,
  sizeBytes: Count,
  uri: Id.optional(),
  preview: z.string().optional(),
  reason: z.string().optional(),
});
/** What the model was shown was cut; the full output stays available through `artifactId`. */
export const OutputTruncatedPayloadSchema = z.looseObject({
  originalBytes: Count,
  keptBytes: Count,
  /** head, tail, head_tail, matching_lines, adaptive… */
  strategy: z.string().optional(),
  artifactId: Id.optional(),
});
/**
 * Secrets were replaced by `[REDACTED:<kind>]` before an output was recorded or shown: how many, of which kinds —
 * never the values. `kinds` maps each kind (`env_secret`, `dotenv`, `openai_key`, `private_key`, `url_password`…)
 * to its count; `count` is their sum. `sink` says where the redacted output went (event, artifact, export,
 * cli_output, log, stream), `source` what it was (tool_output, model_output, provider_error…).
 */
export const OutputRedactedPayloadSchema = z.looseObject({
  count: Count,
  kinds: z.record(z.string(), Count),
  sink: z.string().optional(),
  source: z.string().optional(),
  artifactId: Id.optional(),
});
/**
 * An evidence, replay or review ref was observed or exported. OAR's exports (`export_evidence`, `export_replay`,
 * `export_review`) each record one: `kind`, the id (the envelope's `evidenceId`) and `ref` of the export, its
 * `format` and `scope`, how many events of the scope it covers up to `throughSequence`, and the SHA-256 of its
 * canonical JSON body (`digest`, `sha256:<hex>`). Logs written before wrote `kind: evidence_pack`.
 */
export const EvidenceChangedPayloadSchema = z.looseObject({
  kind: z.string().optional(),
  ref: Ref.optional(),
  format: z.string().optional(),
  scope: z
    .looseObject({ sessionId: Id, threadId: Id.optional(), turnId: Id.optional(), taskId: Id.optional() })
    .optional(),
  eventCount: Count.optional(),
  throughSequence: Count.optional(),
  digest: Id.optional(),
  packRef: Ref.optional(),
  replayRef: Ref.optional(),
  reviewRef: Ref.optional(),
  verificationOutcomes: z.array(VerificationOutcomeSchema).optional(),
});

// --- run status, queue, snapshot, runtime -----------------------------------------------------------------------

/** A summary of the declaration a model step produced; the full declaration is stored and referenced. */
export const DeclarationFactSchema = z.looseObject({
  intent: IntentSchema,
  carrier: CarrierSchema.optional(),
  form: z.string().optional(),
  actionIds: z.array(Id).optional(),
  ref: Ref.optional(),
});

/**
 * `run.status` carries phase/title/detail and, since only standard types go on the stream, OAR's protocol facts:
 * the declaration summary, repairs applied, whether the declaration was recovered from a direct request, the
 * graph status and structured protocol issues.
 */
export const RunStatusPayloadSchema = z.looseObject({
  title: z.string(),
  detail: z.string().optional(),
  checkpoints: z.array(z.string()).optional(),
  declaration: DeclarationFactSchema.optional(),
  repairs: z.array(RepairSchema).optional(),
  recovered: z.boolean().optional(),
  graphStatus: z.string().optional(),
  issues: z.array(ProtocolIssueSchema).optional(),
  metadata: JsonObjectSchema.optional(),
});
export const QueueChangedPayloadSchema = z.looseObject({
  change: z.enum(['enqueued', 'removed', 'promoted', 'dequeued', 'reordered']),
  queuedTurnId: Id.optional(),
  /** The queue after the change, in order. */
  queuedTurns: z.array(QueuedTurnSchema),
});
export const SnapshotUpdatedPayloadSchema = z.looseObject({
  /** Which read model changed: session_snapshot, thread_read_model, task_snapshot, queue_snapshot… */
  readModel: Id,
  version: Count.optional(),
  ref: Ref.optional(),
  changed: z.array(z.string()).optional(),
});
/** `runtime.warning` and `runtime.error` payloads ARE the structured error, plus whether the runtime can go on. */
export const RuntimeWarningPayloadSchema = z.looseObject({ ...OarErrorSchema.shape });
export const RuntimeErrorPayloadSchema = z.looseObject({ ...OarErrorSchema.shape, fatal: z.boolean().optional() });

/** The payload of every standard event OAR does not (yet) type: any JSON object, as the profile requires. */
export const GenericPayloadSchema = JsonObjectSchema;

const TYPED_PAYLOAD_SCHEMAS = {
  'session.created': SessionCreatedPayloadSchema,
  'session.updated': SessionUpdatedPayloadSchema,
  'thread.started': ThreadStartedPayloadSchema,
  'thread.updated': ThreadUpdatedPayloadSchema,
  'turn.submitted': TurnSubmittedPayloadSchema,
  'turn.started': TurnStartedPayloadSchema,
  'turn.completed': TurnCompletedPayloadSchema,
  'turn.failed': TurnFailedPayloadSchema,
  'model.requested': ModelRequestedPayloadSchema,
  'model.delta': ModelDeltaPayloadSchema,
  'model.completed': ModelCompletedPayloadSchema,
  'model.failed': ModelFailedPayloadSchema,
  'reasoning.delta': ReasoningDeltaPayloadSchema,
  'reasoning.summary': ReasoningSummaryPayloadSchema,
  'rate_limit.hit': RateLimitHitPayloadSchema,
  'tool.catalog.resolved': ToolCatalogResolvedPayloadSchema,
  'tool.started': ToolStartedPayloadSchema,
  'tool.args': ToolArgsPayloadSchema,
  'tool.progress': ToolProgressPayloadSchema,
  'tool.result': ToolResultPayloadSchema,
  'tool.failed': ToolFailedPayloadSchema,
  'action.required': ActionRequiredPayloadSchema,
  'action.resolved': ActionResolvedPayloadSchema,
  'permission.evaluated': PermissionEvaluatedPayloadSchema,
  'permission.requested': PermissionRequestedPayloadSchema,
  'permission.resolved': PermissionResolvedPayloadSchema,
  'hook.started': HookStartedPayloadSchema,
  'hook.completed': HookCompletedPayloadSchema,
  'hook.failed': HookFailedPayloadSchema,
  'context.resolved': ContextResolvedPayloadSchema,
  'context.compaction.started': ContextCompactionStartedPayloadSchema,
  'context.compaction.completed': ContextCompactionCompletedPayloadSchema,
  'context.compaction.failed': ContextCompactionFailedPayloadSchema,
  'routing.single_candidate': RoutingSingleCandidatePayloadSchema,
  'routing.not_possible': RoutingNotPossiblePayloadSchema,
  'routing.decided': RoutingDecidedPayloadSchema,
  'subagent.spawned': SubagentSpawnedPayloadSchema,
  'subagent.status': SubagentStatusPayloadSchema,
  'subagent.completed': SubagentCompletedPayloadSchema,
  'subagent.failed': SubagentFailedPayloadSchema,
  'subagent.closed': SubagentClosedPayloadSchema,
  'task.created': TaskCreatedPayloadSchema,
  'task.accepted': TaskAcceptedPayloadSchema,
  'task.updated': TaskUpdatedPayloadSchema,
  'task.queued': TaskQueuedPayloadSchema,
  'task.progress': TaskProgressPayloadSchema,
  'task.paused': TaskPausedPayloadSchema,
  'task.resumed': TaskResumedPayloadSchema,
  'task.cancel_requested': TaskCancelRequestedPayloadSchema,
  'task.dependency.updated': TaskDependencyUpdatedPayloadSchema,
  'task.delegated': TaskDelegatedPayloadSchema,
  'task.started': TaskStartedPayloadSchema,
  'task.completed': TaskCompletedPayloadSchema,
  'task.failed': TaskFailedPayloadSchema,
  'task.cancelled': TaskCancelledPayloadSchema,
  'task.timed_out': TaskTimedOutPayloadSchema,
  'task.archived': TaskArchivedPayloadSchema,
  'task.lost': TaskLostPayloadSchema,
  'task.retrying': TaskRetryingPayloadSchema,
  'task.waiting': TaskWaitingPayloadSchema,
  'task.blocked': TaskBlockedPayloadSchema,
  'task.attempt.started': TaskAttemptStartedPayloadSchema,
  'task.attempt.completed': TaskAttemptCompletedPayloadSchema,
  'task.attempt.failed': TaskAttemptFailedPayloadSchema,
  'artifact.changed': ArtifactChangedPayloadSchema,
  'output.spilled': OutputSpilledPayloadSchema,
  'output.truncated': OutputTruncatedPayloadSchema,
  'output.redacted': OutputRedactedPayloadSchema,
  'output.expired': OutputExpiredPayloadSchema,
  'evidence.changed': EvidenceChangedPayloadSchema,
  'run.status': RunStatusPayloadSchema,
  'queue.changed': QueueChangedPayloadSchema,
  'snapshot.updated': SnapshotUpdatedPayloadSchema,
  'snapshot.repaired': SnapshotRepairedPayloadSchema,
  'history.window.loaded': HistoryWindowLoadedPayloadSchema,
  'history.reconstructed': HistoryReconstructedPayloadSchema,
  'job.created': JobCreatedPayloadSchema,
  'job.started': JobStartedPayloadSchema,
  'job.progress': JobProgressPayloadSchema,
  'job.item.started': JobItemStartedPayloadSchema,
  'job.item.completed': JobItemCompletedPayloadSchema,
  'job.item.failed': JobItemFailedPayloadSchema,
  'job.completed': JobCompletedPayloadSchema,
  'job.failed': JobFailedPayloadSchema,
  'job.cancelled': JobCancelledPayloadSchema,
  'runtime.warning': RuntimeWarningPayloadSchema,
  'runtime.error': RuntimeErrorPayloadSchema,
} satisfies Partial<Record<EventType, z.ZodType>>;

/** The event types whose payload OAR types (the rest take `GenericPayloadSchema`). */
export type TypedPayloadEventType = keyof typeof TYPED_PAYLOAD_SCHEMAS;
export const TYPED_PAYLOAD_EVENT_TYPES = Object.keys(TYPED_PAYLOAD_SCHEMAS) as TypedPayloadEventType[];

export type EventPayloadSchemas = {
  [T in EventType]: T extends TypedPayloadEventType ? (typeof TYPED_PAYLOAD_SCHEMAS)[T] : typeof GenericPayloadSchema;
};

/** The payload schema of every standard event type. */
export const EVENT_PAYLOAD_SCHEMAS = Object.fromEntries(
  EVENT_TYPES.map((type) => [
    type,
    (TYPED_PAYLOAD_SCHEMAS as Partial<Record<EventType, z.ZodType>>)[type] ?? GenericPayloadSchema,
  ]),
) as EventPayloadSchemas;

export type EventPayload<T extends EventType> = z.infer<EventPayloadSchemas[T]>;
