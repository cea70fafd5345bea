import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import { type AgentConfig, AgentSchema, BudgetsSchema, RuntimeLimitsSchema, SecretsConfigSchema } from './binding.js';
import { CONFIG_FILE } from './constants.js';
import { OarRuntimeError } from './errors.js';
import { PipelinesSchema, ServicesSchema } from './executors/definitions.js';
import { checkJsonDepth, INPUT_FILE_LIMITS, readBoundedText } from './input-files.js';
import {
  absoluteModelChoice,
  absoluteModelSpec,
  absoluteModels,
  bindingModel,
  ModelChoiceSchema,
  ModelsConfigSchema,
} from './models/resolve.js';
import { absoluteHooks, HooksSchema } from './policy/hooks/schema.js';
import { PermissionsConfigSchema } from './policy/permission-schema.js';
import { ProviderLimitsSchema } from './runner/provider-limits.js';
import { boundRunner, NPM_ENTRY_PREFIX, NPM_PACKAGE_NAME } from './runners/packages.js';
import { Runtime } from './runtime.js';
import { Store } from './store/store.js';
import { workspaceTools } from './tools/builtin/index.js';
import { absoluteCliConfig, CliToolConfigSchema } from './tools/cli/config.js';
import { ExecConfigSchema } from './tools/exec/config.js';
import { absoluteMcpServers, McpServersSchema } from './tools/mcp/config.js';
import { absoluteModuleSpec, loadToolModule } from './tools/modules.js';
import { ToolRegistry } from './tools/registry.js';
import type { WorkerOptions } from './worker/worker.js';

export { CONFIG_FILE };

/** A `runners.packages` entry: a directory, or `npm:<name>` with a valid npm package name (checked when loaded). */
const RunnerPackageEntrySchema = z
  .string()
  .min(1)
  .refine(
    (entry) => !entry.startsWith(NPM_ENTRY_PREFIX) || NPM_PACKAGE_NAME.test(entry.slice(NPM_ENTRY_PREFIX.length)),
    {
      message: 'npm:<name> needs an npm package name, such as npm:@acme/oar-runner-foo',
    },
  );

/** `oar.config.json`: everything a runtime needs, none of it secret (API keys are named by env var only). */
export const OarConfigSchema = z.strictObject({
  $schema: z.string().optional(),
  /** SQLite path or postgres:// URL (a caller's own override, such as a CLI flag, wins). Default .oar/oar.db. */
  store: z.string().optional(),
  /** Workspace root for the file tools (default: the working directory). */
  workspace: z.string().optional(),
  /** Default model spec (openai:…, anthropic:…, openai-compatible:NAME, script:FILE, or a name from `models`). */
  model: ModelChoiceSchema.optional(),
  models: ModelsConfigSchema.default({}),
  /** The model of semantic tool actions' workers (default: the declaring agent's model). */
  toolWorkerModel: ModelChoiceSchema.optional(),
  /** The main agent. */
  agent: AgentSchema.partial({ name: true }).default({ description: '', capabilities: [], carrier: 'tool' }),
  /** Sub-agents the main agent may delegate to. */
  agents: z.array(AgentSchema).default([]),
  tools: z
    .strictObject({
      /** Built-in workspace tools to offer (default: all of read, glob, grep, write, edit). */
      builtin: z.array(z.enum(['read', 'glob', 'grep', 'write', 'edit'])).optional(),
      /** ES modules exporting tools (default export or `tools`: a ToolDefinition or an array of them). */
      modules: z.array(z.string()).default([]),
      /** A business CLI behind one governed tool, `project_cli` by default (docs/tool-protocol.md). */
      cli: CliToolConfigSchema.optional(),
      /** The `exec` command tool and its `process` companion, sandboxed (docs/commands.md); off when absent. */
      exec: ExecConfigSchema.optional(),
    })
    .default({ modules: [] }),
  permissions: PermissionsConfigSchema.default({ mode: 'default', rules: [] }),
  limits: RuntimeLimitsSchema.partial().default({}),
  /** Spending limits per turn and per session, bound to new sessions (docs/models.md "Budgets"). */
  budgets: BudgetsSchema.optional(),
  /**
   * This process's limits per provider and per model (`"openai"`, `"openai:gpt-4.1"`: `maxConcurrency`,
   * `requestsPerMinute`), shared by every session it drives; not part of a binding (docs/models.md "Provider limits").
   */
  providerLimits: ProviderLimitsSchema.default({}),
  queuePolicy: z.enum(['queue', 'reject']).default('queue'),
  /** The worker of a process using this config: how long a thread lease lasts without renewal. */
  worker: z
    .strictObject({
      leaseTtlMs: z.number().int().min(100).max(3_600_000).optional(),
      /** The most threads the worker drives at once (`oar worker --concurrency` overrides). */
      concurrency: z.number().int().min(1).max(10_000).optional(),
      /** How often the worker looks for leases that ran out (a crashed worker's threads); default 1000 ms. */
      pollMs: z.number().int().min(50).max(60_000).optional(),
    })
    .default({}),
  onProtocolFailure: z.enum(['fail', 'plain_text']).default('fail'),
  /**
   * Environment variables (NAMES) whose values are secrets, beyond the provider keys which always are. Left out,
   * none; `oar session update --from-config` then leaves a session's names as they are, and `{"env": []}` clears them.
   */
  secrets: SecretsConfigSchema.optional(),
  /** Predefined flows of tool calls the agents may run as one `pipeline` action (docs/executors.md). */
  pipelines: PipelinesSchema.default([]),
  /** External HTTP integrations the agents may call as `service` actions; credentials by env var NAME only. */
  services: ServicesSchema.default([]),
  /** Hooks in the path of tool calls, model calls and turn ends, bound to new sessions (docs/hooks.md). */
  hooks: HooksSchema.default([]),
  /** MCP servers whose tools join the inventory as `server.tool`, bound to new sessions (docs/mcp.md). */
  mcp: z.strictObject({ servers: McpServersSchema.default([]) }).default({ servers: [] }),
  /**
   * AgentRunner packages agents may be bound to (docs/runners.md): directories (relative to the config file) with
   * oar-runner.json, or `npm:<name>` for a package installed in the project's node_modules.
   */
  runners: z.strictObject({ packages: z.array(RunnerPackageEntrySchema).default([]) }).default({ packages: [] }),
});
export type OarConfig = z.infer<typeof OarConfigSchema>;

/**
 * Read and validate a config file; a missing default file is an empty config, a missing named file an error. A
 * file over INPUT_FILE_LIMITS.config is refused before it is read (`input_too_large`), one nested deeper than
 * MAX_JSON_DEPTH before it is parsed (`input_too_deep`).
 */
export async function loadConfig(
  path: string | undefined,
  cwd: string,
): Promise<{ config: OarConfig; baseDir: string }> {
  const file = resolve(cwd, path ?? CONFIG_FILE);
  let text: string;
  try {
    // Without a leading UTF-8 byte-order mark (some Windows editors write one; it means nothing here).
    text = await readBoundedText(file, INPUT_FILE_LIMITS.config, 'config');
  } catch (error) {
    if (error instanceof OarRuntimeError) throw error;
    if (path === undefined && (error as NodeJS.ErrnoException).code === 'ENOENT') {
      return { config: OarConfigSchema.parse({}), baseDir: cwd };
    }
    throw new OarRuntimeError('config_unreadable', `cannot read config ${file}: ${(error as Error).message}`);
  }
  checkJsonDepth(text, file, 'config');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new OarRuntimeError('invalid_config', `config ${file} is not valid JSON: ${(error as Error).message}`);
  }
  const parsed = OarConfigSchema.safeParse(json);
  if (!parsed.success) {
    throw new OarRuntimeError('invalid_config', `config ${file} is invalid`, {
      details: { issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) },
    });
  }
  return { config: parsed.data, baseDir: dirname(file) };
}

export interface BuildOptions {
  cwd: string;
  env: Record<string, string | undefined>;
  /** Overrides of the config (CLI flags). */
  store?: string;
  model?: string;
  workspace?: string;
  agent?: string;
  /** Bind the main agent of new sessions to this runner id (`oar run --runner`). */
  runner?: string;
  /** The worker of this process: every session (default), only some, or none (`false`). */
  worker?: boolean | WorkerOptions;
  resumeOnStart?: boolean;
  /**
   * false: the store must exist already (`store_not_found` otherwise), for a command on existing sessions that still
   * needs the config (`oar session update --from-config`). Default: a missing store is created.
   */
  createStore?: boolean;
}

/**
 * Build a runtime from a config: open the store, load the tool modules, and take the configuration new sessions
 * are bound to (agents, models, workspace, tools, permissions, limits). Sessions that already exist keep their own
 * binding: their models are resolved from it, whatever this config or these flags say.
 */
export async function buildRuntime(
  config: OarConfig,
  baseDir: string,
  options: BuildOptions,
): Promise<{ runtime: Runtime; store: Store }> {
  const builtin = config.tools.builtin;
  const toolModules = config.tools.modules.map((spec) => absoluteModuleSpec(spec, baseDir));
  const moduleTools: string[] = [];
  for (const spec of toolModules) for (const tool of await loadToolModule(spec)) moduleTools.push(tool.name);
  const bindTools = [
    ...workspaceTools()
      .map((tool) => tool.name)
      .filter((name) => !builtin || builtin.includes(name as never)),
    ...moduleTools,
    ...(config.tools.cli ? [config.tools.cli.name] : []),
  ];
  // A spec given on the command line is relative to the working directory; one from the file, to the file.
  const modelSpec = options.model
    ? absoluteModelSpec(options.model, options.cwd)
    : config.model
      ? absoluteModelChoice(config.model, baseDir)
      : undefined;
  const mainAgent: Partial<AgentConfig> = {
    ...config.agent,
    name: config.agent.name ?? options.agent ?? 'main',
    ...(config.agent.model ? { model: absoluteModelChoice(config.agent.model, baseDir) } : {}),
  };
  const agents = config.agents.map((a) => ({
    ...a,
    ...(a.model ? { model: absoluteModelChoice(a.model, baseDir) } : {}),
  }));
  // Runner bindings record their package's absolute directory (an npm entry resolved from here), so any worker can
  // start the runner.
  const runnerPackages = config.runners.packages;
  const mainRunner =
    options.runner && options.runner !== config.agent.runner?.id
      ? { id: options.runner, config: {} }
      : config.agent.runner;
  if (mainRunner) mainAgent.runner = await boundRunner(mainRunner, runnerPackages, baseDir);
  for (const agent of agents) {
    if (agent.runner) agent.runner = await boundRunner(agent.runner, runnerPackages, baseDir);
  }
  const storeUrl = options.store ?? config.store;
  const store = await Store.open(storeUrl, { cwd: options.cwd, create: options.createStore !== false });
  // A runtime that cannot start (missing workspace, …) must not leave its store open.
  const runtime = await Runtime.create({
    store,
    workspaceRoot: options.workspace
      ? resolve(options.cwd, options.workspace)
      : config.workspace
        ? resolve(baseDir, config.workspace)
        : options.cwd,
    tools: new ToolRegistry(workspaceTools()),
    bindTools,
    toolModules,
    mainAgent,
    agents,
    ...(modelSpec ? { defaultModel: modelSpec } : {}),
    models: absoluteModels(config.models, baseDir),
    ...(config.toolWorkerModel ? { toolWorkerModel: absoluteModelChoice(config.toolWorkerModel, baseDir) } : {}),
    model: (agent, binding) => bindingModel(agent, binding, options.env),
    permissions: config.permissions,
    limits: config.limits,
    ...(config.budgets ? { budgets: config.budgets } : {}),
    providerLimits: config.providerLimits,
    queuePolicy: config.queuePolicy,
    onProtocolFailure: config.onProtocolFailure,
    ...(config.secrets ? { secrets: config.secrets } : {}),
    pipelines: config.pipelines,
    services: config.services,
    ...(config.tools.cli ? { cli: absoluteCliConfig(config.tools.cli, baseDir) } : {}),
    ...(config.tools.exec ? { exec: config.tools.exec } : {}),
    hooks: absoluteHooks(config.hooks, baseDir),
    mcpServers: absoluteMcpServers(config.mcp.servers, baseDir),
    worker:
      options.worker === false
        ? false
        : { ...config.worker, ...(typeof options.worker === 'object' ? options.worker : {}) },
    ...(options.resumeOnStart === false ? { resumeOnStart: false } : {}),
  }).catch(async (error: unknown) => {
    await store.close();
    throw error;
  });
  return { runtime, store };
}
