import { createHash } from 'node:crypto';
import { realpathSync, statSync } from 'node:fs';
import { REPLAY_MODES } from '@oar/protocol';
import { z } from 'zod';
import { canonicalJson } from '../kernel/canonical-json.js';
import { OarRuntimeError } from '../kernel/errors.js';
import { BudgetsSchema } from './budgets.js';
import { CliToolConfigSchema } from './cli.js';
import { ExecConfigSchema } from './exec.js';
import { HooksSchema } from './hooks.js';
import { McpServersSchema } from './mcp.js';
import { EnvVarNameSchema, ModelChoiceSchema, ModelsConfigSchema } from './models.js';
import { PermissionsConfigSchema } from './permissions.js';
import { PipelinesSchema, ServicesSchema } from './pipelines.js';
import { RunnerBindingSchema } from './runner-binding.js';

/**
 * A session's binding: the configuration it runs with, recorded as a durable fact when the session is created
 * (`session.created` payload) and changed only by an explicit, recorded command (`session.updated`). Every later
 * step — a respond, a resume, a child agent, a retry, another worker on another machine — runs with the bound
 * configuration, from any directory and with no flags. Secrets are never part of it: models name the environment
 * variables that hold keys, never the keys.
 */

/** The budget when neither the limits nor the model's window give one (the budget of OAR before compaction). */
export const DEFAULT_CONTEXT_BUDGET_TOKENS = 32_000;

/** Limits a runtime enforces; every one has a documented default (docs/engine.md). */
export const RuntimeLimitsSchema = z.strictObject({
  /** Model calls per turn; exceeding it fails the turn with `step_budget_exceeded`. */
  maxSteps: z.number().int().min(1).max(10_000),
  /** Concurrency-safe read-only actions running at once. */
  maxParallel: z.number().int().min(1).max(64),
  /** Nesting depth of sub-agent delegation (1 = the main agent may delegate, its children may not). */
  maxSubagentDepth: z.number().int().min(0).max(8),
  /** Per-tool timeout when the tool declares none. */
  toolTimeoutMs: z.number().int().min(1),
  /**
   * Token budget of the context (system prompt + transcript): an explicit override. Unset (the default), each agent's
   * budget is its model's context window minus the output reserve (docs/models.md "Context budget and compaction").
   */
  contextBudgetTokens: z.number().int().min(512).optional(),
  /** Token budget of one action's observation; larger outputs become a preview + ref. */
  observationTokens: z.number().int().min(16),
  /** Token budget of all observations of one action graph, shared equally by its actions (each also capped above). */
  graphObservationTokens: z.number().int().min(16),
  maxArtifactBytes: z.number().int().min(1),
  /** Attempts per model call, the first included (retryable failures only; default 3). */
  modelAttempts: z.number().int().min(1).max(10).optional(),
  /** The first retry's backoff ceiling; each retry doubles it, full jitter (default 500). */
  modelRetryInitialDelayMs: z.number().int().min(0).optional(),
  /** The longest wait before a retry; a provider asking for longer (retry-after) fails the call (default 60,000). */
  modelRetryMaxDelayMs: z.number().int().min(0).optional(),
  /** One model call's time limit (default 600,000: ten minutes). */
  modelTimeoutMs: z.number().int().min(1).optional(),
  /**
   * How long a streaming model call may produce nothing (no text, no tool arguments, no part at all) before it
   * fails as a `timeout` (retried like one). Default: none (only modelTimeoutMs bounds the call).
   */
  modelIdleTimeoutMs: z.number().int().min(1).optional(),
  /** Tool calls one semantic tool action's worker may make (default 12). */
  toolWorkerToolCalls: z.number().int().min(1).max(256).optional(),
  /** Model calls one tool worker may make, its corrective retries included (default 8). */
  toolWorkerModelCalls: z.number().int().min(1).max(64).optional(),
  /** Tokens (input + output) one tool worker's model calls may use (default 100,000). */
  toolWorkerTokens: z.number().int().min(1_000).optional(),
});
export type RuntimeLimits = z.infer<typeof RuntimeLimitsSchema>;

/**
 * The model-call defaults: not in DEFAULT_LIMITS, so bindings recorded before these limits existed (which lack
 * them) and new ones that do not set them hash and behave alike.
 */
export const MODEL_CALL_DEFAULTS = {
  attempts: 3,
  initialDelayMs: 500,
  maxDelayMs: 60_000,
  timeoutMs: 600_000,
} as const;

/** The tool worker's bounds, kept out of DEFAULT_LIMITS for the same reason as MODEL_CALL_DEFAULTS. */
export const TOOL_WORKER_DEFAULTS = { toolCalls: 12, modelCalls: 8, tokens: 100_000 } as const;

export const DEFAULT_LIMITS: RuntimeLimits = {
  maxSteps: 24,
  maxParallel: 4,
  maxSubagentDepth: 2,
  toolTimeoutMs: 120_000,
  observationTokens: 2_000,
  graphObservationTokens: 16_000,
  maxArtifactBytes: 16 * 1024 * 1024,
};

/**
 * An agent's context compaction: past `threshold` of its context budget, the turns before the last `keepTurns`
 * finished ones are summarised by its model (`summaryTokens` at most) and shown as that summary from then on.
 */
export const CompactionConfigSchema = z.strictObject({
  /** false: never compact automatically (`oar compact` still can). Default true. */
  enabled: z.boolean().optional(),
  /** The fraction of the context budget past which compaction triggers (default 0.8). */
  threshold: z.number().min(0.1).max(1).optional(),
  /** Finished turns kept verbatim after the summary (default 1; fewer when nothing else could be compacted). */
  keepTurns: z.number().int().min(0).max(100).optional(),
  /** The summary's length limit in tokens (default: a fifth of the budget, at most 2,000). */
  summaryTokens: z.number().int().min(64).max(32_000).optional(),
});
export type CompactionConfig = z.infer<typeof CompactionConfigSchema>;

/** An agent: the main agent of a session or a sub-agent it may delegate to. */
export const AgentSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'agent names use letters, digits, "_", "." and "-"'),
  description: z.string().default(''),
  capabilities: z.array(z.string()).default([]),
  systemPrompt: z.string().optional(),
  /** Model spec or chain for this agent; the binding's default model when omitted. */
  model: ModelChoiceSchema.optional(),
  carrier: z.enum(['tool', 'text']).default('tool'),
  /** Tool names this agent may use (all bound tools when omitted). */
  tools: z.array(z.string()).optional(),
  /**
   * What ends a turn whose output still breaks the protocol after the corrective retry: `fail` (the turn fails
   * and carries the model's text) or `plain_text` (the text is the answer, nothing executed). The binding's
   * `onProtocolFailure` when omitted.
   */
  onProtocolFailure: z.enum(['fail', 'plain_text']).optional(),
  /**
   * How earlier graphs are replayed to this agent (docs/protocol.md "Replay modes"): `compressed` (default: calls
   * and observations), `hybrid` (also the declarations of recent turns), `full` (every declaration).
   */
  replay: z.enum(REPLAY_MODES).optional(),
  /** When and how this agent's context is compacted (docs/models.md "Context budget and compaction"). */
  compaction: CompactionConfigSchema.optional(),
  /**
   * Run this agent's turns on an AgentRunner instead of the protocol loop (docs/runners.md): the runner's id, its
   * package, binding config and policy. Absent for protocol agents, so their bindings keep their hash.
   */
  runner: RunnerBindingSchema.optional(),
});
export type AgentConfig = z.infer<typeof AgentSchema>;

/**
 * Which environment variables hold secrets beyond the provider keys (those are always secret): their values are
 * redacted wherever output is recorded or shown (docs/security.md). Names only, never values.
 */
export const SecretsConfigSchema = z.strictObject({
  env: z.array(EnvVarNameSchema).default([]),
});
export type SecretsConfig = z.infer<typeof SecretsConfigSchema>;

export const SessionBindingSchema = z.strictObject({
  mainAgent: AgentSchema,
  agents: z.array(AgentSchema),
  /** The default model spec or chain (agents without their own). Script files are absolute paths. */
  model: ModelChoiceSchema.optional(),
  /** Configured models the specs may name (environment variable NAMES for keys, never values). */
  models: ModelsConfigSchema,
  /** The model of semantic tool actions' workers; the declaring agent's model when omitted (docs/protocol.md). */
  toolWorkerModel: ModelChoiceSchema.optional(),
  /** Absolute real path every workspace tool is confined to. */
  workspaceRoot: z.string().min(1),
  /** Names of the tools the session's agents are offered. */
  tools: z.array(z.string()),
  /** Tool modules to load (absolute paths or package names) for tools that are not built in. */
  toolModules: z.array(z.string()),
  permissions: PermissionsConfigSchema,
  limits: RuntimeLimitsSchema,
  /** A turn submitted while the thread is busy waits in the queue or is rejected. */
  queuePolicy: z.enum(['queue', 'reject']),
  /** After a failed corrective retry: fail the turn or show the model's text as the answer. */
  onProtocolFailure: z.enum(['fail', 'plain_text']),
  /**
   * Environment variables named as secrets (names only). Absent in bindings recorded before the field existed and
   * when the list is empty, so such bindings keep their hash.
   */
  secrets: SecretsConfigSchema.optional(),
  /**
   * Configured pipelines (deterministic flows of tool calls) and services (HTTP integrations) the agents may call
   * (docs/executors.md). Absent when empty, like `secrets`, so bindings recorded without them keep their hash.
   */
  pipelines: PipelinesSchema.optional(),
  services: ServicesSchema.optional(),
  /** Spending limits per turn and per session (docs/models.md "Budgets"). Absent when none, like `secrets`. */
  budgets: BudgetsSchema.optional(),
  /** A business CLI behind one tool (docs/tool-protocol.md); absolute paths. Absent when none, like `secrets`. */
  cli: CliToolConfigSchema.optional(),
  /** The `exec` and `process` tools' configuration (docs/commands.md). Absent when exec is off, like `secrets`. */
  exec: ExecConfigSchema.optional(),
  /** Hooks in the path of tool and model calls (docs/hooks.md); absolute paths. Absent when none, like `secrets`. */
  hooks: HooksSchema.optional(),
  /** MCP servers whose tools join the inventory as `server.tool` (docs/mcp.md). Absent when none, like `secrets`. */
  mcpServers: McpServersSchema.optional(),
});
export type SessionBinding = z.infer<typeof SessionBindingSchema>;

/** What `updateBinding` may change; agents are replaced whole, limits merged. */
export const BindingUpdateSchema = SessionBindingSchema.partial().extend({
  limits: RuntimeLimitsSchema.partial().optional(),
});
export type BindingUpdate = z.infer<typeof BindingUpdateSchema>;

/** The content hash of a binding: stable across key order, so equal configurations have equal hashes. */
export function bindingHash(binding: SessionBinding): string {
  return `sha256:${createHash('sha256').update(canonicalJson(binding)).digest('hex')}`;
}

/**
 * The binding after an update: validated whole, so an update can never leave a session unrunnable by shape. An
 * update's `secrets: {env: []}` clears the names: a binding without any has no `secrets` in its JSON (the record)
 * nor in its hash, as one created without any; names are kept sorted and unique, as a new session records them.
 */
export function applyBindingUpdate(binding: SessionBinding, update: BindingUpdate): SessionBinding {
  const next = SessionBindingSchema.parse({
    ...binding,
    ...update,
    limits: { ...binding.limits, ...(update.limits ?? {}) },
  });
  // Cleared, a field stays an own property set to undefined: JSON and `bindingHash` leave it out, and a
  // field-by-field comparison with the binding before (what an update reports as changed) still sees it go.
  const executors = {
    pipelines: next.pipelines?.length ? next.pipelines : undefined,
    services: next.services?.length ? next.services : undefined,
    hooks: next.hooks?.length ? next.hooks : undefined,
    mcpServers: next.mcpServers?.length ? next.mcpServers : undefined,
  };
  if (!next.secrets || next.secrets.env.length === 0) return { ...next, ...executors, secrets: undefined };
  return { ...next, ...executors, secrets: { ...next.secrets, env: [...new Set(next.secrets.env)].sort() } };
}

/** A binding with an update applied; the workspace becomes an absolute real path that must exist. */
export function bindingWith(base: SessionBinding, update: BindingUpdate | undefined): SessionBinding {
  const merged = update ? applyBindingUpdate(base, update) : base;
  let workspaceRoot: string;
  try {
    workspaceRoot = realpathSync(merged.workspaceRoot);
  } catch {
    throw new OarRuntimeError('workspace_unavailable', `workspace ${merged.workspaceRoot} does not exist`, {
      details: { workspace: merged.workspaceRoot },
    });
  }
  if (!statSync(workspaceRoot).isDirectory()) {
    throw new OarRuntimeError('workspace_unavailable', `workspace ${merged.workspaceRoot} is not a directory`, {
      details: { workspace: merged.workspaceRoot },
    });
  }
  return { ...merged, workspaceRoot };
}

/**
 * What an update given from outside (a caller's JSON) makes of a binding, and its hash: `invalid_binding` with the
 * schema's issues when the update is not one, `workspace_unavailable` when its workspace is not a directory.
 */
export function updatedBinding(base: SessionBinding, update: unknown): { binding: SessionBinding; hash: string } {
  const parsed = BindingUpdateSchema.optional().safeParse(update);
  if (!parsed.success) {
    throw new OarRuntimeError('invalid_binding', 'the binding update is invalid', {
      details: { issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })) },
    });
  }
  const binding = bindingWith(base, parsed.data);
  return { binding, hash: bindingHash(binding) };
}
