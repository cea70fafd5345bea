import { useEffect, useRef, useState } from 'preact/hooks';
import {
  ApiError,
  type EventPage,
  enc,
  get,
  type LostAction,
  type PendingDecision,
  qs,
  type ReconcileDecision,
  respondAction,
  type SessionSummary,
  type Snapshot,
} from './api';
import { openStream, type StreamStatus } from './stream';
import { ago, Connection, Empty, ErrorBox, Json, Link, Loading } from './ui';

/**
 * Every pending decision of the workspace (`GET /v1/decisions`): what is asked, why (the rule or mode that
 * matched), and approve / deny with a reason / approve for the session. Keyboard: j/k or ↑/↓ move, a approves,
 * s approves for the session, d denies (with the reason typed in the box, which r focuses). Below them, the lost
 * actions nobody has reconciled yet (`unreconciled`), each answered it happened / it did not / retry.
 */

interface Inbox {
  decisions: PendingDecision[];
  lost: LostAction[];
}

async function loadInbox(): Promise<Inbox> {
  try {
    const r = await get<{ decisions: PendingDecision[]; unreconciled?: LostAction[] }>('/v1/decisions');
    // A server from before lost-action reconciliation sends no `unreconciled`: it has none to show.
    return { decisions: r.decisions, lost: r.unreconciled ?? [] };
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error;
    // An older server without the workspace route: read each session's pending requests and lost actions.
    const { sessions } = await get<{ sessions: SessionSummary[] }>('/v1/sessions?limit=200');
    const out: Inbox = { decisions: [], lost: [] };
    for (const s of sessions) {
      const { snapshot } = await get<{ snapshot: Snapshot }>(`/v1/sessions/${enc(s.sessionId)}?limit=1`);
      for (const t of snapshot.threads) {
        const where = { sessionId: s.sessionId, threadId: t.threadId, sessionTitle: snapshot.title };
        for (const p of t.pendingRequests) out.decisions.push({ ...p, ...where });
        for (const u of t.unreconciledActions ?? []) out.lost.push({ ...u, ...where });
      }
    }
    out.lost.sort((a, b) => a.lostAt.localeCompare(b.lostAt));
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

/** A lost action's answers, as the runtime records them (docs/reliability.md "Reconciling a lost action"). */
const RECONCILE_ANSWERS: { decision: ReconcileDecision; label: string; tone?: string; effect: string }[] = [
  { decision: 'happened', label: 'It happened', tone: 'ok', effect: 'the action ends completed' },
  {
    decision: 'not_happened',
    label: 'It did not happen',
    tone: 'bad',
    effect: 'the action ends failed (not_happened)',
  },
  { decision: 'retry', label: 'Retry', effect: 'a new turn runs it again, under a new idempotency key' },
];

/**
 * One lost action: a crash stopped the call after it may have acted, so only someone who can look at the world can
 * say whether it did — the idempotency key is what to look it up by, hence shown whole and selectable in one click.
 * It has its own reason box: these are answered with the buttons, outside the approvals' keyboard selection.
 */
function LostCard(props: {
  lost: LostAction;
  title: string;
  busy: boolean;
  onAnswer(decision: ReconcileDecision, reason: string): void;
}) {
  const l = props.lost;
  const [reason, setReason] = useState('');
  return (
    <li class="decision lost" data-lost={l.actionId}>
      <div class="decision-head">
        <span class="badge bad">✕ lost</span>
        <strong data-tool>{l.toolName ?? l.graphActionId}</strong>
        <span class="muted">
          in <Link href={`/sessions/${enc(l.sessionId)}?thread=${enc(l.threadId)}`}>{props.title}</Link> · lost{' '}
          <time dateTime={l.lostAt} title={l.lostAt} data-lost-at>
            {ago(l.lostAt)}
          </time>
        </span>
      </div>
      <div class="what">{l.prompt}</div>
      {l.idempotencyKey ? (
        <div class="muted small">
          Idempotency key{' '}
          <code class="idem" data-idempotency-key title="The key the world may have seen this call under">
            {l.idempotencyKey}
          </code>
        </div>
      ) : null}
      <div class="decision-actions">
        <input
          placeholder="Reason (optional; recorded with the answer)"
          aria-label="Reason for the lost action"
          value={reason}
          onInput={(e) => setReason((e.target as HTMLInputElement).value)}
        />
        {RECONCILE_ANSWERS.map((a) => (
          <button
            type="button"
            key={a.decision}
            class={a.tone}
            title={`Then ${a.effect}`}
            disabled={props.busy}
            onClick={() => props.onAnswer(a.decision, reason.trim())}
          >
            {a.label}
          </button>
        ))}
      </div>
    </li>
  );
}

export function InboxScreen() {
  const [items, setItems] = useState<PendingDecision[] | undefined>(undefined);
  const [lost, setLost] = useState<LostAction[]>([]);
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
        const inbox = await loadInbox();
        if (stopped) return;
        const list = inbox.decisions;
        list.sort((a, b) => (a.requestedAt ?? '').localeCompare(b.requestedAt ?? ''));
        setItems(list);
        setLost(inbox.lost);
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
      await respondAction(d.sessionId, d.actionId, {
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

  /** As an approval: the card leaves at once, and the refresh that follows says what the runtime made of it. */
  const reconcile = async (l: LostAction, decision: ReconcileDecision, reason: string) => {
    if (busy) return;
    setBusy(l.actionId);
    try {
      const r = await respondAction(l.sessionId, l.actionId, { decision, ...(reason ? { reason } : {}) });
      const label = RECONCILE_ANSWERS.find((a) => a.decision === decision)?.label ?? decision;
      setNotice(
        `${label}: ${l.toolName ?? l.graphActionId} (${l.actionId})${r.turnId ? ` runs again in turn ${r.turnId}` : ''}`,
      );
      setLost((list) => list.filter((x) => x.actionId !== l.actionId));
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
      {items && items.length === 0 && lost.length === 0 ? (
        <Empty title="Nothing waits for you">
          Decisions the runtime asks for (approvals, questions, lost actions to reconcile) appear here.
        </Empty>
      ) : null}
      {items && items.length === 0 && lost.length > 0 ? <p class="muted">No approval or question waits.</p> : null}
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
      {lost.length > 0 ? (
        <section class="lost-actions" aria-labelledby="lost-h">
          <h2 id="lost-h">Lost actions: did they take effect?</h2>
          <p class="muted small">
            A crash stopped these calls while they ran, so OAR cannot tell whether they acted. They hold nothing — the
            thread went on — but each stays open until someone says: it happened (the action ends completed), it did not
            (it ends failed), or retry (a new turn runs it again under a new idempotency key).
          </p>
          <ul class="inbox" aria-label="lost actions">
            {lost.map((l) => (
              <LostCard
                key={l.actionId}
                lost={l}
                title={l.sessionTitle || titles[l.sessionId] || l.sessionId}
                busy={busy !== undefined}
                onAnswer={(decision, reason) => reconcile(l, decision, reason)}
              />
            ))}
          </ul>
        </section>
      ) : null}
    </section>
  );
}
