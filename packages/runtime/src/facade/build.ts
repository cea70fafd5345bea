import { resolve } from 'node:path';
import { boundRunner } from '../agent-runners/packages.js';
import type { AgentConfig } from '../config/binding.js';
import { absoluteCliConfig } from '../config/cli.js';
import { absoluteHooks } from '../config/hooks.js';
import { absoluteMcpServers } from '../config/mcp.js';
import { absoluteModelChoice, absoluteModelSpec, absoluteModels } from '../config/models.js';
import { absoluteModuleSpec } from '../config/modules.js';
import type { OarConfig } from '../config/oar-config.js';
import { bindingModel } from '../models/resolve.js';
import { Store } from '../store/store.js';
import { workspaceTools } from '../tools/builtin/index.js';
import { loadToolModule } from '../tools/modules.js';
import { ToolRegistry } from '../tools/registry.js';
import type { WorkerOptions } from '../worker/worker.js';
import { Runtime } from './runtime.js';

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
    ...(config.schedules.length ? { schedules: { definitions: config.schedules } } : {}),
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
