import type { RuntimeEvent } from '@oar/protocol';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { ArtifactRetentionSchema } from '../../src/config/retention.js';
import { type ArtifactRetentionPolicy, expireArtifacts, keepMatcher } from '../../src/control-plane/retention.js';
import type { ModelScript } from '../../src/index.js';
import { OarRuntimeError } from '../../src/kernel/errors.js';
import { EventLog } from '../../src/log/event-log.js';
import { putArtifact } from '../../src/store/artifacts.js';
import type { Store } from '../../src/store/store.js';
import { type Harness, harness } from '../engine/harness.js';
import { act, actionRows, answer, ofType, payload, waitFor } from '../engine/helpers.js';
import { assertEventsConform } from '../support/schemas.js';
import { describeStores, type StoreFactory } from '../support/stores.js';

/**
 * Artifact retention (docs/reliability.md "Artifact retention") on a SQLite file and a PostgreSQL schema: old
 * artifacts lose their content and keep a tombstone, each session records `output.expired` (checked against the
 * published schemas), every reader gets `artifact_expired`, and what a session still needs is never expired. Age
 * is made by moving `created_at` back: what the sweep reads, nothing else is faked.
 */

const DAY_MS = 86_400_000;
const POLICY: ArtifactRetentionPolicy = ArtifactRetentionSchema.parse({ maxAgeDays: 30 });

async function started(factory: StoreFactory, script: ModelScript, options: Parameters<typeof harness>[1] = {}) {
  const db = await factory.fresh();
  const h = await harness(script, { ...options, store: db.store });
  factory.defer(() => h.runtime.close());
  return h;
}

/** Make the session's artifacts (all, or these) `days` old. */
async function age(store: Store, sessionId: string, days: number, ids?: string[]): Promise<void> {
  const createdAt = new Date(Date.now() - days * DAY_MS).toISOString();
  await store.db
    .updateTable('oar_artifacts')
    .set({ created_at: createdAt })
    .where('session_id', '=', sessionId)
    .$if(ids !== undefined, (qb) => qb.where('id', 'in', ids ?? []))
    .execute();
}

async function rowsOf(store: Store, sessionId: string) {
  const rows = await store.db.selectFrom('oar_artifacts').selectAll().where('session_id', '=', sessionId).execute();
  return new Map(rows.map((row) => [row.id, row]));
}

async function thrown(promise: Promise<unknown>): Promise<OarRuntimeError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(OarRuntimeError);
    return error as OarRuntimeError;
  }
  throw new Error('expected a rejection');
}

const sessionEvents = (h: Harness, sessionId: string): Promise<RuntimeEvent[]> => h.runtime.log.read(sessionId);

describeStores('artifact retention', (factory) => {
  it('expires old artifacts: content gone, tombstone kept, one output.expired, every reader told artifact_expired', async () => {
    const h = await started(factory, { steps: [] });
    const { sessionId } = await h.runtime.createSession();
    const db = h.store.db;
    const oldA = await putArtifact(db, sessionId, { text: 'the first old output', name: 'runs/run_1/a' });
    const oldB = await putArtifact(db, sessionId, { text: 'the second old output' });
    const version = await putArtifact(db, sessionId, { text: 'before', name: 'file-version:src/a.ts' });
    const fresh = await putArtifact(db, sessionId, { text: 'a fresh output' });
    await age(h.store, sessionId, 40, [oldA.artifactId, oldB.artifactId, version.artifactId]);
    const before = (await sessionEvents(h, sessionId)).length;

    // A dry run says what would go, and changes nothing.
    const dry = await expireArtifacts(h.runtime.log, POLICY, { dryRun: true });
    expect(dry.expired.map((a) => a.artifactId).sort()).toEqual([oldA.artifactId, oldB.artifactId].sort());
    expect(dry).toMatchObject({ dryRun: true, events: 0, kept: [], skipped: [], more: false });
    expect(dry.bytes).toBe(oldA.size + oldB.size);
    expect((await h.runtime.getArtifact({ sessionId, artifactId: oldA.artifactId })).size).toBe(oldA.size);
    expect(await sessionEvents(h, sessionId)).toHaveLength(before);

    const report = await expireArtifacts(h.runtime.log, POLICY);
    expect(report.expired.map((a) => a.artifactId).sort()).toEqual([oldA.artifactId, oldB.artifactId].sort());
    expect(report.events).toBe(1);
    const rows = await rowsOf(h.store, sessionId);
    for (const gone of [oldA, oldB]) {
      const row = rows.get(gone.artifactId);
      // The tombstone: no content, no preview (it is the content's start); name, size and digest as they were.
      expect(row?.expired_at).toEqual(expect.any(String));
      expect(Buffer.from(row?.bytes ?? [1]).byteLength).toBe(0);
      expect(row?.preview).toBe('');
      expect([Number(row?.size), row?.sha256]).toEqual([gone.size, gone.sha256]);
    }
    // File before-images are kept by the default `keep`; a young artifact is not old enough.
    expect(rows.get(version.artifactId)?.expired_at).toBeNull();
    expect(rows.get(fresh.artifactId)?.expired_at).toBeNull();

    const events = await sessionEvents(h, sessionId);
    assertEventsConform(events);
    const [expired] = ofType(events, 'output.expired');
    expect(expired?.threadId).toBeUndefined();
    expect(payload(expired)).toMatchObject({
      count: 2,
      bytes: oldA.size + oldB.size,
      reason: 'retention',
      expiredBefore: report.expiredBefore,
      policy: { maxAgeDays: 30, keep: ['file-version:*'] },
    });
    expect((payload(expired).artifactIds as string[]).sort()).toEqual([oldA.artifactId, oldB.artifactId].sort());
    expect(payload(expired).artifacts).toContainEqual({
      artifactId: oldA.artifactId,
      name: 'runs/run_1/a',
      size: oldA.size,
      sha256: oldA.sha256,
      createdAt: expect.any(String),
    });

    // Every reader: a clear structured error carrying the tombstone, never "not found".
    const error = await thrown(h.runtime.getArtifact({ sessionId, artifactId: oldA.artifactId }));
    expect(error.error).toMatchObject({
      code: 'artifact_expired',
      retryable: false,
      details: {
        artifactId: oldA.artifactId,
        name: 'runs/run_1/a',
        size: oldA.size,
        sha256: oldA.sha256,
        expiredAt: expect.any(String),
        uri: oldA.uri,
      },
    });
    expect((await h.runtime.getArtifact({ sessionId, artifactId: fresh.artifactId })).size).toBe(fresh.size);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);

    // Nothing left to do: the next sweep finds nothing and records nothing.
    const again = await expireArtifacts(h.runtime.log, POLICY);
    expect([again.expired.length, again.events]).toEqual([0, 0]);
    // A policy that keeps nothing by name lets the before-image go too.
    const all = await expireArtifacts(h.runtime.log, { ...POLICY, keep: [] });
    expect(all.expired.map((a) => a.artifactId)).toEqual([version.artifactId]);
    assertEventsConform(await sessionEvents(h, sessionId));
  });

  it('keeps what a session still needs — the compaction summary, a pending action, an unfinished turn — until it is done', async () => {
    const script: ModelScript = { steps: [], compaction: { steps: [{ text: 'Summary: the notes were read.' }] } };
    const h = await started(factory, script);
    const { sessionId, threadId } = await h.runtime.createSession();
    const report = await putArtifact(h.store.db, sessionId, { text: 'a report the pending write quotes' });
    const unused = await putArtifact(h.store.db, sessionId, { text: 'an output nobody names any more' });
    // Steps are read when the model is first called: the pending write names the report by its ref.
    script.steps.push(
      answer('Read them.'),
      act([{ id: 'w1', type: 'tool', name: 'write', args: { filePath: 'out.txt', content: `see ${report.uri}` } }]),
      answer('Written.'),
    );
    await h.runtime.submitTurn({
      sessionId,
      input: 'read the notes',
      attachments: [{ name: 'notes.txt', text: 'n1' }],
    });
    await h.runtime.settled(sessionId);
    const compacted = await h.runtime.compact({ sessionId });
    expect(compacted.status).toBe('completed');
    const summaryId = String(compacted.summaryRef).replace('artifact://', '');
    await h.runtime.submitTurn({ sessionId, input: 'write it', attachments: [{ name: 'draft.txt', text: 'd1' }] });
    await h.runtime.settled(sessionId);
    const waiting = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(waiting.pendingRequests).toHaveLength(1);
    const submitted = ofType(await sessionEvents(h, sessionId), 'turn.submitted');
    const [notes, draft] = submitted.map((e) => (payload(e).attachments as { artifactId: string }[])[0]?.artifactId);
    await age(h.store, sessionId, 40);

    const first = await expireArtifacts(h.runtime.log, POLICY);
    expect(first.expired.map((a) => a.artifactId).sort()).toEqual([notes, unused.artifactId].sort());
    expect(Object.fromEntries(first.kept.map((k) => [k.artifactId, k.reason]))).toEqual({
      [summaryId]: 'compaction_summary',
      [report.artifactId]: 'pending_action',
      [draft as string]: 'running_turn',
    });

    // The decision is made and the turn ends: what only it needed is old enough now; the current summary never is.
    await h.runtime.respondAction({
      sessionId,
      actionId: waiting.pendingRequests[0]?.actionId as string,
      decision: 'approve',
    });
    await h.runtime.settled(sessionId);
    expect((await h.runtime.getThreadRead({ sessionId, threadId })).lastOutcome).toMatchObject({ status: 'completed' });
    await age(h.store, sessionId, 40, [report.artifactId, draft as string]);
    const second = await expireArtifacts(h.runtime.log, POLICY);
    expect(second.expired.map((a) => a.artifactId)).toEqual(expect.arrayContaining([report.artifactId, draft]));
    expect(second.kept.map((k) => [k.artifactId, k.reason])).toContainEqual([summaryId, 'compaction_summary']);
    const events = await sessionEvents(h, sessionId);
    assertEventsConform(events);
    expect(ofType(events, 'output.expired')).toHaveLength(2);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);

    // A fork copies the artifacts its history names under new ids: an expired one as its tombstone.
    const fork = await h.runtime.forkSession({ sessionId });
    const forked = await sessionEvents(h, fork.sessionId);
    const forkNotes = (payload(ofType(forked, 'turn.submitted')[0]).attachments as { artifactId: string }[])[0];
    expect(forkNotes?.artifactId).not.toBe(notes);
    const error = await thrown(
      h.runtime.getArtifact({ sessionId: fork.sessionId, artifactId: forkNotes?.artifactId as string }),
    );
    expect(error.error).toMatchObject({ code: 'artifact_expired', details: { sessionId: fork.sessionId } });
    assertEventsConform(forked);
  });

  it('expand_ref of an expired artifact fails that action with artifact_expired, not unknown_reference', async () => {
    const script: ModelScript = { steps: [] };
    const h = await started(factory, script);
    const { sessionId, threadId } = await h.runtime.createSession();
    const old = await putArtifact(h.store.db, sessionId, { text: 'line 1\nline 2\nline 3\n', name: 'build.log' });
    await age(h.store, sessionId, 40);
    expect((await expireArtifacts(h.runtime.log, POLICY)).expired).toHaveLength(1);
    const block = {
      type: 'agent.protocol',
      version: '1',
      intent: 'expand_ref',
      payload: {
        type: 'expand_ref',
        refs: [{ ref: old.uri, reason: 'the log', range: { start_line: 1, end_line: 2 } }],
      },
    };
    script.steps.push({ text: `\`\`\`json agent-protocol\n${JSON.stringify(block)}\n\`\`\`\n` }, answer('It expired.'));
    await h.runtime.submitTurn({ sessionId, input: 'show the build log' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({
      status: 'failed',
      error: {
        code: 'artifact_expired',
        retryable: false,
        details: { artifactId: old.artifactId, name: 'build.log', ref: old.uri, sha256: old.sha256 },
      },
    });
    // The action failed, not the turn: the model was told, and answered.
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'It expired.' });
    assertEventsConform(await sessionEvents(h, sessionId));
  });

  it('a worker given a policy sweeps on its own, and stops sweeping when it closes', async () => {
    const retention = ArtifactRetentionSchema.parse({ maxAgeDays: 1, sweepEveryMinutes: 0.01 });
    const h = await started(factory, { steps: [] }, { worker: { artifactRetention: retention } });
    const { sessionId } = await h.runtime.createSession();
    const old = await putArtifact(h.store.db, sessionId, { text: 'old' });
    await age(h.store, sessionId, 2);
    const expired = await waitFor(async () => ofType(await sessionEvents(h, sessionId), 'output.expired')[0], 15_000);
    expect(payload(expired).artifactIds).toEqual([old.artifactId]);
    expect(h.runtime.worker?.sweeper?.lastError).toBeUndefined();
    await h.runtime.close();
    const late = await putArtifact(h.store.db, sessionId, { text: 'old too' });
    await age(h.store, sessionId, 2, [late.artifactId]);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect((await rowsOf(h.store, sessionId)).get(late.artifactId)?.expired_at).toBeNull();
  });
});

describeStores('artifact retention on a store written before it', (factory) => {
  it('gets the tombstone column and its index on open; the artifacts it held keep their content and can expire', async () => {
    const database = factory.blank();
    const first = await database.open();
    const old = await putArtifact(first.db, 'ses_legacy', { text: 'written before retention' });
    // As a store of the version before: no column, no index, no record of the migration.
    await sql`drop index oar_artifacts_unexpired`.execute(first.db);
    await sql`alter table oar_artifacts drop column expired_at`.execute(first.db);
    await sql`delete from oar_migrations where name = '0008_artifact_retention'`.execute(first.db);
    await first.close();

    const reopened = await database.open();
    const row = await reopened.db
      .selectFrom('oar_artifacts')
      .selectAll()
      .where('id', '=', old.artifactId)
      .executeTakeFirst();
    expect(row?.expired_at).toBeNull();
    expect(Buffer.from(row?.bytes ?? []).toString()).toBe('written before retention');
    await reopened.db
      .updateTable('oar_artifacts')
      .set({ created_at: new Date(Date.now() - 40 * DAY_MS).toISOString() })
      .execute();
    // Its session has no row (an artifact stored on its own): it is tombstoned with no log to record it in.
    const report = await expireArtifacts(new EventLog(reopened, 'rt_test'), POLICY);
    expect(report.expired.map((a) => a.artifactId)).toEqual([old.artifactId]);
    expect(report.events).toBe(0);
    const after = await reopened.db
      .selectFrom('oar_artifacts')
      .select('expired_at')
      .where('id', '=', old.artifactId)
      .executeTakeFirst();
    expect(after?.expired_at).toEqual(expect.any(String));
  });
});

it('keep patterns: `*` matches any run of characters, `/` included; prefix patterns go to the query', () => {
  const keep = keepMatcher(['file-version:*', '*.md', 'exact-name', 'a*b*c']);
  expect(keep.prefixes).toEqual(['file-version:']);
  expect(keep.matches('file-version:src/deep/a.ts')).toBe(true);
  expect(keep.matches('compactions/cmp_1/summary.md')).toBe(true);
  expect(keep.matches('exact-name')).toBe(true);
  expect(keep.matches('exact-name2')).toBe(false);
  expect(keep.matches('a-b-c')).toBe(true);
  expect(keep.matches('abc')).toBe(true);
  expect(keep.matches('acb')).toBe(false);
  expect(keep.matches(undefined)).toBe(false);
  expect(ArtifactRetentionSchema.safeParse({ maxAgeDays: 30, keep: ['**'] }).success).toBe(false);
  expect(ArtifactRetentionSchema.safeParse({ maxAgeDays: 0 }).success).toBe(false);
  expect(ArtifactRetentionSchema.parse({ maxAgeDays: 7 })).toEqual({
    maxAgeDays: 7,
    keep: ['file-version:*'],
    sweepEveryMinutes: 60,
    batchSize: 1000,
  });
});
