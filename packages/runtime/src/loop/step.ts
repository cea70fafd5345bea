import type { Catalog } from '@oar/protocol';
import { executorCatalog } from '../config/pipelines.js';
import type { ModelHandle } from '../models/model-call.js';
import type { ThreadView } from '../read-models/thread-state.js';
import type { AgentConfig, Engine } from '../scheduler/engine.js';
import type { ContextBudget } from './context/compaction.js';
import type { AssembledContext, CompactionSummary } from './context/context.js';
import type { ResolvedChain } from './model/model-chain.js';

/** What the phases of a model step share (loop/model-step.ts). */

/** prepareStep's answer when a budget stops the call and the thread waits (`waiting_resource`). */
export const WAITING = Symbol('waiting_resource');

/** What the model call needs, with the facts about it already recorded: the hand-off from prepare to call. */
export interface PreparedStep {
  agent: AgentConfig;
  /** The first candidate of the chain: the model this step calls first. */
  model: ModelHandle;
  chain: ResolvedChain;
  catalog: Catalog;
  /** The context of the call; replaced when a compaction follows a `context_overflow` (callStep). */
  context: AssembledContext;
  /** The agent's context budget with the step's first model, and the answer's limit sent with the call. */
  budget: ContextBudget;
  /** A compaction already ran for this step: an overflow then falls back (or fails) as any failure. */
  compacted: boolean;
  reassemble: (thread: ThreadView) => Promise<AssembledContext>;
  measure: (thread: ThreadView, summary: CompactionSummary | undefined) => number;
}

/** What the agent is offered in a step of the thread. */
export function stepCatalog(engine: Engine, thread: ThreadView, agent: AgentConfig): Catalog {
  return {
    tools: engine.tools.catalog().filter((t) => !agent.tools || agent.tools.includes(t.name)),
    // A tool worker calls tools only; a sub-agent at the depth limit may not delegate further.
    agents:
      thread.toolWorker || thread.depth + 1 > engine.limits.maxSubagentDepth
        ? []
        : engine.agents
            .filter((a) => a.name !== agent.name)
            .map((a) => ({ name: a.name, description: a.description, capabilities: a.capabilities })),
    // Pipelines and services are the agent's to call; a tool worker has only the tools its action named.
    ...(thread.toolWorker ? {} : executorCatalog(engine.binding, agent)),
  };
}
