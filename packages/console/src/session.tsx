import { enc } from './api';
import { FilesView } from './files';
import { useSession } from './session-data';
import { TasksView } from './tasks';
import { Timeline } from './timeline';
import { Connection, ErrorBox, Link, Loading } from './ui';
import { EventsView, TimeTravelView } from './views';

/**
 * One session: the thread's timeline (user messages, step messages, the answer as Markdown, model text streaming
 * in) with each step's action graph; a node opens its details (input, permission, attempts, observation,
 * artifacts); a finished turn can be rolled back. Tabs: Timeline, Tasks (the task graph), Events (the explorer), Time
 * travel, Files (the versions of the files OAR wrote). Sub-agent threads open from their node and lead
 * back to it.
 */

export function SessionScreen(props: { sessionId: string; tab: string; params: URLSearchParams }) {
  const { sessionId, tab, params } = props;
  const data = useSession(sessionId);
  const { snapshot, model } = data;
  const threadId = params.get('thread') ?? snapshot?.threads[0]?.threadId ?? '';
  const base = `/sessions/${enc(sessionId)}`;
  const tabs: [string, string][] = [
    ['timeline', 'Timeline'],
    ['tasks', 'Tasks'],
    ['events', 'Events'],
    ['time', 'Time travel'],
    ['files', 'Files'],
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
        ) : tab === 'tasks' ? (
          <TasksView sessionId={sessionId} snapshot={snapshot} />
        ) : tab === 'files' ? (
          <FilesView sessionId={sessionId} threadId={params.get('thread') ?? undefined} model={model} />
        ) : tab === 'time' ? (
          <TimeTravelView sessionId={sessionId} events={data.events} threadId={threadId} version={data.version} />
        ) : (
          <Timeline
            sessionId={sessionId}
            threadId={threadId}
            model={model}
            rms={snapshot.threads}
            selected={params.get('node') ?? undefined}
            onChanged={data.refreshSnapshot}
          />
        )
      ) : null}
    </section>
  );
}
