import { oarError } from '@oar/protocol';
import { type AgentConfig, agentByName } from '../engine.js';
import { newId } from '../ids.js';
import type { RunActionStatus } from '../read-models/thread-state.js';
import { type ActionContext, actionIds, actionStatusEvent } from '../runner/action-context.js';
import { gate } from './tool.js';

/** `auto` picks the first configured agent that has every requested capability. */
export function selectAgent(
  agents: readonly AgentConfig[],
  target: string,
  capabilities: string[],
): AgentConfig | undefined {
  if (target !== 'auto') return agents.find((agent) => agent.name === target);
  return agents.find((agent) => capabilities.every((c) => agent.capabilities.includes(c)));
}

function delegationPrompt(ctx: ActionContext): string {
  const { action } = ctx;
  const task =
    action.prompt ??
    [action.input.prompt, action.input.task, action.input.description].find((v) => typeof v === 'string') ??
    action.description ??
    action.title ??
    JSON.stringify(action.input);
  const context = [...(action.context ?? [])];
  for (const ref of action.contextRefs) {
    const match = /^action:([^.\s]+)\.(summary|output)$/.exec(ref);
    const result = match ? ctx.run.actions[match[1] ?? '']?.result : undefined;
    if (result) context.push(result.summary ?? result.content ?? '');
  }
  return context.length > 0 ? `${String(task)}\n\nContext:\n${context.join('\n\n')}` : String(task);
}

/**
 * An `agent` action: the delegation becomes a child thread running the same loop with the chosen agent, and a
 * child task linked to the parent task. The action stays running until the child's turn ends; the runner then
 * records subagent.completed/failed on the parent (see finishDelegation) and the parent's dependents proceed.
 */
export async function runAgentAction(ctx: ActionContext): Promise<RunActionStatus> {
  const { engine, action, thread, run } = ctx;
  const sessionId = thread.sessionId;
  if (ctx.state.childThreadId) return 'running';
  const agent = selectAgent(engine.agents, action.executor.target, action.executor.capabilities);
  if (!agent) {
    const error = oarError(
      'no_agent',
      action.executor.target === 'auto'
        ? `no configured agent has the capabilities ${JSON.stringify(action.executor.capabilities)}`
        : `agent "${action.executor.target}" is not configured`,
    );
    await engine.append(sessionId, [actionStatusEvent(ctx, 'failed', { error })]);
    return 'failed';
  }
  if (thread.depth + 1 > engine.limits.maxSubagentDepth) {
    const error = oarError(
      'subagent_depth_exceeded',
      `delegation depth ${thread.depth + 1} exceeds the limit of ${engine.limits.maxSubagentDepth}`,
    );
    await engine.append(sessionId, [actionStatusEvent(ctx, 'failed', { error })]);
    return 'failed';
  }
  const gated = await gate(ctx, { executor: { type: 'agent', target: agent.name }, paths: [], input: action.input });
  if ('stopped' in gated) return gated.stopped;

  const childThreadId = newId('thr');
  const subagentId = newId('sub');
  const delegationTaskId = newId('task');
  const childTurnId = newId('turn');
  const prompt = delegationPrompt(ctx);
  const objective = action.title ?? action.description ?? prompt.slice(0, 200);
  if (!agentByName(engine, agent.name)) throw new Error(`agent ${agent.name} vanished`);
  await engine.append(sessionId, [
    ...gated.allowed,
    {
      type: 'thread.started',
      threadId: childThreadId,
      payload: {
        agent: agent.name,
        title: objective,
        parentThreadId: thread.threadId,
        depth: thread.depth + 1,
        parent: {
          threadId: thread.threadId,
          turnId: run.turnId,
          runId: run.runId,
          taskId: run.taskId,
          actionId: action.id,
          subagentId,
          delegationTaskId,
        },
      },
    },
    {
      type: 'subagent.spawned',
      ...actionIds(ctx),
      subagentId,
      payload: { agentName: agent.name, childThreadId, objective, isolation: 'child_thread', graphActionId: action.id },
    },
    {
      type: 'task.created',
      taskId: delegationTaskId,
      parentTaskId: run.taskId,
      threadId: childThreadId,
      turnId: childTurnId,
      payload: { title: objective, objective: prompt, taskKind: 'delegation' },
    },
    {
      type: 'turn.submitted',
      threadId: childThreadId,
      turnId: childTurnId,
      status: 'accepted',
      // The delegated turn runs with the binding of the turn that delegated it, not whatever is current later.
      payload: { status: 'accepted', input: prompt, source: 'delegation', bindingHash: engine.bindingHash },
    },
  ]);
  engine.wake(sessionId, childThreadId);
  return 'running';
}
