import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import { CONFIG_FILE } from '../kernel/constants.js';
import { OarRuntimeError } from '../kernel/errors.js';
import { checkJsonDepth, INPUT_FILE_LIMITS, readBoundedText } from '../kernel/input-files.js';
import { AgentSchema, RuntimeLimitsSchema, SecretsConfigSchema } from './binding.js';
import { BudgetsSchema } from './budgets.js';
import { CliToolConfigSchema } from './cli.js';
import { ExecConfigSchema } from './exec.js';
import { HooksSchema } from './hooks.js';
import { McpServersSchema } from './mcp.js';
import { ModelChoiceSchema, ModelsConfigSchema } from './models.js';
import { PermissionsConfigSchema } from './permissions.js';
import { PipelinesSchema, ServicesSchema } from './pipelines.js';
import { ProviderLimitsSchema } from './provider-limits.js';
import { RetentionSchema } from './retention.js';
import { NPM_ENTRY_PREFIX, NPM_PACKAGE_NAME } from './runner-binding.js';
import { SchedulesSchema } from './schedules.js';

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
  /**
   * How long stored outputs are kept: `artifacts` (`maxAgeDays`, `keep`, `sweepEveryMinutes`, `batchSize`), swept by
   * `oar artifacts expire` and by long-lived workers; not part of a binding (docs/reliability.md "Artifact retention").
   */
  retention: RetentionSchema.default({}),
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
  /**
   * Agents on a timetable (docs/schedules.md): each a cron expression, what a firing starts (a turn, a new session,
   * a job) and the binding and budget of the sessions it creates; added to the store when a worker starts.
   */
  schedules: SchedulesSchema.default([]),
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
