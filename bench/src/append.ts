import { performance } from 'node:perf_hooks';
import { EventLog } from '@oar/runtime';
import { type AppendResult, type BenchOutput, log } from './common.js';
import { type OpenedStore, openPostgres, openSqlite } from './oar.js';

/**
 * Batch size → events appended, each way a commit can be made. Each append is one transaction (sequence, insert,
 * read-model projection). `flushed` waits for the disk (every command's append); `relaxed` is what a worker's step
 * boundary of read-only work gets (log/durability.ts): model.delta facts never need the disk.
 */
const PLAN: [batch: number, events: number, commit: AppendResult['commit']][] = [
  [1, 2_000, 'flushed'],
  [10, 10_000, 'flushed'],
  [100, 20_000, 'flushed'],
  [1, 2_000, 'relaxed'],
  [10, 10_000, 'relaxed'],
  [100, 20_000, 'relaxed'],
];

/**
 * Raw EventLog.append throughput: `model.delta` events (a short text delta on one thread and turn) in batches.
 * Every append validates each event against the OAR profile, assigns sequences under the session row's lock,
 * inserts the events and updates the session and thread read models, all in one transaction.
 */
async function measure(opened: OpenedStore): Promise<AppendResult[]> {
  const eventLog = new EventLog(opened.store, 'rt_bench');
  const results: AppendResult[] = [];
  for (const [batch, events, commit] of PLAN) {
    const sessionId = `ses_append_${batch}_${commit}`;
    const threadId = `thr_append_${batch}_${commit}`;
    const turnId = `turn_append_${batch}_${commit}`;
    const options = { relaxed: commit === 'relaxed' };
    await eventLog.createSession(sessionId, 'append bench', [
      { type: 'session.created', payload: {} },
      { type: 'thread.started', threadId, payload: { agent: 'main', depth: 0 } },
    ]);
    const drafts = (offset: number) =>
      Array.from({ length: batch }, (_, i) => ({
        type: 'model.delta' as const,
        threadId,
        turnId,
        payload: { delta: `token ${offset + i} `, channel: 'text' as const, index: offset + i },
      }));
    // Warm-up of the statement path for this batch size.
    for (let i = 0; i < 20; i++) await eventLog.append(sessionId, drafts(0), options);
    const started = performance.now();
    for (let written = 0; written < events; written += batch) {
      await eventLog.append(sessionId, drafts(written), options);
    }
    const ms = performance.now() - started;
    results.push({ store: opened.label, batch, events, ms, commit });
    log(
      `append ${opened.label} batch ${batch} ${commit}: ${events} events in ${ms.toFixed(0)} ms ` +
        `(${Math.round((events / ms) * 1000)} events/s)`,
    );
  }
  return results;
}

export async function run(): Promise<BenchOutput> {
  const append: AppendResult[] = [];
  const notes: string[] = [];
  const sqlite = await openSqlite('append');
  try {
    append.push(...(await measure(sqlite)));
  } finally {
    await sqlite.dispose();
  }
  const pg = await openPostgres('append');
  if ('unavailable' in pg) notes.push(`PostgreSQL append benchmark skipped: ${pg.unavailable}`);
  else {
    try {
      append.push(...(await measure(pg)));
    } finally {
      await pg.dispose();
    }
  }
  return { append, notes };
}
