import { type Action, hasTask, type OarError, oarError, withCapabilities } from '@oar/protocol';
import { agentByName } from '../config/agents.js';
import type { AgentConfig } from '../config/binding.js';
import { TOOL_WORKER_DEFAULTS } from '../config/binding.js';
import type { PermissionRequest } from '../config/permission-request.js';
import { actionStatusEvent } from '../facts/action.js';
import type { RunActionStatus, ThreadView } from '../read-models/thread-state.js';
import type { ExecutorConfig, ExecutorContext } from '../scheduler/executor-context.js';
import { delegatedWork, startChildThread } from './agent.js';
import type { Executor } from './executor.js';
import type { Authorized } from './gate.js';

/**
 * Semantic tool actions (docs/protocol.md "Semantic tool actions"): a `tool` action that states its task in words
 * — a prompt, with no input or a partial one — is carried out by a tool worker, a focused model loop in a child
 * thread (its own task, `taskKind: tool_worker`) restricted to the tools the action names: every tool that has the
 * requested capabilities for target `auto`, or the one named tool. Each of its tool calls is an ordinary governed
 * call (permission, read/write lock, artifacts, events); the declaring model sees one observation for the action,
 * shaped by the action's result policy, with the worker's summary and the calls it made.
 */

/**
 * The tools a semantic tool action's worker may call, or undefined when the action is a complete call that runs
 * directly (no model call): a named tool whose input its schema accepts, or the one tool `auto` resolves to.
 */
export function toolWorkerTools(
  config: Pick<ExecutorConfig, 'tools'>,
  agent: AgentConfig,
  action: Action,
): string[] | undefined {
  if (!hasTask(action)) return undefined;
  const { target, capabilities } = action.executor;
  if (target !== 'auto') return config.tools.parseInput(target, action.input).ok ? undefined : [target];
  const offered = config.tools.catalog().filter((t) => !agent.tools || agent.tools.includes(t.name));
  const candidates = withCapabilities(offered, capabilities).map((t) => t.name);
  const [only] = candidates;
  if (candidates.length === 1 && only && config.tools.parseInput(only, action.input).ok) return undefined;
  return candidates;
}

/** The agent a thread runs: its own, or — for a tool worker — a focused profile of it (see `toolWorkerAgent`). */
export function threadAgent(
  config: Pick<ExecutorConfig, 'agents' | 'mainAgent' | 'binding'>,
  thread: ThreadView,
): AgentConfig {
  const agent = agentByName(config, thread.agent) ?? config.mainAgent;
  return thread.toolWorker ? toolWorkerAgent(config, agent, thread) : agent;
}

/** The tool calls a tool worker may still declare: its bound minus every action of its runs. */
export function toolCallsLeft(thread: ThreadView): number {
  if (!thread.toolWorker) return Number.POSITIVE_INFINITY;
  let used = 0;
  for (const run of thread.runs.values()) used += run.order.length;
  return Math.max(0, thread.toolWorker.maxToolCalls - used);
}

/** Why a tool worker may make no further model call (its model-call or token bound is spent), if so. */
export function toolWorkerSpent(thread: ThreadView, modelSteps: number): OarError | undefined {
  const worker = thread.toolWorker;
  if (!worker) return undefined;
  const spent =
    modelSteps >= worker.maxModelCalls
      ? `its ${worker.maxModelCalls} model calls`
      : worker.tokensUsed >= worker.maxTokens
        ? `its ${worker.maxTokens} tokens (${worker.tokensUsed} used)`
        : undefined;
  if (!spent) return undefined;
  return oarError('tool_worker_budget_exceeded', `the tool worker used ${spent} without finishing its task`, {
    details: {
      maxModelCalls: worker.maxModelCalls,
      maxTokens: worker.maxTokens,
      tokensUsed: worker.tokensUsed,
      modelCalls: modelSteps,
    },
  });
}

/** What a tool worker is told, in place of the declaring agent's own instructions. */
export const TOOL_WORKER_INSTRUCTIONS = [
  'You are a tool worker: you carry out one action of a larger plan, described in the <node-request> you receive.',
  'Use the tools below to do exactly that task — several calls if needed, each with complete input — then answer',
  'with a concise summary of what you found or changed: file paths, line numbers, key facts, and anything you could',
  'not do. The agent that planned the action sees only your answer and the list of calls you made.',
].join('\n');

function toolWorkerAgent(config: Pick<ExecutorConfig, 'binding'>, agent: AgentConfig, thread: ThreadView): AgentConfig {
  const model = config.binding.toolWorkerModel ?? agent.model;
  const spent = toolCallsLeft(thread) === 0;
  return {
    ...agent,
    // Its own name: its model is resolved (and, for a scripted model, scripted) apart from the declaring agent's.
    name: `${agent.name}.tool_worker`,
    description: `tool worker of ${agent.name}`,
    systemPrompt: spent
      ? `${TOOL_WORKER_INSTRUCTIONS}\nYour tool-call budget is used up: answer now with what you found.`
      : TOOL_WORKER_INSTRUCTIONS,
    // No calls left: no tools offered, so a further call is a correctable fault rather than a silent overrun.
    tools: spent ? [] : (thread.toolWorker?.tools ?? []),
    ...(model ? { model } : {}),
  };
}

/**
 * The permission request of starting a worker: a tool call whose flags are those of its tools together — read-only
 * only if every one is, destructive if any is — so the mode and rules judge it as its riskiest call could be. Each
 * call the worker then makes is evaluated on its own as well.
 */
function workerPermissionRequest(
  config: Pick<ExecutorConfig, 'tools'>,
  action: Action,
  tools: string[],
): PermissionRequest {
  const found = tools.map((name) => config.tools.get(name)).filter((t) => t !== undefined);
  return {
    executor: action.executor,
    tool: {
      name: action.executor.target,
      isReadOnly: found.every((t) => t.isReadOnly),
      isDestructive: found.some((t) => t.isDestructive),
      isConcurrencySafe: found.every((t) => t.isConcurrencySafe),
      capabilities: [...new Set(found.flatMap((t) => t.capabilities))],
    },
    paths: [],
    input: action.input,
  };
}

/**
 * The executor of a semantic tool action: a worker — a child thread whose first turn is the node request — that may
 * call `tools`. Authorized as a call of those tools.
 */
export function toolWorkerExecutor(tools: string[]): Executor<undefined> {
  return {
    async prepare(ctx) {
      const { action, thread } = ctx;
      if (ctx.state.childThreadId) return { settled: 'running' };
      if (tools.length === 0 || thread.toolWorker) {
        const error = thread.toolWorker
          ? oarError(
              'tool_worker_nested',
              `a tool worker calls its tools directly: give "${action.id}" a complete input`,
            )
          : oarError(
              'tool_target_unresolved',
              `no tool offered to this agent has the capabilities ${JSON.stringify(action.executor.capabilities)}`,
            );
        return { refused: { error } };
      }
      return { authorize: workerPermissionRequest(ctx.config, action, tools), prepared: undefined };
    },
    run: (ctx, _prepared, authorized) => startToolWorker(ctx, tools, authorized),
  };
}

/** Start the worker of a semantic tool action: a child thread whose first turn is the node request. */
async function startToolWorker(ctx: ExecutorContext, tools: string[], gated: Authorized): Promise<RunActionStatus> {
  const { config, thread } = ctx;
  const work = await delegatedWork(ctx);
  if (!work.ok) {
    await ctx.record([...gated.allowed, actionStatusEvent(ctx, 'failed', { error: work.error })]);
    return 'failed';
  }
  const declaring = agentByName(config, thread.agent) ?? config.mainAgent;
  const { limits } = config;
  const bounds = {
    tools,
    maxToolCalls: limits.toolWorkerToolCalls ?? TOOL_WORKER_DEFAULTS.toolCalls,
    maxModelCalls: Math.min(limits.maxSteps, limits.toolWorkerModelCalls ?? TOOL_WORKER_DEFAULTS.modelCalls),
    maxTokens: limits.toolWorkerTokens ?? TOOL_WORKER_DEFAULTS.tokens,
  };
  await startChildThread(ctx, gated.allowed, work, {
    agent: declaring.name,
    agentName: `${declaring.name}.tool_worker`,
    taskKind: 'tool_worker',
    toolWorker: bounds,
    spawned: { role: 'tool_worker', tools },
  });
  return 'running';
}
