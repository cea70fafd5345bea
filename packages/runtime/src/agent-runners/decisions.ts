import type { ActionDecision } from '@oar/protocol';
import { newId } from '../kernel/ids.js';
import { waitUnlessAborted } from '../kernel/signals.js';
import type { EventDraft } from '../log/draft.js';
import { loadReadModels } from '../log/read-model-rows.js';
import type { Engine } from '../scheduler/engine.js';
import {
  apiError,
  type OpenDecision,
  type RunnerAskType,
  type RunnerRunIds,
  type RunSession,
  runnerStatus,
} from './run-session.js';

/**
 * Durable decisions of a runner run (docs/runners.md "Decisions"): a `tools.call` that the permission policy asks
 * about, a `platform.request_action`, an `action.requested` result. Each is an `action.required` on the record,
 * exactly like a protocol run's, answered by `oar respond` (or the approval prompt of `oar run`) from any process
 * on the store. Unlike a protocol run, the runner is alive while it waits: the host holds the call open and watches
 * the thread's read model (one indexed row) for the answer until the run's deadline. A decision still open when the
 * run stops waiting for it for any reason (the deadline, an interrupt, the runner cancelling the call, the run's
 * end, a crash found on resume) is closed on the record as a denial by the runtime, so nothing waits for an answer
 * that can no longer change anything.
 */

/** How often the store is asked for the answer while a call waits (a person answers in seconds, not ms). */
export const DECISION_POLL_MS = 200;

/** The most questions one run may have open at once: past it a request is `rate_limited` (no prompt flood). */
export const MAX_OPEN_DECISIONS = 8;

/** What a runner asks to be decided. */
export interface RunnerAsk {
  actionType: RunnerAskType;
  /** What the question names: the tool, or `platform:<action>`. */
  toolName: string;
  prompt: string;
  decisions: ActionDecision[];
  /** What a session grant would cover (tool approvals): recorded so `approve_for_session` grants exactly this. */
  scope?: Record<string, unknown>;
  /** The input the person is shown (already redacted by the log). */
  input?: Record<string, unknown>;
  toolCallId?: string;
  /** Facts recorded with the question, before it (the `permission.evaluated` that asked). */
  before?: EventDraft[];
  /** Extra payload of the `action.required` (a platform action's action, target and payload). */
  extra?: Record<string, unknown>;
}

export interface RunnerDecision {
  actionId: string;
  decision: ActionDecision;
  reason?: string;
  resolvedBy?: string;
}

/**
 * Record the question durably, then wait for its answer until the run's deadline, its end, or the caller giving up
 * (`signal`: the runner cancelled the call). A denial resolves (the caller refuses); the deadline rejects with
 * `deadline_exceeded`, the rest with `unauthorized`, and in every such case the question is closed on the record
 * first. An answer that lands in the very moment the wait ends is recorded as too late (`runner_decision_late`).
 */
export async function awaitDecision(
  session: RunSession,
  ask: RunnerAsk,
  options: {
    /** The question outlives the runner's part of the run (an `action.requested` result): only the deadline ends it. */
    outlivesRun?: boolean;
    signal?: AbortSignal;
  } = {},
): Promise<RunnerDecision> {
  const open = await recordAsk(session, ask);
  const signal = options.signal ? AbortSignal.any([session.signal, options.signal]) : session.signal;
  let answered = false;
  try {
    for (;;) {
      const answer = await resolvedDecision(session, open.actionId);
      if (answer) {
        answered = true;
        return answer;
      }
      if (signal.aborted || (!options.outlivesRun && !session.active)) {
        throw apiError('unauthorized', 'the call stopped waiting: the run ended or the call was cancelled', {
          action_id: open.actionId,
        });
      }
      const left = session.deadlineAt - Date.now();
      if (left <= 0) {
        throw apiError('deadline_exceeded', 'no decision before the run deadline', { action_id: open.actionId });
      }
      await waitUnlessAborted(Math.min(left, DECISION_POLL_MS), signal);
    }
  } finally {
    session.openDecisions.delete(open.actionId);
    if (!answered) {
      const late = await expireDecisions(
        session.engine,
        session.sessionId,
        session.ids,
        [open],
        'the call stopped waiting',
      ).catch(() => []);
      if (late.length > 0) {
        await session
          .record([
            runnerStatus(session, `runner decision ${open.actionId}: answered too late`, {
              phase: 'runner_decision_late',
              actionId: open.actionId,
            }),
          ])
          .catch(() => undefined);
      }
    }
  }
}

/** Record the question (durable: `oar respond` in another process must find it). */
async function recordAsk(session: RunSession, ask: RunnerAsk): Promise<OpenDecision> {
  if (session.openDecisions.size >= MAX_OPEN_DECISIONS) {
    throw apiError('rate_limited', `at most ${MAX_OPEN_DECISIONS} questions of a run may wait at once`, {
      limit: MAX_OPEN_DECISIONS,
    });
  }
  const actionId = newId('act');
  const ids = session.ids;
  const call = ask.toolCallId ? { stepId: ask.toolCallId, toolCallId: ask.toolCallId } : {};
  const runner = { runId: ids.runId, runnerId: session.runnerId };
  const open: OpenDecision = {
    actionId,
    actionType: ask.actionType,
    toolName: ask.toolName,
    ...(ask.toolCallId ? { toolCallId: ask.toolCallId } : {}),
  };
  session.openDecisions.set(actionId, open);
  await session.record(
    [
      ...(ask.before ?? []),
      {
        type: 'action.required',
        ...ids,
        ...call,
        actionId,
        payload: {
          actionType: ask.actionType,
          toolName: ask.toolName,
          prompt: ask.prompt,
          decisions: ask.decisions,
          ...(ask.scope ? { scope: ask.scope } : {}),
          ...(ask.input ? { input: ask.input } : {}),
          ...(ask.toolCallId ? { toolCallId: ask.toolCallId } : {}),
          ...(ask.extra ?? {}),
          expiresAt: new Date(session.deadlineAt).toISOString(),
          runner,
        },
      },
      ...(ask.actionType === 'tool_approval'
        ? [
            {
              type: 'permission.requested' as const,
              ...ids,
              ...call,
              actionId,
              payload: { toolName: ask.toolName, prompt: ask.prompt, runner },
            },
          ]
        : []),
      { type: 'task.waiting', ...ids, payload: { waitingFor: 'permission', reason: ask.prompt } },
    ],
    true,
  );
  return open;
}

/**
 * The answer to a question, once committed (by this process or any other on the store). While the thread's read
 * model (one indexed row) still lists it as pending there is none; only then is its `action.resolved` read.
 */
async function resolvedDecision(session: RunSession, actionId: string): Promise<RunnerDecision | undefined> {
  const thread = await session.engine.loadThread(session.sessionId, session.ids.threadId);
  if (thread.pending.some((p) => p.actionId === actionId)) return undefined;
  const answer = await session.engine.resolvedDecision?.(session.sessionId, actionId);
  return answer ? { actionId, ...answer } : undefined;
}

/**
 * Close questions nobody answered as denied by the runtime — `action.resolved` (`resolvedBy: runtime`), and for a
 * tool approval the `permission.resolved` its `permission.requested` waits for, then `task.resumed` — each only if it
 * is still pending when written (guarded in the transaction). Returns the questions that were answered first: an
 * answer committed a moment earlier stands.
 */
export async function expireDecisions(
  engine: Pick<Engine, 'append'>,
  sessionId: string,
  ids: RunnerRunIds,
  questions: readonly OpenDecision[],
  reason: string,
): Promise<OpenDecision[]> {
  const answered: OpenDecision[] = [];
  for (const question of questions) {
    const call = question.toolCallId ? { stepId: question.toolCallId, toolCallId: question.toolCallId } : {};
    const drafts: EventDraft[] = [
      {
        type: 'action.resolved',
        ...ids,
        actionId: question.actionId,
        payload: { decision: 'deny', reason, resolvedBy: 'runtime' },
      },
      ...(question.actionType === 'tool_approval'
        ? [
            {
              type: 'permission.resolved' as const,
              ...ids,
              ...call,
              actionId: question.actionId,
              payload: {
                decision: 'deny' as const,
                toolName: question.toolName,
                source: 'host_policy' as const,
                reason,
              },
            },
          ]
        : []),
      { type: 'task.resumed', ...ids, payload: { reason: `decision closed: ${reason}` } },
    ];
    try {
      await engine.append(sessionId, drafts, {
        guard: async (tx) => {
          const models = await loadReadModels(tx, sessionId, [{ kind: 'thread', key: ids.threadId }]);
          const pending = models.threads.get(ids.threadId)?.pending ?? [];
          if (!pending.some((p) => p.actionId === question.actionId)) throw new AlreadyResolved();
        },
      });
    } catch (error) {
      if (!(error instanceof AlreadyResolved)) throw error;
      answered.push(question);
    }
  }
  return answered;
}

class AlreadyResolved extends Error {}
