import { performance } from 'node:perf_hooks';
import { EventLog } from '@oar/runtime';
import { type AppendResult, type BenchOutput, log } from './common.js';
import { type OpenedStore, openPostgres, openSqlite } from './oar.js';

/** Batch size → events appended. Each append is one transaction (sequence, insert, read-model projection). */
const PLAN: [batch: number, events: number][] = [
  [1, 2_000],
  [10, 10_000],
  [100, 20_000],
];

/**
 * Raw EventLog.append throughput: `model.delta` events (a short text delta on one thread and turn) in batches.
 * Every append validates each event against the OAR profile, assigns sequences under the session row's lock,
 * inserts the events and updates the session and thread read models, all in one transaction.
 */
async function measure(opened: OpenedStore): Promise<AppendResult[]> {
  const eventLog = new EventLog(opened.store, 'rt_bench');
  const results: AppendResult[] = [];
  for (const [batch, events] of PLAN) {
    const sessionId = `ses_append_${batch}`;
    const threadId = `thr_append_${batch}`;
    const turnId = `turn_append_${batch}`;
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
    for (let i = 0; i < 20; i++) await eventLog.append(sessionId, drafts(0));
    const started = performance.now();
    for (let written = 0; written < events; written += batch) await eventLog.append(sessionId, drafts(written));
    const ms = performance.now() - started;
    results.push({ store: opened.label, batch, events, ms });
    log(
      `append ${opened.label} batch ${batch}: ${events} events in ${ms.toFixed(0)} ms ` +
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
