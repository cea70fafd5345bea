import { useRef } from 'preact/hooks';
import { enc } from './api';
import { FilesView } from './files';
import { JobItemNote, JobTable } from './jobs';
import { useSessionJobs } from './jobs-data';
import { useSession } from './session-data';
import { TasksView } from './tasks';
import { Timeline } from './timeline';
import { Connection, Empty, ErrorBox, Link, Loading } from './ui';
import { EventsView, TimeTravelView } from './views';

/**
 * One session: the thread's timeline (user messages, step messages, the answer as Markdown, model text streaming
 * in) with each step's action graph; a node opens its details (input, permission, attempts, observation,
 * artifacts); a finished turn can be rolled back. Tabs: Timeline, Tasks (the task graph), Events (the explorer), Time
 * travel, Files (the versions of the files OAR wrote), and Jobs when the session runs jobs (each item is a thread of
 * it). Sub-agent threads open from their node and lead back to it.
 */

export function SessionScreen(props: { sessionId: string; tab: string; params: URLSearchParams }) {
  const { sessionId, tab, params } = props;
  const data = useSession(sessionId);
  const { snapshot, model } = data;
  const threadId = params.get('thread') ?? snapshot?.threads[0]?.threadId ?? '';
  const base = `/sessions/${enc(sessionId)}`;
  // The latest job.* event, scanned once per new event: the jobs are read again when one arrives.
  const scan = useRef({ seen: 0, job: 0 });
  for (let i = scan.current.seen; i < data.events.length; i++) {
    const e = data.events[i];
    if (e?.type.startsWith('job.')) scan.current.job = e.sequence;
  }
  scan.current.seen = data.events.length;
  const { jobs } = useSessionJobs(sessionId, scan.current.job);
  const tabs: [string, string][] = [
    ['timeline', 'Timeline'],
    ['tasks', 'Tasks'],
    ['events', 'Events'],
    ['time', 'Time travel'],
    ['files', 'Files'],
    ...(jobs?.length || tab === 'jobs' ? [['jobs', `Jobs (${jobs?.length ?? '…'})`] as [string, string]] : []),
  ];
  const withThread = (path: string) => (params.get('thread') ? `${path}?thread=${enc(threadId)}` : path);
  return (
    <section class="screen session" aria-labelledby="session-h">
      <header class="screen-head">
        <div>
          <div class="crumbs">
            <Link href="/">Sessions</Link> ›
          </div>
          <h1 id="session-h">{snapshot?.title || 'Untitled session'}</h1>
          <div class="muted mono small">{sessionId}</div>
        </div>
        <Connection status={data.conn} label="stream" />
      </header>
      <nav class="tabs" aria-label="session views">
        {tabs.map(([id, label]) => (
          <Link
            key={id}
            href={withThread(id === 'timeline' ? base : `${base}/${id}`)}
            class={tab === id ? 'tab on' : 'tab'}
          >
            {label}
          </Link>
        ))}
      </nav>
      {data.error && !snapshot ? <ErrorBox error={data.error} retry={() => location.reload()} /> : null}
      {data.loading && !data.error ? <Loading what="the session" /> : null}
      {!data.loading && snapshot ? (
        tab === 'events' ? (
          <EventsView sessionId={sessionId} />
        ) : tab === 'jobs' ? (
          jobs?.length ? (
            <JobTable jobs={jobs} session />
          ) : (
            <Empty title={jobs ? 'No jobs in this session' : 'Loading the jobs…'} />
          )
        ) : tab === 'tasks' ? (
          <TasksView sessionId={sessionId} snapshot={snapshot} />
        ) : tab === 'files' ? (
          <FilesView sessionId={sessionId} threadId={params.get('thread') ?? undefined} model={model} />
        ) : tab === 'time' ? (
          <TimeTravelView sessionId={sessionId} events={data.events} threadId={threadId} version={data.version} />
        ) : (
          <>
            {jobs?.length && params.get('thread') ? <JobItemNote threadId={threadId} jobs={jobs} /> : null}
            <Timeline
              sessionId={sessionId}
              threadId={threadId}
              model={model}
              rms={snapshot.threads}
              selected={params.get('node') ?? undefined}
              onChanged={data.refreshSnapshot}
            />
          </>
        )
      ) : null}
    </section>
  );
}
