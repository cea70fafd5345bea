import type { ActionDecision } from '@oar/protocol';
import { newId } from '../ids.js';
import { type EventDraft, loadReadModels } from '../log/event-log.js';
import { apiError, type RunSession } from './run-session.js';

/**
 * Durable decisions of a runner run (docs/runners.md "Decisions"): a `tools.call` that the permission policy asks
 * about, a `platform.request_action`, an `action.requested` result. Each is an `action.required` on the record,
 * exactly like a protocol run's, answered by `oar respond` (or the approval prompt of `oar run`) from any process
 * on the store. Unlike a protocol run, the runner is alive while it waits: the host holds the call open and polls
 * the store for the answer until the run's deadline. A decision still open when the run ends for any reason (the
 * deadline, an interrupt, a crash found on resume) is closed on the record as a denial by the runtime, so nothing
 * waits for an answer that can no longer change anything.
 */

/** How often the store is asked for the answer while a call waits (a person answers in seconds, not ms). */
export const DECISION_POLL_MS = 200;

/** What a runner asks to be decided. */
export interface RunnerAsk {
  actionType: 'tool_approval' | 'platform_action';
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
 * Record the question durably, then wait for its answer until the run's deadline or its end. A denial resolves
 * (the caller refuses); the deadline rejects with `deadline_exceeded`, the run's end with `unauthorized`, and in
 * both cases the question is closed on the record first.
 */
export async function awaitDecision(
  session: RunSession,
  ask: RunnerAsk,
  /** The question outlives the runner's part of the run (an `action.requested` result): only the deadline ends it. */
  outlivesRun = false,
): Promise<RunnerDecision> {
  const actionId = await recordAsk(session, ask);
  let answered = false;
  try {
    for (;;) {
      const answer = await resolvedDecision(session, actionId);
      if (answer) {
        answered = true;
        return answer;
      }
      if (session.signal.aborted || (!outlivesRun && !session.active)) {
        throw apiError('unauthorized', 'the run ended while the decision was pending', { action_id: actionId });
      }
      const left = session.deadlineAt - Date.now();
      if (left <= 0) {
        throw apiError('deadline_exceeded', 'no decision before the run deadline', { action_id: actionId });
      }
      await pause(Math.min(left, DECISION_POLL_MS), session.signal);
    }
  } finally {
    session.openDecisions.delete(actionId);
    if (!answered) await expireDecisions(session, [actionId], 'the runner call stopped waiting').catch(() => undefined);
  }
}

/** Record the question (durable: `oar respond` in another process must find it) and return its id. */
export async function recordAsk(session: RunSession, ask: RunnerAsk): Promise<string> {
  const actionId = newId('act');
  const ids = session.ids;
  const call = ask.toolCallId ? { stepId: ask.toolCallId, toolCallId: ask.toolCallId } : {};
  const runner = { runId: ids.runId, runnerId: session.runnerId };
  session.openDecisions.add(actionId);
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
  return actionId;
}

/** The answer to a question, once committed (by this process or any other on the store). */
export async function resolvedDecision(session: RunSession, actionId: string): Promise<RunnerDecision | undefined> {
  const answer = await session.engine.resolvedDecision?.(session.sessionId, actionId);
  return answer ? { actionId, ...answer } : undefined;
}

/**
 * Close questions nobody answered as denied by the runtime, each only if it is still pending when written (an
 * answer committed a moment earlier stands). Used when a call stops waiting and when a run ends.
 */
export async function expireDecisions(session: RunSession, actionIds: Iterable<string>, reason: string): Promise<void> {
  for (const actionId of actionIds) {
    await session.engine
      .append(
        session.sessionId,
        [
          {
            type: 'action.resolved',
            ...session.ids,
            actionId,
            payload: { decision: 'deny', reason, resolvedBy: 'runtime' },
          },
        ],
        {
          guard: async (tx) => {
            const models = await loadReadModels(tx, session.sessionId, [{ kind: 'thread', key: session.ids.threadId }]);
            const pending = models.threads.get(session.ids.threadId)?.pending ?? [];
            if (!pending.some((p) => p.actionId === actionId)) throw new AlreadyResolved();
          },
        },
      )
      .catch((error: unknown) => {
        if (!(error instanceof AlreadyResolved)) throw error;
      });
  }
}

class AlreadyResolved extends Error {}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
