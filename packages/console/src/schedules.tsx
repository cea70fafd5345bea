import { useEffect, useState } from 'preact/hooks';
import { enc } from './api';
import { useLiveJson } from './jobs-data';
import {
  cronText,
  firingNote,
  inTime,
  nextChangeAt,
  SCHEDULE_LOOK,
  startedHref,
  startedText,
  startText,
  watchesSession,
} from './schedule-words';
import type { Schedule, ScheduleFiring, ScheduleStart } from './types';
import { ago, Connection, Empty, ErrorBox, Filters, Link, Loading, Status } from './ui';

/**
 * Every schedule of the key's workspace (`GET /v1/schedules`): paused or active, its cron and time zone, what a
 * firing starts, its next cron time and its last firing (what it started, or why not); a schedule opens its recent
 * firings (schedule.tsx). Read again when a firing is due (its next cron time, plus a tick) and when the workspace
 * feed says a firing's session changed (jobs-data.ts) — one request, at most once a second.
 */

const FILTERS: { id: string; label: string; test(s: Schedule): boolean }[] = [
  { id: 'all', label: 'All', test: () => true },
  { id: 'active', label: 'Active', test: (s) => !s.paused },
  { id: 'paused', label: 'Paused', test: (s) => s.paused },
  { id: 'failed', label: 'Last firing failed', test: (s) => s.lastFirings[0]?.status === 'failed' },
];

/** Whether a firing waits to start (queued, or being started): without the feed, polling goes on while one does. */
export const anyWaiting = (schedules: Schedule[]) =>
  schedules.some((s) => s.lastFirings.some((f) => f.status === 'queued' || f.status === 'claimed'));

/** Re-render every `ms` (the "in 3 s" of the next firings), with no request. */
export function useNow(ms = 5_000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [ms]);
  return now;
}

export function SchedulesScreen() {
  const live = useLiveJson<{ schedules: Schedule[] }>('/v1/schedules', {
    watches: (sessionId, d) => watchesSession(sessionId, d?.schedules),
    running: (d) => anyWaiting(d.schedules),
    wakeAt: (d) => nextChangeAt(d.schedules),
    throttleMs: 1000,
  });
  const now = useNow();
  const [filter, setFilter] = useState('all');
  const schedules = live.data?.schedules;
  const f = FILTERS.find((x) => x.id === filter) ?? FILTERS[0];
  const list = (schedules ?? []).filter((s) => f?.test(s));
  return (
    <section class="screen" aria-labelledby="schedules-h">
      <header class="screen-head">
        <h1 id="schedules-h">Schedules</h1>
        <Connection status={live.conn} label="updates" />
      </header>
      <div class="toolbar">
        <Filters label="Filter by state" options={FILTERS} value={filter} onChange={setFilter} />
      </div>
      {live.error ? <ErrorBox error={live.error} retry={live.reload} /> : null}
      {!schedules && !live.error ? <Loading what="schedules" /> : null}
      {schedules && schedules.length === 0 ? (
        <Empty title="No schedules yet">
          A schedule runs an agent on a cron timetable — a turn, a new session or a job per firing:{' '}
          <code>oar schedules add --cron "0 3 * * *" --new-session --input 'Write the report'</code>,{' '}
          <code>schedules</code> in <code>oar.config.json</code>, or <code>POST /v1/schedules</code>.
        </Empty>
      ) : null}
      {schedules && schedules.length > 0 && list.length === 0 ? <Empty title="No schedule matches the filter" /> : null}
      {list.length > 0 ? <ScheduleTable schedules={list} now={now} /> : null}
    </section>
  );
}

function ScheduleTable(props: { schedules: Schedule[]; now: number }) {
  return (
    <table class="list schedules" aria-label="schedules">
      <thead>
        <tr>
          <th>State</th>
          <th>Schedule</th>
          <th>Starts</th>
          <th>Next firing</th>
          <th>Last firing</th>
        </tr>
      </thead>
      <tbody>
        {props.schedules.map((s) => (
          <tr key={s.scheduleId} data-schedule={s.scheduleId} data-schedule-state={s.paused ? 'paused' : 'active'}>
            <td>
              <Status status={s.paused ? 'paused' : 'active'} looks={SCHEDULE_LOOK} small />
            </td>
            <td>
              <Link href={`/schedules/${enc(s.scheduleId)}`} class="mono">
                {s.scheduleId}
              </Link>
              <div class="muted mono small" data-cron>
                {cronText(s)}
              </div>
            </td>
            <td class="schedule-start" data-start-kind={s.start.kind} title={startText(s.start)}>
              {startText(s.start)}
              {s.source === 'config' ? <div class="muted small">from oar.config.json</div> : null}
            </td>
            <td>
              <NextFiring at={s.nextFirings[0]} paused={s.paused} now={props.now} />
            </td>
            <td>
              {s.lastFirings[0] ? (
                <Firing firing={s.lastFirings[0]} kind={s.start.kind} />
              ) : (
                <span class="muted">none yet</span>
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** A cron time to come: the time itself (this browser's clock) and how far away it is. */
export function NextFiring(props: { at: string | undefined; paused: boolean; now: number }) {
  if (props.paused) return <span class="muted">— (paused)</span>;
  if (!props.at) return <span class="muted">never again</span>;
  return (
    <time dateTime={props.at} data-next={props.at} title={props.at}>
      {new Date(props.at).toLocaleString()} <span class="muted small">{inTime(props.at, props.now)}</span>
    </time>
  );
}

/** A firing: its status, what it started (a link) or why it did not, and its cron time. */
export function Firing(props: { firing: ScheduleFiring; kind: ScheduleStart['kind']; time?: boolean }) {
  const f = props.firing;
  const href = startedHref(f, props.kind);
  const note = firingNote(f);
  return (
    <div class="firing" data-firing={f.fireAt} data-firing-status={f.status} data-firing-reason={f.reason}>
      <Status status={f.status} looks={SCHEDULE_LOOK} small />
      {href ? (
        <>
          {' '}
          <Link href={href} class="mono small" title={f.started?.sessionId}>
            {startedText(f, props.kind)}
          </Link>
        </>
      ) : null}
      {note ? <span class={`small firing-note${f.status === 'failed' ? ' job-error' : ''}`}> {note}</span> : null}
      {props.time === false ? null : (
        <div class="muted small" title={f.fireAt}>
          {ago(f.fireAt)}
        </div>
      )}
    </div>
  );
}
