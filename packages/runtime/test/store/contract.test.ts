import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { Runtime } from '../../src/facade/runtime.js';
import { OarRuntimeError } from '../../src/kernel/errors.js';
import type { AppendGuard, EventDraft } from '../../src/log/draft.js';
import { EventLog } from '../../src/log/event-log.js';
import { loadAllReadModels } from '../../src/log/read-model-rows.js';
import { replay } from '../../src/read-models/project.js';
import { getArtifact, getArtifactText, putArtifact } from '../../src/store/artifacts.js';
import type { Store } from '../../src/store/store.js';
import { harness } from '../engine/harness.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { describeStores, type TestDatabase } from '../support/stores.js';

/**
 * The store contract: the same suite against a SQLite file and a PostgreSQL schema. What the engine relies on —
 * gap-free per-session sequences under concurrency, all-or-nothing appends, projections equal to a replay of the
 * log, byte-exact artifacts — must hold on both, or "embedded by default, distributed by URL" is a lie.
 */

const RUNTIME_ID = 'rt_contract';

function sessionDrafts(threadId: string): EventDraft[] {
  return [
    { type: 'session.created', payload: { title: 'contract' } },
    { type: 'thread.started', threadId, payload: { agent: 'main', depth: 0 } },
  ];
}

function note(threadId: string, label: string): EventDraft {
  return { type: 'runtime.warning', threadId, payload: { code: 'contract_note', message: label, retryable: false } };
}

async function countRows(store: Store, table: 'oar_events' | 'oar_read_models' | 'oar_artifacts'): Promise<number> {
  const row = await store.db.selectFrom(table).select(sql<number>`count(*)`.as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}

async function lastSequence(store: Store, sessionId: string): Promise<number> {
  const row = await store.db
    .selectFrom('oar_sessions')
    .select('last_sequence')
    .where('id', '=', sessionId)
    .executeTakeFirstOrThrow();
  return Number(row.last_sequence);
}

/** Everything the log and its projections hold for a session, to prove a failed write changed nothing. */
async function dump(store: Store) {
  const events = await store.db
    .selectFrom('oar_events')
    .selectAll()
    .orderBy('session_id')
    .orderBy('sequence')
    .execute();
  const models = await store.db
    .selectFrom('oar_read_models')
    .selectAll()
    .orderBy('session_id')
    .orderBy('kind')
    .orderBy('key')
    .execute();
  const sessions = await store.db.selectFrom('oar_sessions').selectAll().orderBy('id').execute();
  return { events, models, sessions };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the promise to reject, it resolved');
}

function sequencesOf(events: readonly RuntimeEvent[]): number[] {
  return events.map((e) => e.sequence);
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

describeStores('store contract', (factory) => {
  let db: TestDatabase;
  let log: EventLog;

  async function setup(): Promise<void> {
    db = await factory.fresh();
    log = new EventLog(db.store, RUNTIME_ID);
  }

  async function newSession(id = `ses_${randomBytes(4).toString('hex')}`) {
    const threadId = `thr_${id}`;
    const events = await log.createSession(id, 'contract', sessionDrafts(threadId));
    return { sessionId: id, threadId, events };
  }

  describe('migrations', () => {
    it('are idempotent: opening the same database again migrates nothing and loses nothing', async () => {
      await setup();
      const { sessionId, threadId } = await newSession();
      await log.append(sessionId, [note(threadId, 'before reopen')]);
      const migrationsBefore = await db.store.db
        .selectFrom('oar_migrations' as never)
        .select(sql<string>`name`.as('name'))
        .execute();
      expect(migrationsBefore.map((m) => m.name)).toEqual([
        '0001_event_log',
        '0002_thread_leases',
        '0003_thread_action_lists',
        '0004_session_changes',
        '0005_workspaces',
        '0006_provider_limits',
        '0007_runner_storage',
        '0008_artifact_retention',
        '0009_schedules',
      ]);

      const again = await db.open();
      const third = await db.open();
      await third.migrate(); // explicit re-run on an up-to-date database
      const migrationsAfter = await again.db
        .selectFrom('oar_migrations' as never)
        .select(sql<string>`name`.as('name'))
        .execute();
      expect(migrationsAfter).toEqual(migrationsBefore);
      const events = await new EventLog(again, RUNTIME_ID).read(sessionId);
      expect(sequencesOf(events)).toEqual([1, 2, 3]);
      expect(events.at(-1)?.payload).toMatchObject({ message: 'before reopen' });
    });
  });

  describe('sessions and sequences', () => {
    it('creates a session row and its first events, numbered from 1', async () => {
      await setup();
      const { sessionId, threadId, events } = await newSession('ses_created');
      expect(sequencesOf(events)).toEqual([1, 2]);
      expect(events.every((e) => e.sessionId === sessionId && e.runtimeId === RUNTIME_ID)).toBe(true);
      const row = await db.store.db
        .selectFrom('oar_sessions')
        .selectAll()
        .where('id', '=', sessionId)
        .executeTakeFirstOrThrow();
      expect(row).toMatchObject({ id: sessionId, runtime_id: RUNTIME_ID, title: 'contract' });
      expect(Number(row.last_sequence)).toBe(2);
      const models = await loadAllReadModels(db.store.db, sessionId);
      expect(models.session?.sessionId).toBe(sessionId);
      expect(models.session?.threadIds).toEqual([threadId]);
      expect([...models.threads.keys()]).toEqual([threadId]);
      // The same session id cannot be created twice (primary key), and the failed attempt writes nothing.
      const before = await dump(db.store);
      const error = await rejection(log.createSession(sessionId, 'again', sessionDrafts('thr_other')));
      expect(error).toBeInstanceOf(Error);
      expect(await dump(db.store)).toEqual(before);
    });

    it('appends get gap-free sequences continuing the session, each call a contiguous block', async () => {
      await setup();
      const { sessionId, threadId } = await newSession();
      const a = await log.append(sessionId, [note(threadId, 'a1'), note(threadId, 'a2'), note(threadId, 'a3')]);
      const b = await log.append(sessionId, [note(threadId, 'b1')]);
      expect(sequencesOf(a)).toEqual([3, 4, 5]);
      expect(sequencesOf(b)).toEqual([6]);
      expect(await log.append(sessionId, [])).toEqual([]);
      const all = await log.read(sessionId);
      expect(sequencesOf(all)).toEqual(range(1, 6));
      expect(all.map((e) => (e.payload as { message?: string }).message ?? e.type)).toEqual([
        'session.created',
        'thread.started',
        'a1',
        'a2',
        'a3',
        'b1',
      ]);
      expect(await lastSequence(db.store, sessionId)).toBe(6);
      // Sessions are independent: a second session starts at 1 again.
      const other = await newSession();
      expect(sequencesOf(other.events)).toEqual([1, 2]);
      assertEventsConform([...all, ...(await log.read(other.sessionId))]);
    });

    it('enforces unique event ids: a duplicate eventId fails the whole append and writes nothing', async () => {
      await setup();
      const { sessionId, threadId } = await newSession();
      const [first] = await log.append(sessionId, [note(threadId, 'original')]);
      if (!first) throw new Error('no event');
      const before = await dump(db.store);
      const duplicate = { ...note(threadId, 'duplicate'), eventId: first.eventId } as unknown as EventDraft;
      const error = await rejection(log.append(sessionId, [note(threadId, 'would be 4'), duplicate]));
      expect(error).toBeInstanceOf(Error);
      expect(String((error as Error).message)).toMatch(/unique|UNIQUE|duplicate/);
      expect(await dump(db.store)).toEqual(before);
      // Also at the table level, whatever the writer.
      const row = before.events.at(-1);
      if (!row) throw new Error('no row');
      const raw = await rejection(
        db.store.db
          .insertInto('oar_events')
          .values({ ...row, sequence: 99 })
          .execute(),
      );
      expect(raw).toBeInstanceOf(Error);
      expect(await countRows(db.store, 'oar_events')).toBe(before.events.length);
      // The log keeps going without a gap.
      expect(sequencesOf(await log.append(sessionId, [note(threadId, 'next')]))).toEqual([4]);
    });

    it('concurrent appends to one session from many promises never produce gaps or duplicates', async () => {
      await setup();
      const { sessionId, threadId } = await newSession();
      const writers = 40;
      const results = await Promise.all(
        range(1, writers).map((i) =>
          log.append(
            sessionId,
            range(1, (i % 3) + 1).map((j) => note(threadId, `w${i}.${j}`)),
          ),
        ),
      );
      const total = 2 + results.reduce((n, r) => n + r.length, 0);
      for (const block of results) {
        const seq = sequencesOf(block);
        expect(seq).toEqual(range(seq[0] ?? 0, (seq[0] ?? 0) + seq.length - 1));
      }
      const all = await log.read(sessionId);
      expect(sequencesOf(all)).toEqual(range(1, total));
      expect(new Set(all.map((e) => e.eventId)).size).toBe(total);
      expect(await lastSequence(db.store, sessionId)).toBe(total);
      // Each writer's events are a contiguous block in the log, in the order it gave them.
      for (const block of results) {
        const labels = block.map((e) => (e.payload as { message: string }).message);
        const stored = all
          .filter((e) => block.some((b) => b.eventId === e.eventId))
          .map((e) => (e.payload as { message: string }).message);
        expect(stored).toEqual(labels);
      }
      const models = await loadAllReadModels(db.store.db, sessionId);
      expect(models.session?.lastSequence).toBe(total);
      expect(JSON.parse(JSON.stringify(replay(all).session))).toEqual(models.session);
      assertEventsConform(all);
    });

    // PostgreSQL only: two better-sqlite3 connections in ONE process would block the event loop inside SQLite's busy
    // handler while the other connection's open transaction waits for that same event loop.
    // Defined only for PostgreSQL (not skipped for SQLite): CI must never report a skipped test.
    (factory.dialect === 'postgres' ? it : () => undefined)(
      'concurrent appends from two Store instances (two pools) never produce gaps or duplicates',
      async () => {
        await setup();
        const { sessionId, threadId } = await newSession();
        const second = await db.open({ poolSize: 4 });
        const logs = [log, new EventLog(second, RUNTIME_ID)];
        const writers = 60;
        const results = await Promise.all(
          range(1, writers).map((i) =>
            logs[i % 2]?.append(sessionId, [note(threadId, `p${i}a`), note(threadId, `p${i}b`)]),
          ),
        );
        const total = 2 + writers * 2;
        const all = await log.read(sessionId);
        expect(sequencesOf(all)).toEqual(range(1, total));
        expect(new Set(all.map((e) => e.eventId)).size).toBe(total);
        for (const block of results) {
          const [x, y] = sequencesOf(block ?? []);
          expect(y).toBe((x ?? 0) + 1);
        }
        expect(await lastSequence(second, sessionId)).toBe(total);
        const models = await loadAllReadModels(second.db, sessionId);
        expect(models.session?.lastSequence).toBe(total);
      },
    );

    it('an append guard runs under the session lock: of many concurrent claims exactly one commits', async () => {
      await setup();
      const { sessionId, threadId } = await newSession();
      // PostgreSQL: two pools, so the claims really run in parallel transactions.
      const logs =
        factory.dialect === 'postgres' ? [log, new EventLog(await db.open({ poolSize: 4 }), RUNTIME_ID)] : [log];
      const claimed = (tx: Parameters<AppendGuard>[0]) =>
        tx
          .selectFrom('oar_events')
          .select('event_id')
          .where('session_id', '=', sessionId)
          .where('type', '=', 'runtime.warning')
          .execute();
      const attempts = range(1, 16).map((i) =>
        logs[i % logs.length]?.append(sessionId, [note(threadId, `claim ${i}`)], {
          guard: async (tx) => {
            if ((await claimed(tx)).length > 0) throw new OarRuntimeError('already_claimed', 'someone was first');
          },
        }),
      );
      const results = await Promise.allSettled(attempts);
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) {
        if (r.status === 'rejected') expect((r.reason as OarRuntimeError).code).toBe('already_claimed');
      }
      const all = await log.read(sessionId);
      expect(sequencesOf(all)).toEqual([1, 2, 3]);
      expect(await lastSequence(db.store, sessionId)).toBe(3);
      expect((await loadAllReadModels(db.store.db, sessionId)).session?.lastSequence).toBe(3);
    });

    it('appending to an unknown session fails with session_not_found and writes nothing', async () => {
      await setup();
      await newSession();
      const before = await dump(db.store);
      const error = await rejection(log.append('ses_missing', [note('thr_missing', 'lost')]));
      expect(error).toBeInstanceOf(OarRuntimeError);
      expect((error as OarRuntimeError).code).toBe('session_not_found');
      expect(await dump(db.store)).toEqual(before);
      expect(await log.read('ses_missing')).toEqual([]);
    });

    it('a failing append (an invalid draft) rolls back entirely: no events, no read-model change, no sequence', async () => {
      await setup();
      const { sessionId, threadId } = await newSession();
      await log.append(sessionId, [note(threadId, 'kept')]);
      const before = await dump(db.store);
      const heard: RuntimeEvent[][] = [];
      const unsubscribe = log.subscribe((events) => heard.push(events));
      const invalid = { type: 'runtime.warning', threadId, payload: { code: 42 } } as unknown as EventDraft;
      const error = await rejection(
        log.append(sessionId, [
          note(threadId, 'valid first'),
          { type: 'thread.updated', threadId, payload: {} },
          invalid,
        ]),
      );
      expect((error as Error).name).toBe('InvalidEventError');
      expect(await dump(db.store)).toEqual(before);
      expect(await lastSequence(db.store, sessionId)).toBe(3);
      expect(heard).toEqual([]);
      const next = await log.append(sessionId, [note(threadId, 'after the failure')]);
      expect(sequencesOf(next)).toEqual([4]);
      expect(heard.map((batch) => sequencesOf(batch))).toEqual([[4]]);
      unsubscribe();
    });
  });

  describe('reading the log', () => {
    it('reads with a cursor, a limit and a thread filter', async () => {
      await setup();
      const { sessionId, threadId } = await newSession();
      const other = 'thr_second';
      await log.append(sessionId, [{ type: 'thread.started', threadId: other, payload: { agent: 'main', depth: 0 } }]);
      for (let i = 0; i < 6; i++) await log.append(sessionId, [note(i % 2 === 0 ? threadId : other, `n${i}`)]);
      // 1 session.created, 2 thread.started(main), 3 thread.started(second), 4..9 notes alternating threads
      expect(sequencesOf(await log.read(sessionId))).toEqual(range(1, 9));
      expect(sequencesOf(await log.read(sessionId, { after: 4 }))).toEqual([5, 6, 7, 8, 9]);
      expect(sequencesOf(await log.read(sessionId, { after: 4, limit: 2 }))).toEqual([5, 6]);
      expect(sequencesOf(await log.read(sessionId, { limit: 3 }))).toEqual([1, 2, 3]);
      expect(await log.read(sessionId, { after: 9 })).toEqual([]);
      expect(sequencesOf(await log.read(sessionId, { threadId }))).toEqual([2, 4, 6, 8]);
      expect(sequencesOf(await log.read(sessionId, { threadId: other }))).toEqual([3, 5, 7, 9]);
      expect(sequencesOf(await log.read(sessionId, { threadId: other, after: 5, limit: 1 }))).toEqual([7]);
      expect(await log.read(sessionId, { threadId: 'thr_none' })).toEqual([]);
      // Paging by cursor visits every event exactly once.
      const paged: number[] = [];
      for (let cursor = 0; ; ) {
        const page = await log.read(sessionId, { after: cursor, limit: 4 });
        if (page.length === 0) break;
        paged.push(...sequencesOf(page));
        cursor = page.at(-1)?.sequence ?? cursor;
      }
      expect(paged).toEqual(range(1, 9));
      // Bodies round-trip exactly what append returned.
      const otherSession = await newSession();
      const appended = await log.append(otherSession.sessionId, [note(otherSession.threadId, 'round trip')]);
      expect(await log.read(otherSession.sessionId, { after: 2 })).toEqual(appended);
    });
  });

  describe('projections', () => {
    it('read models persisted by a scripted engine run equal a replay of its events', async () => {
      await setup();
      const h = await harness(
        {
          steps: [
            {
              protocol: {
                kind: 'act',
                message: 'Reading.',
                calls: [{ id: 'read_readme', type: 'tool', name: 'read', args: { filePath: 'README.md' } }],
              },
            },
            {
              protocol: {
                kind: 'act',
                message: 'Writing.',
                calls: [
                  { id: 'write_notes', type: 'tool', name: 'write', args: { filePath: 'notes.txt', content: 'hi\n' } },
                ],
              },
            },
            { protocol: { kind: 'answer', message: 'Read and wrote.' } },
          ],
        },
        { store: db.store },
      );
      factory.defer(() => h.runtime.close());
      const { sessionId, threadId } = await h.runtime.createSession({ title: 'projection' });
      await h.runtime.submitTurn({ sessionId, input: 'Read the README, then write notes.' });
      await h.runtime.settled(sessionId);
      const waiting = await h.runtime.log.thread(sessionId, threadId);
      expect(waiting.status).toBe('waiting_permission');
      const pending = waiting.pending[0];
      if (!pending) throw new Error('no pending decision');
      await h.runtime.respondAction({ sessionId, actionId: pending.actionId, decision: 'approve' });
      await h.runtime.settled(sessionId);
      expect(readFileSync(join(h.workspace, 'notes.txt'), 'utf8')).toBe('hi\n');

      const events = await h.runtime.log.read(sessionId);
      const rebuilt = replay(events);
      const stored = await loadAllReadModels(db.store.db, sessionId);
      const plain = (value: unknown) => JSON.parse(JSON.stringify(value));
      expect(stored.session).toEqual(plain(rebuilt.session));
      expect(plain(Object.fromEntries(stored.threads))).toEqual(plain(Object.fromEntries(rebuilt.threads)));
      expect(plain(Object.fromEntries(stored.tasks))).toEqual(plain(Object.fromEntries(rebuilt.tasks)));
      expect(plain(Object.fromEntries(stored.toolInventory))).toEqual(plain(Object.fromEntries(rebuilt.toolInventory)));
      expect(stored.tasks.size).toBeGreaterThanOrEqual(2);
      expect(stored.threads.get(threadId)?.turns.at(-1)).toMatchObject({
        status: 'completed',
        answer: 'Read and wrote.',
      });
      expect(await h.runtime.replaySession(sessionId)).toEqual({
        equal: true,
        differences: [],
        contradictions: [],
        events: events.length,
      });
      assertEventsConform(events);
      assertSnapshotConforms((await h.runtime.getSession({ sessionId })).snapshot);
      // The stored sequence of each read model row is the last event that touched it.
      const rows = await db.store.db
        .selectFrom('oar_read_models')
        .select(['kind', 'key', 'sequence', 'status'])
        .where('session_id', '=', sessionId)
        .execute();
      const session = rows.find((r) => r.kind === 'session');
      expect(Number(session?.sequence)).toBe(events.length);
      const thread = rows.find((r) => r.kind === 'thread' && r.key === threadId);
      expect(Number(thread?.sequence)).toBe(events.filter((e) => e.threadId === threadId).at(-1)?.sequence);
      expect(thread?.status).toBe('idle');
    });
  });

  describe('artifacts', () => {
    it('round-trip bytes, mime, size and sha256', async () => {
      await setup();
      const { sessionId } = await newSession();
      const bytes = new Uint8Array([...range(0, 255), 0, 0, 255, 13, 10]);
      const stored = await putArtifact(db.store.db, sessionId, {
        bytes,
        mime: 'application/octet-stream',
        name: 'b.bin',
      });
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      expect(stored).toMatchObject({ mime: 'application/octet-stream', size: bytes.byteLength, sha256, name: 'b.bin' });
      expect(stored.uri).toBe(`artifact://${stored.artifactId}`);
      const loaded = await getArtifact(db.store.db, sessionId, stored.artifactId);
      expect(loaded).toBeDefined();
      expect(loaded?.sessionId).toBe(sessionId);
      expect(loaded?.size).toBe(bytes.byteLength);
      expect(loaded?.sha256).toBe(sha256);
      expect(loaded?.mime).toBe('application/octet-stream');
      expect(Buffer.from(loaded?.bytes ?? []).equals(Buffer.from(bytes))).toBe(true);
      expect(
        createHash('sha256')
          .update(loaded?.bytes ?? new Uint8Array())
          .digest('hex'),
      ).toBe(sha256);

      // A view into a larger buffer stores only the view's bytes.
      const backing = new Uint8Array([9, 9, 1, 2, 3, 9]);
      const view = await putArtifact(db.store.db, sessionId, { bytes: backing.subarray(2, 5), mime: 'x/y' });
      expect([...((await getArtifact(db.store.db, sessionId, view.artifactId))?.bytes ?? [])]).toEqual([1, 2, 3]);

      const text = `héllo ✓ ${'x'.repeat(500)}`;
      const textArtifact = await putArtifact(db.store.db, sessionId, { text });
      expect(textArtifact.mime).toBe('text/plain');
      expect(textArtifact.size).toBe(Buffer.byteLength(text));
      expect(textArtifact.preview.startsWith('héllo ✓')).toBe(true);
      expect(textArtifact.preview.length).toBeLessThan(text.length);
      expect(await getArtifactText(db.store.db, sessionId, textArtifact.artifactId)).toBe(text);
      expect(await getArtifact(db.store.db, sessionId, 'art_missing')).toBeUndefined();
      // Artifacts never cross sessions: another session's id resolves to nothing.
      const other = await newSession();
      expect(await getArtifact(db.store.db, other.sessionId, stored.artifactId)).toBeUndefined();
    });

    it('rejects an artifact over the size limit with artifact_too_large and stores nothing', async () => {
      await setup();
      const { sessionId } = await newSession();
      const atLimit = await putArtifact(db.store.db, sessionId, { bytes: new Uint8Array(16).fill(7) }, 16);
      expect(atLimit.size).toBe(16);
      const before = await countRows(db.store, 'oar_artifacts');
      const error = await rejection(putArtifact(db.store.db, sessionId, { bytes: new Uint8Array(17) }, 16));
      expect(error).toBeInstanceOf(OarRuntimeError);
      expect((error as OarRuntimeError).error).toMatchObject({
        code: 'artifact_too_large',
        retryable: false,
        details: { size: 17, limit: 16 },
      });
      expect(await countRows(db.store, 'oar_artifacts')).toBe(before);
    });
  });

  describe('scoped state (oar_state)', () => {
    // The only public use of oar_state is the runtime id a Runtime keeps when none is configured.
    it('keeps the runtime id: runtimes on the same database agree on one id, a fresh database gets another', async () => {
      await setup();
      const workspace = tmpdir();
      const again = await db.open();
      const [a, b] = await Promise.all([
        Runtime.create({ store: db.store, workspaceRoot: workspace, model: unusedModel }),
        Runtime.create({ store: again, workspaceRoot: workspace, model: unusedModel }),
      ]);
      factory.defer(() => a.close());
      factory.defer(() => b.close());
      expect(a.runtimeId).toMatch(/^rt_/);
      expect(b.runtimeId).toBe(a.runtimeId);
      const c = await Runtime.create({ store: await db.open(), workspaceRoot: workspace, model: unusedModel });
      factory.defer(() => c.close());
      expect(c.runtimeId).toBe(a.runtimeId);
      const rows = await db.store.db.selectFrom('oar_state').selectAll().execute();
      expect(rows.map((r) => ({ scope: r.scope, key: r.key, value: JSON.parse(r.value) }))).toEqual([
        { scope: 'runtime', key: 'runtime_id', value: a.runtimeId },
      ]);
      const elsewhere = await factory.fresh();
      const d = await Runtime.create({ store: elsewhere.store, workspaceRoot: workspace, model: unusedModel });
      factory.defer(() => d.close());
      expect(d.runtimeId).not.toBe(a.runtimeId);
      // The session a runtime creates carries its id.
      const { sessionId } = await a.createSession();
      expect((await a.getSession({ sessionId })).snapshot.runtimeId).toBe(a.runtimeId);
    });
  });
});

function unusedModel(): never {
  throw new Error('no model call expected in this test');
}
