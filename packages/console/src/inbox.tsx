import { useEffect, useRef, useState } from 'preact/hooks';
import {
  ApiError,
  type EventPage,
  enc,
  get,
  type PendingDecision,
  post,
  qs,
  type SessionSummary,
  type Snapshot,
} from './api';
import { openStream, type StreamStatus } from './stream';
import { ago, Connection, Empty, ErrorBox, Json, Link, Loading } from './ui';

/**
 * Every pending decision of the workspace (`GET /v1/decisions`): what is asked, why (the rule or mode that
 * matched), and approve / deny with a reason / approve for the session. Keyboard: j/k or ↑/↓ move, a approves,
 * s approves for the session, d denies (with the reason typed in the box, which r focuses).
 */

async function loadDecisions(): Promise<PendingDecision[]> {
  try {
    return (await get<{ decisions: PendingDecision[] }>('/v1/decisions')).decisions;
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error;
    // An older server without the workspace route: read each session's pending requests.
    const { sessions } = await get<{ sessions: SessionSummary[] }>('/v1/sessions?limit=200');
    const out: PendingDecision[] = [];
    for (const s of sessions) {
      const { snapshot } = await get<{ snapshot: Snapshot }>(`/v1/sessions/${enc(s.sessionId)}?limit=1`);
      for (const t of snapshot.threads)
        for (const p of t.pendingRequests)
          out.push({ ...p, sessionId: s.sessionId, threadId: t.threadId, sessionTitle: snapshot.title });
    }
    return out;
  }
}

interface Detail {
  reason?: string;
  rule?: unknown;
  mode?: string;
  source?: string;
  input?: unknown;
  scope?: unknown;
}

const details = new Map<string, Promise<Detail>>();

/** Why and what, from the decision's own events: `permission.requested` (reason, rule, mode) and `action.required`. */
function detailOf(d: PendingDecision): Promise<Detail> {
  const cached = details.get(d.actionId);
  if (cached) return cached;
  const load = (async () => {
    const out: Detail = {};
    let after = 0;
    for (let pages = 0; pages < 50; pages++) {
      const page = await get<EventPage>(
        `/v1/sessions/${enc(d.sessionId)}/events${qs({ after, limit: 1000, type: 'action.required,permission.requested', turnId: d.turnId })}`,
      );
      for (const e of page.events) {
        if (e.actionId !== d.actionId) continue;
        const p = (e.payload ?? {}) as Record<string, unknown>;
        if (e.type === 'permission.requested') {
          out.reason = typeof p.reason === 'string' ? p.reason : out.reason;
          out.rule = p.rule ?? out.rule;
          out.mode = typeof p.mode === 'string' ? p.mode : out.mode;
          out.source = typeof p.source === 'string' ? p.source : out.source;
        } else {
          out.input = p.input;
          out.scope = p.scope;
        }
      }
      if (page.nextCursor <= after || page.nextCursor >= page.lastSequence) break;
      after = page.nextCursor;
    }
    return out;
  })();
  load.catch(() => details.delete(d.actionId));
  details.set(d.actionId, load);
  return load;
}

/**
 * The question of a decision without the reason the runtime appends to its prompt ("Allow write on REVIEW.md?
 * default mode asks…"): the reason has its own "Why:" line, so the card says it once.
 */
export function question(prompt: string | undefined, reason: string | undefined): string {
  const text = (prompt ?? '').trim();
  if (text === '') return 'A decision is needed.';
  if (!reason || !text.endsWith(reason.trim()) || text.length === reason.trim().length) return text;
  return text.slice(0, text.length - reason.trim().length).trim();
}

function DecisionDetail(props: { decision: PendingDecision }) {
  const [detail, setDetail] = useState<Detail | undefined>(undefined);
  useEffect(() => {
    let stopped = false;
    detailOf(props.decision)
      .then((x) => !stopped && setDetail(x))
      .catch(() => undefined);
    return () => {
      stopped = true;
    };
  }, [props.decision]);
  const reason = props.decision.reason ?? detail?.reason;
  return (
    <>
      <div class="what">{question(props.decision.prompt, reason)}</div>
      {reason || detail?.rule !== undefined ? (
        <div class="why" data-why>
          <span class="muted">Why: </span>
          {reason}
          {detail?.rule !== undefined ? (
            <span class="muted small">
              {' '}
              (rule <code>{JSON.stringify(detail.rule)}</code>)
            </span>
          ) : detail?.mode ? (
            <span class="muted small"> (permission mode {detail.mode})</span>
          ) : null}
        </div>
      ) : null}
      {detail?.input !== undefined ? (
        <details class="asked-input">
          <summary>What exactly: the action's input</summary>
          <Json value={detail.input} max={4000} />
        </details>
      ) : null}
    </>
  );
}

export function InboxScreen() {
  const [items, setItems] = useState<PendingDecision[] | undefined>(undefined);
  const [titles, setTitles] = useState<Record<string, string>>({});
  const [error, setError] = useState<unknown>(undefined);
  const [conn, setConn] = useState<StreamStatus | undefined>(undefined);
  const [index, setIndex] = useState(0);
  const [reason, setReason] = useState('');
  const [answer, setAnswer] = useState('');
  const [busy, setBusy] = useState<string | undefined>(undefined);
  const [notice, setNotice] = useState<string | undefined>(undefined);
  const reasonRef = useRef<HTMLInputElement>(null);
  const answerRef = useRef<HTMLTextAreaElement>(null);
  const refresh = useRef<() => void>(() => undefined);

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let poll: ReturnType<typeof setInterval> | undefined;
    const load = async () => {
      try {
        const list = await loadDecisions();
        if (stopped) return;
        list.sort((a, b) => (a.requestedAt ?? '').localeCompare(b.requestedAt ?? ''));
        setItems(list);
        setError(undefined);
      } catch (e) {
        if (!stopped) setError(e);
      }
    };
    const soon = () => {
      timer ??= setTimeout(() => {
        timer = undefined;
        void load();
      }, 150);
    };
    refresh.current = soon;
    void load();
    const stream = openStream('/v1/events', {
      onMessage(type, data) {
        if (type === 'sessions') {
          const map: Record<string, string> = {};
          for (const s of (data as { sessions: SessionSummary[] }).sessions ?? []) map[s.sessionId] = s.title ?? '';
          setTitles(map);
          soon();
        } else if (type === 'session.changed') soon();
      },
      onState: setConn,
      onUnavailable() {
        setConn(undefined);
        poll = setInterval(load, 3000);
      },
    });
    return () => {
      stopped = true;
      stream.close();
      if (timer) clearTimeout(timer);
      if (poll) clearInterval(poll);
    };
  }, []);

  const current = items?.[Math.min(index, (items?.length ?? 1) - 1)];

  const decide = async (d: PendingDecision | undefined, decision: 'approve' | 'deny' | 'approve_for_session') => {
    if (!d || busy) return;
    setBusy(d.actionId);
    // What the boxes hold now: a key pressed right after typing can reach a listener registered before the render
    // that saw the text (the effect below re-registers after paint), so the state may still be the old value.
    const reasonNow = (reasonRef.current?.value ?? reason).trim();
    const answerNow = (answerRef.current?.value ?? answer).trim();
    try {
      await post(`/v1/sessions/${enc(d.sessionId)}/actions/${enc(d.actionId)}/decision`, {
        decision,
        ...(reasonNow ? { reason: reasonNow } : {}),
        // an ask-user question is answered with text (payload.text)
        ...(d.actionType === 'user_input' && answerNow ? { payload: { text: answerNow } } : {}),
      });
      setAnswer('');
      setNotice(`${decision.replace(/_/g, ' ')}: ${d.toolName ?? d.actionType ?? 'decision'} (${d.actionId})`);
      setReason('');
      setItems((list) => list?.filter((x) => x.actionId !== d.actionId));
      refresh.current();
    } catch (e) {
      setError(e);
      refresh.current();
    } finally {
      setBusy(undefined);
    }
  };

  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const typing = e.target instanceof HTMLInputElement || e.target instanceof HTMLTextAreaElement;
      if (typing) {
        if (e.key === 'Escape') (e.target as HTMLElement).blur();
        return;
      }
      if (e.ctrlKey || e.metaKey || e.altKey) return;
      const n = items?.length ?? 0;
      if (e.key === 'j' || e.key === 'ArrowDown') setIndex((i) => Math.min(i + 1, Math.max(n - 1, 0)));
      else if (e.key === 'k' || e.key === 'ArrowUp') setIndex((i) => Math.max(i - 1, 0));
      else if (e.key === 'a') void decide(current, 'approve');
      else if (e.key === 's') void decide(current, 'approve_for_session');
      else if (e.key === 'd') void decide(current, 'deny');
      else if (e.key === 'r') {
        e.preventDefault();
        reasonRef.current?.focus();
      } else return;
      e.preventDefault();
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  });

  return (
    <section class="screen" aria-labelledby="inbox-h">
      <header class="screen-head">
        <h1 id="inbox-h">Approvals</h1>
        <Connection status={conn} label="updates" />
      </header>
      <p class="muted small keys">
        Keys: <kbd>j</kbd>/<kbd>k</kbd> move · <kbd>a</kbd> approve · <kbd>s</kbd> approve for session · <kbd>d</kbd>{' '}
        deny · <kbd>r</kbd> type a reason
      </p>
      {notice ? (
        <div class="notice" role="status">
          {notice}
        </div>
      ) : null}
      {error ? <ErrorBox error={error} retry={() => refresh.current()} /> : null}
      {!items && !error ? <Loading what="pending decisions" /> : null}
      {items && items.length === 0 ? (
        <Empty title="Nothing waits for you">Decisions the runtime asks for (approvals, questions) appear here.</Empty>
      ) : null}
      {items && items.length > 0 ? (
        <ul class="inbox" aria-label="pending decisions">
          {items.map((d, i) => {
            const selected = current?.actionId === d.actionId;
            const allowed = d.decisions ?? ['approve', 'deny', 'approve_for_session'];
            return (
              <li
                key={d.actionId}
                class={`decision${selected ? ' selected' : ''}`}
                data-decision={d.actionId}
                aria-current={selected ? 'true' : undefined}
                onClick={() => setIndex(i)}
                onKeyDown={undefined}
              >
                <div class="decision-head">
                  <span class="badge warn">‖ {(d.actionType ?? 'decision').replace(/_/g, ' ')}</span>
                  <strong>{d.toolName ?? d.actionType}</strong>
                  <span class="muted">
                    in{' '}
                    <Link href={`/sessions/${enc(d.sessionId)}?thread=${enc(d.threadId)}`}>
                      {d.sessionTitle || titles[d.sessionId] || d.sessionId}
                    </Link>{' '}
                    · {ago(d.requestedAt)}
                  </span>
                </div>
                <DecisionDetail decision={d} />
                {selected && d.actionType === 'user_input' ? (
                  <textarea
                    ref={answerRef}
                    class="answer"
                    aria-label="Your answer"
                    placeholder="Your answer (sent as the action's output)"
                    rows={2}
                    value={answer}
                    onInput={(e) => setAnswer((e.target as HTMLTextAreaElement).value)}
                  />
                ) : null}
                {selected ? (
                  <div class="decision-actions">
                    <input
                      ref={reasonRef}
                      placeholder="Reason (optional; sent with the decision)"
                      aria-label="Reason"
                      value={reason}
                      onInput={(e) => setReason((e.target as HTMLInputElement).value)}
                      onKeyDown={(e) => {
                        if (e.key === 'Enter') {
                          e.preventDefault();
                          void decide(d, 'deny');
                        }
                      }}
                    />
                    {allowed.includes('approve') ? (
                      <button
                        type="button"
                        class="ok"
                        disabled={busy !== undefined}
                        onClick={() => decide(d, 'approve')}
                      >
                        {d.actionType === 'user_input' ? 'Answer' : 'Approve'} <kbd>a</kbd>
                      </button>
                    ) : null}
                    {allowed.includes('approve_for_session') ? (
                      <button
                        type="button"
                        disabled={busy !== undefined}
                        onClick={() => decide(d, 'approve_for_session')}
                      >
                        Approve for session <kbd>s</kbd>
                      </button>
                    ) : null}
                    {allowed.includes('deny') ? (
                      <button type="button" class="bad" disabled={busy !== undefined} onClick={() => decide(d, 'deny')}>
                        Deny <kbd>d</kbd>
                      </button>
                    ) : null}
                  </div>
                ) : null}
              </li>
            );
          })}
        </ul>
      ) : null}
    </section>
  );
}
