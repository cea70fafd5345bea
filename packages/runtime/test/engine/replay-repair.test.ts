import type { RuntimeEvent } from '@oar/protocol';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { Runtime } from '../../src/index.js';
import { assertEventsConform } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType } from './helpers.js';

/**
 * `repairSession` (`oar replay --repair`): the stored read models that differ from a replay of the log are
 * rewritten from it — changed, missing and extra rows alike — under the session's lock, and the repair is recorded
 * (`history.reconstructed`, `snapshot.repaired`). Nothing is written when nothing differs; events appended while the
 * repair was prepared make it start over, so a rebuild never undoes them. The CLI test covers the binary.
 */
let h: Harness | undefined;
let later: Runtime | undefined;
afterEach(async () => {
  await later?.close();
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
  later = undefined;
});

/**
 * Another process on the store, opened after its rows were damaged: what it caches is the damaged rows (the first
 * process cached the good ones, and serves them while the session's sequence stays where it was).
 */
async function reopen(harnessed: Harness): Promise<Runtime> {
  later = await Runtime.create({
    store: harnessed.store,
    workspaceRoot: harnessed.workspace,
    worker: false,
    model: () => {
      throw new Error('a repair calls no model');
    },
  });
  return later;
}

const read = { id: 'r1', type: 'tool', name: 'read', args: { filePath: 'README.md' } };

async function session(): Promise<{ sessionId: string; threadId: string; runId: string }> {
  h = await harness({ steps: [act([read]), answer('Read it.')] });
  const { sessionId, threadId } = await h.runtime.createSession({ title: 'Old one' });
  await h.runtime.submitTurn({ sessionId, input: 'read the readme' });
  await h.runtime.settled(sessionId);
  // An evidence export: the session projection lists it (`evidence`), which stores written before did not.
  await h.runtime.exportEvidence(sessionId);
  const runId = (await h.store.db.selectFrom('oar_read_models').select('key').where('kind', '=', 'run').execute())[0]
    ?.key as string;
  expect(runId).toBeDefined();
  return { sessionId, threadId, runId };
}

describe('repairSession', () => {
  it('rewrites what differs from the log, removes what the log does not produce, and records it', async () => {
    const { sessionId, threadId, runId } = await session();
    const harnessed = h as Harness;
    const db = harnessed.store.db;
    const evidenceRefs = async (runtime: Runtime) =>
      (await runtime.getSession({ sessionId, limit: 0 })).snapshot.threads[0]?.evidenceSummary.evidenceRefs;
    const exported = await evidenceRefs(harnessed.runtime);
    expect(exported).toHaveLength(1);
    // An old store: a session row without `evidence`, a thread row from an older reducer, a run row lost, a stray task.
    await sql`update oar_read_models set body = json_remove(body, '$.evidence') where kind = 'session'`.execute(db);
    await sql`update oar_read_models set body = json_set(body, '$.status', 'running') where kind = 'thread'`.execute(
      db,
    );
    await db.deleteFrom('oar_read_models').where('kind', '=', 'run').execute();
    await db
      .insertInto('oar_read_models')
      .values({
        session_id: sessionId,
        kind: 'task',
        key: 'task_stray',
        status: 'running',
        sequence: 1,
        body: '{"taskId":"task_stray","status":"running"}',
        updated_at: new Date().toISOString(),
      })
      .execute();
    // A process that reads them caches the damaged rows (as a server would): the repair must not build on them.
    const runtime = await reopen(harnessed);
    expect(await evidenceRefs(runtime)).toEqual([]);
    const found = await runtime.replaySession(sessionId);
    expect(found.equal).toBe(false);
    expect(found.differences).toEqual(['session', `thread ${threadId}`, `run ${runId}`, 'run count', 'task count']);
    const logged = (await allEvents(harnessed, sessionId)).length;

    const result = await runtime.commands.repairSession(sessionId);
    expect(result).toMatchObject({ equal: false, differences: found.differences, events: logged });
    const changes = [
      { kind: 'session', key: sessionId, change: 'differed' },
      { kind: 'thread', key: threadId, change: 'differed' },
      { kind: 'run', key: runId, change: 'missing' },
      { kind: 'task', key: 'task_stray', change: 'extra' },
    ];
    expect(result.repair).toEqual({
      status: 'repaired',
      readModels: changes,
      counts: { differed: 2, missing: 1, extra: 1 },
      recorded: [
        { type: 'history.reconstructed', sequence: logged + 1 },
        { type: 'snapshot.repaired', sequence: logged + 2 },
      ],
    });

    const events = await allEvents(harnessed, sessionId);
    assertEventsConform(events);
    expect(ofType(events, 'history.reconstructed')[0]?.payload).toEqual({
      reason: 'repair',
      eventCount: logged,
      throughSequence: logged,
      readModels: { session: 1, thread: 1, run: 1, task: 1, tool_inventory: 1 },
    });
    expect(ofType(events, 'snapshot.repaired')[0]?.payload).toEqual({
      reason: 'the stored read models differed from a replay of the log; rewritten from it',
      throughSequence: logged,
      readModels: changes,
      threadIds: [threadId],
      counts: { differed: 2, missing: 1, extra: 1 },
    });
    // The store follows from the log again, this process's reads included (its cache was of the old rows).
    expect(await runtime.replaySession(sessionId)).toEqual({
      equal: true,
      differences: [],
      contradictions: [],
      events: logged + 2,
    });
    expect(await evidenceRefs(runtime)).toEqual(exported);
    const after = await runtime.getSession({ sessionId, limit: 0 });
    expect(after.snapshot.threads[0]?.status).toBe('idle');
    expect(after.sequence).toBe(logged + 2);
    const rows = await db.selectFrom('oar_read_models').select(['kind', 'key', 'sequence']).execute();
    expect(rows.some((r) => r.key === 'task_stray')).toBe(false);
    // A rewritten row keeps the projection's `sequence`: the last event that touched the model.
    const lastOfRun = events.filter((e) => e.runId === runId && e.threadId).at(-1) as RuntimeEvent;
    expect(Number(rows.find((r) => r.kind === 'run')?.sequence)).toBe(lastOfRun.sequence);

    // Nothing differs now: a second repair writes nothing.
    expect((await runtime.commands.repairSession(sessionId)).repair).toEqual({ status: 'not_needed' });
    expect(await allEvents(harnessed, sessionId)).toHaveLength(logged + 2);
  });

  it('starts over when events are appended while it is prepared, so the rebuild includes them', async () => {
    const { sessionId } = await session();
    const harnessed = h as Harness;
    await sql`update oar_read_models set body = json_remove(body, '$.evidence') where kind = 'session'`.execute(
      harnessed.store.db,
    );
    const runtime = await reopen(harnessed);
    await runtime.getSession({ sessionId, limit: 0 });
    const log = runtime.log;
    const read = log.read.bind(log);
    let raced = false;
    // Between the repair's read of the log and its write, somebody records a fact.
    log.read = async (id, options) => {
      const events = await read(id, options);
      if (!raced) {
        raced = true;
        await runtime.setState({ sessionId, key: 'note', value: 'written meanwhile' });
      }
      return events;
    };
    const logged = (await read(sessionId)).length;
    const result = await runtime.commands.repairSession(sessionId);
    log.read = read;
    expect(raced).toBe(true);
    // The first attempt's rebuild stopped one event short: refused under the lock, and done again.
    expect(result.events).toBe(logged + 1);
    expect(result.repair).toMatchObject({ status: 'repaired', counts: { differed: 1, missing: 0, extra: 0 } });
    const repaired = ofType(await allEvents(harnessed, sessionId), 'snapshot.repaired')[0];
    expect(repaired?.payload).toMatchObject({ throughSequence: logged + 1 });
    expect((await runtime.replaySession(sessionId)).equal).toBe(true);
    expect(await runtime.getState({ sessionId, key: 'note' })).toEqual({ note: 'written meanwhile' });
  });
});
