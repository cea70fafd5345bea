import { useEffect, useState } from 'preact/hooks';
import { enc, get } from './api';
import type { SessionModel } from './model';
import { ArtifactViewer } from './timeline';
import type { ArtifactCheckpoints, FileVersion } from './types';
import { Empty, ErrorBox, Link, Loading, navigate, shortId, usePath } from './ui';

/**
 * The Files tab: every workspace file OAR's `write` and `edit` changed in the session, with its versions
 * (`GET /v1/sessions/{id}/artifact-checkpoints`, docs/engine.md "File versions"): which call made each, in which
 * turn — marked when a rollback removed that turn — and its content before (the before-image artifact, opened in the
 * artifact viewer beside the list).
 */

export function FilesView(props: { sessionId: string; threadId?: string; model: SessionModel }) {
  const { sessionId, threadId, model } = props;
  const [, params] = usePath();
  const [data, setData] = useState<ArtifactCheckpoints | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const last = model.lastSequence;
  const base = `/sessions/${enc(sessionId)}/files`;
  const query = (artifact?: string) => {
    const q = new URLSearchParams();
    if (threadId) q.set('thread', threadId);
    if (artifact) q.set('artifact', artifact);
    const s = q.toString();
    return s ? `${base}?${s}` : base;
  };
  const artifact = params.get('artifact') ?? undefined;

  // Fetched again when the session's log grows (a new version, a rollback), at most every 300 ms.
  useEffect(() => {
    let stopped = false;
    const timer = setTimeout(async () => {
      try {
        const r = await get<ArtifactCheckpoints>(
          `/v1/sessions/${enc(sessionId)}/artifact-checkpoints${threadId ? `?threadId=${enc(threadId)}` : ''}`,
        );
        if (!stopped) {
          setData(r);
          setError(undefined);
        }
      } catch (e) {
        if (!stopped) setError(e);
      }
    }, 300);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [sessionId, threadId, last]);

  const removed = new Set<string>();
  for (const t of model.threads.values()) {
    for (const r of t.rollbacks) if (r.status === 'completed') for (const id of r.removedTurns) removed.add(id);
  }

  return (
    <div class={`timeline-layout${artifact ? ' with-detail' : ''}`}>
      <div class="files-view">
        <p class="muted small">
          Every file OAR's <code>write</code> and <code>edit</code> changed{threadId ? ' in this thread' : ''}, with the
          content each change replaced. What commands change is not versioned.
        </p>
        {error ? <ErrorBox error={error} /> : null}
        {!data && !error ? <Loading what="the file versions" /> : null}
        {data && data.files.length === 0 ? (
          <Empty title="No file versions yet">A write or edit by the agent keeps the file's content before it.</Empty>
        ) : null}
        {data?.files.map((f) => (
          <section key={f.path} class="file-versions" data-path={f.path} aria-label={`file ${f.path}`}>
            <header class="file-head">
              <strong class="mono">{f.path}</strong>
              <span class="muted small">
                {f.versions.length} version{f.versions.length === 1 ? '' : 's'} · as OAR last left it:{' '}
                {f.latest ? (
                  <>
                    {f.latest.size.toLocaleString()} bytes ·{' '}
                    <code title={f.latest.sha256}>{f.latest.sha256.slice(0, 12)}</code>
                  </>
                ) : (
                  'removed by a rollback'
                )}
              </span>
            </header>
            <ol class="versions">
              {f.versions.map((v) => (
                <VersionRow
                  key={v.version}
                  v={v}
                  rolledBack={!!v.rolledBack || (!!v.turnId && removed.has(v.turnId))}
                  href={v.before?.artifactId ? query(v.before.artifactId) : undefined}
                  open={!!artifact && v.before?.artifactId === artifact}
                />
              ))}
            </ol>
          </section>
        ))}
      </div>
      {artifact ? (
        <aside class="detail" aria-label="before-image">
          <header class="detail-head">
            <h2>Content before</h2>
            <button type="button" onClick={() => navigate(query(), true)} aria-label="Close the before-image">
              ✕
            </button>
          </header>
          <ArtifactViewer key={artifact} sessionId={sessionId} artifactId={artifact} />
        </aside>
      ) : null}
    </div>
  );
}

function VersionRow(props: { v: FileVersion; rolledBack: boolean; href?: string; open: boolean }) {
  const { v } = props;
  return (
    <li data-version={v.version} class={props.open ? 'on' : undefined}>
      <span class="mono">v{v.version}</span> · {v.tool}
      {v.turnId ? (
        <>
          {' '}
          in turn <code title={v.turnId}>{shortId(v.turnId)}</code>
        </>
      ) : null}
      {props.rolledBack ? (
        <span class="badge" data-rolled-back title="A rollback removed this turn from the thread">
          rolled back
        </span>
      ) : null}{' '}
      <span class="muted small">{new Date(v.at).toLocaleString()}</span> ·{' '}
      {v.created || !v.before ? (
        <span>created the file</span>
      ) : v.before.restorable && props.href ? (
        <Link href={props.href} title={`The file's content before this change (${v.before.artifactId})`}>
          content before ({v.before.size.toLocaleString()} bytes)
        </Link>
      ) : (
        <span class="muted">
          content before not kept exactly ({v.before.reason ?? 'not restorable'})
          {props.href ? (
            <>
              {' '}
              — <Link href={props.href}>what was kept</Link>
            </>
          ) : null}
        </span>
      )}{' '}
      <span class="muted small">→ {v.after.size.toLocaleString()} bytes</span>
    </li>
  );
}
