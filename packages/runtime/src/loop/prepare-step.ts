import { oarError } from '@oar/protocol';
import { threadAgent, toolWorkerSpent } from '../executors/tool-worker.js';
import { turnIds } from '../facts/turn-end.js';
import type { EventDraft } from '../log/draft.js';
import { costEstimated } from '../models/cost.js';
import type { ModelHandle } from '../models/model-call.js';
import type { ThreadView, TurnState } from '../read-models/thread-state.js';
import type { AgentConfig, Engine } from '../scheduler/engine.js';
import { inventoryChanged } from '../tools/mcp/inventory.js';
import { budgetGate } from './budgets/budget-gate.js';
import { compactionSummary, compactThread, contextBudget, overTrigger } from './context/compaction.js';
import { assembleContext, type CompactionSummary } from './context/context.js';
import {
  capableChain,
  type ResolvedChain,
  resolveChain,
  routingFacts,
  type TaskProfile,
  taskProfileFact,
} from './model/model-chain.js';
import { type PreparedStep, stepCatalog, WAITING } from './step.js';
import { failTurn } from './turn-end.js';
import { beforeModelCall } from './turn-hooks.js';

/** Phase 1 of a model step (loop/model-step.ts): what the call needs, and the facts recorded before it. */
/** Phase 1: check the step budget, resolve the model, build the catalog and context, record them. */
export async function prepareStep(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
): Promise<PreparedStep | typeof WAITING | undefined> {
  if (turn.modelSteps >= engine.limits.maxSteps) {
    await failTurn(
      engine,
      thread,
      turn,
      oarError('step_budget_exceeded', `the turn used its budget of ${engine.limits.maxSteps} model steps`, {
        details: { maxSteps: engine.limits.maxSteps },
      }),
    );
    return undefined;
  }
  const spent = toolWorkerSpent(thread, turn.modelSteps);
  if (spent) {
    await failTurn(engine, thread, turn, spent);
    return undefined;
  }
  const agent = threadAgent(engine, thread);
  const chain = await resolveModel(engine, thread, turn, agent);
  let model = chain?.candidates[0]?.handle;
  if (!chain || !model) return undefined;
  const catalog = stepCatalog(engine, thread, agent);
  const responsePolicy = thread.runs.get(turn.runIds.at(-1) ?? '')?.declaration.responsePolicy;
  const budget = contextBudget(engine.limits, agent, model);
  const options = {
    ...(turn.pendingCorrection ? { correction: turn.pendingCorrection } : {}),
    ...(responsePolicy ? { responsePolicy } : {}),
    // Reads a rule explicitly allows, unredacted for this model request only (docs/security.md).
    ...(engine.revealed ? { revealed: engine.revealed } : {}),
  };
  // The context as the model would get it now (a compacted thread: its summary, then the turns after it).
  const assemble = async (view: ThreadView) => {
    const summary = await compactionSummary(engine, view);
    return assembleContext(view, agent, catalog, {
      budgetTokens: budget.budgetTokens,
      ...options,
      ...(summary ? { summary } : {}),
    });
  };
  const measure = (view: ThreadView, summary: CompactionSummary | undefined) =>
    assembleContext(view, agent, catalog, {
      budgetTokens: Number.MAX_SAFE_INTEGER,
      ...options,
      ...(summary ? { summary } : {}),
    }).tokenEstimate;
  let context = await assemble(thread);
  let compacted = false;
  // Past the agent's threshold, the older finished turns are compacted before the call (docs/models.md).
  if (agent.compaction?.enabled !== false && overTrigger(context, budget)) {
    const outcome = await compactThread(engine, thread, { trigger: 'threshold', agent, model, budget, measure });
    if (outcome.status === 'interrupted') return undefined;
    if (outcome.status !== 'nothing_to_compact') {
      compacted = true;
      thread = await engine.loadThread(thread.sessionId, thread.threadId);
      context = await assemble(thread);
    }
  }
  // Candidates that cannot serve this call (no tool calling for the tool carrier, too small a window) are out.
  const capable = capableChain(chain, stepProfile(thread, agent, context.tokenEstimate));
  const first = capable.candidates[0]?.handle;
  if (!first) {
    await noCapableModel(engine, thread, turn, agent, capable, context.tokenEstimate);
    return undefined;
  }
  model = first;
  const prepared: PreparedStep = {
    agent,
    model,
    chain: capable,
    catalog,
    context,
    budget,
    compacted,
    reassemble: assemble,
    measure,
  };
  // before_model_call hooks (docs/hooks.md): they may stop the call or rewrite what it is sent.
  const hooked = await beforeModelCall(engine, thread, turn, prepared.context, model, engine.signal(thread.threadId));
  if ('error' in hooked) {
    await failTurn(engine, thread, turn, hooked.error);
    return undefined;
  }
  prepared.context = hooked.context;
  // A call that would exceed a budget is not made: the thread waits for a higher limit, or the turn fails.
  const gate = await budgetGate(engine, thread, turn, model, prepared.context.tokenEstimate);
  if (gate.status === 'waiting') return WAITING;
  if (gate.status === 'failed') {
    await failTurn(engine, thread, turn, gate.error);
    return undefined;
  }
  // The step boundary: everything the previous step staged is committed with the request, before the call (not
  // flushed unless a fact needs it: a power cut can only make this step run again, log/durability.ts).
  await engine.append(
    thread.sessionId,
    [
      ...(turn.modelSteps === 0 ? firstStepFacts(engine, thread, turn, prepared) : rerouted(thread, turn, prepared)),
      // The inventory changed since the previous step (an MCP server's list_changed): recorded again.
      ...inventoryChanged(engine.tools, turnIds(thread, turn), catalog.tools, turn.modelSteps === 0),
      ...requestFacts(engine, thread, turn, prepared),
    ],
    { commit: true },
  );
  return prepared;
}

/** The agent's model chain; when no candidate can serve it, an honest routing fact and a turn that fails with the cause. */
export async function resolveModel(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  agent: AgentConfig,
): Promise<ResolvedChain | undefined> {
  const chain = await resolveChain(engine, agent);
  if (chain.candidates.length > 0) return chain;
  const cause = chain.excluded.map((e) => e.reason).join('; ');
  await engine.append(thread.sessionId, [
    {
      type: 'routing.not_possible',
      ...turnIds(thread, turn),
      payload: {
        candidateCount: 0,
        reason: 'no_model',
        capabilityGap: cause,
        excluded: chain.excluded,
        decisionSource: 'configuration',
      },
    },
  ]);
  await failTurn(
    engine,
    thread,
    turn,
    oarError('no_model', `no model is configured for agent "${agent.name}": ${cause}`),
  );
  return undefined;
}

/** What the step's call needs of a model (the task profile routing checks the candidates against). */
function stepProfile(thread: ThreadView, agent: AgentConfig, promptTokenEstimate: number): TaskProfile {
  return {
    taskKind: thread.toolWorker ? 'tool_worker' : 'agent_turn',
    agent: agent.name,
    carrier: agent.carrier,
    requiresToolCalling: agent.carrier === 'tool',
    promptTokenEstimate,
  };
}

/** The candidates a capability check excluded, as `routing.candidates.resolved` lists them (sorted specs). */
export function capabilityExclusions(chain: ResolvedChain): string[] {
  return chain.excluded
    .filter((e) => e.capabilityGap)
    .map((e) => e.spec)
    .sort();
}

/**
 * A later step whose capability checks exclude other candidates than the turn's routing recorded (the prompt
 * grew past a window): the new profile and decision are recorded with its request.
 */
function rerouted(thread: ThreadView, turn: TurnState, step: PreparedStep): EventDraft[] {
  const now = capabilityExclusions(step.chain);
  if (now.join('\n') === (turn.capabilityExclusions ?? []).join('\n')) return [];
  const ids = turnIds(thread, turn);
  return [
    taskProfileFact(ids, stepProfile(thread, step.agent, step.context.tokenEstimate)),
    ...routingFacts(ids, step.chain),
  ];
}

/** No candidate of the chain has what the call needs: the gap recorded, the turn failed with it. */
async function noCapableModel(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  agent: AgentConfig,
  chain: ResolvedChain,
  promptTokenEstimate: number,
): Promise<void> {
  const gaps = [...new Set(chain.excluded.flatMap((e) => (e.capabilityGap ? [e.capabilityGap] : [])))];
  const ids = turnIds(thread, turn);
  await engine.append(thread.sessionId, [
    taskProfileFact(ids, stepProfile(thread, agent, promptTokenEstimate)),
    {
      type: 'routing.not_possible',
      ...ids,
      payload: {
        candidateCount: 0,
        reason: 'capability_gap',
        capabilityGap: gaps.join(', ') || 'none',
        excluded: chain.excluded,
        decisionSource: 'capability_check',
      },
    },
  ]);
  await failTurn(
    engine,
    thread,
    turn,
    oarError(
      'no_model',
      `no model of agent "${agent.name}"'s chain can serve the call: ${chain.excluded.map((e) => `${e.spec}: ${e.reason}`).join('; ')}`,
      { details: { excluded: chain.excluded, capabilityGap: gaps } },
    ),
  );
}

/** Recorded once per turn, before its first model call: the catalog it offers and how its model was chosen. */
function firstStepFacts(engine: Engine, thread: ThreadView, turn: TurnState, step: PreparedStep): EventDraft[] {
  const { catalog } = step;
  const ids = turnIds(thread, turn);
  return [
    {
      type: 'tool.catalog.resolved',
      ...ids,
      stepId: `${turn.turnId}.catalog`,
      toolCallId: `${turn.turnId}.catalog`,
      payload: {
        tools: engine.tools
          .inventory()
          .filter((t) => catalog.tools.some((c) => c.name === t.name))
          .map((t) => ({
            name: t.name,
            description: t.description,
            capabilities: t.capabilities,
            concurrencySafe: t.isConcurrencySafe,
            readOnly: t.isReadOnly,
            destructive: t.isDestructive,
            idempotent: t.isIdempotent,
            // A business CLI's effective whitelist (binding ∩ router): what this turn's calls may do.
            ...(t.operations ? { operations: t.operations } : {}),
          })),
        agents: catalog.agents.map((a) => ({
          name: a.name,
          description: a.description,
          capabilities: a.capabilities,
        })),
      },
    },
    taskProfileFact(ids, stepProfile(thread, step.agent, step.context.tokenEstimate)),
    ...routingFacts(ids, step.chain),
  ];
}

/** How many omissions one `context.resolved` lists (the most recent ones; `omissionCount` has the total). */
const MAX_LISTED_OMISSIONS = 50;

/** Recorded before every model call: the context it is given and the request itself. */
function requestFacts(_engine: Engine, thread: ThreadView, turn: TurnState, step: PreparedStep): EventDraft[] {
  const { catalog, context } = step;
  const ids = turnIds(thread, turn);
  return [
    {
      type: 'context.resolved',
      ...ids,
      payload: {
        refs: [
          {
            ref: `runtime://threads/${thread.threadId}/transcript`,
            kind: 'transcript',
            tokenEstimate: context.transcript.tokens,
          },
          {
            ref: 'runtime://catalog',
            kind: 'catalog',
            title: `${catalog.tools.length} tools, ${catalog.agents.length} agents`,
          },
          // A compacted thread: the summary its transcript starts with (the context boundary).
          ...(thread.compaction
            ? [
                {
                  ref: thread.compaction.summaryRef,
                  kind: 'compaction_summary',
                  title: `summary of ${thread.compaction.turnCount} turn(s)`,
                },
              ]
            : []),
        ],
        // The most recent omissions only: a long thread under a budget omits more with every step, and listing
        // them all would make every step's fact (and the log) grow with the thread. The count says how many.
        omissions: context.transcript.omitted.slice(-MAX_LISTED_OMISSIONS).map((o) => ({
          ref: o.refs[0] ?? `runtime://threads/${thread.threadId}/turns/${o.turn}`,
          reason: `${o.reason}:${o.level}`,
        })),
        omissionCount: context.transcript.omitted.length,
        tokenEstimate: context.tokenEstimate,
        tokenBudget: step.budget.budgetTokens,
        ...(thread.compaction
          ? {
              compaction: {
                compactionId: thread.compaction.compactionId,
                throughTurnId: thread.compaction.throughTurnId,
                summaryRef: thread.compaction.summaryRef,
              },
            }
          : {}),
      },
    },
    // 1 for a step's first request; a corrective retry counts on (a provider retry: see callStep).
    modelRequested(thread, turn, step, {
      attempt: turn.pendingCorrection !== undefined ? turn.correctiveRetries + 1 : 1,
    }),
    ...costEstimated(turnIds(thread, turn), step.model, step.context.tokenEstimate),
  ];
}

/** A request to the step's model: its first attempt (`requestFacts`) or a provider retry (`callStep`). */
export function modelRequested(
  thread: ThreadView,
  turn: TurnState,
  step: PreparedStep,
  attempt: { attempt: number; retryOf?: string; fallbackFrom?: string },
  model: ModelHandle = step.model,
): EventDraft {
  const { agent, context } = step;
  return {
    type: 'model.requested',
    ...turnIds(thread, turn),
    payload: {
      modelId: model.modelId,
      provider: model.provider,
      ...attempt,
      corrective: turn.pendingCorrection !== undefined,
      messageCount: 2,
      toolCount: agent.carrier === 'tool' ? 1 : 0,
      inputTokenEstimate: context.tokenEstimate,
    },
  };
}
