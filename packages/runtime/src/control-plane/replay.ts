import type { ReadModelChange, RuntimeEvent } from '@oar/protocol';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import type { EventDraft } from '../log/draft.js';
import type { EventLog } from '../log/event-log.js';
import {
  KEYED_KINDS,
  keyOf,
  loadAllReadModels,
  type ModelKey,
  mapOf,
  modelOf,
  readModelRow,
  upsertReadModels,
} from '../log/read-model-rows.js';
import { findContradictions } from '../read-models/contradictions.js';
import { type ReadModels, replay, touchedKeys } from '../read-models/project.js';
import type { Db } from '../store/store.js';
import type { CommandContext } from './command-context.js';

/**
 * `oar replay`: every read model of a session rebuilt from its log and compared with the stored ones — and, with
 * `--repair`, the stored ones rewritten from the rebuild, recorded as `history.reconstructed` (the read models were
 * rebuilt from the log) and `snapshot.repaired` (which of them differed), so a store whose projections fell behind
 * the reducers (a session recorded before the session projection kept `evidence`, a row changed by hand) is made
 * whole again without touching a fact.
 */

/** What `oar replay` reports (`replaySession`, `POST …/replay-check`). */
export interface ReplayReport {
  /** No difference and no contradiction. */
  equal: boolean;
  /** The read models that differ, as `session`, `thread <id>`, `run <id>`…, and `<kind> count` when the counts do. */
  differences: string[];
  /** Facts of the log that cannot both be true (two endings of one turn, task or tool call). */
  contradictions: { sequence: number; reason: string }[];
  /** How many events were replayed. */
  events: number;
}

/** What `--repair` did: nothing was needed, the read models were rewritten, or the log forbade it. */
export type RepairOutcome =
  | { status: 'not_needed' }
  | { status: 'refused'; reason: string }
  | {
      status: 'repaired';
      readModels: ReadModelChange[];
      counts: Record<ReadModelChange['change'], number>;
      /** The facts that record the repair. */
      recorded: { type: string; sequence: number }[];
    };

/** The report as found before the repair, and what the repair did. */
export type RepairReport = ReplayReport & { repair: RepairOutcome };

/** At most this many changed read models (and threads) are listed in `snapshot.repaired`; `counts` has them all. */
const MAX_LISTED = 500;
/** Attempts before a repair that keeps meeting new events gives up (`session_changed`). */
const ATTEMPTS = 3;
/** Rows per statement when the repair rewrites read models (SQLite binds at most 32,766 parameters). */
const ROWS_PER_STATEMENT = 500;

/** A session's log replayed and compared with its stored read models. */
interface Checked {
  report: ReplayReport;
  events: RuntimeEvent[];
  rebuilt: ReadModels;
  changes: ReadModelChange[];
}

async function check(log: EventLog, sessionId: string): Promise<Checked> {
  const events = await log.read(sessionId);
  if (events.length === 0) throw notFound('session', sessionId);
  const rebuilt = replay(events);
  const stored = await loadAllReadModels(log.store.db, sessionId);
  const changes = compareReadModels(sessionId, rebuilt, stored);
  const differences = differenceNames(changes, rebuilt, stored);
  const contradictions = findContradictions(events);
  const equal = differences.length === 0 && contradictions.length === 0;
  return { report: { equal, differences, contradictions, events: events.length }, events, rebuilt, changes };
}

/**
 * Rebuild every read model from the log and compare with the stored ones (`oar replay`). A log that holds a
 * contradiction (two endings of one turn, task or tool call) is reported as such, never as "equal".
 */
export async function replaySession(log: EventLog, sessionId: string): Promise<ReplayReport> {
  return (await check(log, sessionId)).report;
}

/** How each stored read model compares with the rebuilt one (as JSON: the store keeps them as JSON text). */
export function compareReadModels(sessionId: string, rebuilt: ReadModels, stored: ReadModels): ReadModelChange[] {
  const changes: ReadModelChange[] = [];
  const compare = (kind: ReadModelChange['kind'], key: string, want: unknown, have: unknown) => {
    if (have === undefined) changes.push({ kind, key, change: 'missing' });
    else if (JSON.stringify(want) !== JSON.stringify(have)) changes.push({ kind, key, change: 'differed' });
  };
  if (rebuilt.session) compare('session', sessionId, rebuilt.session, stored.session);
  for (const kind of KEYED_KINDS) {
    const want = mapOf(rebuilt, kind);
    const have = mapOf(stored, kind);
    for (const [key, model] of want) compare(kind, key, model, have.get(key));
    for (const key of have.keys()) if (!want.has(key)) changes.push({ kind, key, change: 'extra' });
  }
  return changes;
}

/** The changes as `oar replay` has always named them: each model the store lacks or holds otherwise, then counts. */
function differenceNames(changes: ReadModelChange[], rebuilt: ReadModels, stored: ReadModels): string[] {
  const names = changes
    .filter((c) => c.change !== 'extra')
    .map((c) => (c.kind === 'session' ? 'session' : `${c.kind} ${c.key}`));
  for (const kind of KEYED_KINDS) {
    if (mapOf(rebuilt, kind).size !== mapOf(stored, kind).size) names.push(`${kind} count`);
  }
  return names;
}

/**
 * `oar replay --repair`: the comparison, then — when a stored read model differs and the log holds no
 * contradiction — the stored read models rewritten from the rebuild and the repair recorded, in one transaction
 * under the session's lock. A log that holds a contradiction is not rebuilt over: its projection would take one
 * side of the contradiction, which is for a person to decide. Events appended between the comparison and the lock
 * retry the whole repair (a rebuild of an older log would undo them); after three, `session_changed`.
 */
export async function repairSession(ctx: CommandContext, sessionId: string): Promise<RepairReport> {
  for (let attempt = 1; ; attempt++) {
    const checked = await check(ctx.log, sessionId);
    const { report, changes } = checked;
    if (changes.length === 0) return { ...report, repair: { status: 'not_needed' } };
    if (report.contradictions.length > 0) {
      const reason = 'the log holds contradictory facts: a rebuild would take one side of each, so none is written';
      return { ...report, repair: { status: 'refused', reason } };
    }
    try {
      return { ...report, repair: await writeRepair(ctx, sessionId, checked) };
    } catch (error) {
      if (error instanceof OarRuntimeError && error.code === 'session_changed' && attempt < ATTEMPTS) continue;
      throw error;
    }
  }
}

async function writeRepair(ctx: CommandContext, sessionId: string, checked: Checked): Promise<RepairOutcome> {
  const { events, rebuilt, changes } = checked;
  const throughSequence = (events.at(-1) as RuntimeEvent).sequence;
  const counts = { differed: 0, missing: 0, extra: 0 };
  for (const c of changes) counts[c.change]++;
  const threadIds = [...new Set(changes.filter((c) => c.kind === 'thread').map((c) => c.key))];
  const drafts: EventDraft[] = [
    {
      type: 'history.reconstructed',
      payload: { reason: 'repair', eventCount: events.length, throughSequence, readModels: modelCounts(rebuilt) },
    },
    {
      type: 'snapshot.repaired',
      payload: {
        reason: 'the stored read models differed from a replay of the log; rewritten from it',
        throughSequence,
        readModels: changes.slice(0, MAX_LISTED),
        threadIds: threadIds.slice(0, MAX_LISTED),
        counts,
      },
    },
  ];
  const recorded = await ctx.append(sessionId, drafts, {
    // The two facts project onto the rewritten rows, not onto what this process cached of the old ones.
    fromStore: true,
    guard: async (tx) => {
      // Under the session's lock, before this append's events are inserted: the log's last event is still the
      // one the rebuild went through, or somebody appended since and the rebuild is stale.
      const last = await tx
        .selectFrom('oar_events')
        .select((eb) => eb.fn.max('sequence').as('last'))
        .where('session_id', '=', sessionId)
        .executeTakeFirst();
      if (Number(last?.last ?? 0) !== throughSequence) {
        throw new OarRuntimeError('session_changed', 'events were appended while the read models were rebuilt', {
          retryable: true,
          details: { sessionId, rebuiltThrough: throughSequence, lastSequence: Number(last?.last ?? 0) },
        });
      }
      await rewriteReadModels(tx, sessionId, rebuilt, changes, lastTouches(events));
    },
  });
  return {
    status: 'repaired',
    readModels: changes,
    counts,
    recorded: recorded.map((e) => ({ type: e.type, sequence: e.sequence })),
  };
}

/** How many read models of each kind the rebuild holds (a kind with none is left out). */
function modelCounts(models: ReadModels): Partial<Record<ReadModelChange['kind'], number>> {
  const counts: Partial<Record<ReadModelChange['kind'], number>> = models.session ? { session: 1 } : {};
  for (const kind of KEYED_KINDS) {
    const size = mapOf(models, kind).size;
    if (size > 0) counts[kind] = size;
  }
  return counts;
}

/** The sequence of the last event that touched each read model: the row's `sequence`, as the projection keeps it. */
function lastTouches(events: readonly RuntimeEvent[]): Map<string, number> {
  const last = new Map<string, number>();
  for (const event of events) for (const k of touchedKeys(event)) last.set(keyOf(k), event.sequence);
  return last;
}

/** Write the changed read models as rebuilt, and delete the stored ones the log does not produce. */
async function rewriteReadModels(
  tx: Db,
  sessionId: string,
  rebuilt: ReadModels,
  changes: readonly ReadModelChange[],
  touched: ReadonlyMap<string, number>,
): Promise<void> {
  const updatedAt = new Date().toISOString();
  const rows = changes
    .filter((c) => c.change !== 'extra')
    .map((c) => {
      const k: ModelKey = { kind: c.kind, key: c.key };
      return readModelRow(sessionId, k, modelOf(rebuilt, k) as object, touched.get(keyOf(k)) ?? 0, updatedAt);
    });
  for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
    await upsertReadModels(tx, rows.slice(i, i + ROWS_PER_STATEMENT)).execute();
  }
  for (const c of changes) {
    if (c.change !== 'extra') continue;
    await tx
      .deleteFrom('oar_read_models')
      .where('session_id', '=', sessionId)
      .where('kind', '=', c.kind)
      .where('key', '=', c.key)
      .execute();
  }
}
