import type { AppendGuard, EventDraft, EventLog } from './log/event-log.js';
import type { PermissionsConfig } from './policy/permission-schema.js';
import type { ThreadView } from './read-models/thread-state.js';
import type { ModelHandle } from './runner/model-call.js';
import type { Store } from './store/store.js';
import type { ToolRegistry } from './tools/registry.js';

/** Limits a runtime enforces; every one has a documented default (docs/engine.md). */
export interface RuntimeLimits {
  /** Model calls per turn; exceeding it fails the turn with `step_budget_exceeded`. */
  maxSteps: number;
  /** Concurrency-safe read-only actions running at once. */
  maxParallel: number;
  /** Nesting depth of sub-agent delegation (1 = the main agent may delegate, its children may not). */
  maxSubagentDepth: number;
  /** Per-tool timeout when the tool declares none. */
  toolTimeoutMs: number;
  /** Token budget of the context (system prompt + transcript). */
  contextBudgetTokens: number;
  /** Token budget of one action's observation; larger outputs become a preview + ref. */
  observationTokens: number;
  /** Token budget of all observations of one action graph, shared equally by its actions (each also capped above). */
  graphObservationTokens: number;
  maxArtifactBytes: number;
}

export const DEFAULT_LIMITS: RuntimeLimits = {
  maxSteps: 24,
  maxParallel: 4,
  maxSubagentDepth: 2,
  toolTimeoutMs: 120_000,
  contextBudgetTokens: 32_000,
  observationTokens: 2_000,
  graphObservationTokens: 16_000,
  maxArtifactBytes: 16 * 1024 * 1024,
};

export interface AgentConfig {
  name: string;
  description: string;
  capabilities: string[];
  systemPrompt?: string;
  /** Model spec for this agent; the runtime's default model when omitted. */
  model?: string;
  carrier: 'tool' | 'text';
  /** Tool names this agent may use (all registered tools when omitted). */
  tools?: string[];
}

/** What the runner and the executors share: the store, the log, configuration and the per-thread drivers. */
export interface Engine {
  readonly store: Store;
  readonly log: EventLog;
  readonly runtimeId: string;
  readonly workspaceRoot: string;
  readonly tools: ToolRegistry;
  readonly agents: readonly AgentConfig[];
  readonly mainAgent: AgentConfig;
  readonly permissions: PermissionsConfig;
  readonly limits: RuntimeLimits;
  readonly onProtocolFailure: 'fail' | 'plain_text';
  model(agent: AgentConfig): ModelHandle;
  /** The thread's current abort signal (replaced after each interrupt). */
  signal(threadId: string): AbortSignal;
  /** Make sure the thread's driver runs (after a command changed what it can do). */
  kick(sessionId: string, threadId: string): void;
  loadThread(sessionId: string, threadId: string): Promise<ThreadView>;
  /**
   * Append events in one transaction. `defer` holds them back to be written with the session's next append (one
   * commit instead of two); use it only for facts whose loss in a crash is harmless, such as a model call's
   * completion, which a restart simply repeats.
   */
  append(sessionId: string, drafts: EventDraft[], options?: { defer?: boolean; guard?: AppendGuard }): Promise<void>;
}

export function agentByName(engine: Engine, name: string): AgentConfig | undefined {
  if (name === engine.mainAgent.name) return engine.mainAgent;
  return engine.agents.find((agent) => agent.name === name);
}
