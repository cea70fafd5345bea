import { type Action, oarError } from '@oar/protocol';
import { actionStatusChange } from '../facts/action.js';
import { type LostCall, reconcileRequest } from '../facts/reconcile.js';
import { toolFailed } from '../facts/tool-call.js';
import type { EventDraft } from '../log/draft.js';
import {
  isTerminalRunStatus,
  type ProcessState,
  type RunAction,
  type RunState,
  type ThreadView,
} from '../read-models/thread-state.js';
import { type BackgroundProcess, backgroundProcesses } from '../tools/exec/processes.js';

/**
 * What a worker records when it takes over a thread whose previous tenure ended without finishing its tool calls
 * (a crash, a kill, a lease that ran out). Only the new lease holder calls this, after its claim — so nobody else
 * can still be recording results for these actions. A completed action is never re-run; an action that started
 * without a durable result is re-run only when its tool is idempotent, or idempotent by key (then under the same
 * key); otherwise it becomes `lost` and the model is told. Pending decisions stay pending.
 */
/** Executors whose work is bracketed by tool.started … tool.result/failed, with the idempotency recorded at start. */
const BRACKETED: ReadonlySet<string> = new Set(['tool', 'pipeline', 'service']);

export function recoveryDrafts(thread: ThreadView): { drafts: EventDraft[]; rerun: number; lost: number } {
  const drafts: EventDraft[] = [];
  let rerun = 0;
  let lost = 0;
  for (const run of thread.runs.values()) {
    if (isTerminalRunStatus(run.status)) continue;
    if (isEphemeral(run) && interrupted(run)) {
      lost += abandonEphemeral(thread, run, drafts);
      continue;
    }
    for (const id of run.order) {
      const state = run.actions[id];
      const action = run.declaration.actions.find((a) => a.id === id);
      if (!state || !action || !orphaned(action, state)) continue;
      const ids = { threadId: thread.threadId, turnId: run.turnId, taskId: run.taskId, runId: run.runId };
      if (state.idempotent) {
        rerun++;
        drafts.push(actionStatusChange(ids, action, 'pending', { reason: 'restart: idempotent tool is re-run' }));
        continue;
      }
      if (state.idempotentByKey) {
        // The world deduplicates it by key: ask again under the same key, and it acts at most once.
        rerun++;
        const keyAttempt = state.keyAttempt ?? state.attempt;
        const reason = 'restart: retried with the same idempotency key (the tool is idempotent by key)';
        drafts.push(actionStatusChange(ids, action, 'pending', { reason, keyAttempt }));
        continue;
      }
      lost++;
      const error = oarError(
        'lost',
        `the runtime stopped while "${action.executor.target}" was running; it may or may not have taken effect and was not re-run because it is not idempotent`,
      );
      drafts.push(
        toolFailed(
          { ...ids, stepId: state.toolCallId, toolCallId: state.toolCallId },
          {
            toolName: action.executor.target,
            error,
            graphActionId: id,
            actionStatus: 'lost',
            observation: { id, status: 'lost', artifacts: [], error, ...(action.title ? { title: action.title } : {}) },
          },
          'lost',
        ),
      );
      // Lost is not the end of it: someone (or the tool's reconcile step) says whether it took effect.
      drafts.push(reconcileRequest(lostCall(ids, action, state)));
    }
  }
  drafts.push(...lostProcesses(thread));
  return { drafts, rerun, lost };
}

/**
 * A background process of this OS process that ended while nobody could record it (its runtime closed, its turn
 * was gone): its end, as far as this process saw it. Its output stays unread (the process tool is gone with it).
 */
function endedProcess(thread: ThreadView, process: ProcessState, known: BackgroundProcess): EventDraft {
  known.recorded = true;
  const { exitCode, signalCode } = known.group.child;
  return {
    type: 'process.terminated',
    threadId: thread.threadId,
    ...(process.turnId ? { turnId: process.turnId } : {}),
    ...(process.runId ? { runId: process.runId } : {}),
    ...(process.toolCallId ? { toolCallId: process.toolCallId } : {}),
    processId: process.processId,
    payload: {
      processId: process.processId,
      exitCode,
      signal: signalCode,
      outputBytes: known.group.totalBytes,
      reason: 'ended_unobserved',
    },
  } as EventDraft;
}

/**
 * Processes the thread's commands started whose end is not on record and that this OS process does not run: the
 * runtime that ran them is gone (and took them along: their group or sandbox died with it, or a lost lease stopped
 * them). Recorded as lost, never re-attached (docs/commands.md "After a crash").
 */
function lostProcesses(thread: ThreadView): EventDraft[] {
  // Only this thread's own process is "known" here: an id seen under another session (a fork copies its source's
  // history) is not this thread's to report on.
  const own = (processId: string) => {
    const entry = backgroundProcesses.get(processId);
    return entry?.sessionId === thread.sessionId && entry.threadId === thread.threadId ? entry : undefined;
  };
  return (thread.processes ?? [])
    .filter((process) => !own(process.processId)?.group.running)
    .map((process) => {
      const known = own(process.processId);
      if (known) return endedProcess(thread, process, known);
      const error = oarError(
        'lost',
        `the runtime that ran process ${process.processId} (${process.command}) stopped; its end is unknown and it is not re-attached`,
      );
      return {
        type: 'process.failed',
        threadId: thread.threadId,
        ...(process.turnId ? { turnId: process.turnId } : {}),
        ...(process.runId ? { runId: process.runId } : {}),
        ...(process.toolCallId ? { toolCallId: process.toolCallId } : {}),
        processId: process.processId,
        status: 'lost',
        payload: { processId: process.processId, reason: 'lost', error },
      } as EventDraft;
    });
}

/**
 * A full-DSL graph declared without persistence (`persist` false, `execution.mode` not `durable`) is ephemeral:
 * recorded like any, but not resumed after its tenure ended mid-flight. Carrier graphs carry no such choice and are
 * always resumed; an action's own `persist: true` keeps it resumable inside an ephemeral graph.
 */
function isEphemeral(run: RunState): boolean {
  const { declaration } = run;
  return declaration.source.form === 'dsl' && !declaration.persist && declaration.execution.mode !== 'durable';
}

/** Whether the previous tenure ended mid-flight: a bracketed action is still running with no writer any more. */
function interrupted(run: RunState): boolean {
  return run.declaration.actions.some((a) => orphaned(a, run.actions[a.id]));
}

/**
 * A running bracketed action (tool, pipeline, service) with nobody to finish it. One handed to a child thread — a
 * semantic tool action's worker — is not: the child carries on and ends it.
 */
function orphaned(action: Action, state: RunAction | undefined): boolean {
  return state?.status === 'running' && BRACKETED.has(action.executor.type) && !state.childThreadId;
}

function lostCall(ids: LostCall['ids'], action: Action, state: RunAction): LostCall {
  return {
    ids,
    action,
    toolCallId: state.toolCallId,
    toolName: action.executor.target,
    ...(state.idempotencyKey ? { idempotencyKey: state.idempotencyKey } : {}),
  };
}

/** End an interrupted ephemeral graph's running and not-started actions `lost`; waiting decisions stay. */
function abandonEphemeral(thread: ThreadView, run: RunState, drafts: EventDraft[]): number {
  const ids = { threadId: thread.threadId, turnId: run.turnId, taskId: run.taskId, runId: run.runId };
  let lost = 0;
  for (const action of run.declaration.actions) {
    const status = run.actions[action.id]?.status;
    if ((status !== 'running' && status !== 'pending') || action.persist === true) continue;
    lost++;
    const error = oarError(
      'not_resumed',
      `the runtime stopped while this graph ran; it was declared without persistence (persist: false), so "${action.id}" was not resumed${status === 'running' ? ' (it may or may not have taken effect)' : ''}`,
    );
    drafts.push(
      actionStatusChange(
        ids,
        action,
        'lost',
        { observation: { id: action.id, status: 'lost', artifacts: [], error } },
        'failed',
      ),
    );
    // One that was running may have acted on the world: asked like any lost call (unless running it again is
    // harmless, when the answer is always "run it"). One not started did nothing.
    const state = run.actions[action.id];
    if (state && orphaned(action, state) && !state.idempotent) {
      drafts.push(reconcileRequest(lostCall(ids, action, state)));
    }
  }
  return lost;
}
