import { useEffect, useState } from 'preact/hooks';
import { enc, get } from './api';
import { countsText, jobTitle } from './job-words';
import { useLiveJson } from './jobs-data';
import type { Job, JobCounts, JobItem, JobSummary } from './types';
import { ago, Connection, Empty, ErrorBox, Filters, Link, Loading, Status } from './ui';

/**
 * Every job of the key's workspace (`GET /v1/jobs`, newest first): its status, name, how far its items are, its
 * round and age; a job opens its items (job.tsx). Live through the workspace feed (jobs-data.ts).
 */

const FILTERS: { id: string; label: string; test(job: JobSummary): boolean }[] = [
  { id: 'all', label: 'All', test: () => true },
  { id: 'running', label: 'Running', test: (j) => j.status === 'running' },
  { id: 'failed', label: 'Failed', test: (j) => j.status === 'failed' || j.counts.failed > 0 },
  { id: 'completed', label: 'Completed', test: (j) => j.status === 'completed' },
  { id: 'cancelled', label: 'Cancelled', test: (j) => j.status === 'cancelled' },
];

const anyRunning = (d: { jobs: JobSummary[] }) => d.jobs.some((j) => j.status === 'running');

export function JobsScreen() {
  const live = useLiveJson<{ jobs: JobSummary[] }>('/v1/jobs?limit=200', {
    // A job may start in any session: every change is a reason to look (throttled to one read a second).
    watches: () => true,
    running: anyRunning,
    throttleMs: 1000,
  });
  const [filter, setFilter] = useState('all');
  const jobs = live.data?.jobs;
  const f = FILTERS.find((x) => x.id === filter) ?? FILTERS[0];
  const list = (jobs ?? []).filter((j) => f?.test(j));
  return (
    <section class="screen" aria-labelledby="jobs-h">
      <header class="screen-head">
        <h1 id="jobs-h">Jobs</h1>
        <Connection status={live.conn} label="updates" />
      </header>
      <div class="toolbar">
        <Filters label="Filter by status" options={FILTERS} value={filter} onChange={setFilter} />
      </div>
      {live.error ? <ErrorBox error={live.error} retry={live.reload} /> : null}
      {!jobs && !live.error ? <Loading what="jobs" /> : null}
      {jobs && jobs.length === 0 ? (
        <Empty title="No jobs yet">
          A job runs one prompt over a batch of items, each as a thread of its session:{' '}
          <code>oar jobs start --items items.jsonl --prompt 'Summarise {'{{title}}'}'</code> or{' '}
          <code>POST /v1/jobs</code>.
        </Empty>
      ) : null}
      {jobs && jobs.length > 0 && list.length === 0 ? <Empty title="No job matches the filter" /> : null}
      {list.length > 0 ? <JobTable jobs={list} /> : null}
    </section>
  );
}

/** The jobs as rows: also the session view's Jobs tab. */
export function JobTable(props: { jobs: JobSummary[]; session?: boolean }) {
  return (
    <table class="list jobs" aria-label="jobs">
      <thead>
        <tr>
          <th>Status</th>
          <th>Job</th>
          <th>Items</th>
          <th class="num">Round</th>
          <th>Started</th>
          {props.session ? null : <th class="hide-narrow">Session</th>}
        </tr>
      </thead>
      <tbody>
        {props.jobs.map((j) => (
          <tr key={j.jobId} data-job={j.jobId} data-job-status={j.status}>
            <td>
              <Status status={j.status} small />
            </td>
            <td>
              <Link href={`/jobs/${enc(j.jobId)}`}>{jobTitle(j)}</Link>
              {j.name ? <div class="muted mono small">{j.jobId}</div> : null}
            </td>
            <td>
              <JobProgress counts={j.counts} />
            </td>
            <td class="num" data-round={j.round}>
              {j.round}
            </td>
            <td title={j.createdAt}>{ago(j.createdAt)}</td>
            {props.session ? null : (
              <td class="hide-narrow">
                <Link href={`/sessions/${enc(j.sessionId)}`} class="mono small">
                  {j.sessionId}
                </Link>
              </td>
            )}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

const SEGMENTS: (keyof JobCounts)[] = ['completed', 'failed', 'cancelled', 'running', 'pending'];

/** The items by how far they are: a bar (completed, failed, cancelled, running, pending) and the same in words. */
export function JobProgress(props: { counts: JobCounts }) {
  const c = props.counts;
  const text = countsText(c);
  return (
    <div class="job-progress" data-counts={text}>
      <div class="job-bar" role="img" aria-label={text}>
        {SEGMENTS.map((k) =>
          c[k] > 0 && c.total > 0 ? (
            <span
              key={k}
              class={`seg seg-${k}`}
              style={{ width: `${(100 * c[k]) / c.total}%` }}
              title={`${c[k]} ${k}`}
            />
          ) : null,
        )}
      </div>
      <div class="small">{text}</div>
    </div>
  );
}

/**
 * Above an item's thread in the session view: which job and item it is, with a link back to the job. The session's
 * jobs (their summaries, read again on each `job.*` event) are opened one by one until the thread is found.
 */
export function JobItemNote(props: { threadId: string; jobs: JobSummary[] }) {
  const [found, setFound] = useState<{ job: Job; item: JobItem } | undefined>(undefined);
  const stamp = props.jobs.map((j) => `${j.jobId}@${j.updatedAt}`).join(' ');
  // `stamp`, not the array (a new one at each read): the jobs are opened again only when one of them changed.
  useEffect(() => {
    let stopped = false;
    (async () => {
      for (const summary of props.jobs.slice(0, 20)) {
        const job = await get<Job>(`/v1/jobs/${enc(summary.jobId)}`).catch(() => undefined);
        const item = job?.items.find((i) => i.threadId === props.threadId);
        if (stopped) return;
        if (job && item) {
          setFound({ job, item });
          return;
        }
      }
      if (!stopped) setFound(undefined);
    })();
    return () => {
      stopped = true;
    };
  }, [props.threadId, stamp]);
  if (!found) return null;
  const { job, item } = found;
  return (
    <div class="job-item-note small" data-job-item={`${job.jobId}/${item.index}`}>
      Item {item.index} of job <Link href={`/jobs/${enc(job.jobId)}`}>{jobTitle(job)}</Link> ·{' '}
      <Status status={item.status} small /> · {item.attempts} attempt{item.attempts === 1 ? '' : 's'}
      {job.round > 1 ? ` · round ${job.round}` : ''}
    </div>
  );
}
