import { useState } from 'preact/hooks';
import { enc, post } from './api';
import { canRetry, jobTitle, policyText, REASONS } from './job-words';
import { JobProgress } from './jobs';
import { useLiveJson } from './jobs-data';
import type { Job, JobItem } from './types';
import { ago, Connection, Empty, ErrorBox, Filters, Link, Loading, Status, shortId } from './ui';

/**
 * One job (`GET /v1/jobs/{jobId}`): its policy, counts, round and reason, and every item — its status, attempts
 * (and how many this round has left), its error or summary, and a link to its thread in the job's session (an
 * attempt is a turn of that thread). "Cancel job" (`POST …/cancel`) stops the items at work and leaves the rest
 * unstarted; "Retry failed items" (`POST …/retry`) runs a finished job's failed and cancelled items again, in a
 * new round. Both need an operator key; a refusal shows the API's error.
 */

const ITEM_FILTERS: { id: string; label: string; test(i: JobItem): boolean }[] = [
  { id: 'all', label: 'All', test: () => true },
  { id: 'active', label: 'Running', test: (i) => i.status === 'running' || i.status === 'retrying' },
  { id: 'failed', label: 'Failed or cancelled', test: (i) => i.status === 'failed' || i.status === 'cancelled' },
  { id: 'completed', label: 'Completed', test: (i) => i.status === 'completed' },
  { id: 'pending', label: 'Pending', test: (i) => i.status === 'pending' },
];

export function JobScreen(props: { jobId: string }) {
  const live = useLiveJson<Job>(`/v1/jobs/${enc(props.jobId)}`, {
    watches: (sessionId, job) => !job || job.sessionId === sessionId,
    running: (job) => job.status === 'running',
  });
  const job = live.data;
  return (
    <section class="screen job" aria-labelledby="job-h">
      <header class="screen-head">
        <div>
          <div class="crumbs">
            <Link href="/jobs">Jobs</Link> ›
          </div>
          <h1 id="job-h">{job ? jobTitle(job) : 'Job'}</h1>
          <div class="muted mono small">{props.jobId}</div>
        </div>
        <Connection status={live.conn} label="updates" />
      </header>
      {live.error ? <ErrorBox error={live.error} retry={live.reload} /> : null}
      {!job && !live.error ? <Loading what="the job" /> : null}
      {job ? <JobDetail job={job} onChanged={live.set} /> : null}
    </section>
  );
}

function JobDetail(props: { job: Job; onChanged(job: Job): void }) {
  const { job } = props;
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const [reason, setReason] = useState('');
  const [filter, setFilter] = useState('all');
  const session = `/sessions/${enc(job.sessionId)}`;

  const act = async (what: 'cancel' | 'retry') => {
    setBusy(true);
    setError(undefined);
    setNotice(undefined);
    try {
      const path = `/v1/jobs/${enc(job.jobId)}/${what}`;
      const next = await post<Job>(path, what === 'cancel' && reason.trim() ? { reason: reason.trim() } : {});
      props.onChanged(next);
      const again = next.items.filter(
        (i) => i.status !== 'completed' && i.status !== 'failed' && i.status !== 'cancelled',
      ).length;
      setNotice(
        what === 'cancel'
          ? `Job ${next.status === 'cancelled' ? 'cancelled' : next.status}.`
          : `Round ${next.round}: ${again} item${again === 1 ? '' : 's'} run again.`,
      );
      setReason('');
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };

  const f = ITEM_FILTERS.find((x) => x.id === filter) ?? ITEM_FILTERS[0];
  const items = job.items.filter((i) => f?.test(i));
  return (
    <>
      <dl class="job-facts">
        <dt>Status</dt>
        <dd data-job-status={job.status}>
          <Status status={job.status} />
          {job.reason ? (
            <span class="muted small" data-reason={job.reason}>
              {' '}
              {REASONS[job.reason] ?? `reason: ${job.reason}`}
            </span>
          ) : null}
        </dd>
        <dt>Items</dt>
        <dd>
          <JobProgress counts={job.counts} />
        </dd>
        <dt>Round</dt>
        <dd data-round={job.round}>
          {job.round}
          {job.round > 1 ? <span class="muted small"> (retried {job.round - 1}×)</span> : null}
        </dd>
        <dt>Policy</dt>
        <dd class="small" data-policy>
          {policyText(job.policy)}
        </dd>
        {job.template ? (
          <>
            <dt>Prompt</dt>
            <dd>
              <code class="job-template">{job.template}</code>
              {job.agent ? <span class="muted small"> · agent {job.agent}</span> : null}
            </dd>
          </>
        ) : null}
        <dt>Session</dt>
        <dd>
          <Link href={session} class="mono small">
            {job.sessionId}
          </Link>
        </dd>
        <dt>Started</dt>
        <dd title={job.createdAt}>
          {ago(job.createdAt)}
          {job.endedAt ? <span class="muted small"> · ended {ago(job.endedAt)}</span> : null}
        </dd>
      </dl>
      <div class="decision-actions job-actions">
        {job.status === 'running' ? (
          <>
            <input
              placeholder="Reason (optional)"
              aria-label="Cancel reason"
              value={reason}
              onInput={(e) => setReason((e.target as HTMLInputElement).value)}
            />
            <button
              type="button"
              class="bad"
              disabled={busy}
              title="Interrupt the items at work; the rest never start (an operator key)"
              onClick={() => void act('cancel')}
            >
              Cancel job
            </button>
          </>
        ) : null}
        {canRetry(job) ? (
          <button
            type="button"
            class="primary"
            disabled={busy}
            title="Run the failed and cancelled items again, each with a fresh round of attempts (an operator key)"
            onClick={() => void act('retry')}
          >
            Retry failed items
          </button>
        ) : null}
      </div>
      {notice ? (
        <div class="notice" role="status">
          {notice}
        </div>
      ) : null}
      {error ? <ErrorBox error={error} /> : null}
      <h2 class="job-items-h">Items</h2>
      <div class="toolbar">
        <Filters label="Filter items by status" options={ITEM_FILTERS} value={filter} onChange={setFilter} />
      </div>
      {items.length === 0 ? (
        <Empty title="No item matches the filter" />
      ) : (
        <table class="list job-items" aria-label="items">
          <thead>
            <tr>
              <th class="num">#</th>
              <th>Item</th>
              <th>Status</th>
              <th class="num">Attempts</th>
              <th>Outcome</th>
              <th>Thread</th>
            </tr>
          </thead>
          <tbody>
            {items.map((item) => (
              <ItemRow key={item.index} item={item} session={session} />
            ))}
          </tbody>
        </table>
      )}
    </>
  );
}

function ItemRow(props: { item: JobItem; session: string }) {
  const { item } = props;
  return (
    <tr data-item={item.index} data-item-status={item.status}>
      <td class="num">{item.index}</td>
      <td class="job-label" title={item.label}>
        {item.label ?? <span class="muted">—</span>}
      </td>
      <td>
        <Status status={item.status} small />
      </td>
      <td class="num" data-attempts={item.attempts} data-attempts-left={item.attemptsLeft}>
        {item.attempts}
        {item.status === 'completed' ? null : <div class="muted small">{item.attemptsLeft} left</div>}
      </td>
      <td class="job-outcome">
        {item.error ? (
          <div class="job-error" data-error-code={item.error.code}>
            <code>{item.error.code}</code> {item.error.message}
          </div>
        ) : item.summary ? (
          <div class="job-summary">{item.summary}</div>
        ) : item.status === 'cancelled' ? (
          <span class="muted">{item.attempts > 0 ? 'interrupted' : 'never started'}</span>
        ) : (
          <span class="muted">—</span>
        )}
      </td>
      <td>
        <Link href={`${props.session}?thread=${enc(item.threadId)}`} class="mono small" title={item.threadId}>
          {shortId(item.threadId)}
        </Link>
        {item.turnId ? (
          <div class="muted small mono" title={`the latest attempt: turn ${item.turnId}`}>
            {shortId(item.turnId)}
          </div>
        ) : null}
      </td>
    </tr>
  );
}
