import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { type AgentConfig, DEFAULT_LIMITS } from './engine.js';
import { OarRuntimeError } from './errors.js';
import { ModelsConfigSchema, resolveModel } from './models/resolve.js';
import { PermissionsConfigSchema } from './policy/permission-schema.js';
import type { ModelHandle } from './runner/model-call.js';
import { Runtime } from './runtime.js';
import { Store } from './store/store.js';
import { workspaceTools } from './tools/builtin/index.js';
import { ToolRegistry } from './tools/registry.js';
import type { AnyTool } from './tools/tool.js';

/** The default config file name, looked up in the working directory. */
export const CONFIG_FILE = 'oar.config.json';

const AgentEntrySchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'agent names use letters, digits, "_", "." and "-"'),
  description: z.string().default(''),
  capabilities: z.array(z.string()).default([]),
  systemPrompt: z.string().optional(),
  model: z.string().optional(),
  carrier: z.enum(['tool', 'text']).default('tool'),
  tools: z.array(z.string()).optional(),
});

const LimitsSchema = z.strictObject({
  maxSteps: z.number().int().min(1).max(10_000).optional(),
  maxParallel: z.number().int().min(1).max(64).optional(),
  maxSubagentDepth: z.number().int().min(0).max(8).optional(),
  toolTimeoutMs: z.number().int().min(1).optional(),
  contextBudgetTokens: z.number().int().min(512).optional(),
  observationTokens: z.number().int().min(16).optional(),
  graphObservationTokens: z.number().int().min(16).optional(),
  maxArtifactBytes: z.number().int().min(1).optional(),
});

/** `oar.config.json`: everything a runtime needs, none of it secret (API keys are named by env var only). */
export const OarConfigSchema = z.strictObject({
  $schema: z.string().optional(),
  /** SQLite path or postgres:// URL; OAR_STORE and --store override it. Default .oar/oar.db. */
  store: z.string().optional(),
  /** Workspace root for the file tools (default: the working directory). */
  workspace: z.string().optional(),
  /** Default model spec (openai:…, anthropic:…, openai-compatible:NAME, script:FILE, or a name from `models`). */
  model: z.string().optional(),
  models: ModelsConfigSchema.default({}),
  /** The main agent. */
  agent: AgentEntrySchema.partial({ name: true }).default({ description: '', capabilities: [], carrier: 'tool' }),
  /** Sub-agents the main agent may delegate to. */
  agents: z.array(AgentEntrySchema).default([]),
  tools: z
    .strictObject({
      /** Built-in workspace tools to offer (default: all of read, glob, grep, write, edit). */
      builtin: z.array(z.enum(['read', 'glob', 'grep', 'write', 'edit'])).optional(),
      /** ES modules exporting tools (default export or `tools`: a ToolDefinition or an array of them). */
      modules: z.array(z.string()).default([]),
    })
    .default({ modules: [] }),
  permissions: PermissionsConfigSchema.default({ mode: 'default', rules: [] }),
  limits: LimitsSchema.default({}),
  queuePolicy: z.enum(['queue', 'reject']).default('queue'),
  onProtocolFailure: z.enum(['fail', 'plain_text']).default('fail'),
});
export type OarConfig = z.infer<typeof OarConfigSchema>;

/** Read and validate a config file; a missing default file is an empty config, a missing named file an error. */
export async function loadConfig(
  path: string | undefined,
  cwd: string,
): Promise<{ config: OarConfig; baseDir: string }> {
  const file = resolve(cwd, path ?? CONFIG_FILE);
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if (path === undefined && (error as NodeJS.ErrnoException).code === 'ENOENT') {
      return { config: OarConfigSchema.parse({}), baseDir: cwd };
    }
    throw new OarRuntimeError('config_unreadable', `cannot read config ${file}: ${(error as Error).message}`);
  }
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

async function loadToolModule(spec: string, baseDir: string): Promise<AnyTool[]> {
  const url = spec.startsWith('.') || isAbsolute(spec) ? pathToFileURL(resolve(baseDir, spec)).href : spec;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(url)) as Record<string, unknown>;
  } catch (error) {
    throw new OarRuntimeError('tool_module_unloadable', `cannot load tool module ${spec}: ${(error as Error).message}`);
  }
  const exported = mod.tools ?? mod.default;
  const list = Array.isArray(exported) ? exported : exported ? [exported] : [];
  if (list.length === 0 || !list.every((t) => t && typeof t === 'object' && 'name' in t && 'execute' in t)) {
    throw new OarRuntimeError(
      'invalid_tool_module',
      `${spec} must export tools (default or "tools"): ToolDefinition objects`,
    );
  }
  return list as AnyTool[];
}

export interface BuildOptions {
  cwd: string;
  env: Record<string, string | undefined>;
  /** Overrides of the config (CLI flags). */
  store?: string;
  model?: string;
  workspace?: string;
  agent?: string;
  resumeOnStart?: boolean;
}

/**
 * Build a runtime from a config: open the store, load the tools, resolve every agent's model up front (so a
 * missing API key fails at start, not in the middle of a turn).
 */
export async function buildRuntime(
  config: OarConfig,
  baseDir: string,
  options: BuildOptions,
): Promise<{ runtime: Runtime; store: Store }> {
  const modelSpec = options.model ?? config.model;
  if (!modelSpec) {
    throw new OarRuntimeError(
      'model_required',
      'no model configured: pass --model SPEC or set "model" in oar.config.json',
      {
        details: { examples: ['openai:gpt-4.1', 'anthropic:claude-sonnet-4-5', 'script:./script.json'] },
      },
    );
  }
  const tools = new ToolRegistry();
  const builtin = config.tools.builtin;
  for (const tool of workspaceTools()) if (!builtin || builtin.includes(tool.name as never)) tools.register(tool);
  for (const spec of config.tools.modules) for (const tool of await loadToolModule(spec, baseDir)) tools.register(tool);

  const mainAgent: AgentConfig = {
    name: config.agent.name ?? options.agent ?? 'main',
    description: config.agent.description,
    capabilities: config.agent.capabilities,
    carrier: config.agent.carrier,
    ...(config.agent.systemPrompt ? { systemPrompt: config.agent.systemPrompt } : {}),
    ...(config.agent.tools ? { tools: config.agent.tools } : {}),
  };
  const agents: AgentConfig[] = config.agents.map((a) => ({
    ...a,
    ...(a.systemPrompt ? { systemPrompt: a.systemPrompt } : {}),
  }));
  const handles = new Map<string, ModelHandle>();
  for (const agent of [mainAgent, ...agents]) {
    // A spec given on the command line is relative to the working directory; one from the file, to the file.
    const spec = agent.model ?? modelSpec;
    const resolved = await resolveModel(spec, {
      models: config.models,
      cwd: options.model !== undefined && spec === options.model ? options.cwd : baseDir,
      env: options.env,
      ...(agent.name !== mainAgent.name ? { agent: agent.name } : {}),
    });
    handles.set(agent.name, {
      model: resolved.model,
      provider: resolved.info.provider,
      modelId: resolved.info.modelId,
      supportsForcedToolChoice: resolved.info.supportsForcedToolChoice,
    });
  }
  const storeUrl = options.store ?? options.env.OAR_STORE ?? config.store;
  const store = await Store.open(storeUrl, { cwd: options.cwd });
  // A runtime that cannot start (missing workspace, …) must not leave its store open.
  const runtime = await Runtime.create({
    store,
    workspaceRoot: options.workspace
      ? resolve(options.cwd, options.workspace)
      : config.workspace
        ? resolve(baseDir, config.workspace)
        : options.cwd,
    tools,
    mainAgent,
    agents,
    model: (agent) => {
      const handle = handles.get(agent.name);
      if (!handle) throw new OarRuntimeError('unknown_agent', `agent "${agent.name}" has no model`);
      return handle;
    },
    permissions: config.permissions,
    limits: { ...DEFAULT_LIMITS, ...config.limits },
    queuePolicy: config.queuePolicy,
    onProtocolFailure: config.onProtocolFailure,
    ...(options.resumeOnStart === false ? { resumeOnStart: false } : {}),
  }).catch(async (error: unknown) => {
    await store.close();
    throw error;
  });
  return { runtime, store };
}
