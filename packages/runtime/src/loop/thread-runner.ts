import {
  type ActionResult,
  AGENT_PROTOCOL_TOOL_NAME,
  type Catalog,
  correctiveLine,
  type Declaration,
  type OarError,
  oarError,
  type ParseOutcome,
  parseAssistantText,
  parseToolCall,
  protocolResult,
} from '@oar/protocol';
import { MODEL_CALL_DEFAULTS } from '../config/binding.js';
import { executorCatalog } from '../config/pipelines.js';
import { executeAction } from '../executors/registry.js';
import { threadAgent, toolCallsLeft, toolWorkerSpent } from '../executors/tool-worker.js';
import { artifactCreated } from '../facts/action.js';
import {
  decidedActions,
  decidedRun,
  declarationFault,
  finalReport,
  nextAttemptFacts,
  renderPlan,
} from '../facts/decisions.js';
import { queueChanged, ThreadChangedError, threadUnchanged } from '../facts/queue.js';
import { subagentStatus } from '../facts/subagent-status.js';
import { turnIds } from '../facts/turn-end.js';
import { isClosing, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { waitUnlessAborted } from '../kernel/signals.js';
import type { EventDraft } from '../log/draft.js';
import { costEstimated, costRecorded } from '../models/cost.js';
import { callModel, type ModelHandle, type ModelOutput } from '../models/model-call.js';
import { type ModelFailure, type ModelRetryPolicy, retryDelay } from '../models/model-errors.js';
import { actionHistory } from '../read-models/run.js';
import {
  compactionRange,
  isTerminalRunStatus,
  type RunState,
  type ThreadView,
  type TurnState,
} from '../read-models/thread-state.js';
import type { AgentConfig, Engine } from '../scheduler/engine.js';
import { runFinished, scheduleRun } from '../scheduler/run-scheduler.js';
import { inventoryChanged } from '../tools/mcp/inventory.js';
import { budgetGate } from './budgets/budget-gate.js';
import {
  type ContextBudget,
  compactionSummary,
  compactThread,
  contextBudget,
  overTrigger,
} from './context/compaction.js';
import { type AssembledContext, assembleContext, type CompactionSummary } from './context/context.js';
import {
  capableChain,
  fallbackApplied,
  type ModelCandidate,
  nextCandidate,
  type ResolvedChain,
  resolveChain,
  routingFacts,
  type TaskProfile,
  taskProfileFact,
} from './model/model-chain.js';
import { providerSlot } from './model/provider-slot.js';
import { completeTurn, failTurn } from './turn-end.js';
import { beforeModelCall } from './turn-hooks.js';

/** Runs one turn of an agent bound to a runner (agent-runners/host.ts); true when it made progress. */
export type RunnerTurn = (
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  agent: AgentConfig,
  signal: AbortSignal,
) => Promise<boolean>;

/**
 * The protocol runner loop, one step at a time. `advance` takes the thread's durable state, as its worker just read
 * it, and performs the next step — start a queued turn, continue the current action graph, or make the next model
 * call — so the same function continues a turn after an approval, an interrupt or a process restart.
 * Returns true when it made progress and should be called again. A turn of an agent bound to a runner is one run
 * of `runnerTurn` (agent-runners/host.ts, above the loop: the worker hands it in).
 */
export async function advance(engine: Engine, thread: ThreadView, runnerTurn?: RunnerTurn): Promise<boolean> {
  const { sessionId, threadId } = thread;
  if (thread.status === 'closed') return false;
  // A requested compaction first: it changes only what later model calls are shown, never the turn's work.
  if (thread.compactionRequest) {
    await compactOnRequest(engine, thread);
    return true;
  }
  const turn = thread.turns.find((t) => t.turnId === thread.activeTurnId);
  if (!turn) {
    // An accepted turn was accepted before anything was queued behind it, so it starts first.
    const next = thread.turns.find((t) => t.status === 'accepted') ?? thread.queue[0];
    if (!next) return false;
    const drafts: EventDraft[] = [
      // The turn runs with the binding current now: a later binding update applies to later turns only.
      {
        type: 'turn.started',
        threadId,
        turnId: next.turnId,
        status: 'running',
        payload: { bindingHash: engine.bindingHash },
      },
      ...subagentStatus(thread, next.turnId, 'running', 'the sub-agent started its turn'),
      {
        type: 'thread.updated',
        threadId,
        status: 'running',
        payload: { status: 'running', activeTurnId: next.turnId },
      },
      ...(thread.queue.some((q) => q.turnId === next.turnId)
        ? [
            queueChanged(
              thread,
              thread.queue.filter((q) => q.turnId !== next.turnId),
              'dequeued',
              next.turnId,
            ),
          ]
        : []),
    ];
    try {
      // The dequeue writes a queue computed from this read: a concurrent submit/remove/promote must not be lost.
      await engine.append(sessionId, drafts, { guard: threadUnchanged(thread) });
    } catch (error) {
      if (error instanceof ThreadChangedError) return true; // re-read and decide again
      throw error;
    }
    return true;
  }
  const signal = engine.signal(threadId);
  if (signal.aborted) return false;

  const run = turn.runIds.map((id) => thread.runs.get(id)).findLast((r): r is RunState => r !== undefined);
  if (run && !isTerminalRunStatus(run.status)) {
    if (!runFinished(run)) {
      await scheduleRun(engine, thread, run, signal, executeAction);
      // Interrupted: the interrupt records how the graph ended (cancelled), not an ordinary observation.
      if (signal.aborted) return false;
      const after = await engine.loadThread(sessionId, threadId);
      const updated = after.runs.get(run.runId);
      if (!updated || !runFinished(updated)) return false;
      await observeRun(engine, after, updated);
      return true;
    }
    await observeRun(engine, thread, run);
    return true;
  }
  // An agent bound to a runner runs the turn as one runner run instead of model steps (agent-runners/host.ts).
  const agent = threadAgent(engine, thread);
  if (agent.runner) {
    if (!runnerTurn)
      throw new OarRuntimeError(
        'internal_error',
        `agent "${agent.name}" is bound to a runner, and no runner host is here`,
      );
    return runnerTurn(engine, thread, turn, agent, signal);
  }
  // False while the thread waits for a resource (a budget): nothing to do until a limit changes.
  return modelStep(engine, thread, turn, signal);
}

/** Close a finished graph: the aggregate result, the task attempt's end, and the task's end. */
async function observeRun(engine: Engine, thread: ThreadView, run: RunState): Promise<void> {
  const results = run.order.map(
    (id) => run.actions[id]?.result ?? ({ id, status: 'cancelled', artifacts: [] } as ActionResult),
  );
  const result = protocolResult(run.runId, results, 'continue');
  const ids = { threadId: thread.threadId, turnId: run.turnId, taskId: run.taskId, runId: run.runId };
  const failed = result.status === 'failed';
  const summary = `${results.filter((r) => r.status === 'completed').length}/${results.length} actions completed`;
  await engine.append(thread.sessionId, [
    {
      type: 'run.status',
      ...ids,
      status: result.status === 'completed' ? 'completed' : 'failed',
      payload: { phase: 'observed', status: result.status, title: run.declaration.title ?? 'action graph', result },
    },
    failed
      ? {
          type: 'task.attempt.failed',
          ...ids,
          payload: { retryable: true, error: oarError('actions_failed', summary), failureCategory: 'action_failure' },
        }
      : { type: 'task.attempt.completed', ...ids, payload: { summary } },
    failed
      ? { type: 'task.failed', ...ids, payload: { error: oarError('actions_failed', summary) } }
      : { type: 'task.completed', ...ids, payload: { summary } },
  ]);
}

/**
 * What the corrective request tells the model, in the carrier it uses: under the tool carrier, plain text is
 * answered with "call the tool", not with the text form's rules (which would teach it the wrong carrier).
 */
function describeFault(outcome: ParseOutcome, output: ModelOutput, carrier: AgentConfig['carrier']): string {
  const toolCarrierText = carrier === 'tool' && output.toolCalls.length === 0;
  // Under the tool carrier "no agent-protocol block" is the text form's complaint: the tool line replaces it.
  const errors = toolCarrierText ? outcome.errors.filter((e) => e.code !== 'missing_block') : outcome.errors;
  // correctiveLine joins each message and hint once (no "message.. hint"), the same for every issue code.
  const lines = errors.slice(0, 12).map(correctiveLine);
  if (toolCarrierText) {
    lines.unshift(
      `- [no_tool_call]: You answered in plain text, and plain text is never executed. Call the ${AGENT_PROTOCOL_TOOL_NAME} tool with your declaration.`,
      `  To answer the user, call it with {"kind": "answer", "message": "<your answer>"}; to act, with {"kind": "act", "calls": […]}.`,
    );
  }
  if (output.finishReason === 'length') {
    lines.unshift('- Your output was cut off (token limit): send a shorter declaration.');
  }
  return lines.join('\n');
}

/** How much of the model's text a failed turn carries (it is in model.completed whole). */
const MAX_FAILED_TEXT = 4_000;

function boundedText(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}

async function modelStep(engine: Engine, thread: ThreadView, turn: TurnState, signal: AbortSignal): Promise<boolean> {
  const prepared = await prepareStep(engine, thread, turn);
  if (prepared === WAITING) return false;
  if (!prepared) return true;
  const output = await callStep(engine, thread, turn, prepared, signal);
  if (!output) return true;
  await resolveStep(engine, thread, turn, prepared, output);
  return true;
}

/** prepareStep's answer when a budget stops the call and the thread waits (`waiting_resource`). */
const WAITING = Symbol('waiting_resource');

/** What the model call needs, with the facts about it already recorded: the hand-off from prepare to call. */
interface PreparedStep {
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
function stepCatalog(engine: Engine, thread: ThreadView, agent: AgentConfig): Catalog {
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

/**
 * Act on a `compact` request (control-plane `compact`): compact the thread's finished turns now, under this
 * worker's lease, whatever the threshold. The request ends with `context.compaction.completed` or `.failed`.
 */
async function compactOnRequest(engine: Engine, thread: ThreadView): Promise<void> {
  const request = thread.compactionRequest;
  const turnId = thread.activeTurnId ?? thread.turns.at(-1)?.turnId;
  if (!request || !turnId) return;
  const agent = threadAgent(engine, thread);
  const model = (await resolveChain(engine, agent)).candidates[0]?.handle;
  const fail = (error: OarError) =>
    engine.append(thread.sessionId, [
      {
        type: 'context.compaction.failed',
        threadId: thread.threadId,
        turnId,
        payload: { compactionId: newId('cmp'), trigger: 'manual', error, requestId: request.requestId },
      },
    ]);
  if (!model) {
    await fail(oarError('no_model', `no model is configured for agent "${agent.name}" to summarise with`));
    return;
  }
  const catalog = stepCatalog(engine, thread, agent);
  const outcome = await compactThread(engine, thread, {
    trigger: 'manual',
    agent,
    model,
    budget: contextBudget(engine.limits, agent, model),
    requestId: request.requestId,
    // Asked for now: every finished turn is compacted (the active turn, if any, stays whole).
    keepTurns: 0,
    measure: (view, summary) =>
      assembleContext(view, agent, catalog, {
        budgetTokens: Number.MAX_SAFE_INTEGER,
        ...(summary ? { summary } : {}),
      }).tokenEstimate,
  });
  if (outcome.status === 'nothing_to_compact') {
    await fail(oarError('nothing_to_compact', 'the thread has no finished turns to compact'));
  }
}

/**
 * One model step, in three phases with typed hand-offs: prepare (budget, model, catalog, context, and the facts
 * recorded before the call) → call (the model call and its model.completed / model.failed) → resolve (parse the
 * output, then apply the declaration, or retry correctively, fall back or fail). A phase that ends the step —
 * the turn failed, or the work was interrupted — returns undefined and the next phase does not run.
 */

/** Phase 1: check the step budget, resolve the model, build the catalog and context, record them. */
async function prepareStep(
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
  // The step boundary: everything the previous step staged is committed with the request, before the call.
  await engine.append(
    thread.sessionId,
    [
      ...(turn.modelSteps === 0 ? firstStepFacts(engine, thread, turn, prepared) : rerouted(thread, turn, prepared)),
      // The inventory changed since the previous step (an MCP server's list_changed): recorded again.
      ...inventoryChanged(engine.tools, turnIds(thread, turn), catalog.tools, turn.modelSteps === 0),
      ...requestFacts(engine, thread, turn, prepared),
    ],
    { durable: true },
  );
  return prepared;
}

/** The agent's model chain; when no candidate can serve it, an honest routing fact and a turn that fails with the cause. */
async function resolveModel(
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
function capabilityExclusions(chain: ResolvedChain): string[] {
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
function modelRequested(
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

/**
 * Phase 2: make the call and record how it ended (model.completed, or model.failed and a failed turn). A retryable
 * failure (transient, timeout, rate limited) is retried under the model's policy, each attempt a recorded fact:
 * `model.failed` with its class and the wait (`retryInMs`), `rate_limit.hit` for a 429, then the next
 * `model.requested`. Every attempt counts as a model call of the thread (a scripted model's step index follows
 * them), only the call's end counts as a step. Returns the output for phase 3, or undefined when the call failed
 * or the work was interrupted meanwhile.
 */
async function callStep(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  step: PreparedStep,
  signal: AbortSignal,
): Promise<ModelOutput | undefined> {
  const { agent, chain } = step;
  let context = step.context;
  const ids = turnIds(thread, turn);
  let index = 0;
  let model = step.model;
  let policy = retryPolicy(engine, model);
  // Every attempt is a model call of the thread (the scripted model's cursor), whichever candidate made it.
  for (let attempt = 1, calls = 0; ; attempt++, calls++) {
    const timeoutMs = model.timeoutMs ?? engine.limits.modelTimeoutMs ?? MODEL_CALL_DEFAULTS.timeoutMs;
    // This process's limits of the provider and model (concurrency, per minute, a 429's pause) come first.
    const slot = await providerSlot(engine, thread.sessionId, ids, model, signal);
    const idleTimeoutMs = model.idleTimeoutMs ?? engine.limits.modelIdleTimeoutMs;
    const call =
      slot.cancelled ??
      (await callModel(model, {
        system: context.system,
        transcript: context.transcript.text,
        carrier: agent.carrier,
        signal,
        modelCall: thread.modelCalls + calls,
        timeoutMs,
        ...(engine.deltas ? { deltas: engine.deltas } : {}),
        // The answer's limit, reserved out of the context budget (the provider's default when nothing is known).
        ...maxOutputOf(engine, agent, model),
        ...(idleTimeoutMs !== undefined ? { idleTimeoutMs } : {}),
      }));
    if (slot.cancelled === undefined) slot.release();
    if (call.ok) {
      const output = call.output;
      await engine.append(thread.sessionId, [
        {
          type: 'model.completed',
          ...ids,
          payload: {
            modelId: model.modelId,
            provider: model.provider,
            finishReason: output.finishReason as 'stop',
            usage: output.usage,
            durationMs: output.durationMs,
            output: { text: output.text, toolCalls: output.toolCalls },
            ...(attempt > 1 ? { attempt } : {}),
          },
        },
        ...costRecorded(ids, model, output.usage),
      ]);
      return signal.aborted ? undefined : output;
    }
    const { failure } = call;
    // A provider's pause (429 retry-after) holds back every caller of this model in the process, up to the wait
    // this model's policy accepts (a longer one fails or falls back here, and the others find out themselves).
    if (failure.failureClass === 'rate_limited' && failure.retryAfterMs !== undefined) {
      engine.limiter.pause(model, Math.min(failure.retryAfterMs, policy.maxDelayMs));
    }
    // The request does not fit the window: compact once and send the smaller request again (a second overflow
    // falls back to the next candidate of the chain, or fails, as any failure).
    if (
      failure.failureClass === 'context_overflow' &&
      !signal.aborted &&
      !step.compacted &&
      agent.compaction?.enabled !== false
    ) {
      const smaller = await compactOnOverflow(engine, thread, turn, step, model, {
        failure,
        attempt,
        durationMs: call.durationMs,
      });
      if (smaller === 'stop') return undefined;
      if (smaller) {
        context = smaller;
        step.context = smaller;
        await engine.append(
          thread.sessionId,
          [
            modelRequested(thread, turn, step, { attempt: attempt + 1, retryOf: failure.failureClass }, model),
            ...costEstimated(ids, model, smaller.tokenEstimate),
          ],
          { durable: true },
        );
        continue;
      }
    }
    const retryInMs = signal.aborted ? undefined : retryDelay(failure, attempt, policy);
    // Given up on this model for a class the chain falls back on: the next candidate takes the call.
    const next =
      retryInMs === undefined && !signal.aborted ? nextCandidate(chain, index, failure.failureClass) : undefined;
    const failed: EventDraft = {
      type: 'model.failed',
      ...ids,
      payload: {
        modelId: model.modelId,
        provider: model.provider,
        error: failure.error,
        durationMs: call.durationMs,
        failureClass: failure.failureClass,
        attempt,
        ...(failure.statusCode !== undefined ? { statusCode: failure.statusCode } : {}),
        ...(retryInMs !== undefined ? { retryInMs } : {}),
        ...(next !== undefined ? { fallback: true } : {}),
      },
    };
    if (signal.aborted) {
      // The interrupt records the turn's end. The call itself is bracketed (model.requested … model.failed), which
      // also counts it as made; a runtime that is closing records nothing, so a restart repeats the same call.
      if (!isClosing(signal)) await engine.append(thread.sessionId, [failed]);
      return undefined;
    }
    const candidate = next === undefined ? undefined : chain.candidates[next];
    if (next !== undefined && candidate) {
      const from = chain.candidates[index] as ModelCandidate;
      await engine.append(thread.sessionId, [failed, ...rateLimitFacts(ids, model, failure, attempt)]);
      // The fallback's request is a call like any: a budget may stop it.
      if (!(await budgetAllows(engine, thread, turn, candidate.handle, context.tokenEstimate))) return undefined;
      await engine.append(
        thread.sessionId,
        [
          fallbackApplied(ids, from, candidate, failure.failureClass, attempt),
          modelRequested(thread, turn, step, { attempt: 1, fallbackFrom: model.modelId }, candidate.handle),
          ...costEstimated(ids, candidate.handle, context.tokenEstimate),
        ],
        { durable: true },
      );
      index = next;
      model = candidate.handle;
      policy = retryPolicy(engine, model);
      attempt = 0;
      continue;
    }
    // Durable at once when a wait follows: observers see the failure (and its time) while the thread waits.
    await engine.append(thread.sessionId, [failed, ...rateLimitFacts(ids, model, failure, attempt)], {
      durable: retryInMs !== undefined,
    });
    if (retryInMs === undefined) {
      await failTurn(engine, thread, turn, withAttempts(failure.error, attempt, policy));
      return undefined;
    }
    // An interrupt ends the wait at once (the interrupt then records the turn's end).
    if (!(await waitUnlessAborted(retryInMs, signal))) return undefined;
    // A retry is a call like any: a budget may stop it (the step then starts over once the thread may go on).
    if (!(await budgetAllows(engine, thread, turn, model, context.tokenEstimate))) return undefined;
    const retry = modelRequested(thread, turn, step, { attempt: attempt + 1, retryOf: failure.failureClass }, model);
    await engine.append(thread.sessionId, [retry], { durable: true });
  }
}

/** The `maxOutputTokens` of a call to `model`: the output reserve of the agent's budget with it, when known. */
function maxOutputOf(engine: Engine, agent: AgentConfig, model: ModelHandle): { maxOutputTokens?: number } {
  const { maxOutputTokens } = contextBudget(engine.limits, agent, model);
  return maxOutputTokens !== undefined ? { maxOutputTokens } : {};
}

/**
 * A `context_overflow` answered the step's call: record the failed attempt as one that is retried (`retryInMs`
 * 0), compact everything finished, and return the smaller context for the retry. Undefined when nothing could be
 * compacted (the failure is then handled as usual); `stop` when the work was interrupted meanwhile.
 */
async function compactOnOverflow(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  step: PreparedStep,
  model: ModelHandle,
  failed: { failure: ModelFailure; attempt: number; durationMs: number },
): Promise<AssembledContext | 'stop' | undefined> {
  const current = await engine.loadThread(thread.sessionId, thread.threadId);
  if (compactionRange(current, 0).length === 0) return undefined;
  const { failure } = failed;
  await engine.append(thread.sessionId, [
    {
      type: 'model.failed',
      ...turnIds(thread, turn),
      payload: {
        modelId: model.modelId,
        provider: model.provider,
        error: failure.error,
        durationMs: failed.durationMs,
        failureClass: failure.failureClass,
        attempt: failed.attempt,
        ...(failure.statusCode !== undefined ? { statusCode: failure.statusCode } : {}),
        retryInMs: 0,
        compacting: true,
      },
    },
  ]);
  step.compacted = true;
  const budget = contextBudget(engine.limits, step.agent, model);
  const outcome = await compactThread(engine, current, {
    trigger: 'context_overflow',
    agent: step.agent,
    model,
    budget,
    measure: step.measure,
    keepTurns: 0,
  });
  if (outcome.status === 'interrupted') return 'stop';
  return step.reassemble(await engine.loadThread(thread.sessionId, thread.threadId));
}

/**
 * The budget check before a retry's or a fallback's request (loop/budgets/budget-gate.ts): false when a limit stops it —
 * the thread then waits in `waiting_resource`, or the turn has failed with `budget_exceeded`.
 */
async function budgetAllows(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  model: ModelHandle,
  inputTokenEstimate: number,
): Promise<boolean> {
  const now = await engine.loadThread(thread.sessionId, thread.threadId);
  const gate = await budgetGate(engine, now, turn, model, inputTokenEstimate);
  if (gate.status === 'failed') await failTurn(engine, now, turn, gate.error);
  return gate.status === 'ok';
}

/** The model's retry policy: its own configured fields, else the limits', else the defaults. */
function retryPolicy(engine: Engine, model: ModelHandle): ModelRetryPolicy {
  const limits = engine.limits;
  return {
    attempts: model.retry?.attempts ?? limits.modelAttempts ?? MODEL_CALL_DEFAULTS.attempts,
    initialDelayMs:
      model.retry?.initialDelayMs ?? limits.modelRetryInitialDelayMs ?? MODEL_CALL_DEFAULTS.initialDelayMs,
    maxDelayMs: model.retry?.maxDelayMs ?? limits.modelRetryMaxDelayMs ?? MODEL_CALL_DEFAULTS.maxDelayMs,
  };
}

/** A 429 is also a `rate_limit.hit`: what the provider said (its wait, its limit headers, its request id). */
function rateLimitFacts(
  ids: ReturnType<typeof turnIds>,
  model: ModelHandle,
  failure: ModelFailure,
  attempt: number,
): EventDraft[] {
  if (failure.failureClass !== 'rate_limited') return [];
  return [
    {
      type: 'rate_limit.hit',
      ...ids,
      payload: {
        modelId: model.modelId,
        provider: model.provider,
        attempt,
        ...(failure.statusCode !== undefined ? { statusCode: failure.statusCode } : {}),
        ...(failure.retryAfterMs !== undefined ? { retryAfterMs: failure.retryAfterMs } : {}),
        ...(failure.rateLimit ? { limits: failure.rateLimit } : {}),
        ...(failure.providerRequestId ? { providerRequestId: failure.providerRequestId } : {}),
      },
    },
  ];
}

/** The error a call ends the turn with: how many attempts it took, and why no more were made. */
function withAttempts(error: OarError, attempts: number, policy: ModelRetryPolicy): OarError {
  const retryAfterMs = error.details?.retryAfterMs;
  const reason = !error.retryable
    ? 'not_retryable'
    : typeof retryAfterMs === 'number' && retryAfterMs > policy.maxDelayMs
      ? 'retry_after_too_long'
      : 'attempts_exhausted';
  return { ...error, details: { ...error.details, attempts, maxAttempts: policy.attempts, gaveUp: reason } };
}

/** Phase 3: parse the output in the agent's carrier; apply a valid declaration, otherwise handle the fault. */
async function resolveStep(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  step: PreparedStep,
  output: ModelOutput,
): Promise<void> {
  const outcome = parseOutput(thread, step, output);
  if (!outcome.ok || !outcome.declaration) {
    await rejectOutput(engine, thread, turn, step.agent, outcome, output);
    return;
  }
  // Well-formed but not applicable now (a retry of nothing, a report missing its sections): correctable as well.
  const fault = declarationFault(thread, turn, outcome.declaration);
  if (fault) {
    const rejected = { ...outcome, ok: false, errors: [fault] };
    await rejectOutput(engine, thread, turn, step.agent, rejected, output);
    return;
  }
  await applyDeclaration(engine, thread, turn, outcome.declaration, outcome);
}

/** The protocol tool call when the carrier is `tool` and the model made one, otherwise the text (DSL). */
function parseOutput(thread: ThreadView, step: PreparedStep, output: ModelOutput): ParseOutcome {
  const { agent, catalog } = step;
  const left = toolCallsLeft(thread);
  const catalogForParse = {
    catalog,
    history: actionHistory(thread.runs.values()),
    // A tool worker's declaration may not exceed the tool calls it has left.
    ...(Number.isFinite(left) && left > 0 ? { limits: { maxActions: left } } : {}),
    // Only the finish reason `length` makes JSON that does not parse "cut off" (truncated_output).
    finishReason: output.finishReason,
  };
  return agent.carrier === 'tool' && output.toolCalls.length > 0
    ? parseToolCall(output.toolCalls, catalogForParse)
    : parseAssistantText(output.text, { ...catalogForParse, allowPlainText: agent.carrier === 'text' });
}

/**
 * Output that is no valid declaration: one corrective retry (the next model call names the fault), then the
 * plain-text fallback when configured and there is text, else a failed turn. Nothing of it is executed.
 */
async function rejectOutput(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  agent: AgentConfig,
  outcome: ParseOutcome,
  output: ModelOutput,
): Promise<void> {
  const ids = turnIds(thread, turn);
  const fault = describeFault(outcome, output, agent.carrier);
  const details = {
    errors: outcome.errors,
    repairs: outcome.repairs,
    recovered: outcome.recovered,
    finishReason: output.finishReason,
    correction: fault,
  };
  if (turn.correctiveRetries < 1) {
    await engine.append(thread.sessionId, [
      {
        type: 'runtime.warning',
        ...ids,
        payload: {
          code: 'protocol_violation',
          message: `the model output was rejected (${outcome.errors.map((e) => e.code).join(', ')}); one corrective retry`,
          retryable: true,
          details,
        },
      },
    ]);
    return;
  }
  const text = output.text.trim();
  if ((agent.onProtocolFailure ?? engine.onProtocolFailure) === 'plain_text' && text !== '') {
    await engine.append(thread.sessionId, [
      {
        type: 'runtime.warning',
        ...ids,
        payload: {
          code: 'protocol_fallback_plain_text',
          message: 'the corrective retry failed too; showing the model text as the answer, nothing executed',
          retryable: false,
          details,
        },
      },
    ]);
    await completeTurn(engine, thread, turn, { outcome: 'plain_text_fallback', answer: output.text });
    return;
  }
  await failTurn(
    engine,
    thread,
    turn,
    oarError('protocol_violation', 'the model broke the agent protocol twice; nothing was executed', {
      // The model's words are not lost: a failed turn carries them (bounded), and the CLI prints them.
      details: { ...details, ...(text !== '' ? { modelText: boundedText(text, MAX_FAILED_TEXT) } : {}) },
    }),
  );
}

async function applyDeclaration(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  declaration: Declaration,
  outcome: ParseOutcome,
): Promise<void> {
  const facts = { repairs: outcome.repairs, recovered: outcome.recovered, form: declaration.source.form };
  const { intent, decision } = declaration;
  if (intent === 'respond' || intent === 'stop' || intent === 'report') {
    const report = finalReport(declaration);
    const extra = report ? { ...facts, report: await storeReport(engine, thread, turn, report.report) } : facts;
    await completeTurn(engine, thread, turn, {
      outcome: intent === 'stop' ? 'done' : 'answered',
      answer: report?.answer ?? declaration.message ?? '',
      extra,
    });
    return;
  }
  if (intent === 'plan') {
    await recordPlan(engine, thread, turn, declaration, facts);
    return;
  }
  if (intent === 'cancel' || (intent === 'decide' && decision?.decision === 'abort')) {
    await completeTurn(engine, thread, turn, {
      outcome: intent === 'cancel' ? 'cancelled' : 'aborted',
      answer: declaration.message ?? '',
      extra: { ...facts, ...(decision ? { decision } : {}) },
    });
    return;
  }
  const decided = decision ? decidedRun(thread, turn, decision) : undefined;
  if (intent === 'decide' && decision) {
    const next =
      decided && ['retry', 'skip'].includes(decision.decision) ? decidedActions(decided, decision) : undefined;
    const decisionFact: EventDraft = {
      type: 'run.status',
      ...turnIds(thread, turn),
      payload: {
        phase: 'decision',
        title: `decision: ${decision.decision}`,
        decision,
        ...(decided ? { decidedRunId: decided.runId } : {}),
        ...(next?.skipped.length ? { skipped: next.skipped } : {}),
        ...facts,
      },
    };
    // replan and continue (and a skip that leaves nothing to run): the next model step sees the failure and goes on.
    if (!decided || !next || next.actions.length === 0) {
      await engine.append(thread.sessionId, [decisionFact]);
      return;
    }
    const ids = { turnId: turn.turnId, runId: newId('run') };
    const attempt = { ...declaration, intent: 'execute' as const, actions: next.actions };
    await engine.append(thread.sessionId, [
      decisionFact,
      ...nextAttemptFacts(thread, decided, attempt, ids, {
        reason: decision.decision === 'retry' ? 'decided_retry' : 'decided_skip',
        retryOf: decided.runId,
        ...(next.skipped.length ? { skipped: next.skipped } : {}),
      }),
    ]);
    return;
  }
  if (declaration.actions.length === 0) {
    // A decision without actions (continue / skip / replan): record it; the next model step follows.
    await engine.append(thread.sessionId, [
      {
        type: 'run.status',
        ...turnIds(thread, turn),
        payload: { phase: 'decision', title: 'decision', decision: declaration.decision ?? null, ...facts },
      },
    ]);
    return;
  }
  const revised = intent === 'revise' ? decidedRun(thread, turn) : undefined;
  if (revised) {
    // The revision replaces what had not started; what ran keeps its facts in the revised run.
    const started = revised.order.filter(
      (id) => revised.actions[id]?.startedAt || revised.actions[id]?.status === 'completed',
    );
    const diff = {
      kept: started,
      replaced: revised.order.filter((id) => !started.includes(id)),
      added: declaration.actions.map((a) => a.id),
    };
    await engine.append(thread.sessionId, [
      ...nextAttemptFacts(
        thread,
        revised,
        declaration,
        { turnId: turn.turnId, runId: newId('run') },
        {
          reason: 'revised',
          revisionOf: revised.runId,
          diff,
          ...facts,
        },
      ),
    ]);
    return;
  }
  const runId = newId('run');
  const taskId = newId('task');
  const title = declaration.title ?? declaration.message?.slice(0, 120) ?? `${declaration.actions.length} action(s)`;
  const ids = { ...turnIds(thread, turn), taskId, runId };
  // The graph is persisted (run.status declared) in the same transaction as its task, before anything runs.
  await engine.append(thread.sessionId, [
    {
      type: 'task.created',
      ...ids,
      ...(thread.parent ? { parentTaskId: thread.parent.delegationTaskId } : {}),
      payload: { title, objective: declaration.message ?? title, taskKind: 'action_graph' },
    },
    { type: 'task.attempt.started', ...ids, payload: { attempt: 1, status: 'running' } },
    {
      type: 'run.status',
      ...ids,
      status: 'running',
      payload: { phase: 'declared', title, declaration, ...facts },
    },
  ]);
}

/**
 * A plan is recorded and shown, never executed (docs/protocol.md "Intents"): its graph is the turn's answer. The
 * user decides in the next turn; the model then declares the work with intent execute.
 */
async function recordPlan(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  declaration: Declaration,
  facts: Record<string, unknown>,
): Promise<void> {
  const ids = { ...turnIds(thread, turn), taskId: newId('task'), runId: newId('run') };
  const title = declaration.title ?? `plan of ${declaration.actions.length} action(s)`;
  await engine.append(thread.sessionId, [
    { type: 'task.created', ...ids, payload: { title, objective: declaration.message ?? title, taskKind: 'plan' } },
    // Phase `planned`, not `declared`: no run of the thread is created, so nothing is scheduled and no id is used.
    { type: 'run.status', ...ids, payload: { phase: 'planned', title, declaration, ...facts } },
    { type: 'task.completed', ...ids, payload: { summary: 'planned; nothing executed' } },
  ]);
  await completeTurn(engine, thread, turn, { outcome: 'planned', answer: renderPlan(declaration), extra: facts });
}

/** The structured report of an answer, stored as an artifact of the turn; what the turn's completion names. */
async function storeReport(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  report: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const artifact = await engine.artifacts.put(
    thread.sessionId,
    { text: JSON.stringify(report, null, 2), mime: 'application/json', name: `${turn.turnId}/final_report` },
    engine.limits.maxArtifactBytes,
  );
  await engine.append(thread.sessionId, [artifactCreated(turnIds(thread, turn), artifact)]);
  return { ...report, artifact: artifact.uri };
}
