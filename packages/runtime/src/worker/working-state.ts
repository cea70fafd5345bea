import { OAR_SCHEMA_VERSION, type RuntimeEvent } from '@oar/protocol';
import type { EventDraft } from '../log/event-log.js';
import { applyEvent, emptyReadModels, threadView } from '../read-models/project.js';
import type { ThreadView } from '../read-models/thread-state.js';

/**
 * The working truth of the worker that holds a thread's lease: the thread as committed, plus the facts this
 * driver has recorded since the last commit point and not yet written. Nobody else writes this thread's step
 * facts (the lease says so), so the driver needs no read back from the store to know what it just did; the staged
 * facts are committed together at the next commit point (see `ThreadEngine.append`).
 *
 * The staged drafts are applied as provisional events: the sequence, time and id the log assigns at commit are
 * not known yet, so the view's `lastSequence` and timestamps are provisional. Nothing decides on those before
 * the commit (idle detection reads the committed thread after a commit point).
 */
export function withStaged(
  committed: ThreadView,
  staged: readonly EventDraft[],
  envelope: { runtimeId: string },
): ThreadView {
  const { runs, ...thread } = committed;
  const models = emptyReadModels();
  models.threads.set(thread.threadId, thread);
  for (const [runId, run] of Object.entries(runs)) models.runs.set(runId, run);
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
  return threadView(models, thread.threadId) ?? committed;
}
