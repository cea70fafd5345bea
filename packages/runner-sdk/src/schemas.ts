import { z } from 'zod';

/**
 * The AgentRunner Protocol v1 entities (agentrunner-protocol-v1.md), with the spec's snake_case field names, as
 * zod schemas: the one source of the types for runners and for the OAR host. Entities the spec defines with
 * defaults parse with those defaults; unknown fields are kept (`looseObject`) so a newer peer's extra fields pass
 * through an older one unharmed.
 */

/** A label in several languages: `{"en_US": "…", "zh_Hans": "…"}`. */
export const I18nObjectSchema = z.record(z.string(), z.string());

export const AgentRunnerCapabilitiesSchema = z.looseObject({
  streaming: z.boolean().default(false),
  tool_calling: z.boolean().default(false),
  knowledge_retrieval: z.boolean().default(false),
  multimodal_input: z.boolean().default(false),
  event_context: z.boolean().default(true),
  platform_api: z.boolean().default(false),
  interrupt: z.boolean().default(false),
  stateful_session: z.boolean().default(false),
  self_managed_context: z.boolean().default(true),
});
export type AgentRunnerCapabilities = z.infer<typeof AgentRunnerCapabilitiesSchema>;

export const MODEL_OPS = ['invoke', 'stream', 'rerank'] as const;
export const TOOL_OPS = ['detail', 'call'] as const;
export const KNOWLEDGE_OPS = ['list', 'retrieve'] as const;
export const HISTORY_OPS = ['page', 'search'] as const;
export const EVENT_OPS = ['get', 'page'] as const;
export const ARTIFACT_OPS = ['metadata', 'read'] as const;
export const STORAGE_AREAS = ['plugin', 'workspace', 'binding'] as const;
export const FILE_KINDS = ['config', 'knowledge'] as const;

/** The most a runner may ever use; the host narrows it by the binding policy and the run's scope. */
export const AgentRunnerPermissionsSchema = z.looseObject({
  models: z.array(z.enum(MODEL_OPS)).default([]),
  tools: z.array(z.enum(TOOL_OPS)).default([]),
  knowledge_bases: z.array(z.enum(KNOWLEDGE_OPS)).default([]),
  history: z.array(z.enum(HISTORY_OPS)).default([]),
  events: z.array(z.enum(EVENT_OPS)).default([]),
  artifacts: z.array(z.enum(ARTIFACT_OPS)).default([]),
  storage: z.array(z.enum(STORAGE_AREAS)).default([]),
  files: z.array(z.enum(FILE_KINDS)).default([]),
  platform_api: z.array(z.string()).default([]),
});
export type AgentRunnerPermissions = z.infer<typeof AgentRunnerPermissionsSchema>;

export const BOOTSTRAP_MODES = ['none', 'current_event', 'recent_tail', 'summary_tail'] as const;

export const AgentRunnerContextPolicySchema = z.looseObject({
  ownership: z.enum(['self_managed', 'host_bootstrap', 'hybrid']).default('self_managed'),
  bootstrap: z.enum(BOOTSTRAP_MODES).default('current_event'),
  max_inline_events: z.number().int().min(0).default(0),
  max_inline_bytes: z.number().int().min(0).default(0),
  supports_history_pull: z.boolean().default(true),
  supports_history_search: z.boolean().default(false),
  supports_artifact_pull: z.boolean().default(true),
  owns_compaction: z.boolean().default(true),
  wants_static_context_refs: z.boolean().default(true),
});
export type AgentRunnerContextPolicy = z.infer<typeof AgentRunnerContextPolicySchema>;

/**
 * One field of a runner's binding-config form (the spec's DynamicFormItemSchema). The host checks a binding's
 * config against these: `required`, the value's `type`, and `options` for a select.
 */
export const DynamicFormItemSchema = z.looseObject({
  name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_.-]*$/, 'field names use letters, digits, "_", "." and "-"'),
  label: I18nObjectSchema.optional(),
  description: I18nObjectSchema.optional(),
  type: z.enum(['string', 'text', 'integer', 'number', 'boolean', 'select', 'array', 'object']),
  required: z.boolean().default(false),
  default: z.unknown().optional(),
  options: z.array(z.looseObject({ name: z.string(), label: I18nObjectSchema.optional() })).optional(),
});
export type DynamicFormItem = z.infer<typeof DynamicFormItemSchema>;

/** Stable runner ids: `plugin:author/name/runner`. */
export const RUNNER_ID_PATTERN = /^plugin:[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/;

export const AgentRunnerManifestSchema = z.looseObject({
  id: z.string().regex(RUNNER_ID_PATTERN, 'runner ids are plugin:author/name/runner'),
  name: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'runner names use letters, digits, "_", "." and "-"'),
  label: I18nObjectSchema,
  description: I18nObjectSchema.nullable().optional(),
  capabilities: AgentRunnerCapabilitiesSchema,
  permissions: AgentRunnerPermissionsSchema,
  context: AgentRunnerContextPolicySchema,
  config_schema: z.array(DynamicFormItemSchema).default([]),
  metadata: z.record(z.string(), z.unknown()).default({}),
});
export type AgentRunnerManifest = z.infer<typeof AgentRunnerManifestSchema>;
export type AgentRunnerManifestInput = z.input<typeof AgentRunnerManifestSchema>;

/** LIST_AGENT_RUNNERS's answer. The host parses each manifest on its own, so one bad one does not hide the rest. */
export const ListAgentRunnersResponseSchema = z.looseObject({ runners: z.array(z.unknown()) });

// --- the run context ---------------------------------------------------------------------------------------------

const Dict = z.record(z.string(), z.unknown());

export const ArtifactRefSchema = z.looseObject({
  artifact_id: z.string(),
  name: z.string().nullable().optional(),
  mime_type: z.string().nullable().optional(),
  size: z.number().int().nullable().optional(),
  sha256: z.string().nullable().optional(),
});
export type ArtifactRef = z.infer<typeof ArtifactRefSchema>;

export const AgentTriggerSchema = z.looseObject({
  type: z.string(),
  source: z.enum(['platform', 'webui', 'api', 'scheduler', 'system', 'pipeline_adapter']),
  timestamp: z.number().int().nullable().optional(),
});

export const AgentEventContextSchema = z.looseObject({
  event_id: z.string(),
  event_type: z.string(),
  event_time: z.number().int().nullable().optional(),
  source: z.string(),
  source_event_type: z.string().nullable().optional(),
  raw_ref: z.looseObject({ artifact_id: z.string() }).nullable().optional(),
  data: Dict.default({}),
});

export const ConversationContextSchema = z.looseObject({
  conversation_id: z.string().nullable().optional(),
  thread_id: z.string().nullable().optional(),
  launcher_type: z.string().nullable().optional(),
  launcher_id: z.string().nullable().optional(),
  bot_id: z.string().nullable().optional(),
  workspace_id: z.string().nullable().optional(),
});

export const ActorContextSchema = z.looseObject({
  actor_type: z.string(),
  actor_id: z.string().nullable().optional(),
  actor_name: z.string().nullable().optional(),
  metadata: Dict.default({}),
});

export const SubjectContextSchema = z.looseObject({
  subject_type: z.string(),
  subject_id: z.string().nullable().optional(),
  data: Dict.default({}),
});

export const ContentElementSchema = z.looseObject({ type: z.string() });

export const AgentInputSchema = z.looseObject({
  text: z.string().nullable().optional(),
  contents: z.array(ContentElementSchema).default([]),
  attachments: z.array(ArtifactRefSchema).default([]),
  message_chain: Dict.nullable().optional(),
});

export const DeliveryContextSchema = z.looseObject({
  surface: z.string(),
  reply_target: Dict.nullable().optional(),
  supports_streaming: z.boolean().default(false),
  supports_edit: z.boolean().default(false),
  supports_reaction: z.boolean().default(false),
  max_message_size: z.number().int().nullable().optional(),
  platform_capabilities: Dict.default({}),
});

export const ModelResourceSchema = z.looseObject({
  model_id: z.string(),
  provider: z.string().nullable().optional(),
  operations: z.array(z.enum(MODEL_OPS)).default([]),
});
export const ToolResourceSchema = z.looseObject({
  tool_name: z.string(),
  description: z.string().nullable().optional(),
  parameters: Dict.nullable().optional(),
});
export const KnowledgeBaseResourceSchema = z.looseObject({ kb_id: z.string(), name: z.string().nullable().optional() });
export const FileResourceSchema = z.looseObject({ file_id: z.string(), kind: z.string().nullable().optional() });
export const StorageResourceSchema = z.looseObject({
  plugin_storage: z.boolean().default(false),
  workspace_storage: z.boolean().default(false),
  binding_storage: z.boolean().default(false),
});

export const AgentResourcesSchema = z.looseObject({
  models: z.array(ModelResourceSchema).default([]),
  tools: z.array(ToolResourceSchema).default([]),
  knowledge_bases: z.array(KnowledgeBaseResourceSchema).default([]),
  files: z.array(FileResourceSchema).default([]),
  storage: StorageResourceSchema.default({ plugin_storage: false, workspace_storage: false, binding_storage: false }),
  platform_capabilities: Dict.default({}),
});
export type AgentResources = z.infer<typeof AgentResourcesSchema>;

export const InlineContextPolicySchema = z.looseObject({
  mode: z.enum(BOOTSTRAP_MODES),
  delivered_count: z.number().int().min(0).default(0),
  source_total_count: z.number().int().min(0).nullable().optional(),
  messages_complete: z.boolean().default(false),
  reason: z.string().nullable().optional(),
});

export const ContextAPICapabilitiesSchema = z.looseObject({
  history_page: z.boolean().default(false),
  history_search: z.boolean().default(false),
  event_get: z.boolean().default(false),
  event_page: z.boolean().default(false),
  artifact_metadata: z.boolean().default(false),
  artifact_read: z.boolean().default(false),
  state: z.boolean().default(false),
  storage: z.boolean().default(false),
});
export type ContextAPICapabilities = z.infer<typeof ContextAPICapabilitiesSchema>;

export const ContextAccessSchema = z.looseObject({
  conversation_id: z.string().nullable().optional(),
  thread_id: z.string().nullable().optional(),
  latest_cursor: z.string().nullable().optional(),
  event_seq: z.number().int().nullable().optional(),
  transcript_seq: z.number().int().nullable().optional(),
  has_history_before: z.boolean().default(false),
  inline_policy: InlineContextPolicySchema,
  available_apis: ContextAPICapabilitiesSchema,
});

/** One transcript message (bootstrap and history pages): role and text content. */
export const MessageSchema = z.looseObject({
  role: z.enum(['system', 'user', 'assistant', 'tool']),
  content: z.string(),
  /** Present on history pages: the opaque cursor of this message. */
  cursor: z.string().optional(),
});
export type Message = z.infer<typeof MessageSchema>;

export const BootstrapContextSchema = z.looseObject({
  messages: z.array(MessageSchema).default([]),
  summary: z.string().nullable().optional(),
  artifacts: z.array(ArtifactRefSchema).default([]),
  metadata: Dict.default({}),
});

export const StaticContextRefSchema = z.looseObject({ hash: z.string(), version: z.string().nullable().optional() });

export const AgentRuntimeContextSchema = z.looseObject({
  host: z.string().default('oar'),
  langbot_version: z.string().nullable().optional(),
  trace_id: z.string(),
  /** Seconds since the epoch (a float, as in the spec). */
  deadline_at: z.number().nullable().optional(),
  locale: z.string().nullable().optional(),
  timezone: z.string().nullable().optional(),
  static_refs: z.record(z.string(), StaticContextRefSchema).default({}),
  metadata: Dict.default({}),
});

export const AgentRunStateSchema = z.looseObject({
  conversation: Dict.default({}),
  actor: Dict.default({}),
  subject: Dict.default({}),
  runner: Dict.default({}),
});

export const AgentRunContextSchema = z.looseObject({
  run_id: z.string(),
  trigger: AgentTriggerSchema,
  event: AgentEventContextSchema,
  conversation: ConversationContextSchema.nullable().optional(),
  actor: ActorContextSchema.nullable().optional(),
  subject: SubjectContextSchema.nullable().optional(),
  input: AgentInputSchema,
  delivery: DeliveryContextSchema,
  resources: AgentResourcesSchema,
  context: ContextAccessSchema,
  state: AgentRunStateSchema,
  runtime: AgentRuntimeContextSchema,
  config: Dict.default({}),
  bootstrap: BootstrapContextSchema.nullable().optional(),
  adapter: Dict.nullable().optional(),
  metadata: Dict.default({}),
});
export type AgentRunContext = z.infer<typeof AgentRunContextSchema>;
export type AgentRunContextInput = z.input<typeof AgentRunContextSchema>;

export const AgentRunRequestSchema = z.looseObject({
  runner_id: z.string(),
  runner_name: z.string(),
  context: AgentRunContextSchema,
});
export type AgentRunRequest = z.infer<typeof AgentRunRequestSchema>;

// --- the result stream ---------------------------------------------------------------------------------------------

/** The result types the spec names; any other type is ignored by the host with a recorded warning. */
export const RESULT_TYPES = [
  'message.delta',
  'message.completed',
  'tool.call.started',
  'tool.call.completed',
  'artifact.created',
  'state.updated',
  'action.requested',
  'run.completed',
  'run.failed',
] as const;
export type ResultType = (typeof RESULT_TYPES)[number];

export const AgentRunResultSchema = z.looseObject({
  run_id: z.string(),
  type: z.string().min(1),
  data: Dict.default({}),
  sequence: z.number().int().min(0).nullable().optional(),
  timestamp: z.number().int().nullable().optional(),
});
export type AgentRunResult = z.infer<typeof AgentRunResultSchema>;
export type AgentRunResultInput = z.input<typeof AgentRunResultSchema>;

/** `data` of the known result types, checked by the host (a result whose data does not match fails the run). */
export const ResultDataSchemas = {
  'message.delta': z.looseObject({ chunk: z.looseObject({ role: z.string().optional(), content: z.string() }) }),
  'message.completed': z.looseObject({ message: z.looseObject({ role: z.string().optional(), content: z.string() }) }),
  'tool.call.started': z.looseObject({ tool_call_id: z.string().optional(), tool_name: z.string() }),
  'tool.call.completed': z.looseObject({ tool_call_id: z.string().optional(), tool_name: z.string() }),
  'artifact.created': z.looseObject({
    name: z.string().min(1),
    mime_type: z.string().optional(),
    /** UTF-8 text, or base64 with `encoding: "base64"`. */
    content: z.string(),
    encoding: z.enum(['utf8', 'base64']).optional(),
  }),
  // Scope, key, JSON and size are checked by the host, which refuses a bad update with a warning (the run goes on).
  'state.updated': z.looseObject({ scope: z.string(), key: z.string(), value: z.unknown() }),
  'action.requested': z.looseObject({ action: z.string(), target: Dict.optional(), payload: Dict.optional() }),
  'run.completed': z.looseObject({ message: z.looseObject({ content: z.string() }).optional() }),
  'run.failed': z.looseObject({ code: z.string(), message: z.string(), retryable: z.boolean().optional() }),
} satisfies Record<ResultType, z.ZodType>;

// --- the API proxy ---------------------------------------------------------------------------------------------------

/** The proxy actions (spec section 7), named `<group>.<method>` on the wire. */
export const API_ACTIONS = [
  'models.invoke',
  'models.stream',
  'models.rerank',
  'tools.get_detail',
  'tools.call',
  'knowledge.retrieve',
  'history.page',
  'history.search',
  'events.get',
  'events.page',
  'artifacts.metadata',
  'artifacts.read_range',
  'artifacts.open_stream',
  'state.get',
  'state.set',
  'state.delete',
  'storage.get',
  'storage.set',
  'storage.delete',
  'storage.list',
  'platform.request_action',
  // OAR additions beyond the spec's list (docs/runners.md), which LangBot's proxy has too: the keys of a state scope,
  // the thread's queued input claimed by the running run, the agent's instructions, a token estimate.
  'state.list',
  'steering.pull',
  'prompt.get',
  'tokens.count',
] as const;
export type ApiAction = (typeof API_ACTIONS)[number];

/** One proxy call, runner → host: the run it belongs to, the action, and the action's arguments. */
export const AgentApiRequestSchema = z.looseObject({
  run_id: z.string().optional(),
  action: z.string(),
  payload: Dict.default({}),
});
export type AgentApiRequest = z.infer<typeof AgentApiRequestSchema>;

export const ChatMessageSchema = z.looseObject({
  role: z.enum(['system', 'user', 'assistant', 'tool']),
  content: z.string().default(''),
  /** On an assistant message: the tool calls it made. */
  tool_calls: z.array(z.looseObject({ id: z.string(), name: z.string(), arguments: z.string() })).optional(),
  /** On a tool message: the call it answers, and the tool's name. */
  tool_call_id: z.string().optional(),
  name: z.string().optional(),
});
export type ChatMessage = z.infer<typeof ChatMessageSchema>;

export const ModelToolSchema = z.looseObject({
  name: z.string(),
  description: z.string().optional(),
  parameters: Dict.optional(),
});
export type ModelTool = z.infer<typeof ModelToolSchema>;

export const ModelInvokeArgsSchema = z.looseObject({
  model_id: z.string(),
  messages: z.array(ChatMessageSchema).min(1),
  tools: z.array(ModelToolSchema).nullable().optional(),
  extra_args: Dict.nullable().optional(),
});
export type ModelInvokeArgs = z.infer<typeof ModelInvokeArgsSchema>;

/** What models.invoke answers (and models.stream's last chunk). */
export const ModelInvokeResultSchema = z.looseObject({
  message: ChatMessageSchema,
  finish_reason: z.string(),
  usage: z.looseObject({ input_tokens: z.number(), output_tokens: z.number() }),
});
export type ModelInvokeResult = z.infer<typeof ModelInvokeResultSchema>;

/** A models.stream chunk: a piece of text, or the whole result at the end. */
export const ModelStreamChunkSchema = z.union([
  z.looseObject({ type: z.literal('delta'), content: z.string() }),
  z.looseObject({ type: z.literal('result'), result: ModelInvokeResultSchema }),
]);
export type ModelStreamChunk = z.infer<typeof ModelStreamChunkSchema>;

/**
 * models.rerank (spec 7.1: `rerank(model_id, query, documents, top_k=None)`): documents are texts or JSON objects
 * (a provider that ranks text gets an object as its JSON), at most MAX_RERANK_DOCUMENTS of them.
 */
export const MAX_RERANK_DOCUMENTS = 1_000;
export const ModelRerankArgsSchema = z.looseObject({
  model_id: z.string(),
  query: z.string().min(1),
  documents: z
    .array(z.union([z.string(), Dict]))
    .min(1)
    .max(MAX_RERANK_DOCUMENTS),
  top_k: z.number().int().min(1).nullable().optional(),
});
export type ModelRerankArgs = z.infer<typeof ModelRerankArgsSchema>;
/** The documents most relevant first: each one's index in the request, its score, and the document itself. */
export const ModelRerankResultSchema = z.looseObject({
  results: z.array(z.looseObject({ index: z.number().int(), score: z.number(), document: z.unknown() })),
});
export type ModelRerankResult = z.infer<typeof ModelRerankResultSchema>;

export const ToolCallArgsSchema = z.looseObject({ tool_name: z.string(), parameters: Dict.default({}) });
export const ToolCallResultSchema = z.looseObject({
  tool_call_id: z.string(),
  ok: z.boolean(),
  content: z.string(),
  structured: z.unknown().optional(),
  artifact_id: z.string().optional(),
  /** The call's idempotency key, as recorded in its `tool.started` (OAR: a runner may hand it on to the world). */
  idempotency_key: z.string().optional(),
  error: z.looseObject({ code: z.string(), message: z.string() }).optional(),
});
export type ToolCallResult = z.infer<typeof ToolCallResultSchema>;

export const HistoryPageArgsSchema = z.looseObject({
  conversation_id: z.string().nullable().optional(),
  before_cursor: z.string().nullable().optional(),
  after_cursor: z.string().nullable().optional(),
  limit: z.number().int().min(1).max(200).default(50),
  direction: z.enum(['backward', 'forward']).default('backward'),
  include_artifacts: z.boolean().default(false),
});
export const HistoryPageResultSchema = z.looseObject({
  items: z.array(MessageSchema),
  next_cursor: z.string().nullable(),
  has_more: z.boolean(),
});
export type HistoryPageResult = z.infer<typeof HistoryPageResultSchema>;

export const EventsPageArgsSchema = z.looseObject({
  before_cursor: z.string().nullable().optional(),
  limit: z.number().int().min(1).max(200).default(50),
});
export const EventEnvelopeSchema = z.looseObject({
  event_id: z.string(),
  event_type: z.string(),
  sequence: z.number().int(),
  timestamp: z.string(),
  data: Dict,
  /** Set when the payload was too large to inline: read it with artifacts.* or events.get. */
  payload_truncated: z.boolean().optional(),
});
export const EventsPageResultSchema = z.looseObject({
  items: z.array(EventEnvelopeSchema),
  next_cursor: z.string().nullable(),
  has_more: z.boolean(),
});

export const ArtifactMetadataSchema = z.looseObject({
  artifact_id: z.string(),
  name: z.string().nullable(),
  mime_type: z.string(),
  size: z.number().int(),
  sha256: z.string(),
  /** ISO 8601, when the host knows it. */
  created_at: z.string().nullable().optional(),
});
export const ArtifactReadRangeArgsSchema = z.looseObject({
  artifact_id: z.string(),
  offset: z.number().int().min(0).default(0),
  length: z.number().int().min(1).default(65_536),
});
export const ArtifactReadRangeResultSchema = z.looseObject({
  artifact_id: z.string(),
  offset: z.number().int(),
  /** base64 of the bytes read. */
  data: z.string(),
  /** Always base64 (text and binary artifacts alike). */
  encoding: z.literal('base64').optional(),
  eof: z.boolean(),
});

export const STATE_SCOPES = ['conversation', 'actor', 'subject', 'runner'] as const;
export const StateArgsSchema = z.looseObject({
  scope: z.enum(STATE_SCOPES),
  key: z.string(),
  value: z.unknown().optional(),
});
/** state.list: the keys of one scope (sorted), those starting with `prefix`, at most `limit`. */
export const StateListArgsSchema = z.looseObject({
  scope: z.enum(STATE_SCOPES),
  prefix: z.string().max(100).nullable().optional(),
  limit: z.number().int().min(1).max(100).default(100),
});
/** steering.pull: claim the thread's queued input for the running run — all of it (FIFO) or one, at most `limit`. */
export const SteeringPullArgsSchema = z.looseObject({
  mode: z.enum(['all', 'one']).default('all'),
  limit: z.number().int().min(1).max(100).nullable().optional(),
});
/** tokens.count: OAR's token estimate of a model call's input (the models.invoke arguments, extra_args ignored). */
export const TokensCountArgsSchema = z.looseObject({
  model_id: z.string(),
  messages: z.array(ChatMessageSchema).min(1),
  tools: z.array(ModelToolSchema).nullable().optional(),
});

/** A storage key: 1-256 letters, digits, "_", ".", ":", "/" or "-" ("/" and ":" make prefixes for storage.list). */
export const StorageKeySchema = z.string().regex(/^[A-Za-z0-9_.:/-]{1,256}$/);
export const StorageSetArgsSchema = z.looseObject({
  area: z.enum(STORAGE_AREAS),
  key: StorageKeySchema,
  /** Any JSON value; with `encoding: "base64"`, a base64 string of the bytes. */
  value: z.unknown(),
  encoding: z.enum(['json', 'base64']).default('json'),
});
export const StorageListArgsSchema = z.looseObject({
  area: z.enum(STORAGE_AREAS),
  prefix: z
    .string()
    .regex(/^[A-Za-z0-9_.:/-]{0,256}$/)
    .nullable()
    .optional(),
  cursor: z.string().max(2048).nullable().optional(),
  limit: z.number().int().min(1).max(200).default(50),
});
/** storage.get's answer (a missing key is `not_found`). */
export const StorageGetResultSchema = z.looseObject({
  area: z.enum(STORAGE_AREAS),
  key: z.string(),
  value: z.unknown(),
  encoding: z.enum(['json', 'base64']),
  size: z.number().int(),
  updated_at: z.string(),
});
export type StorageGetResult = z.infer<typeof StorageGetResultSchema>;
export const StorageListResultSchema = z.looseObject({
  items: z.array(
    z.looseObject({
      key: z.string(),
      encoding: z.enum(['json', 'base64']),
      size: z.number().int(),
      updated_at: z.string(),
    }),
  ),
  next_cursor: z.string().nullable(),
  has_more: z.boolean(),
});
export type StorageListResult = z.infer<typeof StorageListResultSchema>;

export const HistorySearchArgsSchema = z.looseObject({
  query: z.string().min(1).max(1_000),
  filters: z
    .looseObject({
      /** Only messages of these roles. */
      roles: z.array(z.enum(['system', 'user', 'assistant', 'tool'])).optional(),
      /** A conversation other than the run's own (needs a grant this host does not give). */
      conversation_id: z.string().nullable().optional(),
    })
    .nullable()
    .optional(),
  top_k: z.number().int().min(1).max(50).default(10),
});
export const HistorySearchResultSchema = z.looseObject({
  items: z.array(MessageSchema.extend({ score: z.number() })),
});
export type HistorySearchResult = z.infer<typeof HistorySearchResultSchema>;

/** artifacts.open_stream's chunks: the bytes in order (base64), then one end chunk with the totals. */
export const ArtifactStreamChunkSchema = z.union([
  z.looseObject({ type: z.literal('chunk'), offset: z.number().int(), data: z.string() }),
  z.looseObject({ type: z.literal('end'), size: z.number().int(), sha256: z.string() }),
]);
export type ArtifactStreamChunk = z.infer<typeof ArtifactStreamChunkSchema>;

/**
 * The generation settings a runner may pass in `models.invoke` / `models.stream` `extra_args` (any other key is
 * `invalid_argument`): they reach OAR's model layer as the provider call's settings.
 */
export const ModelExtraArgsSchema = z.strictObject({
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.number().int().min(1).optional(),
  max_tokens: z.number().int().min(1).optional(),
  max_output_tokens: z.number().int().min(1).optional(),
  stop: z.union([z.string(), z.array(z.string()).max(8)]).optional(),
  seed: z.number().int().optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
  frequency_penalty: z.number().min(-2).max(2).optional(),
});
export type ModelExtraArgs = z.infer<typeof ModelExtraArgsSchema>;
export const MODEL_EXTRA_ARGS = Object.keys(ModelExtraArgsSchema.shape) as (keyof ModelExtraArgs)[];

// --- errors ----------------------------------------------------------------------------------------------------------

/** Exactly the spec's error codes (section 8); the host answers with no other. */
export const AGENT_API_ERROR_CODES = [
  'unauthorized',
  'not_found',
  'deadline_exceeded',
  'payload_too_large',
  'rate_limited',
  'invalid_argument',
  'runtime_error',
] as const;
export type AgentApiErrorCode = (typeof AGENT_API_ERROR_CODES)[number];

export const AgentAPIErrorSchema = z.looseObject({
  code: z.enum(AGENT_API_ERROR_CODES),
  message: z.string(),
  retryable: z.boolean().default(false),
  details: Dict.default({}),
});
export type AgentAPIErrorShape = z.infer<typeof AgentAPIErrorSchema>;
