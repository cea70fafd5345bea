import { useEffect, useRef, useState } from 'preact/hooks';
import { allEvents, enc, get, type OarEvent, type Snapshot } from './api';
import { applyEvent, emptyModel, type SessionModel } from './model';
import { openStream, type StreamStatus } from './stream';

/**
 * A session, live: the snapshot (`GET /v1/sessions/{id}`), every durable event (JSON pages), then the SSE stream
 * from the last sequence. Durable events are appended and folded into the model; the snapshot (the runtime's read
 * models, where statuses come from) is fetched again shortly after each burst of events. Model deltas (no `id:`)
 * only feed the streaming text.
 */

export interface SessionData {
  snapshot?: Snapshot;
  events: OarEvent[];
  model: SessionModel;
  conn?: StreamStatus;
  error?: unknown;
  loading: boolean;
  version: number;
  refreshSnapshot(): void;
}

export function useSession(sessionId: string): SessionData {
  const [snapshot, setSnapshot] = useState<Snapshot | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [conn, setConn] = useState<StreamStatus | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const [version, setVersion] = useState(0);
  const events = useRef<OarEvent[]>([]);
  const model = useRef<SessionModel>(emptyModel());
  const refresh = useRef<() => void>(() => undefined);

  useEffect(() => {
    let stopped = false;
    let stream: { close(): void } | undefined;
    let snapTimer: ReturnType<typeof setTimeout> | undefined;
    let renderQueued = false;
    events.current = [];
    model.current = emptyModel();
    setSnapshot(undefined);
    setLoading(true);
    setError(undefined);
    const bump = () => {
      if (renderQueued) return;
      renderQueued = true;
      requestAnimationFrame(() => {
        renderQueued = false;
        if (!stopped) setVersion((v) => v + 1);
      });
    };
    const loadSnapshot = async () => {
      try {
        const s = await get<{ snapshot: Snapshot }>(`/v1/sessions/${enc(sessionId)}?limit=1`);
        if (!stopped) setSnapshot(s.snapshot);
      } catch (e) {
        if (!stopped) setError(e);
      }
    };
    // Throttled, not debounced: a session that never pauses still gets a fresh read model every 150 ms.
    const soon = () => {
      snapTimer ??= setTimeout(() => {
        snapTimer = undefined;
        void loadSnapshot();
      }, 150);
    };
    refresh.current = soon;
    (async () => {
      try {
        await loadSnapshot();
        const page = await allEvents(sessionId);
        if (stopped) return;
        for (const e of page.events) {
          events.current.push(e);
          applyEvent(model.current, e);
        }
        setLoading(false);
        bump();
        const last = events.current[events.current.length - 1]?.sequence ?? 0;
        stream = openStream(
          `/v1/sessions/${enc(sessionId)}/events`,
          {
            onMessage(type, data, id) {
              if (type === 'snapshot' || type === 'snapshot.repaired') {
                soon();
                return;
              }
              if (type === 'server.closing') return;
              const e = data as OarEvent;
              if (!e || typeof e !== 'object' || typeof e.type !== 'string') return;
              if (id === undefined) {
                // live-only (model.delta): never stored, only the streaming text
                applyEvent(model.current, e);
                bump();
                return;
              }
              const lastSeq = events.current[events.current.length - 1]?.sequence ?? 0;
              if (e.sequence <= lastSeq) return;
              events.current.push(e);
              applyEvent(model.current, e);
              bump();
              soon();
            },
            onState(s) {
              setConn(s);
              if (s.state === 'live') soon();
            },
          },
          last,
        );
      } catch (e) {
        if (!stopped) {
          setError(e);
          setLoading(false);
        }
      }
    })();
    return () => {
      stopped = true;
      stream?.close();
      if (snapTimer) clearTimeout(snapTimer);
    };
  }, [sessionId]);

  return {
    snapshot,
    events: events.current,
    model: model.current,
    conn,
    error,
    loading,
    version,
    refreshSnapshot: () => refresh.current(),
  };
}
