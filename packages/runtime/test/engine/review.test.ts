import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent, SessionSnapshot } from '@oar/protocol';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentConfig, ModelScript, ReviewResult } from '../../src/index.js';
import { canonicalJson } from '../../src/kernel/canonical-json.js';
import { createScriptedModel } from '../../src/models/testing.js';
import { assertSnapshotConforms } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, errorCode, ofType, payload } from './helpers.js';

/**
 * Issue 29 §4, evidence and review: every export is a recorded fact (`evidence.changed`), the evidence summary is
 * filled from the facts, and `export_review` gives the review pack of a session, thread, turn or task — the changes
 * OAR's file tools made with their diffs, the decisions and who made them, the commands with their exit codes, and
 * what the model calls cost.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const PRICE = { inputPerMillion: 1, outputPerMillion: 2 };
const call = (id: string, name: string, args: Record<string, unknown>) => ({ id, type: 'tool', name, args });

/** A harness whose scripted model has a price, so its calls record `cost.recorded`. */
function priced(script: ModelScript, options: Parameters<typeof harness>[1] = {}) {
  const models = new Map<string, ReturnType<typeof createScriptedModel>>();
  return harness(script, {
    ...options,
    model: (agent: AgentConfig) => {
      let model = models.get(agent.name);
      if (!model) {
        model = createScriptedModel(script);
        models.set(agent.name, model);
      }
      return { model, provider: 'oar-script', modelId: model.modelId, supportsForcedToolChoice: true, price: PRICE };
    },
  });
}

/** Let the session run, answering every decision it asks until none is pending: `decide` says how. */
async function answering(
  x: Harness,
  sessionId: string,
  decide: (request: { prompt?: string }) => {
    decision: 'approve' | 'deny';
    resolvedBy: string;
    reason?: string;
  },
) {
  for (let round = 0; round < 10; round++) {
    await x.runtime.settled(sessionId);
    const { snapshot } = await x.runtime.getSession({ sessionId, limit: 0 });
    const pending = snapshot.threads.flatMap((t) => t.pendingRequests);
    if (pending.length === 0) return;
    for (const request of pending) {
      await x.runtime.respondAction({ sessionId, actionId: request.actionId, ...decide(request) });
    }
  }
  throw new Error('decisions kept coming');
}

const decide = ({ prompt = '' }: { prompt?: string }) =>
  prompt.includes('secret.txt')
    ? { decision: 'deny' as const, resolvedBy: 'user:carol', reason: 'not that file' }
    : prompt.startsWith('Allow exec')
      ? { decision: 'approve' as const, resolvedBy: 'user:bob' }
      : { decision: 'approve' as const, resolvedBy: 'user:ada' };

/** The digest a reader computes from what it was given (after JSON, as over HTTP). */
function digestOf(result: ReviewResult | Record<string, unknown>): string {
  const {
    digest: _digest,
    markdown: _markdown,
    ...body
  } = JSON.parse(JSON.stringify(result)) as Record<string, unknown>;
  return `sha256:${createHash('sha256').update(canonicalJson(body)).digest('hex')}`;
}

const sum = (values: number[]) => Math.round(values.reduce((a, b) => a + b, 0) * 1e6) / 1e6;
const evidenceFacts = (events: RuntimeEvent[]) => ofType(events, 'evidence.changed');

/** Two turns: a file written, edited, a command that exits 2; then an edit, an edit allowed by rule, a denied write. */
async function reviewedSession() {
  const x = await priced(
    {
      steps: [
        {
          ...act([call('w1', 'write', { filePath: 'notes.txt', content: 'one\ntwo\nthree\n' })]),
          alternatives: [{ ifPrompt: 'Objective: Tidy the notes', ...answer('Tidied.') }],
        },
        act([call('e1', 'edit', { filePath: 'notes.txt', oldString: 'two', newString: 'TWO' })]),
        act([call('x1', 'exec', { command: ['node', '-e', 'console.log("built"); process.exit(2)'] })]),
        answer('Turn one done.'),
        act([
          call('e2', 'edit', { filePath: 'notes.txt', oldString: 'three', newString: 'THREE' }),
          call('e3', 'edit', { filePath: 'README.md', oldString: 'Hello from', newString: 'Hi from' }),
          call('w2', 'write', { filePath: 'secret.txt', content: 'psst\n' }),
        ]),
        answer('Turn two done.'),
      ],
    },
    {
      exec: { sandbox: { profile: 'none', unsandboxed: 'allow' } },
      permissions: { mode: 'default', rules: [{ decision: 'allow', tool: 'edit', paths: ['README.md'] }] },
    },
  );
  h = x;
  const { sessionId, threadId } = await x.runtime.createSession();
  const first = await x.runtime.submitTurn({ sessionId, input: 'write the notes and build' });
  await answering(x, sessionId, decide);
  const second = await x.runtime.submitTurn({ sessionId, input: 'shout the last line' });
  await answering(x, sessionId, decide);
  return { x, sessionId, threadId, first: first.turnId, second: second.turnId };
}

describe('export_review', () => {
  it('lists the changes with diffs, the approvals and who gave them, the commands with exit codes, the costs', async () => {
    const { x, sessionId, threadId, first, second } = await reviewedSession();
    expect(readFileSync(join(x.workspace, 'notes.txt'), 'utf8')).toBe('one\nTWO\nTHREE\n');
    const before = await allEvents(x, sessionId);

    const review = await x.runtime.exportReview({ sessionId });
    expect(review).toMatchObject({ format: 'oar.review.v1', sessionId, scope: { sessionId } });
    expect(review.throughSequence).toBe(before.at(-1)?.sequence);
    expect(review.eventCount).toBe(before.length);
    expect(review.turns.map((t) => [t.turnId, t.status, t.answer])).toEqual([
      [first, 'completed', 'Turn one done.'],
      [second, 'completed', 'Turn two done.'],
    ]);

    // Changes: the file OAR created, from nothing to what is on disk; the denied write is not a change.
    expect(review.changes.map((c) => c.path).sort()).toEqual(['README.md', 'notes.txt']);
    const notes = review.changes.find((c) => c.path === 'notes.txt');
    expect(notes?.created).toBe(true);
    expect(notes?.calls.map((c) => [c.tool, c.status, c.turnId])).toEqual([
      ['write', 'applied', first],
      ['edit', 'applied', first],
      ['edit', 'applied', second],
    ]);
    expect(notes?.diffStatus).toBe('complete');
    expect(notes?.diff).toBe('--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1,3 @@\n+one\n+TWO\n+THREE');
    // README.md existed before OAR touched it: its kept before-image (the edit's file version) gives the whole diff.
    const readme = review.changes.find((c) => c.path === 'README.md');
    expect(readme).toMatchObject({ created: false, diffStatus: 'complete' });
    expect(readme?.diff).toContain('-Hello from the sample workspace.\n+Hi from the sample workspace.');
    expect(readme?.diffNote).toBeUndefined();
    expect(readFileSync(join(x.workspace, 'README.md'), 'utf8').split('\n')[2]).toMatch(/^Hi from/);

    // Approvals: each decision asked, answered by whom; the rule's allow counted, not listed as a person's.
    const asked = ofType(before, 'action.required');
    expect(review.approvals).toHaveLength(asked.length);
    expect(review.approvals.map((a) => [a.tool?.split(' ')[0], a.decision, a.resolvedBy, a.turnId])).toEqual(
      expect.arrayContaining([
        ['write', 'approve', 'user:ada', first],
        ['edit', 'approve', 'user:ada', first],
        ['exec', 'approve', 'user:bob', first],
        ['edit', 'approve', 'user:ada', second],
        ['write', 'deny', 'user:carol', second],
      ]),
    );
    expect(review.approvals.find((a) => a.decision === 'deny')).toMatchObject({ reason: 'not that file' });
    expect(review.summary).toMatchObject({ approvals: 5, pendingApprovals: 0, filesChanged: 2, commands: 1 });
    expect(review.policyDecisions).toEqual({ 'allow (rule)': 1 });

    // Commands: what ran, and its exit code.
    const started = payload(ofType(before, 'process.started')[0]);
    expect(review.commands).toEqual([
      expect.objectContaining({
        processId: started.processId,
        command: started.command,
        status: 'completed',
        exitCode: 2,
        turnId: first,
        threadId,
      }),
    ]);
    expect(review.summary.commandsFailed).toBe(1);

    // Costs: the recorded amounts and usage of the session's calls.
    const recorded = ofType(before, 'cost.recorded').map((e) => payload(e).amount as number);
    const usage = ofType(before, 'model.completed').map((e) => payload(e).usage as { totalTokens: number });
    expect(recorded.length).toBeGreaterThan(0);
    expect(review.costs).toMatchObject({
      modelCalls: usage.length,
      pricedCalls: recorded.length,
      unpricedCalls: 0,
      costUsd: sum(recorded),
      totalTokens: usage.reduce((n, u) => n + u.totalTokens, 0),
    });
    expect(review.costs.costUsd).toBeGreaterThan(0);
    expect(Object.keys(review.costs.byTurn)).toEqual([first, second]);

    // Recorded: one evidence.changed after everything it covers, with the digest of the pack as returned.
    const after = await allEvents(x, sessionId);
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.slice(before.length).map((e) => e.type)).toEqual(['evidence.changed']);
    const fact = after.at(-1) as RuntimeEvent;
    expect(fact.evidenceId).toBe(review.reviewId);
    expect(fact.threadId).toBeUndefined();
    expect(payload(fact)).toMatchObject({
      kind: 'review',
      ref: `runtime://review/${review.reviewId}`,
      reviewRef: `runtime://review/${review.reviewId}`,
      format: 'oar.review.v1',
      scope: { sessionId },
      throughSequence: review.throughSequence,
      eventCount: review.eventCount,
      digest: review.digest,
    });
    expect(digestOf(review)).toBe(review.digest);
  });

  it('narrows to a turn, a thread or a task; an unknown id, or one of another thread, is not found', async () => {
    const { x, sessionId, threadId, first, second } = await reviewedSession();
    const turn = await x.runtime.exportReview({ sessionId, turnId: second, format: 'markdown' });
    expect(turn.scope).toEqual({ sessionId, threadId, turnId: second });
    expect(turn.turns.map((t) => t.turnId)).toEqual([second]);
    // The content before the turn is known from the first turn's calls: a diff of the whole file.
    const notes = turn.changes.find((c) => c.path === 'notes.txt');
    expect(notes).toMatchObject({ created: false, diffStatus: 'complete' });
    expect(notes?.calls).toHaveLength(1);
    expect(notes?.diff).toBe('--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n one\n TWO\n-three\n+THREE');
    expect(turn.approvals.map((a) => a.decision).sort()).toEqual(['approve', 'deny']);
    expect(turn.commands).toEqual([]);
    const events = await allEvents(x, sessionId);
    const turnCost = ofType(events, 'cost.recorded').filter((e) => e.turnId === second);
    expect(turn.costs.costUsd).toBe(sum(turnCost.map((e) => payload(e).amount as number)));
    expect(turn.costs.modelCalls).toBe(ofType(events, 'model.completed').filter((e) => e.turnId === second).length);
    // The Markdown document, with its sections and the diff.
    const md = turn.markdown ?? '';
    for (const heading of ['## Summary', '## Changes', '## Approvals', '## Commands', '## Costs']) {
      expect(md).toContain(`\n${heading}\n`);
    }
    expect(md.indexOf('## Summary')).toBeLessThan(md.indexOf('## Costs'));
    expect(md).toContain('```diff\n--- a/notes.txt\n+++ b/notes.txt\n@@ -1,3 +1,3 @@\n one\n TWO\n-three\n+THREE\n```');
    expect(md).toMatch(/\| deny \| user:carol \| write \|[^\n]*\| not that file \|/);
    expect(md).toContain('No command was run in this scope.');
    expect(digestOf(turn)).toBe(turn.digest);

    const firstTurn = await x.runtime.exportReview({ sessionId, threadId, turnId: first });
    expect(firstTurn.commands.map((c) => c.exitCode)).toEqual([2]);
    expect(firstTurn.changes.map((c) => c.path)).toEqual(['notes.txt']);
    expect((await x.runtime.exportReview({ sessionId, threadId })).turns).toHaveLength(2);

    // A task on a thread of its own.
    await x.runtime.createTask({ sessionId, taskId: 'tidy', objective: 'Tidy the notes' });
    const started = await x.runtime.startTask({ sessionId, taskId: 'tidy' });
    await x.runtime.settled(sessionId);
    const task = await x.runtime.exportReview({ sessionId, taskId: 'tidy' });
    expect(task.scope).toEqual({ sessionId, threadId: started.threadId, taskId: 'tidy' });
    expect(task.tasks).toEqual([expect.objectContaining({ taskId: 'tidy', status: 'completed', attempts: 1 })]);
    expect(task.turns.map((t) => [t.turnId, t.answer])).toEqual([[started.turnId, 'Tidied.']]);
    expect(task.changes).toEqual([]);

    const unknown = [
      x.runtime.exportReview({ sessionId: 'ses_nope' }),
      x.runtime.exportReview({ sessionId, threadId: 'thr_nope' }),
      x.runtime.exportReview({ sessionId, turnId: 'turn_nope' }),
      x.runtime.exportReview({ sessionId, taskId: 'task_nope' }),
      // Ids of the session, but not of the thread named.
      x.runtime.exportReview({ sessionId, threadId, turnId: started.turnId as string }),
      x.runtime.exportReview({ sessionId, threadId, taskId: 'tidy' }),
      x.runtime.exportReview({ sessionId, threadId: started.threadId as string, turnId: first }),
    ];
    const codes = [];
    for (const attempt of unknown) codes.push(await errorCode(attempt));
    expect(codes).toEqual([
      'session_not_found',
      'thread_not_found',
      'turn_not_found',
      'task_not_found',
      'turn_not_found',
      'task_not_found',
      'turn_not_found',
    ]);
    expect(await errorCode(x.runtime.exportReview({ sessionId, format: 'pdf' as never }))).toBe('invalid_input');
    // A refused review records nothing.
    expect(evidenceFacts(await allEvents(x, sessionId))).toHaveLength(4);
  });
});

describe('the evidence summary', () => {
  it('lists the exports recorded, verification from acceptance, audit notes; telemetry unavailable without tracing', async () => {
    const { x, sessionId, threadId, second } = await reviewedSession();
    const empty = (await x.runtime.getSession({ sessionId, limit: 0 })).snapshot;
    const main = (s: SessionSnapshot) => s.threads.find((t) => t.threadId === threadId);
    expect(empty.evidenceRefs).toEqual([]);
    expect(main(empty)?.evidenceSummary).toMatchObject({
      evidenceRefs: [],
      replayRefs: [],
      reviewRefs: [],
      traceIds: [],
      verificationOutcomes: [{ name: 'verification', status: 'unavailable' }],
    });
    expect(empty.telemetrySummary).toMatchObject({ status: 'unavailable', joinStatus: 'unavailable' });
    expect(empty.telemetrySummary.reason).toContain('tracing');
    expect(main(empty)?.telemetry).toMatchObject({ status: 'unavailable' });

    // Acceptance criteria are verified by the task's owner: complete_task passes them, fail_task fails them.
    const criteria = { assignee: { kind: 'external' as const }, threadId, acceptance: [{ criterion: 'uppercase' }] };
    await x.runtime.createTask({ sessionId, taskId: 'check', objective: 'Check the notes', ...criteria });
    await x.runtime.createTask({ sessionId, taskId: 'lint', objective: 'Lint the notes', ...criteria });
    for (const taskId of ['check', 'lint']) await x.runtime.startTask({ sessionId, taskId });
    await x.runtime.completeTask({ sessionId, taskId: 'check', summary: 'looks right' });
    await x.runtime.failTask({ sessionId, taskId: 'lint', error: { message: 'trailing spaces' } });

    const evidence = await x.runtime.exportEvidence(sessionId);
    const replay = await x.runtime.exportReplay(sessionId);
    const review = await x.runtime.exportReview({ sessionId, turnId: second });
    await x.runtime.createTask({ sessionId, taskId: 'tidy', objective: 'Tidy the notes' });
    const other = await x.runtime.startTask({ sessionId, taskId: 'tidy' });
    await x.runtime.settled(sessionId);
    const taskReview = await x.runtime.exportReview({ sessionId, taskId: 'tidy' });

    const events = await allEvents(x, sessionId);
    const facts = evidenceFacts(events);
    expect(facts.map((e) => payload(e).kind)).toEqual(['evidence', 'replay', 'review', 'review']);
    expect(facts.map((e) => e.evidenceId)).toEqual([
      evidence.evidenceId,
      replay.exportId,
      review.reviewId,
      taskReview.reviewId,
    ]);
    // The replay export holds the events up to its own record, which comes right after them.
    const replayFact = facts[1] as RuntimeEvent;
    expect(replay.events.at(-1)?.sequence).toBe(replayFact.sequence - 1);
    expect(payload(replayFact)).toMatchObject({ throughSequence: replayFact.sequence - 1, digest: digestOf(replay) });
    expect(payload(facts[0])).toMatchObject({ packRef: `runtime://evidence/${evidence.evidenceId}` });
    expect(payload(facts[0]).digest).toBe(digestOf(evidence));

    const { snapshot } = await x.runtime.getSession({ sessionId, limit: 0 });
    assertSnapshotConforms(snapshot);
    expect(snapshot.evidenceRefs).toEqual(facts.map((e) => payload(e).ref));
    const summary = main(snapshot)?.evidenceSummary;
    // The main thread: the session-wide exports and the review of its turn, not the other thread's.
    expect(summary?.evidenceRefs).toEqual(facts.slice(0, 3).map((e) => payload(e).ref));
    expect(summary?.replayRefs).toEqual([`runtime://replay/${replay.exportId}`]);
    expect(summary?.reviewRefs).toEqual([`runtime://review/${review.reviewId}`]);
    expect(summary?.exports?.map((e) => [e.kind, e.sequence, e.digest, e.turnId])).toEqual([
      ['evidence', facts[0]?.sequence, payload(facts[0]).digest, undefined],
      ['replay', facts[1]?.sequence, payload(facts[1]).digest, undefined],
      ['review', facts[2]?.sequence, review.digest, second],
    ]);
    const tidy = snapshot.threads.find((t) => t.threadId === other.threadId)?.evidenceSummary;
    expect(tidy?.reviewRefs).toEqual([`runtime://review/${taskReview.reviewId}`]);
    expect(tidy?.evidenceRefs).toHaveLength(3);
    expect(summary?.verificationOutcomes).toEqual([
      expect.objectContaining({ name: 'task check acceptance', status: 'passed' }),
      expect.objectContaining({ name: 'task lint acceptance', status: 'failed' }),
    ]);
    // Who decided what, counted from the action.resolved facts of the thread.
    const decided = new Map<string, number>();
    for (const e of ofType(events, 'action.resolved').filter((r) => r.threadId === threadId)) {
      const key = `${payload(e).decision} by ${payload(e).resolvedBy}`;
      decided.set(key, (decided.get(key) ?? 0) + 1);
    }
    expect([...decided.keys()].sort()).toEqual(['approve by user:ada', 'approve by user:bob', 'deny by user:carol']);
    expect(summary?.auditNotes).toEqual(
      expect.arrayContaining([
        `decisions: ${[...decided].map(([key, n]) => `${n} ${key}`).join(', ')}`,
        'exports: 1 evidence, 1 replay, 1 review',
      ]),
    );
    expect(snapshot.telemetrySummary.status).toBe('unavailable');
    // The read models come from reducers: a rebuild from the log gives the same.
    expect(await x.runtime.replaySession(sessionId)).toMatchObject({ equal: true, differences: [] });
  });

  it('an export of a session where nothing happened since its last record is not recorded again', async () => {
    h = await harness({ steps: [answer('hi'), answer('again')] });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.submitTurn({ sessionId, input: 'hi' });
    await rt.settled(sessionId);
    const records = async () => ofType(await allEvents(h as Harness, sessionId), 'evidence.changed').length;
    await rt.exportReview({ sessionId });
    await rt.exportReview({ sessionId });
    await rt.exportReview({ sessionId, format: 'markdown' });
    expect(await records()).toBe(1);
    // Another kind of export is its own record; something new happening makes the next export a record again.
    await rt.exportReplay(sessionId);
    await rt.exportReplay(sessionId);
    expect(await records()).toBe(2);
    await rt.submitTurn({ sessionId, input: 'again' });
    await rt.settled(sessionId);
    await rt.exportReview({ sessionId });
    expect(await records()).toBe(3);
  });

  it('telemetry is available with the trace ids the facts carry when tracing is on', async () => {
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    h = await harness({ steps: [answer('One.'), answer('Two.')] }, { tracing: { tracerProvider } });
    const { sessionId, threadId } = await h.runtime.createSession();
    for (const input of ['first', 'second']) {
      await h.runtime.submitTurn({ sessionId, input });
      await h.runtime.settled(sessionId);
    }
    const traced = ofType(await allEvents(h, sessionId), 'turn.started').map((e) => e.traceId);
    expect(traced).toHaveLength(2);
    expect(traced.every((id) => /^[0-9a-f]{32}$/.test(String(id)))).toBe(true);
    const { snapshot } = await h.runtime.getSession({ sessionId, limit: 0 });
    assertSnapshotConforms(snapshot);
    expect(snapshot.telemetrySummary).toMatchObject({ status: 'available', traceIds: [...new Set(traced)] });
    expect(snapshot.telemetrySummary.reason).toBeUndefined();
    const thread = snapshot.threads.find((t) => t.threadId === threadId);
    expect(thread?.evidenceSummary.traceIds).toEqual([...new Set(traced)]);
    expect(thread?.telemetry).toMatchObject({ status: 'available', traceIds: [...new Set(traced)] });
    // The spans of those traces went to the provider.
    expect(exporter.getFinishedSpans().map((s) => s.spanContext().traceId)).toEqual(
      expect.arrayContaining([...new Set(traced)]),
    );
  });
});
