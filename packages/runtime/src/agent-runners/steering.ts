import { SteeringPullArgsSchema } from '@oar/runner-sdk';
import { queueChanged, ThreadChangedError, threadUnchanged } from '../facts/queue.js';
import type { EventDraft } from '../log/draft.js';
import type { ThreadView } from '../read-models/thread-state.js';
import type { AuditTarget } from './run-session.js';
import { apiError, type RunSession } from './run-session.js';

/**
 * steering.pull: the running run claims the input queued on its thread meanwhile (turns submitted while it runs),
 * so a runner that supports steering folds a follow-up into the work in flight instead of answering it as a turn of
 * its own afterwards. What a claim records: one `queue.changed` `removed` per claimed turn, with
 * `steered: {runId, runnerId, turnId}` naming the run (and turn) that took its input — the queued turn does not run on
 * its own (it ends `cancelled`, as any removed queued turn), its input stays in the transcript, and the record says
 * where it went. Written under the queue guard, so a concurrent submit is never lost.
 *
 * Claimed in queue order, and only from the front: a task's attempt (which leaves only with its task) or a turn held
 * by its task stops the claim, so nothing overtakes it. Nothing is claimed while the thread has an interrupt pending
 * (the queued turn that asked for it runs on its own) or when the run's turn is no longer the active one.
 * Needs the manifest's `steering` capability (LangBot's name for it): a runner that does not say it folds follow-ups
 * in would drop them.
 */
export async function steeringPull(session: RunSession, payload: Record<string, unknown>, audit: AuditTarget) {
  audit.scope = 'conversation';
  audit.resource = session.ids.threadId;
  if ((session.capabilities as Record<string, unknown>).steering !== true) {
    throw apiError('unauthorized', 'steering.pull needs the steering capability in the runner manifest');
  }
  const parsed = SteeringPullArgsSchema.safeParse(payload);
  if (!parsed.success) throw apiError('invalid_argument', 'steering.pull takes {mode?: "all" | "one", limit (1-100)?}');
  const max = parsed.data.mode === 'one' ? 1 : (parsed.data.limit ?? 100);
  // A concurrent submit changes the queue under us: read it again (a few times; then nothing is claimed this time).
  for (let attempt = 0; attempt < 5; attempt++) {
    const thread = await session.engine.loadThread(session.sessionId, session.ids.threadId);
    const claimed = claimable(thread, session.ids.turnId).slice(0, max);
    if (claimed.length === 0) return { items: [], claimed_at: null };
    const claimedAt = new Date().toISOString();
    let queue = thread.queue;
    const drafts: EventDraft[] = claimed.map((entry) => {
      queue = queue.filter((q) => q.turnId !== entry.turnId);
      const draft = queueChanged(thread, queue, 'removed', entry.turnId);
      const steered = { runId: session.ids.runId, runnerId: session.runnerId, turnId: session.ids.turnId };
      // (Narrowed for the typed payload: queueChanged always builds a queue.changed.)
      return draft.type === 'queue.changed' ? { ...draft, payload: { ...draft.payload, steered } } : draft;
    });
    try {
      await session.engine.append(session.sessionId, drafts, { guard: threadUnchanged(thread) });
    } catch (error) {
      if (error instanceof ThreadChangedError) continue;
      throw error;
    }
    return {
      items: claimed.map((entry) => ({
        turn_id: entry.turnId,
        input: entry.input,
        source: entry.source,
        enqueued_at: entry.enqueuedAt,
      })),
      claimed_at: claimedAt,
    };
  }
  return { items: [], claimed_at: null };
}

/** The queued entries the run may claim: from the front of the queue, up to the first that must run on its own. */
function claimable(thread: ThreadView, runTurnId: string): ThreadView['queue'] {
  if (thread.activeTurnId !== runTurnId || thread.interrupt) return [];
  const out: ThreadView['queue'] = [];
  for (const entry of thread.queue) {
    const turn = thread.turns.find((t) => t.turnId === entry.turnId);
    if (turn?.status !== 'queued' || turn.task) break;
    out.push(entry);
  }
  return out;
}
