import { FALLBACK_CLASSES, modelChain } from '../../config/models.js';
import type { EventDraft } from '../../log/draft.js';
import type { ModelHandle } from '../../models/model-call.js';
import { contextWindowOf, outputReserveOf } from '../../models/windows.js';
import type { AgentConfig, BoundConfig } from '../../scheduler/engine.js';

/**
 * Routing over an agent's model choice (docs/models.md "Chains and fallback"): the candidates of its chain, each
 * resolved in order (one that cannot be — a key not set, an unknown name — is excluded with the reason), the
 * decision recorded once per turn, and the move to the next candidate when a call gives up on one for a class
 * the chain falls back on. Each step starts again from the first candidate: a primary that recovered is used.
 */

export interface ModelCandidate {
  /** The spec as configured; '' when the process supplies the model without one (a host's own model). */
  spec: string;
  handle: ModelHandle;
}

export interface ResolvedChain {
  candidates: ModelCandidate[];
  /** Why a candidate is not used: it cannot be resolved, or lacks a capability the task needs (`capabilityGap`). */
  excluded: { spec: string; reason: string; capabilityGap?: string; contextWindow?: number; required?: number }[];
  fallbackOn: readonly string[];
}

export async function resolveChain(
  engine: Pick<BoundConfig, 'model' | 'binding'>,
  agent: AgentConfig,
): Promise<ResolvedChain> {
  const choice = agent.model ?? engine.binding.model;
  const { specs, fallbackOn } =
    choice === undefined ? { specs: [''], fallbackOn: FALLBACK_CLASSES } : modelChain(choice);
  const candidates: ModelCandidate[] = [];
  const excluded: ResolvedChain['excluded'] = [];
  for (const spec of specs) {
    try {
      // One spec at a time: the host resolves (and caches) each candidate as the agent's model.
      const handle = await engine.model(spec === '' ? agent : { ...agent, model: spec });
      candidates.push({ spec, handle });
    } catch (error) {
      excluded.push({ spec, reason: error instanceof Error ? error.message : String(error) });
    }
  }
  return { candidates, excluded, fallbackOn };
}

const label = (candidate: ModelCandidate) => candidate.spec || candidate.handle.modelId;

/** How the turn's model was chosen, recorded before its first call. */
export function routingFacts(ids: { threadId: string; turnId: string }, chain: ResolvedChain): EventDraft[] {
  const [selected] = chain.candidates;
  if (!selected) return [];
  const total = chain.candidates.length + chain.excluded.length;
  if (total === 1) {
    return [
      {
        type: 'routing.single_candidate',
        ...ids,
        payload: {
          candidateCount: 1,
          selectedModel: selected.handle.modelId,
          provider: selected.handle.provider,
          decisionSource: 'configuration',
          reason: 'the only candidate: one model is configured',
          // The chain given is the capable one (capableChain): a single candidate lacks nothing the call needs.
          capabilityGap: 'none',
        },
      },
    ];
  }
  return [
    {
      type: 'routing.candidates.resolved',
      ...ids,
      payload: {
        candidateCount: chain.candidates.length,
        candidates: chain.candidates.map((c) => ({
          spec: label(c),
          modelId: c.handle.modelId,
          provider: c.handle.provider,
        })),
        excluded: chain.excluded,
        fallbackOn: chain.fallbackOn,
        decisionSource: 'configuration',
      },
    },
    {
      type: 'routing.decided',
      ...ids,
      payload: {
        selectedModel: selected.handle.modelId,
        provider: selected.handle.provider,
        candidateCount: chain.candidates.length,
        fallback: false,
        reason:
          chain.excluded.length > 0
            ? `first usable candidate of the chain (${chain.excluded.length} excluded)`
            : 'first candidate of the chain',
        decisionSource: 'configuration',
      },
    },
  ];
}

/** The candidate a call moves on to after giving up on `current` for `failureClass`, if the chain allows it. */
export function nextCandidate(chain: ResolvedChain, current: number, failureClass: string): number | undefined {
  if (!chain.fallbackOn.includes(failureClass)) return undefined;
  return current + 1 < chain.candidates.length ? current + 1 : undefined;
}

/** The fact of a fallback: from which model to which, on what, after how many attempts. */
export function fallbackApplied(
  ids: { threadId: string; turnId: string },
  from: ModelCandidate,
  to: ModelCandidate,
  trigger: string,
  attempts: number,
): EventDraft {
  return {
    type: 'routing.fallback.applied',
    ...ids,
    payload: {
      from: from.handle.modelId,
      to: to.handle.modelId,
      fromProvider: from.handle.provider,
      toProvider: to.handle.provider,
      trigger,
      attempts,
      selectedModel: to.handle.modelId,
      decisionSource: 'fallback',
    },
  };
}

/**
 * What the turn's next call needs of a model (the standard's task profile): tool calling when the agent speaks
 * the tool carrier, and a context window that holds the prompt and the answer's reserve.
 */
export interface TaskProfile {
  taskKind: 'agent_turn' | 'tool_worker';
  agent: string;
  carrier: 'tool' | 'text';
  requiresToolCalling: boolean;
  promptTokenEstimate: number;
}

/**
 * The chain without the candidates that cannot serve the profile: no tool calling under the tool carrier, or a
 * known context window smaller than the prompt estimate plus the model's output reserve. Each exclusion keeps its
 * reason and the capability it lacks; an unknown window never excludes.
 */
export function capableChain(chain: ResolvedChain, profile: TaskProfile): ResolvedChain {
  const candidates: ModelCandidate[] = [];
  const excluded = [...chain.excluded];
  for (const candidate of chain.candidates) {
    const { handle } = candidate;
    if (profile.requiresToolCalling && handle.toolCalling === false) {
      excluded.push({
        spec: label(candidate),
        reason: `${handle.modelId} cannot call tools, and agent "${profile.agent}" uses the tool carrier`,
        capabilityGap: 'tool_calling',
      });
      continue;
    }
    const window = contextWindowOf(handle);
    const reserve = handle.maxOutputTokens ?? outputReserveOf(handle);
    if (window !== undefined && window < profile.promptTokenEstimate + reserve) {
      excluded.push({
        spec: label(candidate),
        reason: `the context window of ${handle.modelId} (${window} tokens) is smaller than the prompt (about ${profile.promptTokenEstimate} tokens) plus the answer's reserve (${reserve})`,
        capabilityGap: 'context_window',
        contextWindow: window,
        required: profile.promptTokenEstimate + reserve,
      });
      continue;
    }
    candidates.push(candidate);
  }
  return { ...chain, candidates, excluded };
}

/** `task.profile.resolved`: the requirements routing checks the candidates against, recorded before routing. */
export function taskProfileFact(ids: { threadId: string; turnId: string }, profile: TaskProfile): EventDraft {
  const taskProfile = {
    taskKind: profile.taskKind,
    agent: profile.agent,
    carrier: profile.carrier,
    requirements: {
      toolCalling: profile.requiresToolCalling,
      minContextTokens: profile.promptTokenEstimate,
    },
    promptTokenEstimate: profile.promptTokenEstimate,
  };
  // The turn is the task whose model work the profile describes.
  return { type: 'task.profile.resolved', ...ids, taskId: ids.turnId, taskProfile, payload: taskProfile };
}
