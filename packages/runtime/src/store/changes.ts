import { sql } from 'kysely';
import type { Store } from './store.js';

/**
 * Which sessions changed since a position in the store's own commit order — never since a time. Writers stamp
 * `updated_at` with their own clocks, and clocks disagree (another machine, a container, a stepped clock): a poll
 * keyed on time misses the changes of a writer whose clock is behind. The position is the store's:
 *
 * - **SQLite**: the `rowid` of the last event seen. Events are never deleted, and SQLite has one writer at a time,
 *   so rowids are handed out in commit order: a reader that sees rowid N has seen every commit before it.
 * - **PostgreSQL**: a snapshot (`pg_current_snapshot()`). A session row whose last writer (`change_xid`, the
 *   writing transaction's id, stamped by a trigger) was not yet visible in the previous poll's snapshot changed
 *   since — whatever the order in which transactions commit. A writer older than that snapshot's `xmin` (the oldest
 *   transaction it saw running) had ended by then, so it was visible: the poll reads only the rows with
 *   `change_xid >= xmin`, an index range, never the whole table. While nothing is running that range holds just the
 *   rows written since the last poll; a long transaction elsewhere in the database widens it to the rows written
 *   since it began (read, found visible, skipped) until it ends.
 *
 * A change is reported with the session's newest sequence; the same change may be reported twice (a session row
 * rewritten without a new event, an overlap at the start), never not at all.
 */
export type ChangeCursor = { dialect: 'sqlite'; rowid: number } | { dialect: 'postgres'; snapshot: string };

export interface StoreChange {
  sessionId: string;
  sequence: number;
}

/** At most this many events are read per SQLite poll (a notifier catching up reads the rest on the next ones). */
export const CHANGE_WINDOW = 5000;

/** The store's current position: changes after it are reported by `changesSince`. */
export async function changeCursor(store: Store): Promise<ChangeCursor> {
  if (store.dialect === 'postgres') {
    const { rows } = await sql<{ snapshot: string }>`select pg_current_snapshot()::text as snapshot`.execute(store.db);
    return { dialect: 'postgres', snapshot: rows[0]?.snapshot ?? '1:1:' };
  }
  const { rows } = await sql<{ rowid: number | null }>`select max(rowid) as rowid from oar_events`.execute(store.db);
  return { dialect: 'sqlite', rowid: Number(rows[0]?.rowid ?? 0) };
}

/**
 * The sessions that changed after `cursor`, each with its newest sequence, and the position to ask from next.
 * `more`: the SQLite window was full, so there may be more to read right away.
 */
export async function changesSince(
  store: Store,
  cursor: ChangeCursor,
): Promise<{ changes: StoreChange[]; cursor: ChangeCursor; more: boolean }> {
  if (cursor.dialect === 'postgres') {
    // One statement: the rows and the snapshot they were read under are the same view. The lower bound is a value,
    // not an expression, so the planner sees how few rows it selects (an index range). The left join yields the
    // snapshot even when nothing changed.
    const xmin = snapshotXmin(cursor.snapshot);
    const { rows } = await sql<{ snapshot: string; id: string | null; last_sequence: number | string | null }>`
      select s.snap::text as snapshot, o.id, o.last_sequence
      from (select pg_current_snapshot() as snap) s
      left join oar_sessions o
        on o.change_xid >= ${xmin}::xid8
        and not pg_visible_in_snapshot(o.change_xid, ${cursor.snapshot}::pg_snapshot)`.execute(store.db);
    const changes: StoreChange[] = [];
    for (const row of rows) {
      if (row.id !== null) changes.push({ sessionId: row.id, sequence: Number(row.last_sequence) });
    }
    return { changes, cursor: { dialect: 'postgres', snapshot: rows[0]?.snapshot ?? cursor.snapshot }, more: false };
  }
  const { rows } = await sql<{ session_id: string; sequence: number; position: number; seen: number }>`
    select session_id, max(sequence) as sequence, max(position) as position, count(*) as seen
    from (
      select rowid as position, session_id, sequence from oar_events
      where rowid > ${cursor.rowid} order by rowid limit ${CHANGE_WINDOW}
    )
    group by session_id`.execute(store.db);
  let rowid = cursor.rowid;
  let seen = 0;
  for (const row of rows) {
    rowid = Math.max(rowid, Number(row.position));
    seen += Number(row.seen);
  }
  return {
    changes: rows.map((row) => ({ sessionId: row.session_id, sequence: Number(row.sequence) })),
    cursor: { dialect: 'sqlite', rowid },
    more: seen >= CHANGE_WINDOW,
  };
}

/** The `xmin` of a `pg_snapshot` text (`xmin:xmax:xip,…`): the oldest transaction it saw still running. */
function snapshotXmin(snapshot: string): string {
  const xmin = snapshot.split(':')[0] ?? '';
  return /^[0-9]+$/.test(xmin) ? xmin : '0';
}
