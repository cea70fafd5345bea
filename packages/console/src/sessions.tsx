import { useEffect, useRef, useState } from 'preact/hooks';
import { enc, get, post, type SessionSummary, type Snapshot } from './api';
import { openStream, type StreamStatus } from './stream';
import { ago, Connection, Empty, ErrorBox, Filters, Link, Loading, navigate, Status } from './ui';

/**
 * Every session of the key's workspace: the main thread's status, the pending decisions and the lost actions to
 * reconcile (all from the session snapshot), title, last activity; search and a status filter. Live:
 * `GET /v1/events` sends the list, then each changed session (its snapshot is then fetched again). Without that
 * stream the list is polled.
 */

interface Row extends SessionSummary {
  status?: string;
  pending?: number;
  /** Lost actions nobody has reconciled: the thread reads idle, so only this says something is still open. */
  lost?: number;
  activeTurnId?: string;
}

const FILTERS: { id: string; label: string; test(s: string | undefined): boolean }[] = [
  { id: 'all', label: 'All', test: () => true },
  { id: 'active', label: 'Running', test: (s) => s === 'running' || s === 'queued' },
  { id: 'waiting', label: 'Waiting', test: (s) => s === 'blocked' },
  { id: 'idle', label: 'Idle', test: (s) => s === 'idle' || s === 'completed' },
  { id: 'failed', label: 'Failed', test: (s) => s === 'failed' || s === 'cancelled' || s === 'stale' },
];

export function SessionsScreen() {
  const [rows, setRows] = useState<Map<string, Row> | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [conn, setConn] = useState<StreamStatus | undefined>(undefined);
  const [query, setQuery] = useState('');
  const [filter, setFilter] = useState('all');
  const [title, setTitle] = useState('');
  const [creating, setCreating] = useState(false);
  const rowsRef = useRef(new Map<string, Row>());
  const [reload, setReload] = useState(0);

  useEffect(() => {
    let stopped = false;
    let poll: ReturnType<typeof setInterval> | undefined;
    const publish = () => !stopped && setRows(new Map(rowsRef.current));
    const detail = async (id: string) => {
      try {
        const s = await get<{ snapshot: Snapshot }>(`/v1/sessions/${enc(id)}?limit=1`);
        const main = s.snapshot.threads[0];
        const row = rowsRef.current.get(id);
        if (!row) return;
        row.status = main?.status;
        row.activeTurnId = main?.activeTurnId;
        row.pending = s.snapshot.threads.reduce((n, t) => n + t.pendingRequests.length, 0);
        row.lost = s.snapshot.threads.reduce((n, t) => n + (t.unreconciledActions?.length ?? 0), 0);
        row.title = s.snapshot.title ?? row.title;
        publish();
      } catch {
        // the row keeps what it had; the list itself shows errors
      }
    };
    const queue: string[] = [];
    let running = 0;
    const enqueue = (id: string) => {
      if (!queue.includes(id)) queue.push(id);
      const pump = () => {
        while (running < 4 && queue.length) {
          const next = queue.shift() as string;
          running++;
          void detail(next).finally(() => {
            running--;
            pump();
          });
        }
      };
      pump();
    };
    const merge = (list: SessionSummary[], replace: boolean) => {
      if (replace) {
        const next = new Map<string, Row>();
        for (const s of list) next.set(s.sessionId, { ...rowsRef.current.get(s.sessionId), ...s });
        rowsRef.current = next;
      } else for (const s of list) rowsRef.current.set(s.sessionId, { ...rowsRef.current.get(s.sessionId), ...s });
      publish();
      for (const s of list.slice(0, 100)) enqueue(s.sessionId);
    };
    const pollList = async () => {
      try {
        const { sessions } = await get<{ sessions: SessionSummary[] }>('/v1/sessions?limit=200');
        const changed = sessions.filter((s) => rowsRef.current.get(s.sessionId)?.updatedAt !== s.updatedAt);
        merge(sessions, true);
        for (const s of changed) enqueue(s.sessionId);
        setError(undefined);
      } catch (e) {
        if (!stopped) setError(e);
      }
    };
    const stream = openStream('/v1/events', {
      onMessage(type, data) {
        if (type === 'sessions') merge((data as { sessions: SessionSummary[] }).sessions ?? [], true);
        else if (type === 'session.changed') merge([data as SessionSummary], false);
      },
      onState: setConn,
      onUnavailable() {
        // No workspace stream on this server: poll the list instead.
        setConn(undefined);
        void pollList();
        poll = setInterval(pollList, 3000);
      },
    });
    return () => {
      stopped = true;
      stream.close();
      if (poll) clearInterval(poll);
    };
  }, [reload]);

  const create = async (e: Event) => {
    e.preventDefault();
    setCreating(true);
    try {
      const s = await post<{ sessionId: string }>('/v1/sessions', title.trim() ? { title: title.trim() } : {});
      navigate(`/sessions/${enc(s.sessionId)}`);
    } catch (err) {
      setError(err);
    } finally {
      setCreating(false);
    }
  };

  const q = query.trim().toLowerCase();
  const f = FILTERS.find((x) => x.id === filter) ?? FILTERS[0];
  const list = rows
    ? [...rows.values()]
        .filter((r) => !q || r.sessionId.toLowerCase().includes(q) || (r.title ?? '').toLowerCase().includes(q))
        .filter((r) => f?.test(r.status))
        .sort((a, b) => (b.updatedAt ?? '').localeCompare(a.updatedAt ?? ''))
    : [];

  return (
    <section class="screen" aria-labelledby="sessions-h">
      <header class="screen-head">
        <h1 id="sessions-h">Sessions</h1>
        <Connection status={conn} label="updates" />
      </header>
      <form class="toolbar" onSubmit={create}>
        <input
          type="search"
          placeholder="Search title or id"
          aria-label="Search sessions"
          value={query}
          onInput={(e) => setQuery((e.target as HTMLInputElement).value)}
        />
        <Filters label="Filter by status" options={FILTERS} value={filter} onChange={setFilter} />
        <span class="spacer" />
        <input
          placeholder="New session title"
          aria-label="New session title"
          value={title}
          onInput={(e) => setTitle((e.target as HTMLInputElement).value)}
        />
        <button type="submit" class="primary" disabled={creating}>
          New session
        </button>
      </form>
      {error ? <ErrorBox error={error} retry={() => setReload((n) => n + 1)} /> : null}
      {!rows && !error ? <Loading what="sessions" /> : null}
      {rows && rows.size === 0 ? (
        <Empty title="No sessions yet">
          Create one above, then submit a turn. With <code>oar serve</code> in demo mode try the demo prompt.
        </Empty>
      ) : null}
      {rows && rows.size > 0 && list.length === 0 ? <Empty title="No session matches the search or filter" /> : null}
      {list.length > 0 ? (
        <table class="list" aria-label="sessions">
          <thead>
            <tr>
              <th>Status</th>
              <th>Title</th>
              <th class="num">Decisions</th>
              <th>Last activity</th>
              <th class="hide-narrow num">Events</th>
            </tr>
          </thead>
          <tbody>
            {list.map((r) => (
              <tr key={r.sessionId} data-session={r.sessionId}>
                <td>{r.status ? <Status status={r.status} small /> : <span class="muted">…</span>}</td>
                <td>
                  <Link href={`/sessions/${enc(r.sessionId)}`}>{r.title || 'Untitled session'}</Link>
                  <div class="muted mono small">{r.sessionId}</div>
                </td>
                <td class="num">
                  {r.pending ? (
                    <Link href="/inbox" class="badge warn">
                      {r.pending} pending
                    </Link>
                  ) : null}{' '}
                  {r.lost ? (
                    <Link href="/inbox" class="badge bad">
                      {r.lost} lost
                    </Link>
                  ) : null}
                  {!r.pending && !r.lost ? <span class="muted">{r.pending === 0 ? 'none' : '…'}</span> : null}
                </td>
                <td title={r.updatedAt}>{ago(r.updatedAt)}</td>
                <td class="hide-narrow num">{r.events ?? '—'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
    </section>
  );
}
