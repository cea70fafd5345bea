import type { Db } from './store.js';

/**
 * The text a person or client sends to a process's standard input (`write_process_stdin`), handed from the
 * command to the runtime that runs the process outside the log: the log records only its size and digest, so the
 * process gets exactly what was sent (a password typed at a prompt is not redacted into `[REDACTED]`) and nothing
 * of it stays on record. A row lives until the request is answered (control-plane/processes.ts,
 * worker/process-requests.ts).
 */

const scopeOf = (sessionId: string) => `process-input:${sessionId}`;

export async function putProcessInput(db: Db, sessionId: string, requestId: string, text: string): Promise<void> {
  await db
    .insertInto('oar_state')
    .values({ scope: scopeOf(sessionId), key: requestId, value: text, updated_at: new Date().toISOString() })
    .execute();
}

/** The text of a request, if it is still here. */
export async function processInput(db: Db, sessionId: string, requestId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('oar_state')
    .select('value')
    .where('scope', '=', scopeOf(sessionId))
    .where('key', '=', requestId)
    .executeTakeFirst();
  return row?.value;
}

/**
 * Forget the texts of a session's requests that are no longer pending: answered, or never recorded (the command
 * failed after it stored the text). `keep` are the pending ones; a text younger than `graceMs` is kept in any case,
 * since its request may be being recorded right now.
 */
export async function dropProcessInputs(
  db: Db,
  sessionId: string,
  keep: readonly string[],
  graceMs = 60_000,
): Promise<void> {
  const before = new Date(Date.now() - graceMs).toISOString();
  await db
    .deleteFrom('oar_state')
    .where('scope', '=', scopeOf(sessionId))
    .$if(keep.length > 0, (qb) => qb.where('key', 'not in', keep))
    .where('updated_at', '<', before)
    .execute();
}

/** Forget one request's text (it was written to the process). */
export async function dropProcessInput(db: Db, sessionId: string, requestId: string): Promise<void> {
  await db.deleteFrom('oar_state').where('scope', '=', scopeOf(sessionId)).where('key', '=', requestId).execute();
}
