import { useState } from 'preact/hooks';
import { enc, post } from './api';
import { useLiveJson } from './jobs-data';
import { cronText, inTime, nextChangeAt, SCHEDULE_LOOK, startText, watchesSession } from './schedule-words';
import { anyWaiting, Firing, NextFiring, useNow } from './schedules';
import type { Schedule } from './types';
import { ago, Connection, Empty, ErrorBox, Link, Loading, Status } from './ui';

/**
 * One schedule (`GET /v1/schedules/{scheduleId}`): its cron and time zone, what a firing starts, its policies, its
 * next cron times and its recent firings (up to 20, newest first) — each with what it started (a link to the
 * session, the turn's thread or the job) or why it did not. "Pause" and "Resume" (`POST …/pause`, `…/resume`) need
 * an operator key; a refusal shows the API's error.
 */

const CATCH_UP: Record<string, string> = {
  skip: 'skip: cron times missed while no worker ran are recorded skipped',
  run_once: 'run once: one firing now for the latest missed cron time',
};
const OVERLAP: Record<string, string> = {
  skip: 'skip a firing while the previous one’s work still runs',
  queue: 'queue it until the previous one’s work ended',
  cancel: 'cancel the previous one’s work, then start',
};

export function ScheduleScreen(props: { scheduleId: string }) {
  const live = useLiveJson<Schedule>(`/v1/schedules/${enc(props.scheduleId)}`, {
    watches: (sessionId, s) => watchesSession(sessionId, s ? [s] : undefined),
    running: (s) => anyWaiting([s]),
    wakeAt: (s) => nextChangeAt([s]),
    throttleMs: 1000,
  });
  const s = live.data;
  return (
    <section class="screen schedule" aria-labelledby="schedule-h">
      <header class="screen-head">
        <div>
          <div class="crumbs">
            <Link href="/schedules">Schedules</Link> ›
          </div>
          <h1 id="schedule-h">{props.scheduleId}</h1>
        </div>
        <Connection status={live.conn} label="updates" />
      </header>
      {live.error ? <ErrorBox error={live.error} retry={live.reload} /> : null}
      {!s && !live.error ? <Loading what="the schedule" /> : null}
      {s ? <ScheduleDetail schedule={s} onChanged={live.set} /> : null}
    </section>
  );
}

function ScheduleDetail(props: { schedule: Schedule; onChanged(s: Schedule): void }) {
  const s = props.schedule;
  const now = useNow();
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const state = s.paused ? 'paused' : 'active';

  const act = async (what: 'pause' | 'resume') => {
    setBusy(true);
    setError(undefined);
    setNotice(undefined);
    try {
      const next = await post<Schedule>(`/v1/schedules/${enc(s.scheduleId)}/${what}`);
      props.onChanged(next);
      setNotice(
        next.paused
          ? 'Schedule paused: no firing until it is resumed.'
          : `Schedule resumed: next firing ${next.nextFirings[0] ? inTime(next.nextFirings[0]) : 'never'}.`,
      );
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  const start = s.start;
  return (
    <>
      <dl class="job-facts schedule-facts">
        <dt>State</dt>
        <dd data-schedule-state={state}>
          <Status status={state} looks={SCHEDULE_LOOK} />
        </dd>
        <dt>Cron</dt>
        <dd class="mono" data-cron>
          {cronText(s)}
        </dd>
        <dt>Starts</dt>
        <dd data-start-kind={start.kind}>
          {startText(start)}
          {start.kind === 'turn' && start.sessionId ? (
            <>
              {' '}
              ·{' '}
              <Link href={`/sessions/${enc(start.sessionId)}`} class="mono small">
                its session
              </Link>
            </>
          ) : null}
          {start.agent ? <span class="muted small"> · agent {start.agent}</span> : null}
        </dd>
        {start.kind === 'job' && start.prompt ? (
          <>
            <dt>Prompt</dt>
            <dd>
              <code class="job-template">{start.prompt}</code>
            </dd>
          </>
        ) : null}
        <dt>Next firings</dt>
        <dd data-next-firings={s.nextFirings.length}>
          {s.paused || s.nextFirings.length === 0 ? (
            <NextFiring at={undefined} paused={s.paused} now={now} />
          ) : (
            <ul class="next-firings">
              {s.nextFirings.map((at) => (
                <li key={at}>
                  <NextFiring at={at} paused={false} now={now} />
                </li>
              ))}
            </ul>
          )}
        </dd>
        <dt>Catch-up</dt>
        <dd class="small">{CATCH_UP[s.catchUp] ?? s.catchUp}</dd>
        <dt>Overlap</dt>
        <dd class="small">{OVERLAP[s.overlap] ?? s.overlap}</dd>
        <dt>Source</dt>
        <dd class="small">
          {s.source === 'config' ? 'oar.config.json' : 'API'}
          {s.createdAt ? (
            <span class="muted" title={s.createdAt}>
              {' '}
              · added {ago(s.createdAt)}
            </span>
          ) : null}
        </dd>
      </dl>
      <div class="decision-actions job-actions">
        {s.paused ? (
          <button
            type="button"
            class="primary"
            disabled={busy}
            title="Fire again from the first cron time after now (an operator key)"
            onClick={() => void act('resume')}
          >
            Resume
          </button>
        ) : (
          <button
            type="button"
            disabled={busy}
            title="No firing until it is resumed; work already started goes on (an operator key)"
            onClick={() => void act('pause')}
          >
            Pause
          </button>
        )}
      </div>
      {notice ? (
        <div class="notice" role="status">
          {notice}
        </div>
      ) : null}
      {error ? <ErrorBox error={error} /> : null}
      <h2 class="job-items-h">Recent firings</h2>
      {s.lastFirings.length === 0 ? (
        <Empty title="No firing yet">
          {s.paused ? 'The schedule is paused.' : 'The first one is its next cron time, fired by a worker.'}
        </Empty>
      ) : (
        <table class="list firings" aria-label="firings">
          <thead>
            <tr>
              <th>Cron time</th>
              <th>Firing</th>
            </tr>
          </thead>
          <tbody>
            {s.lastFirings.map((f) => (
              <tr key={f.fireAt} data-fire-at={f.fireAt} data-firing-status={f.status}>
                <td title={f.fireAt}>
                  {new Date(f.fireAt).toLocaleString()}
                  <div class="muted small">{ago(f.fireAt)}</div>
                </td>
                <td>
                  <Firing firing={f} kind={s.start.kind} time={false} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}
