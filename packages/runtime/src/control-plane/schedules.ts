import type { ScheduleDefinition } from '../config/schedules.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { Db } from '../store/store.js';
import { DEFAULT_WORKSPACE } from '../store/workspaces.js';
import {
  deleteSchedule,
  type FiringRow,
  firingRows,
  insertSchedule,
  replaceDefinition,
  type ScheduleRow,
  scheduleRow,
  scheduleRows,
  setPaused,
} from './schedule-rows.js';
import { nextFireAfter, nextFirings } from './schedule-timing.js';

/**
 * The schedule commands (docs/schedules.md): add, list, get, pause, resume, remove, and the upsert of the config
 * file's schedules. Their inputs arrive checked against config/schedules.ts (the facade parses them, defaults
 * applied); what firing does is the worker's (worker/schedule-ticker.ts). Schedules are rows, not session events:
 * the facts are on the sessions, turns and jobs the firings start.
 */

/** A schedule as `get`/`list` answer it: its definition, state, the next cron times and the last firings. */
export type ScheduleView = ScheduleDefinition & {
  workspaceId?: string;
  source: 'config' | 'api';
  createdAt: string;
  updatedAt: string;
  lastFireAt?: string;
  nextFireAt?: string;
  /** The next cron times (up to 3; none while paused). */
  nextFirings: string[];
  /** The last firings, newest first (`get`: up to 20; `list`: the last one). */
  lastFirings: FiringRow[];
};

/** `workspaceId`: the caller's workspace (an API key's); a schedule of another one is `schedule_not_found`. */
export interface ScheduleIdInput {
  scheduleId: string;
  workspaceId?: string;
}

const stored = (workspaceId: string | undefined) =>
  workspaceId === undefined || workspaceId === DEFAULT_WORKSPACE ? undefined : workspaceId;

async function view(db: Db, row: ScheduleRow, firings: number): Promise<ScheduleView> {
  const { paused: _paused, ...definition } = row.definition;
  const next = row.paused || !row.nextFireAt ? [] : [row.nextFireAt];
  if (next[0]) {
    for (const time of nextFirings(row.definition, new Date(next[0]), 2)) next.push(time.toISOString());
  }
  return {
    ...definition,
    scheduleId: row.scheduleId,
    paused: row.paused,
    ...(row.workspaceId ? { workspaceId: row.workspaceId } : {}),
    source: row.source,
    createdAt: row.createdAt,
    updatedAt: row.updatedAt,
    ...(row.lastFireAt ? { lastFireAt: row.lastFireAt } : {}),
    ...(row.nextFireAt ? { nextFireAt: row.nextFireAt } : {}),
    nextFirings: next,
    lastFirings: await firingRows(db, row.scheduleId, { limit: firings }),
  };
}

/** The schedule, if the caller's workspace may see it (no workspace: any). */
async function owned(db: Db, input: ScheduleIdInput): Promise<ScheduleRow> {
  const row = await scheduleRow(db, input.scheduleId);
  if (!row || (input.workspaceId !== undefined && row.workspaceId !== stored(input.workspaceId))) {
    throw notFound('schedule', input.scheduleId);
  }
  return row;
}

/** The first cron time after `from`, as stored (ISO), or null when the expression never fires again. */
const pointerAfter = (definition: ScheduleDefinition, from: Date) =>
  nextFireAfter(definition, from)?.toISOString() ?? null;

export async function addSchedule(
  db: Db,
  definition: Omit<ScheduleDefinition, 'scheduleId'> & { scheduleId?: string | undefined },
  options: { workspaceId?: string | undefined; source?: 'config' | 'api'; now?: Date } = {},
): Promise<ScheduleView> {
  const scheduleId = definition.scheduleId ?? newId('sch');
  const full = { ...definition, scheduleId } as ScheduleDefinition;
  const workspaceId = stored(options.workspaceId);
  if (full.start.kind === 'turn') await requireSession(db, full.start.sessionId, workspaceId);
  const now = options.now ?? new Date();
  const added = await insertSchedule(db, {
    scheduleId,
    workspaceId,
    definition: full,
    source: options.source ?? 'api',
    nextFireAt: pointerAfter(full, now) ?? undefined,
    now: now.toISOString(),
  });
  if (!added) {
    throw new OarRuntimeError('schedule_exists', `schedule "${scheduleId}" already exists`, {
      details: { scheduleId },
    });
  }
  return getSchedule(db, { scheduleId });
}

/** A turn schedule names a session the caller's workspace owns: checked when it is added, not when it first fires. */
async function requireSession(db: Db, sessionId: string, workspaceId: string | undefined): Promise<void> {
  const session = await db
    .selectFrom('oar_sessions')
    .select(['id', 'workspace_id'])
    .where('id', '=', sessionId)
    .executeTakeFirst();
  if (!session || (session.workspace_id ?? undefined) !== workspaceId) throw notFound('session', sessionId);
}

export async function getSchedule(db: Db, input: ScheduleIdInput): Promise<ScheduleView> {
  return view(db, await owned(db, input), 20);
}

export async function listSchedules(db: Db, input: { workspaceId?: string } = {}): Promise<ScheduleView[]> {
  const rows = await scheduleRows(
    db,
    input.workspaceId === undefined ? {} : { workspaceId: stored(input.workspaceId) ?? null },
  );
  return Promise.all(rows.map((row) => view(db, row, 1)));
}

/** Pause: no firing until resumed. A firing already started goes on. */
export async function pauseSchedule(db: Db, input: ScheduleIdInput): Promise<ScheduleView> {
  const row = await owned(db, input);
  if (!row.paused) await setPaused(db, row.scheduleId, true, null, new Date().toISOString());
  return getSchedule(db, input);
}

/** Resume: the next firing is the first cron time from now — the times passed while paused are not "missed". */
export async function resumeSchedule(db: Db, input: ScheduleIdInput, now = new Date()): Promise<ScheduleView> {
  const row = await owned(db, input);
  if (row.paused) await setPaused(db, row.scheduleId, false, pointerAfter(row.definition, now), now.toISOString());
  return getSchedule(db, input);
}

/** Remove a schedule and its firing records; what its firings started stays (sessions, jobs and their facts). */
export async function removeSchedule(db: Db, input: ScheduleIdInput): Promise<{ scheduleId: string; removed: true }> {
  const row = await owned(db, input);
  await deleteSchedule(db, row.scheduleId);
  return { scheduleId: row.scheduleId, removed: true };
}

/**
 * The config file's schedules, as a runtime with a worker starts: a new one is added (source `config`), a changed
 * one takes the new definition with its pointer from now, an unchanged one is left as it is (its pointer, its pause).
 * An id the API already uses is left alone and reported: the config never overwrites a schedule somebody added.
 */
export async function upsertConfigSchedules(
  db: Db,
  definitions: readonly ScheduleDefinition[],
  now = new Date(),
): Promise<{ added: string[]; changed: string[]; conflicts: string[] }> {
  const report = { added: [] as string[], changed: [] as string[], conflicts: [] as string[] };
  for (const definition of definitions) {
    const existing = await scheduleRow(db, definition.scheduleId);
    if (!existing) {
      const added = await insertSchedule(db, {
        scheduleId: definition.scheduleId,
        workspaceId: undefined,
        definition,
        source: 'config',
        nextFireAt: pointerAfter(definition, now) ?? undefined,
        now: now.toISOString(),
      });
      // Another worker inserted it first, from the same file: fine.
      if (added) report.added.push(definition.scheduleId);
    } else if (existing.source !== 'config') {
      report.conflicts.push(definition.scheduleId);
    } else if (JSON.stringify(existing.definition) !== JSON.stringify(definition)) {
      await replaceDefinition(
        db,
        definition.scheduleId,
        definition,
        pointerAfter(definition, now) ?? undefined,
        now.toISOString(),
      );
      report.changed.push(definition.scheduleId);
    }
  }
  return report;
}
