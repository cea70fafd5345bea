import type { Action, ActionResult, FullOutput, OarError } from '@oar/protocol';
import { shapeObservation } from '@oar/protocol';
import type { Engine } from '../engine.js';
import type { EventDraft } from '../log/event-log.js';
import type { RunAction, RunState, ThreadView } from '../read-models/thread-state.js';

/** Everything an executor needs about the one action it runs. */
export interface ActionContext {
  engine: Engine;
  thread: ThreadView;
  run: RunState;
  action: Action;
  state: RunAction;
  signal: AbortSignal;
}

/** Correlation ids every event about this action carries. */
export function actionIds(ctx: ActionContext) {
  return {
    threadId: ctx.thread.threadId,
    turnId: ctx.run.turnId,
    taskId: ctx.run.taskId,
    runId: ctx.run.runId,
  };
}

/** tool.* events also need a step id and a tool call id: one step per graph action, one call id per action. */
export function toolIds(ctx: ActionContext) {
  return { ...actionIds(ctx), stepId: ctx.state.toolCallId, toolCallId: ctx.state.toolCallId };
}

export function observe(ctx: ActionContext, output: FullOutput): ActionResult {
  // A graph's observations share one budget, so a wide graph cannot flood the next model call.
  const { observationTokens, graphObservationTokens } = ctx.engine.limits;
  const budget = Math.min(observationTokens, Math.floor(graphObservationTokens / Math.max(1, ctx.run.order.length)));
  return shapeObservation(ctx.action, output, ctx.action.resultPolicy, budget, { runId: ctx.run.runId }).result;
}

/** A terminal status decided without running a tool (denied, skipped, cancelled, lost, or a runtime operation). */
export function actionStatusEvent(
  ctx: ActionContext,
  status: 'completed' | 'failed' | 'denied' | 'skipped' | 'cancelled' | 'lost',
  output: FullOutput,
): EventDraft {
  const resultStatus = status === 'completed' ? 'completed' : status;
  return {
    type: 'run.status',
    ...actionIds(ctx),
    status: status === 'completed' ? 'completed' : 'failed',
    payload: {
      phase: 'action',
      title: ctx.action.title ?? ctx.action.id,
      graphActionId: ctx.action.id,
      status,
      observation: observe(ctx, { ...output, status: resultStatus }),
    },
  };
}

export function errorOutput(error: OarError): FullOutput {
  return { error, status: 'failed' };
}
