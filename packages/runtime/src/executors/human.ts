import { oarError } from '@oar/protocol';
import { actionIds, actionStatusEvent } from '../facts/action.js';
import { subagentStatus } from '../facts/subagent-status.js';
import { newId } from '../kernel/ids.js';
import type { RunActionStatus } from '../read-models/thread-state.js';
import type { ActionContext } from '../scheduler/action-context.js';
import { resolveActionContext, unresolvedReference } from './references.js';
import { gate } from './tool.js';

/**
 * A `human` action (ask_user / confirm): the runtime pauses on `action.required` and continues only through
 * respond_action. The human's answer (its payload, or the decision itself for confirm) is the action's output.
 */
export async function runHumanAction(ctx: ActionContext): Promise<RunActionStatus> {
  const { engine, action, state } = ctx;
  const sessionId = ctx.thread.sessionId;
  if (!state.approved) {
    // Rules may target human executors too; a denial or an ask stops here like any other action.
    const gated = await gate(ctx, { executor: action.executor, paths: [], input: action.input });
    if ('stopped' in gated) return gated.stopped;
    if (gated.allowed.length > 0) await engine.append(sessionId, gated.allowed);
  }
  if (state.approved) {
    const response = state.response ?? {};
    const text = typeof response.text === 'string' ? response.text : JSON.stringify(response);
    await engine.append(sessionId, [
      actionStatusEvent(ctx, 'completed', { text, structured: { decision: 'approve', ...response }, summary: text }),
    ]);
    return 'completed';
  }
  const resolved = await resolveActionContext(ctx, engine.limits.observationTokens);
  if (!resolved.ok) {
    const error = unresolvedReference(resolved);
    await engine.append(sessionId, [actionStatusEvent(ctx, 'failed', { error })]);
    return 'failed';
  }
  const asked =
    resolved.task ??
    (typeof action.input.question === 'string' ? action.input.question : undefined) ??
    (typeof action.input.prompt === 'string' ? action.input.prompt : undefined) ??
    action.description ??
    action.title;
  // The person sees what the model pointed at, labelled with where it came from.
  const question =
    asked && resolved.items.length > 0
      ? `${asked}\n\nContext:\n${resolved.items.map((item) => `[${item.source}]\n${item.text}`).join('\n\n')}`
      : asked;
  if (!question) {
    const error = oarError(
      'invalid_human_action',
      `${action.executor.target} needs a question (input.question or a prompt)`,
    );
    await engine.append(sessionId, [actionStatusEvent(ctx, 'failed', { error })]);
    return 'failed';
  }
  const confirm = action.executor.target === 'confirm';
  await engine.append(sessionId, [
    {
      type: 'action.required',
      ...actionIds(ctx),
      actionId: newId('act'),
      payload: {
        actionType: 'user_input',
        decisionKind: confirm ? 'confirm' : 'ask_user',
        prompt: question,
        decisions: confirm ? ['approve', 'deny'] : ['approve'],
        graphActionId: action.id,
        ...(confirm ? {} : { inputSchema: { type: 'object', properties: { text: { type: 'string' } } } }),
      },
    },
    { type: 'task.waiting', ...actionIds(ctx), payload: { waitingFor: 'input', reason: question } },
    ...subagentStatus(ctx.thread, ctx.run.turnId, 'blocked', `waiting for input: ${question}`),
  ]);
  return 'waiting_input';
}
