import type { RuntimeEvent } from '@oar/protocol';
import type { Db } from '../store/store.js';

/**
 * The decision facts of a session's log, read straight from the store: the questions asked (`action.required`) and
 * their answers (`action.resolved`). Read by the control plane (to say a decision was already resolved), by a runner
 * call that waits for its approval in another process's hands (agent-runners/decisions.ts), and by whoever drives a
 * session and must hear of a runner's question while the run is still going (`Runtime.settled`).
 */

/** The committed `action.resolved` of a decision, if any: how it was answered, by whom and when. */
export async function resolutionOf(db: Db, sessionId: string, actionId: string): Promise<RuntimeEvent | undefined> {
  const rows = await db
    .selectFrom('oar_events')
    .select(['body'])
    .where('session_id', '=', sessionId)
    .where('type', '=', 'action.resolved')
    .orderBy('sequence')
    .execute();
  // The first answer is the answer (a guard keeps a second from being written).
  for (const row of rows) {
    const event = JSON.parse(row.body) as RuntimeEvent;
    if ((event as { actionId?: string }).actionId === actionId) return event;
  }
  return undefined;
}

/** The questions asked after `sequence` (in order), and the newest sequence looked at. */
export async function questionsAfter(
  db: Db,
  sessionId: string,
  sequence: number,
): Promise<{ questions: RuntimeEvent[]; sequence: number }> {
  const rows = await db
    .selectFrom('oar_events')
    .select(['body', 'sequence'])
    .where('session_id', '=', sessionId)
    .where('sequence', '>', sequence)
    .where('type', '=', 'action.required')
    .orderBy('sequence')
    .execute();
  const questions = rows.map((row) => JSON.parse(row.body) as RuntimeEvent);
  return { questions, sequence: Number(rows.at(-1)?.sequence ?? sequence) };
}
