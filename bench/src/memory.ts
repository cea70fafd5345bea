import { performance } from 'node:perf_hooks';
import type { Runtime } from '@oar/runtime';
import { type BenchOutput, gc, log, type MemoryResult } from './common.js';
import { openSqlite, scriptedRuntime } from './oar.js';

const SESSIONS = 1_000;

const mb = (bytes: number) => bytes / (1024 * 1024);

/** Heap used after a full collection (needs --expose-gc; without it the figure includes garbage). */
function heapUsed(): number {
  gc();
  return process.memoryUsage().heapUsed;
}

async function phase(
  name: string,
  runtime: Runtime,
  work: (i: number) => Promise<void>,
  keep: unknown[],
): Promise<MemoryResult> {
  const before = heapUsed();
  const started = performance.now();
  for (let i = 0; i < SESSIONS; i++) await work(i);
  await runtime.settled();
  const ms = performance.now() - started;
  const after = heapUsed();
  const result: MemoryResult = {
    phase: name,
    sessions: SESSIONS,
    heapBeforeMb: mb(before),
    heapAfterMb: mb(after),
    bytesPerSession: (after - before) / SESSIONS,
    rssAfterMb: mb(process.memoryUsage().rss),
    ms,
  };
  log(
    `memory ${name}: heap ${result.heapBeforeMb.toFixed(1)} → ${result.heapAfterMb.toFixed(1)} MB, ` +
      `${result.bytesPerSession.toFixed(0)} B/session (${keep.length} ids kept by the caller)`,
  );
  return result;
}

/**
 * Memory a runtime holds per session: 1,000 sessions, each with its main thread idle (just created), then each after
 * one completed one-step turn (the thread is idle again). The caller keeps the session ids, as a server would.
 */
export async function run(): Promise<BenchOutput> {
  const notes: string[] = [];
  if (!(globalThis as { gc?: unknown }).gc) notes.push('memory: run without --expose-gc, figures include garbage');
  const opened = await openSqlite('memory');
  const script = { steps: [{ protocol: { kind: 'answer', message: 'Hello.' } }] };
  const { runtime } = await scriptedRuntime(opened.store, script as never);
  // Warm-up so module-level caches (compiled schemas, prepared statements) are not counted per session.
  const warm = await runtime.createSession({ title: 'warm-up' });
  await runtime.submitTurn({ sessionId: warm.sessionId, input: 'hello' });
  await runtime.settled();
  const ids: string[] = [];
  const memory: MemoryResult[] = [];
  memory.push(
    await phase(
      'created, thread idle',
      runtime,
      async (i) => {
        ids.push((await runtime.createSession({ title: `session ${i}` })).sessionId);
      },
      ids,
    ),
  );
  memory.push(
    await phase(
      'after one completed turn each',
      runtime,
      async (i) => {
        await runtime.submitTurn({ sessionId: ids[i]!, input: 'hello' });
        await runtime.settled(ids[i]);
      },
      ids,
    ),
  );
  const idle = await opened.store.db
    .selectFrom('oar_read_models')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('kind', '=', 'thread')
    .where('status', '=', 'idle')
    .executeTakeFirstOrThrow();
  if (Number(idle.n) < SESSIONS) throw new Error(`expected ${SESSIONS} idle threads, found ${idle.n}`);
  await runtime.close();
  await opened.dispose();
  return { memory, notes };
}
