import { useEffect, useState } from 'preact/hooks';
import { ApiError, call, enc, get, post, type ThreadRM, type UnreconciledAction } from './api';
import { Dag } from './dag';
import { ExecutorIcon } from './icons';
import { highlightJson } from './markdown.js';
import { type ActionNode, actionStatus, type SessionModel, type ThreadView, type TurnView } from './model';
import { RollbackNote, RollbackPanel, rollbackDoneText } from './rollback';
import { ToolUiSection } from './tool-ui';
import { Empty, ErrorBox, Json, Link, Loading, Markdown, navigate, Status } from './ui';

/**
 * A thread's timeline: its turns with each step's action graph, a node's details (input, permission, attempts,
 * observation, artifacts) and the composer of the next turn. The session screen (session.tsx) and time travel
 * (views.tsx) draw it.
 */

/** The most recent turns are drawn; earlier ones on request, so a long session stays quick to render. */
const TURN_WINDOW = 30;

function turnStatus(u: TurnView, rm: ThreadRM | undefined) {
  return rm?.turns.find((t) => t.turnId === u.turnId)?.status ?? u.status;
}

/** A turn that ended: the thread can be rolled back to the boundary before it. */
const FINISHED = new Set(['completed', 'failed', 'cancelled', 'timed_out', 'lost', 'stale']);

export function Timeline(props: {
  sessionId: string;
  threadId: string;
  model: SessionModel;
  rms: ThreadRM[];
  selected?: string;
  readOnly?: boolean;
  onChanged?(): void;
  /** Where a node and closing its details lead (default: this timeline with `node=`). */
  nodeHref?(a: ActionNode | undefined): string;
}) {
  const { sessionId, threadId, model, rms } = props;
  const t: ThreadView | undefined = model.threads.get(threadId);
  const rm = rms.find((x) => x.threadId === threadId);
  const parent = model.parents.get(threadId) ?? (t?.parentThreadId ? { threadId: t.parentThreadId } : undefined);
  const base = `/sessions/${enc(sessionId)}`;
  const [selRun, selAction] = (props.selected ?? '').split(':');
  const selectedNode = t?.turns
    .flatMap((u) => u.runs)
    .find((r) => r.runId === selRun)
    ?.actions.find((a) => a.id === selAction);
  const hrefOf =
    props.nodeHref ??
    ((a: ActionNode | undefined) => `${base}?thread=${enc(threadId)}${a ? `&node=${enc(`${a.runId}:${a.id}`)}` : ''}`);
  const select = (a: ActionNode) => navigate(hrefOf(a), true);
  const children = (rm?.subagents ?? []).filter((s) => s.childThreadId);
  const status = rm?.status ?? t?.status ?? 'unknown';
  const [shown, setShown] = useState(TURN_WINDOW);
  // Rollback: the turn whose plan is open, and what the last rollback from here did.
  const [rollbackOf, setRollbackOf] = useState<string | undefined>(undefined);
  const [rolledBack, setRolledBack] = useState<string | undefined>(undefined);
  const busy =
    !!rm?.activeTurnId ||
    (rm?.pendingRequests.length ?? 0) > 0 ||
    (rm?.queuedTurns.length ?? 0) > 0 ||
    rm?.status === 'running' ||
    rm?.status === 'blocked';
  const visible = t?.turns.slice(-shown) ?? [];
  // The thread's rollbacks stand where they happened: between the turns they kept and the turns after them.
  const notes = (t?.rollbacks ?? []).filter(
    (r) => (t?.turns.length ?? 0) <= shown || r.sequence > (visible[0]?.firstSeq ?? 0),
  );
  const notesBetween = (from: number, to: number) =>
    notes
      .filter((r) => r.sequence > from && r.sequence < to)
      .map((r) => <RollbackNote key={r.rollbackId} rollback={r} />);
  return (
    <div class={`timeline-layout${selectedNode ? ' with-detail' : ''}`}>
      <div class="timeline">
        <div class="thread-head">
          <Status status={status} />
          <span>
            Thread <span class="mono">{threadId}</span>
            {t?.agent ? ` · agent ${t.agent}` : ''}
          </span>
          {parent ? (
            <Link
              class="back"
              href={`${base}?thread=${enc(parent.threadId)}${'actionId' in parent && parent.runId ? `&node=${enc(`${parent.runId}:${parent.actionId}`)}` : ''}`}
            >
              ↩ back to the parent thread
            </Link>
          ) : null}
          {children.length ? (
            <span class="muted small">
              sub-agents:{' '}
              {children.map((c) => (
                <Link key={c.subagentId} href={`${base}?thread=${enc(c.childThreadId as string)}`} class="chip">
                  <ExecutorIcon type="agent" /> {c.agent ?? c.subagentId} ({c.status ?? 'unknown'})
                </Link>
              ))}
            </span>
          ) : null}
        </div>
        {rm && rm.incidents.length > 0 ? (
          <ul class="incidents">
            {rm.incidents.map((i) => (
              <li key={`${i.code}-${i.at}`} class={`incident ${i.severity}`}>
                <strong>
                  {i.severity === 'error' ? '✕' : '⚠'} {i.code}
                </strong>{' '}
                {i.message}
              </li>
            ))}
          </ul>
        ) : null}
        {!t || t.turns.length === 0 ? (
          <Empty title="No turns yet">{props.readOnly ? null : 'Write what the agent should do below.'}</Empty>
        ) : null}
        {t && t.turns.length > shown ? (
          <button type="button" class="link earlier" onClick={() => setShown((n) => n + TURN_WINDOW)}>
            Show {Math.min(TURN_WINDOW, t.turns.length - shown)} earlier turns ({t.turns.length - shown} hidden)
          </button>
        ) : null}
        {visible.map((u, index) => [
          ...notesBetween(visible[index - 1]?.firstSeq ?? Number.NEGATIVE_INFINITY, u.firstSeq),
          <article key={u.turnId} class="turn" data-turn={u.turnId}>
            <header class="turn-head">
              <Status status={turnStatus(u, rm)} small />
              <span class="muted mono small">{u.turnId}</span>
              {props.readOnly || !FINISHED.has(turnStatus(u, rm)) ? null : (
                <button
                  type="button"
                  class="link rollback"
                  disabled={busy || rollbackOf === u.turnId}
                  title={
                    busy
                      ? 'The thread has work in progress: wait or interrupt it first'
                      : 'Remove this turn and every later one from the thread, and restore the files OAR wrote in them (rollbackThread)'
                  }
                  onClick={() => {
                    setRolledBack(undefined);
                    setRollbackOf(u.turnId);
                  }}
                >
                  Roll back to before this turn
                </button>
              )}
            </header>
            {rollbackOf === u.turnId && !props.readOnly ? (
              <RollbackPanel
                sessionId={sessionId}
                threadId={threadId}
                turnId={u.turnId}
                onCancel={() => setRollbackOf(undefined)}
                onDone={(r) => {
                  setRollbackOf(undefined);
                  setRolledBack(rollbackDoneText(r));
                  props.onChanged?.();
                }}
              />
            ) : null}
            {u.input !== undefined || u.inputRef ? (
              <div class="msg user">
                <div class="who">{u.source === 'user' || !u.source ? 'You' : u.source}</div>
                <div class="body">{u.input ?? <span class="muted">input stored at {u.inputRef}</span>}</div>
              </div>
            ) : null}
            {u.runs.map((run, i) => (
              <div class="step" key={run.runId}>
                {run.message ? (
                  <div class="msg assistant step-msg">
                    <div class="who">Agent · step {i + 1}</div>
                    <Markdown source={run.message} />
                  </div>
                ) : null}
                <div class="graph-head">
                  <span>Action graph {i + 1}</span>
                  <Status status={run.status} small />
                  <span class="muted small">
                    {run.actions.filter((a) => actionStatus(a, rm) === 'completed').length}/{run.actions.length}{' '}
                    completed
                  </span>
                </div>
                <Dag run={run} rm={rm} selected={selRun === run.runId ? selAction : undefined} onSelect={select} />
              </div>
            ))}
            {u.answer !== undefined ? (
              <div class="msg assistant answer" data-answer>
                <div class="who">Answer{u.outcome && u.outcome !== 'answered' ? ` (${u.outcome})` : ''}</div>
                <Markdown source={u.answer} />
              </div>
            ) : null}
            {u.error ? (
              <div class="msg error">
                <div class="who">{turnStatus(u, rm) === 'cancelled' ? 'Cancelled' : 'Failed'}</div>
                <code>{u.error.code}</code> {u.error.message}
              </div>
            ) : null}
          </article>,
        ])}
        {notesBetween(visible[visible.length - 1]?.firstSeq ?? Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY)}
        {rolledBack && !props.readOnly ? (
          <div class="notice" role="status" data-rolled-back>
            {rolledBack}
          </div>
        ) : null}
        {t?.streaming || t?.streamingCall ? (
          <div class="msg assistant streaming" data-streaming aria-live="polite">
            <div class="who">Agent · writing…</div>
            {t.streaming ? <div class="body">{t.streaming}</div> : null}
            {t.streamingCall ? (
              <div class="muted small">declaring actions… ({t.streamingCall} characters so far)</div>
            ) : null}
          </div>
        ) : null}
        {rm && rm.pendingRequests.length > 0 ? (
          <div class="pending-note">
            ‖ {rm.pendingRequests.length} decision{rm.pendingRequests.length > 1 ? 's' : ''} pending:{' '}
            {rm.pendingRequests.map((p) => p.prompt ?? p.actionType).join('; ')} —{' '}
            <Link href="/inbox">open the inbox</Link>
          </div>
        ) : null}
        {rm?.unreconciledActions?.length ? <LostNote lost={rm.unreconciledActions} /> : null}
        {props.readOnly ? null : (
          <Composer sessionId={sessionId} threadId={threadId} rm={rm} onChanged={props.onChanged} />
        )}
      </div>
      {selectedNode ? (
        <NodeDetail
          sessionId={sessionId}
          threadId={threadId}
          node={selectedNode}
          status={actionStatus(selectedNode, rm)}
          onClose={() => navigate(hrefOf(undefined), true)}
        />
      ) : null}
    </div>
  );
}

/** Lost actions hold nothing, so the thread reads idle: this says what is still open, and where to answer it. */
function LostNote(props: { lost: UnreconciledAction[] }) {
  const n = props.lost.length;
  return (
    <div class="lost-note" data-lost-note>
      ✕ {n} lost action{n > 1 ? 's' : ''} to reconcile: {props.lost.map((l) => l.prompt).join('; ')} —{' '}
      <Link href="/inbox">say whether {n > 1 ? 'they' : 'it'} happened in the inbox</Link>
    </div>
  );
}

function Composer(props: { sessionId: string; threadId: string; rm: ThreadRM | undefined; onChanged?(): void }) {
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const [note, setNote] = useState<string | undefined>(undefined);
  const running = props.rm?.status === 'running' || props.rm?.status === 'blocked' || !!props.rm?.activeTurnId;
  const path = `/v1/sessions/${enc(props.sessionId)}`;
  const act = async (fn: () => Promise<string>) => {
    setBusy(true);
    setError(undefined);
    try {
      setNote(await fn());
      props.onChanged?.();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  const submit = () =>
    act(async () => {
      const r = await post<{ status: string; turnId: string }>(`${path}/turns`, {
        input: text,
        threadId: props.threadId,
      });
      setText('');
      return `turn ${r.turnId}: ${r.status}`;
    });
  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        if (text.trim()) void submit();
      }}
    >
      <textarea
        aria-label="New turn"
        placeholder={running ? 'A new turn waits in the queue until the running one ends' : 'What should the agent do?'}
        value={text}
        rows={3}
        onInput={(e) => setText((e.target as HTMLTextAreaElement).value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
            e.preventDefault();
            if (text.trim()) void submit();
          }
        }}
      />
      <div class="composer-actions">
        <button type="submit" class="primary" disabled={busy || !text.trim()}>
          Send <kbd>Ctrl+Enter</kbd>
        </button>
        <button
          type="button"
          class="bad"
          disabled={busy || !running}
          title="Interrupt the running turn (recorded as cancelled)"
          onClick={() =>
            act(async () => {
              const r = await post<{ status: string }>(`${path}/interrupt`, {
                threadId: props.threadId,
                reason: 'interrupted from the console',
              });
              return `interrupt: ${r.status}`;
            })
          }
        >
          Interrupt
        </button>
        <button
          type="button"
          disabled={busy}
          title="Have the server's worker continue unfinished work (after a restart)"
          onClick={() =>
            act(async () => {
              const r = await post<{ driven?: boolean }>(`${path}/resume`, {});
              return r.driven === false ? 'resume: no worker on this server' : 'resume requested';
            })
          }
        >
          Resume
        </button>
        {note ? (
          <span class="muted small" role="status">
            {note}
          </span>
        ) : null}
      </div>
      {error ? <ErrorBox error={error} /> : null}
    </form>
  );
}

function NodeDetail(props: { sessionId: string; threadId: string; node: ActionNode; status: string; onClose(): void }) {
  const a = props.node;
  const base = `/sessions/${enc(props.sessionId)}`;
  return (
    <aside class="detail" aria-label={`action ${a.id}`}>
      <header class="detail-head">
        <h2>
          <ExecutorIcon type={a.executorType} /> {a.title ?? a.id}
        </h2>
        <button type="button" onClick={props.onClose} aria-label="Close details">
          ✕
        </button>
      </header>
      <dl class="facts">
        <dt>Status</dt>
        <dd>
          <Status status={props.status} />
        </dd>
        <dt>Action</dt>
        <dd class="mono">{a.id}</dd>
        <dt>Executor</dt>
        <dd>
          {a.executorType}
          {a.target ? ` → ${a.target}` : ''}
        </dd>
        {a.dependsOn.length ? (
          <>
            <dt>Depends on</dt>
            <dd class="mono">{a.dependsOn.join(', ')}</dd>
          </>
        ) : null}
        <dt>Permission</dt>
        <dd data-permission>
          {a.permission ? (
            <>
              <strong>{a.permission.decision}</strong>
              {a.permission.source ? ` (${a.permission.source})` : ''}
              {a.permission.reason ? <div class="muted">{a.permission.reason}</div> : null}
            </>
          ) : (
            <span class="muted">not evaluated yet</span>
          )}
          {a.decision ? (
            <div>
              Decision: <strong>{a.decision.decision}</strong>
              {a.decision.reason ? ` — “${a.decision.reason}”` : ''}
              {a.decision.resolvedBy ? <span class="muted"> by {a.decision.resolvedBy}</span> : null}
            </div>
          ) : null}
          {a.pendingActionId ? (
            <div>
              ‖ waiting for a decision — <Link href="/inbox">answer it in the inbox</Link>
            </div>
          ) : null}
          {a.reconcileActionId ? (
            <div data-reconcile>
              ✕ lost: it may or may not have taken effect — <Link href="/inbox">say which in the inbox</Link>
            </div>
          ) : null}
        </dd>
        {a.childThreadId ? (
          <>
            <dt>Sub-agent</dt>
            <dd>
              <Link href={`${base}?thread=${enc(a.childThreadId)}`}>open the child thread ›</Link>
            </dd>
          </>
        ) : null}
      </dl>
      <h3>Input</h3>
      {a.input === undefined ? <p class="muted">none</p> : <Json value={a.input} max={20_000} />}
      <h3>Attempts</h3>
      {a.attempts.length === 0 ? (
        <p class="muted">not started</p>
      ) : (
        <ol class="attempts">
          {a.attempts.map((at) => (
            <li key={`${at.attempt}-${at.startedAt}`}>
              #{at.attempt} <Status status={at.status} small /> {new Date(at.startedAt).toLocaleTimeString()}
              {at.durationMs !== undefined ? ` · ${at.durationMs} ms` : ''}
              {at.error ? <div class="bad-text">{at.error}</div> : null}
            </li>
          ))}
        </ol>
      )}
      {a.toolOutput ? (
        <>
          <h3>Tool UI</h3>
          <ToolUiSection sessionId={props.sessionId} toolCallId={a.toolOutput.toolCallId} at={a.toolOutput.sequence} />
        </>
      ) : null}
      <h3>What the model saw</h3>
      {a.observation === undefined ? (
        <p class="muted">no observation yet</p>
      ) : (
        <Json value={a.observation} max={20_000} />
      )}
      <h3>Full output</h3>
      {a.artifacts.length === 0 ? (
        <p class="muted">no artifacts</p>
      ) : (
        a.artifacts.map((id) => <ArtifactViewer key={id} sessionId={props.sessionId} artifactId={id} />)
      )}
    </aside>
  );
}

interface ArtifactMeta {
  artifactId: string;
  name?: string;
  mime?: string;
  mimeType?: string;
  size?: number;
  sizeBytes?: number;
  hash?: string;
  sha256?: string;
  preview?: string;
}

const PREVIEW_BYTES = 256 * 1024;

export function ArtifactViewer(props: { sessionId: string; artifactId: string }) {
  const [meta, setMeta] = useState<ArtifactMeta | undefined>(undefined);
  const [text, setText] = useState<string | undefined>(undefined);
  const [partial, setPartial] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const path = `/v1/sessions/${enc(props.sessionId)}/artifacts/${enc(props.artifactId)}`;
  useEffect(() => {
    let stopped = false;
    (async () => {
      try {
        const m = await get<ArtifactMeta>(path);
        if (stopped) return;
        setMeta(m);
        const mime = m.mime ?? m.mimeType ?? '';
        if (/^(text\/|application\/(json|x-ndjson|xml|yaml))/.test(mime) || mime === '') {
          const r = await call('GET', `${path}/content`, undefined, { range: `bytes=0-${PREVIEW_BYTES - 1}` });
          const body = await r.text();
          if (stopped) return;
          setPartial(r.status === 206 && (m.size ?? m.sizeBytes ?? 0) > PREVIEW_BYTES);
          setText(body);
        }
      } catch (e) {
        // 416: an empty artifact
        if (e instanceof ApiError && e.status === 416) setText('');
        else if (!stopped) setError(e);
      }
    })();
    return () => {
      stopped = true;
    };
  }, [path]);
  const download = async () => {
    try {
      const r = await call('GET', `${path}/content?download=1`);
      const url = URL.createObjectURL(await r.blob());
      const a = document.createElement('a');
      a.href = url;
      a.download = (meta?.name ?? props.artifactId).split('/').pop() ?? props.artifactId;
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (e) {
      setError(e);
    }
  };
  // An artifact the retention policy expired (410): a fact about the past, not a failure — its tombstone is shown.
  const expired =
    error instanceof ApiError && error.code === 'artifact_expired'
      ? ((error.details ?? {}) as { name?: string; size?: number; sha256?: string; expiredAt?: string })
      : undefined;
  if (expired) {
    return (
      <div class="artifact" data-artifact={props.artifactId} data-expired="true">
        <div class="artifact-head">
          <strong class="mono">{expired.name ?? props.artifactId}</strong>
          <span class="muted small">
            expired{expired.expiredAt ? ` ${new Date(expired.expiredAt).toLocaleString()}` : ''}
            {expired.size !== undefined ? ` · ${expired.size.toLocaleString()} bytes` : ''}
          </span>
        </div>
        <p class="muted">
          The retention policy deleted this artifact's content; its name, size and SHA-256
          {expired.sha256 ? <code class="mono small"> {expired.sha256.slice(0, 16)}…</code> : null} are kept.
        </p>
      </div>
    );
  }
  const mime = meta?.mime ?? meta?.mimeType ?? '';
  const size = meta?.size ?? meta?.sizeBytes;
  let body = text;
  let isJson = false;
  if (text !== undefined && (mime.includes('json') || /^\s*[{[]/.test(text)) && !partial) {
    try {
      body = JSON.stringify(JSON.parse(text), null, 2);
      isJson = true;
    } catch {
      // not JSON after all: plain text
    }
  }
  return (
    <div class="artifact" data-artifact={props.artifactId}>
      <div class="artifact-head">
        <strong class="mono">{meta?.name ?? props.artifactId}</strong>
        <span class="muted small">
          {mime || '…'}
          {size !== undefined ? ` · ${size.toLocaleString()} bytes` : ''}
        </span>
        <button type="button" class="download" onClick={download}>
          Download
        </button>
      </div>
      {error ? <ErrorBox error={error} /> : null}
      {!meta && !error ? <Loading what="the artifact" /> : null}
      {body !== undefined ? (
        isJson ? (
          <pre class="code json" dangerouslySetInnerHTML={{ __html: highlightJson(body) }} />
        ) : (
          <pre class="code text">
            {body.split('\n').map((line, i) => (
              <span class="line" key={i}>
                {line}
                {'\n'}
              </span>
            ))}
          </pre>
        )
      ) : meta && !error && text === undefined && mime ? (
        <p class="muted">
          No preview for {mime}
          {meta.preview ? `: ${meta.preview}` : ''}. Download it to open.
        </p>
      ) : null}
      {partial ? <p class="muted small">Showing the first {PREVIEW_BYTES / 1024} KiB; download for the rest.</p> : null}
    </div>
  );
}
