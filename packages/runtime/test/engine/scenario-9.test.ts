import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, ToolError } from '../../src/index.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, payload, READ_ONLY_TEST_TOOL, registryWith } from './helpers.js';

/**
 * Acceptance scenario 9 of the Agent Runtime standard, evidence export: "Given a completed or failed turn, evidence
 * export includes runtime summary, timeline, tool failures, artifact refs, and verification/review refs when
 * available." One turn completes (a write that produced artifacts, and a tool that failed), the next fails (its
 * provider refuses the call); a task with acceptance criteria is verified by its owner and a review is exported.
 * The evidence export then has the runtime summary (threads, the turns' outcomes, tasks, usage), the whole timeline
 * in log order, the tool failure and the failed turn with their structured errors, every artifact ref of the log,
 * the verification outcome and the review ref — and is itself recorded as `evidence.changed` with its digest.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const lookupTool = defineTool<{ id: string }>({
  name: 'lookup',
  description: 'Looks a record up in the inventory service.',
  input: z.strictObject({ id: z.string() }),
  ...READ_ONLY_TEST_TOOL,
  async execute(input) {
    throw new ToolError('upstream_failed', `the inventory service has no record ${input.id}`, { retryable: false });
  },
});

describe('acceptance scenario 9: evidence export', () => {
  it('exports the runtime summary, timeline, tool failures, artifact refs, verification and review refs', async () => {
    h = await harness(
      {
        steps: [
          act([
            { id: 'note', type: 'tool', name: 'write', args: { filePath: 'notes.md', content: 'checked\n' } },
            { id: 'look', type: 'tool', name: 'lookup', args: { id: 'sku-404' } },
          ]),
          answer('Notes written; the lookup failed.'),
          { error: { message: 'the provider refused the request', statusCode: 400, retryable: false } },
        ],
      },
      { tools: registryWith(lookupTool), permissions: { mode: 'accept-edits' } },
    );
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    const completed = await rt.submitTurn({ sessionId, input: 'write the notes and look sku-404 up' });
    await rt.settled(sessionId);
    const failed = await rt.submitTurn({ sessionId, input: 'and now summarize' });
    await rt.settled(sessionId);
    // Verification: a task with acceptance criteria, checked by its owner; a review of the completed turn.
    await rt.createTask({
      sessionId,
      taskId: 'verify_notes',
      objective: 'Check the notes',
      threadId,
      assignee: { kind: 'external' },
      acceptance: [{ criterion: 'notes.md says checked' }],
    });
    await rt.startTask({ sessionId, taskId: 'verify_notes' });
    await rt.completeTask({ sessionId, taskId: 'verify_notes', summary: 'notes.md says checked' });
    const review = await rt.exportReview({ sessionId, turnId: completed.turnId });
    const before = await allEvents(h, sessionId);

    const pack = await rt.exportEvidence(sessionId);
    expect(pack).toMatchObject({ format: 'oar.evidence.v1', sessionId, runtimeId: before[0]?.runtimeId });

    // Runtime summary: the thread, each turn's outcome, the task, usage.
    expect(pack.summary.threads).toEqual([
      expect.objectContaining({ threadId, lastOutcome: { turnId: failed.turnId, status: 'failed' } }),
    ]);
    expect(pack.summary.turns).toMatchObject({ completed: 1, failed: 1 });
    expect(pack.summary.tasks).toMatchObject({ completed: 1 });
    expect(pack.summary.usage?.totalTokens).toBeGreaterThan(0);
    expect(pack.turns[completed.turnId]).toMatchObject({ threadId, outcome: 'completed', modelCalls: 2 });
    expect(pack.turns[failed.turnId]).toMatchObject({ threadId, outcome: 'failed', modelCalls: 1 });

    // Timeline: every event of the log before the export, in order, with its ids.
    expect(pack.timeline.map((e) => [e.sequence, e.type, e.turnId])).toEqual(
      before.map((e) => [e.sequence, e.type, e.turnId]),
    );

    // Failures: the tool's and the turn's, each with its structured error and its turn.
    const failure = (type: string) => pack.failures.filter((f) => f.type === type);
    expect(failure('tool.failed')).toMatchObject([
      { turnId: completed.turnId, threadId, error: { code: 'upstream_failed', retryable: false } },
    ]);
    expect(failure('turn.failed')).toMatchObject([
      { turnId: failed.turnId, threadId, error: { code: 'model_invalid_request' } },
    ]);
    expect(failure('model.failed')).toMatchObject([{ turnId: failed.turnId }]);
    expect(failure('tool.failed')[0]?.detail).toContain('upstream_failed');

    // Artifact refs: every artifact the log recorded (the write's output and the file's version among them).
    const recorded = ofType(before, 'artifact.changed');
    expect(recorded.length).toBeGreaterThan(0);
    expect(pack.artifacts.map((a) => [a.artifactId, a.uri])).toEqual(
      recorded.map((e) => [e.artifactId, payload(e).uri]),
    );
    const written = ofType(before, 'tool.result').find((e) => payload(e).graphActionId === 'note');
    expect(pack.artifacts.map((a) => a.uri)).toContain(payload(written).outputRef);

    // Verification and review refs, available here: the task's acceptance outcome and the review exported.
    expect(pack.verification.outcomes).toEqual([
      expect.objectContaining({ name: 'task verify_notes acceptance', status: 'passed' }),
    ]);
    expect(pack.verification.reviewRefs).toEqual([`runtime://review/${review.reviewId}`]);

    // The correlation ids join it all, and the export is itself a recorded fact.
    expect(pack.correlation.turnIds).toEqual([completed.turnId, failed.turnId]);
    expect(pack.correlation.taskIds).toContain('verify_notes');
    const events = await allEvents(h, sessionId);
    const recordedExport = events.at(-1);
    expect(recordedExport).toMatchObject({ type: 'evidence.changed', evidenceId: pack.evidenceId });
    expect(payload(recordedExport)).toMatchObject({
      kind: 'evidence',
      packRef: `runtime://evidence/${pack.evidenceId}`,
      throughSequence: before.at(-1)?.sequence,
      failures: pack.failures.length,
      artifacts: pack.artifacts.length,
    });
    assertEventsConform(events);
    const { snapshot } = await rt.getSession({ sessionId });
    assertSnapshotConforms(snapshot);
    expect(snapshot.evidenceRefs).toContain(`runtime://evidence/${pack.evidenceId}`);
    expect((await rt.replaySession(sessionId)).differences).toEqual([]);
  });
});
