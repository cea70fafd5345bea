import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiError, type EventPage, enc, get, type OarEvent, post, qs, type Snapshot } from './api';
import { eventSummary, foldEvents } from './model';
import { Timeline } from './timeline';
import { Empty, ErrorBox, Json, Loading, navigate, Status, shortId, usePath } from './ui';

/**
 * The event explorer (a JSON page of the log at a time, filtered by type, thread and turn on the server and by
 * action here, with cursor pagination and the raw event) and time travel (a scrubber over the sequence: the
 * read model as of event N from `GET /v1/sessions/{id}/history?at=N`, the timeline and DAG folded from events 1…N),
 * and from any position a fork: a new session with the history up to there (`POST /v1/sessions/{id}/fork`).
 */

const PAGE = 100;

function aboutAction(e: OarEvent, action: string): boolean {
  const p = (e.payload ?? {}) as Record<string, unknown>;
  const ids = [p.graphActionId, e.actionId, e.toolCallId, e.stepId].filter((x): x is string => typeof x === 'string');
  return ids.some((id) => id === action || id.endsWith(`.${action}`) || id.includes(action));
}

export function EventsView(props: { sessionId: string }) {
  const [type, setType] = useState('');
  const [turnId, setTurnId] = useState('');
  const [threadId, setThreadId] = useState('');
  const [action, setAction] = useState('');
  const [cursors, setCursors] = useState<number[]>([0]);
  const [page, setPage] = useState<EventPage | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(false);
  const [open, setOpen] = useState<number | undefined>(undefined);
  const after = cursors[cursors.length - 1] ?? 0;
  const [applied, setApplied] = useState({ type: '', turnId: '', threadId: '' });

  useEffect(() => {
    let stopped = false;
    setLoading(true);
    get<EventPage>(
      `/v1/sessions/${enc(props.sessionId)}/events${qs({ after, limit: PAGE, type: applied.type, turnId: applied.turnId, threadId: applied.threadId })}`,
    )
      .then((p) => {
        if (stopped) return;
        setPage(p);
        setError(undefined);
      })
      .catch((e) => !stopped && setError(e))
      .finally(() => !stopped && setLoading(false));
    return () => {
      stopped = true;
    };
  }, [props.sessionId, after, applied]);

  const shown = (page?.events ?? []).filter((e) => !action.trim() || aboutAction(e, action.trim()));
  return (
    <div class="events-view">
      <form
        class="toolbar"
        onSubmit={(e) => {
          e.preventDefault();
          setCursors([0]);
          setApplied({ type: type.trim(), turnId: turnId.trim(), threadId: threadId.trim() });
        }}
      >
        <input
          placeholder="type (tool.*, turn.completed)"
          aria-label="Filter by type"
          value={type}
          onInput={(e) => setType((e.target as HTMLInputElement).value)}
        />
        <input
          placeholder="turn id"
          aria-label="Filter by turn"
          value={turnId}
          onInput={(e) => setTurnId((e.target as HTMLInputElement).value)}
        />
        <input
          placeholder="thread id"
          aria-label="Filter by thread"
          value={threadId}
          onInput={(e) => setThreadId((e.target as HTMLInputElement).value)}
        />
        <input
          placeholder="action id"
          aria-label="Filter by action"
          value={action}
          onInput={(e) => setAction((e.target as HTMLInputElement).value)}
        />
        <button type="submit" class="primary">
          Filter
        </button>
      </form>
      <div class="pager">
        <button type="button" disabled={cursors.length <= 1} onClick={() => setCursors((c) => c.slice(0, -1))}>
          ‹ Previous
        </button>
        <span class="muted small">
          after event {after}
          {page ? ` · page to ${page.nextCursor} of ${page.lastSequence}` : ''}
          {action.trim() ? ` · ${shown.length} about “${action.trim()}” in this page` : ''}
        </span>
        <button
          type="button"
          disabled={!page || page.nextCursor >= page.lastSequence || page.nextCursor <= after}
          onClick={() => page && setCursors((c) => [...c, page.nextCursor])}
        >
          Next ›
        </button>
      </div>
      {error ? <ErrorBox error={error} /> : null}
      {loading && !page ? <Loading what="events" /> : null}
      {page && shown.length === 0 ? (
        <Empty title="No event matches in this page">
          Filters apply within a page: continue with Next until the last sequence.
        </Empty>
      ) : null}
      {shown.length > 0 ? (
        <table class="list events" aria-label="events">
          <thead>
            <tr>
              <th class="num">#</th>
              <th>Type</th>
              <th class="hide-narrow">Thread</th>
              <th class="hide-narrow">Turn</th>
              <th>Status / action</th>
              <th class="hide-narrow">Time</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((e) => {
              const p = (e.payload ?? {}) as Record<string, unknown>;
              return [
                <tr
                  key={e.sequence}
                  class="clickable"
                  data-seq={e.sequence}
                  tabIndex={0}
                  aria-expanded={open === e.sequence}
                  onClick={() => setOpen(open === e.sequence ? undefined : e.sequence)}
                  onKeyDown={(k) => {
                    if (k.key === 'Enter') setOpen(open === e.sequence ? undefined : e.sequence);
                  }}
                >
                  <td class="num mono">{e.sequence}</td>
                  <td class="mono">{e.type}</td>
                  <td class="hide-narrow mono small">{e.threadId ? shortId(e.threadId) : ''}</td>
                  <td class="hide-narrow mono small">{e.turnId ? shortId(e.turnId) : ''}</td>
                  <td class="small">
                    {e.status ?? (typeof p.status === 'string' ? p.status : '')}{' '}
                    {typeof p.graphActionId === 'string' ? <span class="mono">{p.graphActionId}</span> : null}
                    {eventSummary(e) ? <span data-summary>{eventSummary(e)}</span> : null}
                  </td>
                  <td class="hide-narrow small">{new Date(e.timestamp).toLocaleTimeString()}</td>
                </tr>,
                open === e.sequence ? (
                  <tr key={`${e.sequence}-raw`} class="raw">
                    <td colSpan={6}>
                      <Json value={e} max={50_000} />
                    </td>
                  </tr>
                ) : null,
              ];
            })}
          </tbody>
        </table>
      ) : null}
    </div>
  );
}

export function TimeTravelView(props: { sessionId: string; events: OarEvent[]; threadId: string; version: number }) {
  const { events } = props;
  const [, params] = usePath();
  const last = events[events.length - 1]?.sequence ?? 0;
  const first = events[0]?.sequence ?? 0;
  const atParam = Number(params.get('at'));
  const at = Number.isInteger(atParam) && atParam >= first && atParam <= last ? atParam : last;
  const [snapshot, setSnapshot] = useState<{ at: number; snapshot: Snapshot } | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [unsupported, setUnsupported] = useState(false);
  const [forking, setForking] = useState(false);
  const base = `/sessions/${enc(props.sessionId)}/time`;
  const go = (n: number, node?: string) =>
    navigate(
      `${base}?at=${n}${params.get('thread') ? `&thread=${enc(props.threadId)}` : ''}${node ? `&node=${enc(node)}` : ''}`,
      true,
    );

  // The DAG and timeline as of `at`: a fold over the prefix (linear; a 10k-event log folds in milliseconds).
  const model = useMemo(() => foldEvents(events, at), [events, at, props.version]);

  useEffect(() => {
    if (unsupported || at === 0) return;
    let stopped = false;
    const timer = setTimeout(async () => {
      try {
        const r = await get<{ snapshot: Snapshot; sequence: number }>(
          `/v1/sessions/${enc(props.sessionId)}/history?at=${at}`,
        );
        if (!stopped) {
          setSnapshot({ at, snapshot: r.snapshot });
          setError(undefined);
        }
      } catch (e) {
        if (stopped) return;
        if (e instanceof ApiError && e.status === 404 && e.code === 'route_not_found') setUnsupported(true);
        else setError(e);
      }
    }, 80);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [props.sessionId, at, unsupported]);

  if (last === 0) return <Empty title="No events yet" />;
  const event = events.find((e) => e.sequence === at);
  const rm = snapshot?.snapshot.threads.find((t) => t.threadId === props.threadId);
  const stale = snapshot !== undefined && snapshot.at !== at;
  return (
    <div class="time-travel">
      <div class="scrubber">
        <button type="button" aria-label="Previous event" disabled={at <= first} onClick={() => go(at - 1)}>
          ◀
        </button>
        <input
          type="range"
          min={first}
          max={last}
          value={at}
          aria-label="Event sequence"
          aria-valuetext={`event ${at} of ${last}`}
          onInput={(e) => go(Number((e.target as HTMLInputElement).value))}
        />
        <button type="button" aria-label="Next event" disabled={at >= last} onClick={() => go(at + 1)}>
          ▶
        </button>
        <span class="mono" data-at={at}>
          event {at} / {last}
        </span>
        <button
          type="button"
          class="fork"
          disabled={forking}
          title="A new session whose history is this one's up to this event (forkSession)"
          onClick={async () => {
            setForking(true);
            try {
              const fork = await post<{ sessionId: string }>(`/v1/sessions/${enc(props.sessionId)}/fork`, { at });
              navigate(`/sessions/${enc(fork.sessionId)}`);
            } catch (e) {
              setError(e);
            } finally {
              setForking(false);
            }
          }}
        >
          Fork here
        </button>
      </div>
      <div class="at-event">
        {event ? (
          <>
            <span class="mono">{event.type}</span>{' '}
            <span class="muted small">{new Date(event.timestamp).toLocaleString()}</span>
          </>
        ) : null}
        {at !== last ? (
          <button type="button" class="link" onClick={() => go(last)}>
            jump to now
          </button>
        ) : null}
      </div>
      {error ? <ErrorBox error={error} /> : null}
      <div class="rm-summary" data-rm-at={snapshot?.at}>
        {unsupported ? (
          <span class="muted">
            This server has no history route: statuses below are folded from the events, not the read model.
          </span>
        ) : rm ? (
          <>
            <span>Thread as of event {snapshot?.at}:</span> <Status status={rm.status} />
            <span class="muted small">
              {rm.turns.length} turn{rm.turns.length === 1 ? '' : 's'} · {rm.pendingRequests.length} pending ·{' '}
              {rm.queuedTurns.length} queued
              {rm.unreconciledActions?.length ? ` · ${rm.unreconciledActions.length} lost to reconcile` : ''}
            </span>
            {stale ? <span class="muted small">(loading event {at}…)</span> : null}
          </>
        ) : (
          <Loading what={`the read model at event ${at}`} />
        )}
      </div>
      <Timeline
        sessionId={props.sessionId}
        threadId={props.threadId}
        model={model}
        rms={snapshot && !stale ? snapshot.snapshot.threads : []}
        selected={params.get('node') ?? undefined}
        readOnly
        nodeHref={(a) =>
          `${base}?at=${at}${params.get('thread') ? `&thread=${enc(props.threadId)}` : ''}${a ? `&node=${enc(`${a.runId}:${a.id}`)}` : ''}`
        }
      />
    </div>
  );
}
