import { type OarError, oarError } from '@oar/protocol';
import { agentByName } from '../config/agents.js';
import type { AgentConfig } from '../config/binding.js';
import { DEFAULT_CONTEXT_BUDGET_TOKENS } from '../config/binding.js';
import { actionIds, actionStatusEvent } from '../facts/action.js';
import { newId } from '../kernel/ids.js';
import type { EventDraft } from '../log/draft.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import type { Executor } from './executor.js';
import { nodeRequest, resolveActionContext, taskText, unresolvedReference } from './references.js';

/** `auto` picks the first configured agent that has every requested capability. */
export function selectAgent(
  agents: readonly AgentConfig[],
  target: string,
  capabilities: string[],
): AgentConfig | undefined {
  if (target !== 'auto') return agents.find((agent) => agent.name === target);
  return agents.find((agent) => capabilities.every((c) => agent.capabilities.includes(c)));
}

/**
 * An `agent` action: the delegation becomes a child thread running the same loop with the chosen agent, and a
 * child task linked to the parent task. The action stays running until the child's turn ends; the runner then
 * records subagent.completed/failed on the parent (see finishDelegation) and the parent's dependents proceed.
 */
export const agentExecutor: Executor<AgentConfig> = {
  async prepare(ctx) {
    const { config, action, thread } = ctx;
    if (ctx.state.childThreadId) return { settled: 'running' };
    const agent = selectAgent(config.agents, action.executor.target, action.executor.capabilities);
    if (!agent) {
      const error = oarError(
        'no_agent',
        action.executor.target === 'auto'
          ? `no configured agent has the capabilities ${JSON.stringify(action.executor.capabilities)}`
          : `agent "${action.executor.target}" is not configured`,
      );
      return { refused: { error } };
    }
    if (thread.depth + 1 > config.limits.maxSubagentDepth) {
      const error = oarError(
        'subagent_depth_exceeded',
        `delegation depth ${thread.depth + 1} exceeds the limit of ${config.limits.maxSubagentDepth}`,
      );
      return { refused: { error } };
    }
    return {
      authorize: { executor: { type: 'agent', target: agent.name }, paths: [], input: action.input },
      prepared: agent,
    };
  },
  async run(ctx, agent, gated) {
    const work = await delegatedWork(ctx);
    if (!work.ok) {
      await ctx.record([...gated.allowed, actionStatusEvent(ctx, 'failed', { error: work.error })]);
      return 'failed';
    }
    if (!agentByName(ctx.config, agent.name)) throw new Error(`agent ${agent.name} vanished`);
    await startChildThread(ctx, gated.allowed, work, { agent: agent.name, taskKind: 'delegation' });
    return 'running';
  },
};

/** Who a child thread runs as: its agent, what its task is recorded as, and — for a tool worker — its bounds. */
export interface ChildThreadRole {
  agent: string;
  taskKind: 'delegation' | 'tool_worker';
  /** How the spawn names it, when not the agent (a tool worker: `<agent>.tool_worker`). */
  agentName?: string;
  toolWorker?: Record<string, unknown>;
  /** Extra facts of the spawn (a tool worker: its role and tools). */
  spawned?: Record<string, unknown>;
}

/**
 * Start the child thread a delegated node runs in: the thread (linked to the parent action), the spawn, the child's
 * task under the parent's, and its first turn carrying the node request — written with the gate's evaluation, in
 * one append. The parent action stays running until the child's first turn ends (see `delegationEnd`).
 */
export async function startChildThread(
  ctx: ExecutorContext,
  allowed: EventDraft[],
  work: { prompt: string; task: string },
  role: ChildThreadRole,
): Promise<void> {
  const { config, action, thread, run } = ctx;
  const childThreadId = newId('thr');
  const subagentId = newId('sub');
  const childTaskId = newId('task');
  const childTurnId = newId('turn');
  const objective = action.title ?? action.description ?? work.task.slice(0, 200);
  await ctx.record([
    ...allowed,
    {
      type: 'thread.started',
      threadId: childThreadId,
      payload: {
        agent: role.agent,
        title: objective,
        parentThreadId: thread.threadId,
        depth: thread.depth + 1,
        ...(role.toolWorker ? { toolWorker: role.toolWorker } : {}),
        parent: {
          threadId: thread.threadId,
          turnId: run.turnId,
          runId: run.runId,
          taskId: run.taskId,
          actionId: action.id,
          subagentId,
          delegationTaskId: childTaskId,
        },
      },
    },
    {
      type: 'subagent.spawned',
      ...actionIds(ctx),
      subagentId,
      payload: {
        agentName: role.agentName ?? role.agent,
        childThreadId,
        objective,
        isolation: 'child_thread',
        ...role.spawned,
        graphActionId: action.id,
      },
    },
    {
      type: 'task.created',
      taskId: childTaskId,
      parentTaskId: run.taskId,
      threadId: childThreadId,
      turnId: childTurnId,
      payload: { title: objective, objective: work.task, taskKind: role.taskKind },
    },
    {
      type: 'turn.submitted',
      threadId: childThreadId,
      turnId: childTurnId,
      status: 'accepted',
      // The delegated turn runs with the binding of the turn that delegated it, not whatever is current later.
      payload: { status: 'accepted', input: work.prompt, source: role.taskKind, bindingHash: config.bindingHash },
    },
  ]);
  ctx.wake(childThreadId);
}

/**
 * The work a delegated node receives: the node request (its resolved context and task) and the task alone (the
 * delegation task's title). A reference that cannot be resolved fails the action: the node would work blind.
 */
export async function delegatedWork(
  ctx: ExecutorContext,
): Promise<{ ok: true; prompt: string; task: string } | { ok: false; error: OarError }> {
  // Half the child's context budget for what it is handed; the rest is its own work.
  const budget = ctx.config.limits.contextBudgetTokens ?? DEFAULT_CONTEXT_BUDGET_TOKENS;
  const resolved = await resolveActionContext(ctx, Math.floor(budget / 2));
  if (!resolved.ok) return { ok: false, error: unresolvedReference(resolved) };
  const task = taskText(ctx.action, resolved.task);
  const input = ctx.action.executor.type === 'tool' ? ctx.action.input : undefined;
  return {
    ok: true,
    task,
    prompt: nodeRequest({ runId: ctx.run.runId, actionId: ctx.action.id }, resolved.items, task, input),
  };
}
