import { oarError } from '@oar/protocol';
import { actionIds, actionStatusEvent } from '../facts/action.js';
import { subagentStatus } from '../facts/subagent-status.js';
import { newId } from '../kernel/ids.js';
import type { RunActionStatus } from '../read-models/thread-state.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import type { Executor } from './executor.js';
import type { Authorized } from './gate.js';
import { resolveActionContext, unresolvedReference } from './references.js';

/**
 * A `human` action (ask_user / confirm): the runtime pauses on `action.required` and continues only through
 * respond_action. The human's answer (its payload, or the decision itself for confirm) is the action's output.
 */
export const humanExecutor: Executor<undefined> = {
  // Rules may target human executors too; a denial or an ask stops the question like any other action. An answered
  // question is not judged again: the answer is what it waited for.
  prepare: async (ctx) =>
    ctx.state.approved
      ? { unjudged: undefined }
      : { authorize: { executor: ctx.action.executor, paths: [], input: ctx.action.input }, prepared: undefined },
  run: (ctx, _prepared, authorized) => askHuman(ctx, authorized),
};

async function askHuman(ctx: ExecutorContext, gated: Authorized): Promise<RunActionStatus> {
  const { config, action, state } = ctx;
  if (gated.allowed.length > 0) await ctx.record(gated.allowed);
  if (state.approved) {
    const response = state.response ?? {};
    const text = typeof response.text === 'string' ? response.text : JSON.stringify(response);
    await ctx.record([
      actionStatusEvent(ctx, 'completed', { text, structured: { decision: 'approve', ...response }, summary: text }),
    ]);
    return 'completed';
  }
  const resolved = await resolveActionContext(ctx, config.limits.observationTokens);
  if (!resolved.ok) {
    const error = unresolvedReference(resolved);
    await ctx.record([actionStatusEvent(ctx, 'failed', { error })]);
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
    await ctx.record([actionStatusEvent(ctx, 'failed', { error })]);
    return 'failed';
  }
  const confirm = action.executor.target === 'confirm';
  await ctx.record([
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
