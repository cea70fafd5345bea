import {
  type Action,
  type ActionResult,
  DEFAULT_RESULT_POLICY,
  type FullOutput,
  type OarError,
  type ResultPolicy,
  shapeObservation,
} from '@oar/protocol';
import type { RuntimeLimits } from '../config/binding.js';
import type { EventDraft } from '../log/draft.js';
import type {
  RunAction,
  RunActionStatus,
  RunState,
  TerminalActionStatus,
  ThreadView,
} from '../read-models/thread-state.js';
import { artifactUri, type StoredArtifact } from '../store/artifacts.js';

/**
 * What the facts of one action are built from: the action, its state, its run and thread, and the limits that
 * shape its observation. An executor's `ExecutorContext` (scheduler/executor-context.ts) is one.
 */
export interface ActionScope {
  readonly config: { readonly limits: RuntimeLimits };
  thread: ThreadView;
  run: RunState;
  action: Action;
  state: RunAction;
}

/** Correlation ids every event about this action carries. */
export function actionIds(ctx: ActionScope) {
  return {
    threadId: ctx.thread.threadId,
    turnId: ctx.run.turnId,
    taskId: ctx.run.taskId,
    runId: ctx.run.runId,
  };
}

/** tool.* events also need a step id and a tool call id: one step per graph action, one call id per action. */
export function toolIds(ctx: ActionScope) {
  return { ...actionIds(ctx), stepId: ctx.state.toolCallId, toolCallId: ctx.state.toolCallId };
}

/**
 * The context with an executor's own default result policy in place of the runtime default (`summary`, what
 * normalization fills in when a declaration asks for none); a policy the model asked for is kept. A business
 * CLI's result and a skill's text must reach the model whole.
 */
export function withDefaultPolicy<C extends ActionScope>(ctx: C, policy: ResultPolicy): C {
  const { returnToModel, storeFull, ...rest } = ctx.action.resultPolicy;
  const asked = returnToModel !== DEFAULT_RESULT_POLICY.returnToModel || !storeFull || Object.keys(rest).length > 0;
  return asked ? ctx : { ...ctx, action: { ...ctx.action, resultPolicy: policy } };
}

export function observe(ctx: ActionScope, output: FullOutput): ActionResult {
  return observeIn(ctx.config.limits, ctx.run, ctx.action, output);
}

/** An action's observation of `output`, shaped by its result policy within its share of the graph's budget. */
export function observeIn(
  limits: Pick<RuntimeLimits, 'observationTokens' | 'graphObservationTokens'>,
  run: RunState,
  action: Action,
  output: FullOutput,
): ActionResult {
  // A graph's observations share one budget, so a wide graph cannot flood the next model call.
  const { observationTokens, graphObservationTokens } = limits;
  const budget = Math.min(observationTokens, Math.floor(graphObservationTokens / Math.max(1, run.order.length)));
  return shapeObservation(action, output, action.resultPolicy, budget, { runId: run.runId }).result;
}

/** The correlation ids of one graph action's events (see `actionIds`). */
export type ActionIds = ReturnType<typeof actionIds>;

/** What a `run.status` action event tells besides the status: the ended action's observation, or why it is pending. */
export type ActionStatusFacts =
  /** `reconciled`: the end of a lost action, decided by its reconciliation (facts/reconcile.ts). */
  | { observation: ActionResult; reconciled?: { actionId: string; decision: string; resolvedBy: string } }
  /** Back to pending; `keyAttempt`: a retry after a crash under the key of that attempt (idempotent by key). */
  | { attempt?: number; reason: string; keyAttempt?: number };

/**
 * The one shape of "this graph action's status changed": a `run.status` event in phase `action`, whether the action
 * ended (with its observation) or went back to `pending` (a retry, a re-run after a restart). `eventStatus` is the
 * event's own status, left out when not given. Takes plain ids so that code without an ExecutorContext (recovery,
 * respond_action) builds the same event.
 */
export function actionStatusChange(
  ids: ActionIds,
  action: Pick<Action, 'id' | 'title'>,
  status: RunActionStatus,
  facts: ActionStatusFacts,
  eventStatus?: 'running' | 'completed' | 'failed',
): EventDraft {
  return {
    type: 'run.status',
    ...ids,
    ...(eventStatus ? { status: eventStatus } : {}),
    payload: { phase: 'action', title: action.title ?? action.id, graphActionId: action.id, status, ...facts },
  };
}

/** The observation of an action that ended `status` with `output`, shaped to the graph's budget. */
export function endObservation(ctx: ActionScope, status: TerminalActionStatus, output: FullOutput): ActionResult {
  return observe(ctx, { ...output, status });
}

/** A terminal status decided without running a tool (denied, skipped, cancelled, lost, or a runtime operation). */
export function actionStatusEvent(ctx: ActionScope, status: TerminalActionStatus, output: FullOutput): EventDraft {
  return actionStatusChange(
    actionIds(ctx),
    ctx.action,
    status,
    { observation: endObservation(ctx, status, output) },
    status === 'completed' ? 'completed' : 'failed',
  );
}

export function errorOutput(error: OarError): FullOutput {
  return { error, status: 'failed' };
}

/** The `artifact.changed` fact of an output just stored, with the correlation ids of what produced it. */
export function artifactCreated(
  ids: { threadId: string; turnId?: string; taskId?: string; runId?: string },
  artifact: StoredArtifact,
): EventDraft {
  return {
    type: 'artifact.changed',
    ...ids,
    artifactId: artifact.artifactId,
    payload: {
      change: 'created',
      name: artifact.name,
      mime: artifact.mime,
      size: artifact.size,
      hash: `sha256:${artifact.sha256}`,
      uri: artifactUri(artifact.artifactId),
      preview: artifact.preview,
    },
  };
}
