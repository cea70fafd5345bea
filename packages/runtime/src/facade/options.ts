import type { z } from 'zod';
import type { AgentConfig, RuntimeLimits, SecretsConfig, SessionBinding } from '../config/binding.js';
import type { Budgets } from '../config/budgets.js';
import type { CliToolConfigSchema } from '../config/cli.js';
import type { ExecConfigSchema } from '../config/exec.js';
import type { HooksSchema } from '../config/hooks.js';
import type { McpServersSchema } from '../config/mcp.js';
import type { ModelChoice, ModelsConfig } from '../config/models.js';
import type { PermissionsConfig } from '../config/permissions.js';
import type { PipelineConfig, PipelinesSchema, ServiceConfig, ServicesSchema } from '../config/pipelines.js';
import type { ProviderLimits } from '../config/provider-limits.js';
import type { TracingOptions } from '../log/tracing.js';
import type { ModelHandle } from '../models/model-call.js';
import type { ProviderLimiter } from '../models/provider-limits.js';
import type { Store } from '../store/store.js';
import type { ToolRegistry } from '../tools/registry.js';
import type { WorkerOptions } from '../worker/worker.js';
import type { SchedulesOptions } from './schedules.js';

export interface RuntimeOptions {
  store: Store;
  /** Stable id of this installation (events carry it); generated and kept in the store when omitted. */
  runtimeId?: string;
  /**
   * The tools this process can run (default: the built-in workspace tools). New sessions are bound to all of
   * them unless `bindTools` narrows it.
   */
  tools?: ToolRegistry;
  /** Names of the tools new sessions are bound to (default: every tool in `tools` and `toolModules`). */
  bindTools?: string[];
  /** Tool modules (absolute paths or package names) new sessions are bound to; loaded wherever a session runs. */
  toolModules?: string[];
  // ---- the binding new sessions get (each session records its own; later steps use the recorded one) ----
  /** Root every workspace tool is confined to. */
  workspaceRoot: string;
  /** The main agent (name "main" unless given) and the sub-agents it may delegate to. */
  mainAgent?: Partial<AgentConfig>;
  agents?: AgentConfig[];
  /** Default model spec recorded in new bindings (agents without their own `model`). */
  defaultModel?: ModelChoice;
  /** Configured models the specs may name (environment variable names for keys, never keys). */
  models?: ModelsConfig;
  /** The model spec of semantic tool actions' workers (default: the declaring agent's model). */
  toolWorkerModel?: ModelChoice;
  permissions?: Partial<PermissionsConfig>;
  limits?: Partial<RuntimeLimits>;
  /** Spending limits per turn and per session (docs/models.md "Budgets"). */
  budgets?: Budgets;
  /** A turn submitted while the thread is busy waits in the queue (default) or is rejected. */
  queuePolicy?: 'queue' | 'reject';
  /** After a failed corrective retry: fail the turn (default) or show the model's text as the answer. */
  onProtocolFailure?: 'fail' | 'plain_text';
  /** Environment variables (names) whose values are secrets, beyond the provider keys (docs/security.md). */
  secrets?: Partial<SecretsConfig>;
  /** Pipelines and services new sessions may call (docs/executors.md); config-file shapes, defaults applied here. */
  pipelines?: z.input<typeof PipelinesSchema> | PipelineConfig[];
  services?: z.input<typeof ServicesSchema> | ServiceConfig[];
  /**
   * A business CLI behind one tool (docs/tool-protocol.md), bound to new sessions; its paths as given (absolute
   * paths mean the same from any directory). Its tool's name must also be among `bindTools` when that is given.
   */
  cli?: z.input<typeof CliToolConfigSchema>;
  /** The `exec` and `process` tools (docs/commands.md), bound to new sessions; both are offered with it. */
  exec?: z.input<typeof ExecConfigSchema>;
  /** Hooks bound to new sessions (docs/hooks.md); paths absolute, as `absoluteHooks` makes them. */
  hooks?: z.input<typeof HooksSchema>;
  /** MCP servers bound to new sessions (docs/mcp.md); paths absolute, as `absoluteMcpServers` makes them. */
  mcpServers?: z.input<typeof McpServersSchema>;
  // ---- this process ----
  /** The model of an agent under a session's binding (its spec: `agent.model ?? binding.model`). */
  model: (agent: AgentConfig, binding: SessionBinding) => ModelHandle | Promise<ModelHandle>;
  /**
   * Run a worker in this process (default: yes, for every session). `false`: a control plane only — commands and
   * queries, with the threads driven by workers elsewhere.
   */
  worker?: boolean | WorkerOptions;
  /**
   * OpenTelemetry spans of the worker's turns, model calls and tool runs (docs/tracing.md): the tracer provider
   * (default the global one, a no-op until an SDK is registered) and whether prompts and outputs are recorded.
   */
  tracing?: TracingOptions;
  /**
   * Limits per provider and per model (`openai`, `openai:gpt-4.1`: concurrency, requests per minute) shared by every
   * session this runtime drives (docs/models.md "Provider limits"); pass one `ProviderLimiter` to several runtimes
   * of a process to share it among them too.
   */
  providerLimits?: ProviderLimits | ProviderLimiter;
  /**
   * Schedules (docs/schedules.md): the config file's `definitions`, added to the store by the worker's ticker as it
   * starts, and the ticker itself (`ticker: false`: this process fires nothing; without a worker it never does).
   */
  schedules?: SchedulesOptions;
  /** Look for unfinished work in the worker's sessions when the runtime starts (default true). */
  resumeOnStart?: boolean;
  /**
   * How much per-session and per-binding state a long-lived process keeps between uses, least recently used first
   * out; whatever is forgotten is rebuilt from the store when it is needed again. `sessions`: the notifier's newest
   * sequence per session (default 4,096); `bindings`: runnable configurations, one per binding hash (default 64).
   */
  caches?: { sessions?: number; bindings?: number };
}
