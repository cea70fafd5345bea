/**
 * @oar/runtime — the OAR engine. The public surface, chosen on purpose:
 * - `Runtime` (control plane + worker over one store) and `buildRuntime`/`loadConfig` for `oar.config.json`;
 * - the session binding, the store, the event log and its notifier, leases;
 * - tools (`defineTool`, the registry, the built-in workspace tools) and model resolution;
 * - read models and snapshots, structured errors.
 * The scripted model and other test helpers live under `@oar/runtime/testing`.
 */

export * from './agent-runners/index.js';
export {
  type AgentConfig,
  AgentSchema,
  type BindingUpdate,
  BindingUpdateSchema,
  bindingHash,
  type CompactionConfig,
  CompactionConfigSchema,
  DEFAULT_CONTEXT_BUDGET_TOKENS,
  DEFAULT_LIMITS,
  type RuntimeLimits,
  RuntimeLimitsSchema,
  type SecretsConfig,
  SecretsConfigSchema,
  type SessionBinding,
  SessionBindingSchema,
} from './config/binding.js';
export {
  BUDGET_DIMENSIONS,
  type BudgetDimension,
  type BudgetLimits,
  BudgetLimitsSchema,
  type Budgets,
  BudgetsSchema,
} from './config/budgets.js';
export { type ExecConfig, ExecConfigSchema } from './config/exec.js';
export {
  HOOK_POINTS,
  type HookConfig,
  HookConfigSchema,
  type HookInput,
  type HookOutput,
  type HookPoint,
  HooksSchema,
} from './config/hooks.js';
export { configJsonSchema } from './config/json-schema.js';
export { type McpServerConfig, McpServerConfigSchema, McpServersSchema } from './config/mcp.js';
export {
  absoluteModelChoice,
  absoluteModelSpec,
  DEFAULT_API_KEY_ENV,
  FALLBACK_CLASSES,
  MODEL_PROVIDERS,
  type ModelChoice,
  ModelChoiceSchema,
  type ModelConfig,
  ModelConfigSchema,
  type ModelsConfig,
  ModelsConfigSchema,
  modelChain,
  parseModelSpec,
} from './config/models.js';
export { CONFIG_FILE, loadConfig, type OarConfig, OarConfigSchema } from './config/oar-config.js';
export type { PermissionRequest, SessionGrant } from './config/permission-request.js';
export {
  type DefaultDenyRule,
  type PermissionMode,
  type PermissionRule,
  type PermissionsConfig,
  PermissionsConfigSchema,
} from './config/permissions.js';
export {
  type PipelineConfig,
  PipelineSchema,
  type PipelineStep,
  PipelinesSchema,
  type ServiceAuth,
  type ServiceConfig,
  ServiceSchema,
  ServicesSchema,
} from './config/pipelines.js';
export { type ProviderLimit, type ProviderLimits, ProviderLimitsSchema } from './config/provider-limits.js';
export {
  type ArtifactRetention,
  ArtifactRetentionSchema,
  DEFAULT_ARTIFACT_KEEP,
  type Retention,
  RetentionSchema,
} from './config/retention.js';
export {
  type AddScheduleInput,
  AddScheduleInputSchema,
  CATCH_UP_POLICIES,
  OVERLAP_POLICIES,
  type ScheduleDefinition,
  ScheduleDefinitionSchema,
  type ScheduleFact,
  type ScheduleStart,
} from './config/schedules.js';
export {
  checkAttachments,
  MAX_TURN_ATTACHMENT_BYTES,
  MAX_TURN_ATTACHMENTS,
  type TurnAttachmentInput,
  TurnAttachmentInputSchema,
} from './control-plane/attachments.js';
export type { CompactionResult } from './control-plane/compaction.js';
export type { RespondActionInput } from './control-plane/decisions.js';
export type { ForkSessionInput, ForkSessionResult } from './control-plane/fork.js';
export {
  type JobIdInput,
  type JobView,
  type ListJobsInput,
  type StartJobInput,
  StartJobInputSchema,
} from './control-plane/jobs.js';
export type { ChangeLimitsInput, ChangeLimitsResult, LimitChange } from './control-plane/limits.js';
export type {
  EvaluatePermissionInput,
  EvaluatePermissionResult,
  ResolvePermissionInput,
} from './control-plane/permissions.js';
export type {
  ProcessRequestInput,
  ProcessRequestResult,
  WriteProcessStdinInput,
} from './control-plane/processes.js';
export type { ThreadResumePoint } from './control-plane/queries.js';
export {
  type ArtifactRetentionPolicy,
  type ExpireArtifactsReport,
  expireArtifacts,
  type KeepReason,
} from './control-plane/retention.js';
export type { ExportReviewInput, ReviewResult } from './control-plane/review.js';
export type { FileChange, ReviewPack } from './control-plane/review-render.js';
export type { RollbackConflict, RollbackFile, RollbackInput, RollbackResult } from './control-plane/rollback.js';
export type { FiringRow, StartedWork } from './control-plane/schedule-rows.js';
export type { ScheduleIdInput, ScheduleView } from './control-plane/schedules.js';
export type {
  CloseSubagentInput,
  ResumeSubagentInput,
  SpawnSubagentInput,
  SubagentInput,
  SubagentView,
  WaitSubagentsInput,
} from './control-plane/subagents.js';
export type {
  CreateTaskInput,
  LinkTasksInput,
  TaskAssignee,
  TaskDefinition,
  UpdateTaskInput,
} from './control-plane/task-graph.js';
export { TASK_EDGE_KINDS } from './control-plane/task-graph.js';
export type {
  CompleteTaskInput,
  FailTaskInput,
  PauseTaskInput,
  StartTaskInput,
  StartTaskResult,
  TaskProgressInput,
} from './control-plane/task-lifecycle.js';
export type { InterruptResult, SubmitTurnInput, SubmitTurnResult } from './control-plane/turns.js';
export { type BuildOptions, buildRuntime } from './facade/build.js';
export { TaskDefinitionSchema } from './facade/inputs.js';
export type { RuntimeJobs } from './facade/jobs.js';
export type { RuntimeOptions } from './facade/options.js';
export { type AskedWatch, Runtime } from './facade/runtime.js';
export type { RuntimeSchedules, SchedulesOptions } from './facade/schedules.js';
export { JOB_POLICY_DEFAULTS, MAX_JOB_ITEMS } from './facts/job-start.js';
export { PERMISSION_MODES } from './kernel/constants.js';
export { ERROR_CODES, type ErrorCode, type ErrorCodeInfo, EXIT, exitCodeFor } from './kernel/error-codes.js';
export { notFound, OarRuntimeError, ToolError, toOarError } from './kernel/errors.js';
export { newId } from './kernel/ids.js';
export {
  checkJsonDepth,
  INPUT_FILE_LIMITS,
  inputTooLarge,
  readBoundedBytes,
  readBoundedText,
  utf8WithoutBom,
} from './kernel/input-files.js';
export { type Command, commandMatches } from './kernel/match/command-match.js';
export { resolutionOf } from './log/decision-log.js';
export type { EventDraft } from './log/draft.js';
export { type AppendOptions, EventLog, eventRow, NOTIFY_CHANNEL } from './log/event-log.js';
export { isLiveEvent, LiveChannel, type LiveEvent, type LiveListener } from './log/live.js';
export { type ChangeListener, Notifier, type NotifierOptions, type SessionChange } from './log/notifier.js';
export {
  genAiProviderName,
  setGlobalTracerProvider,
  TRACER_NAME,
  Tracing,
  type TracingOptions,
} from './log/tracing.js';
export { COMPACTION_DEFAULTS, type ContextBudget, contextBudget } from './loop/context/compaction.js';
export type { ModelHandle } from './models/model-call.js';
export {
  type ModelDelta,
  type ModelDeltaSink,
  PARTIAL_OUTPUT_LIMIT,
  type PartialOutputFields,
} from './models/model-deltas.js';
export { ProviderLimiter, type SlotWait } from './models/provider-limits.js';
export { bindingModel, resolveModel } from './models/resolve.js';
export { loadModelScript, type ModelScript, ModelScriptSchema, parseModelScript } from './models/script-schema.js';
export { contextWindowOf, DEFAULT_WINDOWS, DEFAULT_WINDOWS_AS_OF, outputReserveOf } from './models/windows.js';
export type { HookFunction } from './policy/hooks/run-hook.js';
export { evaluatePermission } from './policy/permissions.js';
export { grantFor } from './policy/request.js';
export { DEFAULT_DENY_RULES } from './policy/sensitive-paths.js';
export { findContradictions } from './read-models/contradictions.js';
export { type JobItemState, type JobState, JobStateSchema } from './read-models/job.js';
export { type ReadModels, replay } from './read-models/project.js';
export type { SessionState } from './read-models/session.js';
export { toSessionSnapshot, toThreadReadModel } from './read-models/snapshots.js';
export type { RunState, ThreadState, ThreadView, TurnState } from './read-models/thread-state.js';
export { TimeTravel } from './read-models/time-travel.js';
export {
  bindingSecrets,
  type LiteralSecret,
  maskConnectionUrl,
  processRedactor,
  REDACTION_KINDS,
  type RedactionCounts,
  type RedactionKind,
  type RedactionSink,
  RedactionTally,
  Redactor,
  redactionFact,
  secretEnvNames,
} from './redaction/index.js';
export type { BoundConfig, Engine } from './scheduler/engine.js';
export {
  type ArtifactContent,
  type ArtifactTombstone,
  artifactIdFromRef,
  artifactUri,
  type ExpiryCandidate,
  getArtifact,
  isArtifactExpired,
  putArtifact,
  type StoredArtifact,
} from './store/artifacts.js';
export type { Dialect } from './store/dialect.js';
export { isTransientStoreFault } from './store/faults.js';
export { type Fence, type LeaseHolder, LeaseLostError, ownerName } from './store/leases.js';
export { DEFAULT_STORE_PATH, Store, type StoreOptions } from './store/store.js';
export {
  type ApiKeyRecord,
  ApiKeyRecordSchema,
  type ApiKeyScope,
  ApiKeyScopeSchema,
  DEFAULT_WORKSPACE,
  sessionIdIn,
  type Workspace,
  WorkspaceIdSchema,
  WorkspaceSchema,
  Workspaces,
} from './store/workspaces.js';
export { READ_ONLY_FILE_TOOL } from './tools/builtin/files.js';
export { editTool, globTool, grepTool, readTool, workspaceTools, writeTool } from './tools/builtin/index.js';
export { EXEC_TOOL } from './tools/exec/exec-tool.js';
export { PROCESS_TOOL } from './tools/exec/process-tool.js';
export { McpPool } from './tools/mcp/pool.js';
export { loadToolModule } from './tools/modules.js';
export { type ToolInventoryEntry, ToolRegistry } from './tools/registry.js';
export {
  type AnyTool,
  callFacts,
  defineTool,
  type ToolContext,
  type ToolDefinition,
  type ToolFacts,
  type ToolOutput,
} from './tools/tool.js';
export { DEFAULT_LEASE_TTL_MS, Worker, type WorkerOptions } from './worker/worker.js';
