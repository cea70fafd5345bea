import { OAR_SCHEMA_VERSION, type RuntimeEvent } from '@oar/protocol';
import type { EventDraft } from '../log/draft.js';
import { applyEvent, emptyReadModels, updatedView } from '../read-models/project.js';
import type { RunState, ThreadView } from '../read-models/thread-state.js';

/**
 * The working truth of the worker that holds a thread's lease: the thread as committed, plus the facts this
 * driver has recorded since the last commit point and not yet written. Nobody else writes this thread's step
 * facts (the lease says so), so the driver needs no read back from the store to know what it just did; the staged
 * facts are committed together at the next commit point (see `ThreadEngine.append`).
 *
 * The staged drafts are applied as provisional events: the sequence, time and id the log assigns at commit are
 * not known yet, so the view's `lastSequence` and timestamps are provisional. Nothing decides on those before
 * the commit (idle detection reads the committed thread after a commit point). A view that already holds some of
 * the staged facts may be passed with only the rest: the result is the same but for those provisional timestamps
 * (the facts applied earlier keep the time they were applied at).
 */
export function withStaged(
  committed: ThreadView,
  staged: readonly EventDraft[],
  envelope: { runtimeId: string },
): ThreadView {
  const { runs, ...thread } = committed;
  const models = emptyReadModels();
  models.threads.set(thread.threadId, thread);
  // Only the runs the staged facts name are projected (a long thread has hundreds; the rest are unchanged).
  for (const draft of staged) {
    const run = draft.runId === undefined ? undefined : runs.get(draft.runId);
    if (run && draft.runId !== undefined) models.runs.set(draft.runId, run);
  }
  const timestamp = new Date().toISOString();
  let sequence = committed.lastSequence;
  for (const draft of staged) {
    const event = {
      ...draft,
      sessionId: committed.sessionId,
      runtimeId: envelope.runtimeId,
      sequence: ++sequence,
      timestamp,
      eventId: `staged:${sequence}`,
      schemaVersion: OAR_SCHEMA_VERSION,
    } as RuntimeEvent;
    applyEvent(models, event);
  }
  const next = models.threads.get(thread.threadId) ?? thread;
  const changed: RunState[] = [];
  for (const [runId, run] of models.runs) if (runs.get(runId) !== run) changed.push(run);
  return updatedView(committed, next, changed);
}
