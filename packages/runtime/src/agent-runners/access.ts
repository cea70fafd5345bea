import type { AgentRunnerManifest, ContextAPICapabilities, MODEL_OPS } from '@oar/runner-sdk';
import type { RunnerPolicy } from '../config/runner-binding.js';

type ModelOp = (typeof MODEL_OPS)[number];

/**
 * A run's effective access: manifest permissions ∩ binding policy ∩ run scope, computed once when the run starts and
 * frozen for it (every proxy call is checked against this object, never against anything the runner sends). It
 * holds ids and operations only, so it is recorded as it is.
 */
export interface RunAccess {
  models: string[];
  /** `rerank` is granted like the others; a model whose provider offers no reranking refuses it when called. */
  modelOps: ModelOp[];
  tools: string[];
  toolOps: ('detail' | 'call')[];
  knowledgeBases: string[];
  knowledgeOps: ('list' | 'retrieve')[];
  history: ('page' | 'search')[];
  events: ('get' | 'page')[];
  artifacts: ('metadata' | 'read')[];
  state: boolean;
  storage: ('plugin' | 'workspace' | 'binding')[];
  /** Platform actions the runner may ask for (each still needs an approval): manifest ∩ binding, none by default. */
  platformActions: string[];
  env: string[];
  timeoutMs: number;
  callsPerMinute: number;
}

/** What the run itself may reach: the models the agent's binding can resolve, the tools the agent is offered. */
export interface RunScope {
  models: string[];
  tools: string[];
  /** The knowledge bases the binding declares. */
  knowledgeBases: string[];
}

export const DEFAULT_RUNNER_TIMEOUT_MS = 600_000;
export const DEFAULT_CALLS_PER_MINUTE = 600;

const within = <T extends string>(asked: readonly T[], allowed: readonly string[] | undefined): T[] =>
  allowed === undefined ? [...asked] : asked.filter((x) => allowed.includes(x));

export function computeAccess(
  manifest: AgentRunnerManifest,
  policy: RunnerPolicy | undefined,
  scope: RunScope,
): RunAccess {
  const p = manifest.permissions;
  const modelOps = [...p.models];
  const toolOps = [...p.tools];
  return {
    models: modelOps.length ? within(scope.models, policy?.models) : [],
    modelOps,
    tools: toolOps.length ? within(scope.tools, policy?.tools) : [],
    toolOps,
    knowledgeBases: p.knowledge_bases.length ? within(scope.knowledgeBases, policy?.knowledgeBases) : [],
    knowledgeOps: [...p.knowledge_bases],
    history: within(p.history, policy?.history),
    events: within(p.events, policy?.events),
    artifacts: within(p.artifacts, policy?.artifacts),
    // Host-owned state needs no manifest permission (the spec has none), but a binding can switch it off.
    state: policy?.state !== false,
    storage: within(p.storage, policy?.storage),
    // Off unless the manifest declares the capability and the action, and the binding names the action too.
    platformActions: manifest.capabilities.platform_api
      ? p.platform_api.filter((action) => (policy?.platformActions ?? []).includes(action))
      : [],
    env: [...(policy?.env ?? [])].sort(),
    timeoutMs: policy?.timeoutMs ?? DEFAULT_RUNNER_TIMEOUT_MS,
    callsPerMinute: policy?.callsPerMinute ?? DEFAULT_CALLS_PER_MINUTE,
  };
}

/** ctx.context.available_apis: true exactly for what the access grants and this host implements. */
export function availableApis(access: RunAccess): ContextAPICapabilities {
  return {
    history_page: access.history.includes('page'),
    history_search: access.history.includes('search'),
    event_get: access.events.includes('get'),
    event_page: access.events.includes('page'),
    artifact_metadata: access.artifacts.includes('metadata'),
    artifact_read: access.artifacts.includes('read'),
    state: access.state,
    storage: access.storage.length > 0,
  };
}
