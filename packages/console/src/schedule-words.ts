import type { Schedule, ScheduleFiring, ScheduleStart } from './types.js';

/** A schedule in words: what it starts, what became of a firing, when the next one is. Pure (tested in Node). */

/** Firing and schedule states as they read without colour (the Status pill's symbol and tone). */
export const SCHEDULE_LOOK: Record<string, { symbol: string; tone: string }> = {
  active: { symbol: '●', tone: 'ok' },
  paused: { symbol: '‖', tone: 'waiting' },
  started: { symbol: '▶', tone: 'ok' },
  claimed: { symbol: '◔', tone: 'running' },
  queued: { symbol: '◷', tone: 'idle' },
  skipped: { symbol: '–', tone: 'muted' },
  failed: { symbol: '✕', tone: 'bad' },
};

const clip = (text: string, max = 60) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);

/** "new session: “Write the report”", "turn in ses_1: “Any news?”", "job “nightly” over 3 items". */
export function startText(start: ScheduleStart): string {
  if (start.kind === 'job') {
    const n = start.items?.length ?? 0;
    return `job${start.name ? ` “${clip(start.name, 40)}”` : ''} over ${n} item${n === 1 ? '' : 's'}`;
  }
  const input = start.input ? `: “${clip(start.input)}”` : '';
  if (start.kind === 'turn') return `turn in ${start.sessionId ?? 'a session'}${input}`;
  return `new session${start.title ? ` “${clip(start.title, 40)}”` : ''}${input}`;
}

/** "0 3 * * * · Europe/Paris" (UTC when no time zone is set). */
export const cronText = (s: Pick<Schedule, 'cron' | 'timezone'>) => `${s.cron} · ${s.timezone ?? 'UTC'}`;

/**
 * Where a started firing's work is in the console (`kind`: what the schedule starts): its job, its turn's thread
 * in the schedule's session, or the new session.
 */
export function startedHref(f: ScheduleFiring, kind: ScheduleStart['kind']): string | undefined {
  const s = f.started;
  if (!s) return undefined;
  if (s.jobId) return `/jobs/${encodeURIComponent(s.jobId)}`;
  const session = `/sessions/${encodeURIComponent(s.sessionId)}`;
  return kind === 'turn' && s.threadId ? `${session}?thread=${encodeURIComponent(s.threadId)}` : session;
}

/** What a started firing started, as its link reads: "job job_1", "turn turn_1" (in a session), "session ses_1". */
export function startedText(f: ScheduleFiring, kind: ScheduleStart['kind']): string {
  const s = f.started;
  if (!s) return '';
  if (s.jobId) return `job ${s.jobId}`;
  if (kind === 'turn' && s.turnId) return `turn ${s.turnId}`;
  return `session ${s.sessionId}`;
}

/** Why a firing did not start (or what else to know about it), in words; '' when there is nothing to say. */
export function firingNote(f: ScheduleFiring): string {
  const d = f.details ?? {};
  switch (f.status) {
    case 'started':
      return d.missed ? `catch-up: ${d.missed} missed` : '';
    case 'skipped':
      if (f.reason === 'missed') {
        return `missed: no worker ran${d.count && d.count > 1 ? ` (${d.count} cron times)` : ''}`;
      }
      if (f.reason === 'overlap') return 'the previous firing’s work still ran';
      return f.reason ?? '';
    case 'queued':
      return 'waits for the previous firing’s work to end';
    case 'claimed':
      return f.reason === 'catch_up' ? 'catch-up firing being started' : 'being started';
    case 'failed':
      return [f.reason, d.error?.message].filter(Boolean).join(': ');
    default:
      return '';
  }
}

/** "in 3 s", "in 5 min", "in 2 h", "in 3 d"; "now" once it is due. */
export function inTime(iso: string | undefined, now = Date.now()): string {
  if (!iso) return '—';
  const ms = Date.parse(iso) - now;
  if (Number.isNaN(ms)) return iso;
  if (ms < 1_000) return 'now';
  if (ms < 60_000) return `in ${Math.round(ms / 1000)} s`;
  if (ms < 3_600_000) return `in ${Math.round(ms / 60_000)} min`;
  if (ms < 86_400_000) return `in ${Math.round(ms / 3_600_000)} h`;
  return `in ${Math.round(ms / 86_400_000)} d`;
}

/**
 * When the schedules may have changed by themselves: the earliest next cron time of an active schedule, plus a
 * second for a worker's ticker (about once a second) to record the firing. Undefined: nothing is due.
 */
export function nextChangeAt(schedules: Schedule[]): number | undefined {
  let first: number | undefined;
  for (const s of schedules) {
    const at = s.paused ? Number.NaN : Date.parse(s.nextFirings[0] ?? '');
    if (!Number.isNaN(at) && (first === undefined || at < first)) first = at;
  }
  return first === undefined ? undefined : first + 1_000;
}

/** Whether a change of this session can change the schedules shown: a firing's session, or a turn schedule's. */
export function watchesSession(sessionId: string, schedules: Schedule[] | undefined): boolean {
  // A firing's new session has a derived id (`ses_sch_…`): its first event is the firing taking effect.
  if (!schedules || sessionId.includes('ses_sch_')) return true;
  return schedules.some(
    (s) => s.start.sessionId === sessionId || s.lastFirings.some((f) => f.started?.sessionId === sessionId),
  );
}
