import { useEffect, useState } from 'preact/hooks';
import { ApiError, enc, post } from './api';
import { fileActionText, notUndoneText, type RollbackView } from './model';
import type { RollbackResult } from './types';
import { ErrorBox, Loading, shortId } from './ui';

/**
 * Rolling a thread back to the boundary before one of its turns (`POST /v1/sessions/{id}/rollback`, docs/engine.md
 * "Rolling back a thread"): the plan first (a dry run: the turns removed, each file restored or deleted, the
 * conflicts), then the rollback itself once confirmed — with the files, or the history only (`files: keep`), which
 * is what is left when a file was changed outside OAR. And the note a rollback leaves in the timeline.
 */

const REASONS: Record<string, string> = {
  changed_outside: 'changed outside OAR since',
  not_restorable: 'its content before was not kept exactly',
  before_image_missing: 'its content before is no longer stored',
};

const turns = (n: number) => `${n} turn${n === 1 ? '' : 's'}`;

/** The turns and files a rollback result names, in words: for the notice after it. */
export function rollbackDoneText(r: RollbackResult): string {
  const files = r.files.filter((f) => f.action !== 'keep');
  return `Rolled back ${turns(r.removedTurns.length)}${
    files.length ? ` · ${files.map((f) => `${f.path} ${fileActionText(f.action)}`).join(', ')}` : ''
  }${r.files.some((f) => f.action === 'keep') ? ' · files kept as they are' : ''}.`;
}

export function RollbackPanel(props: {
  sessionId: string;
  threadId: string;
  turnId: string;
  onCancel(): void;
  onDone(result: RollbackResult): void;
}) {
  const { sessionId, threadId, turnId } = props;
  const [plan, setPlan] = useState<RollbackResult | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [busy, setBusy] = useState(false);
  const [check, setCheck] = useState(0);
  const path = `/v1/sessions/${enc(sessionId)}/rollback`;

  useEffect(() => {
    let stopped = false;
    setBusy(true);
    setError(undefined);
    post<RollbackResult>(path, { turnId, threadId, files: 'restore', dryRun: true })
      .then((p) => !stopped && setPlan(p))
      .catch((e) => !stopped && setError(e))
      .finally(() => !stopped && setBusy(false));
    return () => {
      stopped = true;
    };
  }, [path, turnId, threadId, check]);

  const perform = async (files: 'restore' | 'keep') => {
    setBusy(true);
    setError(undefined);
    try {
      props.onDone(await post<RollbackResult>(path, { turnId, threadId, files }));
    } catch (e) {
      setError(e);
      // A file changed between the plan and the confirmation: the refusal carries the new plan; nothing changed.
      if (e instanceof ApiError && e.code === 'rollback_conflict' && e.details && typeof e.details === 'object') {
        const d = e.details as Partial<RollbackResult>;
        if (Array.isArray(d.conflicts) && Array.isArray(d.files) && Array.isArray(d.removedTurns)) {
          setPlan({ ...(d as RollbackResult), status: 'planned' });
        }
      }
    } finally {
      setBusy(false);
    }
  };

  const conflicts = plan?.conflicts ?? [];
  const files = plan?.files ?? [];
  const notUndone = notUndoneText(plan?.affected);
  return (
    <section class="rollback-plan" aria-label="Rollback plan" data-rollback-plan={turnId}>
      <h3>Roll back to before this turn?</h3>
      {!plan && busy ? <Loading what="the rollback plan" /> : null}
      {plan ? (
        <>
          <p data-removed-turns={plan.removedTurns.join(' ')}>
            Removes <strong>{turns(plan.removedTurns.length)}</strong> from the thread — this one
            {plan.removedTurns.length > 1 ? ` and the ${turns(plan.removedTurns.length - 1)} after it` : ''}:{' '}
            {plan.removedTurns.map((id, i) => (
              <span key={id}>
                {i ? ', ' : ''}
                <code title={id}>{shortId(id)}</code>
              </span>
            ))}
            . The thread goes back to{' '}
            {plan.keptThroughTurnId ? (
              <>
                the end of turn <code title={plan.keptThroughTurnId}>{shortId(plan.keptThroughTurnId)}</code>
              </>
            ) : (
              'its start'
            )}
            ; the model no longer sees them. The event log keeps them (time travel still shows them).
          </p>
          <h4>Files</h4>
          {files.length === 0 && conflicts.length === 0 ? (
            <p class="muted">No file that OAR's write or edit changed in these turns.</p>
          ) : files.length === 0 ? null : (
            <ul class="rollback-files">
              {files.map((f) => (
                <li key={f.path} data-file={f.path} data-file-action={f.action}>
                  <code>{f.path}</code> — {fileActionText(f.action, true)}
                  {f.action === 'restore' && f.fromVersion ? (
                    <span class="muted small"> (to its content before version {f.fromVersion})</span>
                  ) : null}
                </li>
              ))}
            </ul>
          )}
          {conflicts.length > 0 ? (
            <div class="rollback-conflicts" data-conflicts={conflicts.length}>
              <strong>
                ✕ {conflicts.length} file{conflicts.length === 1 ? '' : 's'} cannot be restored, so a rollback with the
                files is refused (nothing would be changed).
              </strong>
              <ul>
                {conflicts.map((c) => (
                  <li key={c.path} data-conflict={c.path} data-reason={c.reason}>
                    <code>{c.path}</code> — {REASONS[c.reason] ?? c.reason}
                    {c.message ? <div class="muted small">{c.message}</div> : null}
                  </li>
                ))}
              </ul>
              <div class="small">
                Restore {conflicts.length === 1 ? 'it' : 'them'} by hand and check again, or roll back the history only:
                every file stays as it is now.
              </div>
            </div>
          ) : null}
          {notUndone.length ? (
            <p class="muted small" data-not-undone>
              Not undone: {notUndone.join('; ')}.
            </p>
          ) : null}
        </>
      ) : null}
      <div class="decision-actions">
        <button
          type="button"
          class="bad"
          disabled={busy || !plan || conflicts.length > 0}
          title={conflicts.length ? 'A file cannot be restored: roll back the history only, or fix it first' : ''}
          onClick={() => void perform('restore')}
        >
          Roll back
        </button>
        <button
          type="button"
          disabled={busy || !plan}
          title="Remove the turns from the history and leave every file as it is now (files: keep)"
          onClick={() => void perform('keep')}
        >
          Roll back history only
        </button>
        {conflicts.length > 0 || error ? (
          <button type="button" disabled={busy} onClick={() => setCheck((n) => n + 1)}>
            Check again
          </button>
        ) : null}
        <button type="button" class="link" disabled={busy && !!plan} onClick={props.onCancel}>
          Cancel
        </button>
      </div>
      {error ? <ErrorBox error={error} /> : null}
    </section>
  );
}

/** What a rollback removed and what became of the files, where it happened in the thread. */
export function RollbackNote(props: { rollback: RollbackView }) {
  const r = props.rollback;
  const done = r.status === 'completed';
  const notUndone = notUndoneText(r.affected);
  const at = r.completedAt ?? r.startedAt;
  return (
    <div class="rollback-note" data-rollback={r.rollbackId} data-rollback-status={r.status}>
      <div>
        <strong>↶ {done ? 'Rolled back' : 'Rolling back'}</strong> to before turn{' '}
        <code title={r.targetTurnId}>{shortId(r.targetTurnId)}</code>: {done ? 'removed' : 'removing'}{' '}
        {turns(r.removedTurns.length)}
        {at ? <span class="muted small"> · {new Date(at).toLocaleString()}</span> : null}
        {r.requestedBy ? <span class="muted small"> · by {r.requestedBy}</span> : null}
      </div>
      <ul class="small">
        {r.removedTurns.map((id) => (
          <li key={id} data-removed-turn={id}>
            <code title={id}>{shortId(id)}</code>
            {r.removedInputs[id] ? <span class="muted"> “{clip(r.removedInputs[id] as string)}”</span> : null}
          </li>
        ))}
      </ul>
      <div class="small" data-rollback-files>
        Files:{' '}
        {r.files.length === 0
          ? 'none changed by OAR in these turns'
          : r.files.map((f, i) => (
              <span key={f.path} data-file={f.path} data-file-action={f.action}>
                {i ? ', ' : ''}
                <code>{f.path}</code> {fileActionText(f.action, !done)}
              </span>
            ))}
      </div>
      {notUndone.length ? <div class="muted small">Not undone: {notUndone.join('; ')}.</div> : null}
      {done ? null : (
        <div class="small">
          A rollback cut short holds the thread: roll back to before this same turn again to finish it.
        </div>
      )}
    </div>
  );
}

function clip(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 80 ? `${line.slice(0, 79)}…` : line;
}
