import type { ScheduleDefinition } from '../config/schedules.js';
import type { ScheduleFiringsTable } from '../store/schema.js';
import type { Db } from '../store/store.js';

/**
 * The stored schedules and their firings (migration 0009): the queries of the schedule commands and of the
 * worker's ticker, in one place. Claiming a firing is one insert that does nothing on a conflict of its primary
 * key (schedule, cron time): on both dialects exactly one worker's insert takes effect, and `returning` tells it so.
 */

export type FiringStatus = 'claimed' | 'started' | 'queued' | 'skipped' | 'failed';

export interface StartedWork {
  sessionId: string;
  threadId?: string;
  turnId?: string;
  jobId?: string;
}

export interface ScheduleRow {
  scheduleId: string;
  workspaceId: string | undefined;
  definition: ScheduleDefinition;
  paused: boolean;
  source: 'config' | 'api';
  createdAt: string;
  updatedAt: string;
  lastFireAt: string | undefined;
  nextFireAt: string | undefined;
}

export interface FiringRow {
  scheduleId: string;
  fireAt: string;
  status: FiringStatus;
  started?: StartedWork;
  reason?: string;
  details?: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

type RawSchedule = {
  id: string;
  workspace_id: string | null;
  definition: string;
  paused: number | string | boolean;
  source: string;
  created_at: string;
  updated_at: string;
  last_fire_at: string | null;
  next_fire_at: string | null;
};

function scheduleOf(row: RawSchedule): ScheduleRow {
  return {
    scheduleId: row.id,
    workspaceId: row.workspace_id ?? undefined,
    definition: JSON.parse(row.definition) as ScheduleDefinition,
    // PostgreSQL answers an integer column as a number; be lenient with what a driver hands back.
    paused: Number(row.paused) === 1 || row.paused === true,
    source: row.source === 'config' ? 'config' : 'api',
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    lastFireAt: row.last_fire_at ?? undefined,
    nextFireAt: row.next_fire_at ?? undefined,
  };
}

type RawFiring = ScheduleFiringsTable;

function firingOf(row: RawFiring): FiringRow {
  return {
    scheduleId: row.schedule_id,
    fireAt: row.fire_at,
    status: row.status as FiringStatus,
    ...(row.started ? { started: JSON.parse(row.started) as StartedWork } : {}),
    ...(row.reason ? { reason: row.reason } : {}),
    ...(row.details ? { details: JSON.parse(row.details) as Record<string, unknown> } : {}),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export async function scheduleRow(db: Db, scheduleId: string): Promise<ScheduleRow | undefined> {
  const row = await db.selectFrom('oar_schedules').selectAll().where('id', '=', scheduleId).executeTakeFirst();
  return row ? scheduleOf(row) : undefined;
}

export async function scheduleRows(db: Db, filter: { workspaceId?: string | null } = {}): Promise<ScheduleRow[]> {
  let query = db.selectFrom('oar_schedules').selectAll().orderBy('created_at').orderBy('id');
  if (filter.workspaceId === null) query = query.where('workspace_id', 'is', null);
  else if (filter.workspaceId !== undefined) query = query.where('workspace_id', '=', filter.workspaceId);
  return (await query.execute()).map(scheduleOf);
}

/** The schedules whose next cron time has come, not paused. */
export async function dueScheduleRows(db: Db, now: string, limit = 100): Promise<ScheduleRow[]> {
  const rows = await db
    .selectFrom('oar_schedules')
    .selectAll()
    .where('paused', '=', 0)
    .where('next_fire_at', '<=', now)
    .orderBy('next_fire_at')
    .limit(limit)
    .execute();
  return rows.map(scheduleOf);
}

export interface NewSchedule {
  scheduleId: string;
  workspaceId: string | undefined;
  definition: ScheduleDefinition;
  source: 'config' | 'api';
  nextFireAt: string | undefined;
  now: string;
}

/** Insert a schedule; false when its id is taken. */
export async function insertSchedule(db: Db, s: NewSchedule): Promise<boolean> {
  const row = await db
    .insertInto('oar_schedules')
    .values({
      id: s.scheduleId,
      workspace_id: s.workspaceId ?? null,
      definition: JSON.stringify(s.definition),
      paused: s.definition.paused ? 1 : 0,
      source: s.source,
      created_at: s.now,
      updated_at: s.now,
      last_fire_at: null,
      next_fire_at: s.nextFireAt ?? null,
    })
    .onConflict((oc) => oc.column('id').doNothing())
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * A config schedule as the config file says it now: its definition replaced when it changed (its pointer then
 * recomputed by the caller), its firings kept. Its `paused` is the file's only when the definition changed: a
 * pause through the API outlives restarts with an unchanged file.
 */
export async function replaceDefinition(
  db: Db,
  scheduleId: string,
  definition: ScheduleDefinition,
  nextFireAt: string | undefined,
  now: string,
): Promise<void> {
  await db
    .updateTable('oar_schedules')
    .set({
      definition: JSON.stringify(definition),
      paused: definition.paused ? 1 : 0,
      next_fire_at: nextFireAt ?? null,
      updated_at: now,
    })
    .where('id', '=', scheduleId)
    .execute();
}

export async function setPaused(db: Db, scheduleId: string, paused: boolean, nextFireAt: string | null, now: string) {
  await db
    .updateTable('oar_schedules')
    .set({ paused: paused ? 1 : 0, updated_at: now, ...(paused ? {} : { next_fire_at: nextFireAt }) })
    .where('id', '=', scheduleId)
    .execute();
}

export async function deleteSchedule(db: Db, scheduleId: string): Promise<void> {
  await db.deleteFrom('oar_schedule_firings').where('schedule_id', '=', scheduleId).execute();
  await db.deleteFrom('oar_schedules').where('id', '=', scheduleId).execute();
}

/**
 * Move a schedule's pointer forward to `nextFireAt` and its last firing to `lastFireAt` — never back: two tickers
 * that handled the same due times race here harmlessly, the later time wins.
 */
export async function advancePointer(
  db: Db,
  scheduleId: string,
  lastFireAt: string | undefined,
  nextFireAt: string | undefined,
): Promise<void> {
  const now = new Date().toISOString();
  if (lastFireAt) {
    await db
      .updateTable('oar_schedules')
      .set({ last_fire_at: lastFireAt, updated_at: now })
      .where('id', '=', scheduleId)
      .where((eb) => eb.or([eb('last_fire_at', 'is', null), eb('last_fire_at', '<', lastFireAt)]))
      .execute();
  }
  await db
    .updateTable('oar_schedules')
    .set({ next_fire_at: nextFireAt ?? null, updated_at: now })
    .where('id', '=', scheduleId)
    .where('paused', '=', 0)
    .where((eb) =>
      nextFireAt === undefined ? eb('next_fire_at', 'is not', null) : eb('next_fire_at', '<', nextFireAt),
    )
    .execute();
}

/**
 * Claim one cron time of a schedule: true only for the one caller whose insert took effect. `status` is `claimed`
 * for work about to start, or a final `skipped` (recorded as it is claimed).
 */
export async function claimFiring(
  db: Db,
  f: { scheduleId: string; fireAt: string; status: 'claimed' | 'skipped'; reason?: string; details?: object },
): Promise<boolean> {
  const now = new Date().toISOString();
  const row = await db
    .insertInto('oar_schedule_firings')
    .values({
      schedule_id: f.scheduleId,
      fire_at: f.fireAt,
      status: f.status,
      started: null,
      reason: f.reason ?? null,
      details: f.details ? JSON.stringify(f.details) : null,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.columns(['schedule_id', 'fire_at']).doNothing())
    .returning('fire_at')
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Take over a firing left `claimed` (its worker died between the claim and the start) or `queued` (waiting for the
 * previous firing's work), as read: one conditional update, so of the workers that read it, one takes it.
 */
export async function retakeFiring(db: Db, firing: FiringRow): Promise<boolean> {
  const result = await db
    .updateTable('oar_schedule_firings')
    .set({ status: 'claimed', updated_at: new Date().toISOString() })
    .where('schedule_id', '=', firing.scheduleId)
    .where('fire_at', '=', firing.fireAt)
    .where('status', '=', firing.status)
    .where('updated_at', '=', firing.updatedAt)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Firings in `status` (claimed and never started, or queued) last touched before `staleBefore`, oldest first. */
export async function staleFirings(
  db: Db,
  status: 'claimed' | 'queued',
  staleBefore: string,
  limit = 50,
): Promise<FiringRow[]> {
  const rows = await db
    .selectFrom('oar_schedule_firings')
    .selectAll()
    .where('status', '=', status)
    .where('updated_at', '<', staleBefore)
    .orderBy('updated_at')
    .limit(limit)
    .execute();
  return rows.map(firingOf);
}

export async function finishFiring(
  db: Db,
  f: {
    scheduleId: string;
    fireAt: string;
    status: FiringStatus;
    started?: StartedWork;
    reason?: string;
    details?: object;
  },
): Promise<void> {
  await db
    .updateTable('oar_schedule_firings')
    .set({
      status: f.status,
      started: f.started ? JSON.stringify(f.started) : null,
      reason: f.reason ?? null,
      ...(f.details ? { details: JSON.stringify(f.details) } : {}),
      updated_at: new Date().toISOString(),
    })
    .where('schedule_id', '=', f.scheduleId)
    .where('fire_at', '=', f.fireAt)
    .execute();
}

/** A schedule's firings, newest first. */
export async function firingRows(
  db: Db,
  scheduleId: string,
  options: { limit?: number; before?: string; status?: FiringStatus | FiringStatus[] } = {},
): Promise<FiringRow[]> {
  let query = db
    .selectFrom('oar_schedule_firings')
    .selectAll()
    .where('schedule_id', '=', scheduleId)
    .orderBy('fire_at', 'desc')
    .limit(options.limit ?? 20);
  if (options.before) query = query.where('fire_at', '<', options.before);
  if (options.status) query = query.where('status', 'in', [options.status].flat());
  return (await query.execute()).map(firingOf);
}

/** The firings that started work in a session (the evidence export lists them). */
export async function firingsOfSession(db: Db, sessionId: string): Promise<FiringRow[]> {
  const rows = await db
    .selectFrom('oar_schedule_firings')
    .selectAll()
    .where('started', 'like', `%"sessionId":${JSON.stringify(sessionId)}%`)
    .orderBy('fire_at')
    .execute();
  // `like` is a coarse filter (its `_` matches any character): the parsed value decides.
  return rows.map(firingOf).filter((firing) => firing.started?.sessionId === sessionId);
}
