import { performance } from 'node:perf_hooks';
import type { Runtime } from '@oar/runtime';
import { type BenchOutput, gc, log, type MemoryResult } from './common.js';
import { openSqlite, scriptedRuntime } from './oar.js';

const SESSIONS = 1_000;
/** Turns enough for the JIT to have compiled a turn's path before anything is measured. */
const WARM_UP_SESSIONS = 300;

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
 * one completed one-step turn (the thread is idle again) — these two include the event log's read-model cache filling
 * up (at most 256 sessions) — then 1,000 more, each created and given one turn with the cache full: the cost of one
 * more idle session at scale. The caller keeps the session ids, as a server would.
 */
export async function run(): Promise<BenchOutput> {
  const notes: string[] = [];
  if (!(globalThis as { gc?: unknown }).gc) notes.push('memory: run without --expose-gc, figures include garbage');
  const opened = await openSqlite('memory');
  const script = { steps: [{ protocol: { kind: 'answer', message: 'Hello.' } }] };
  {
    // Warm-up in a runtime of its own, closed before measuring: module-level caches (compiled schemas, prepared
    // statements) and the code the JIT compiles for a turn's path (about 2 MB after the first few hundred turns: it
    // was most of the "per session" figure when one warm-up turn left it to the measured phase) are process-wide and
    // not per session; the closed runtime's own caches go with it.
    const warm = await scriptedRuntime(opened.store, script as never);
    for (let i = 0; i < WARM_UP_SESSIONS; i++) {
      const { sessionId } = await warm.runtime.createSession({ title: `warm-up ${i}` });
      await warm.runtime.submitTurn({ sessionId, input: 'hello' });
      await warm.runtime.settled(sessionId);
    }
    await warm.runtime.close();
  }
  const { runtime } = await scriptedRuntime(opened.store, script as never);
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
  // The event log keeps the read models of at most 256 sessions (a bounded cache, filled by the phases above): a
  // second thousand sessions, each created and given one turn with that cache already full, is what one more idle
  // session costs at scale.
  memory.push(
    await phase(
      'one more session with one turn, cache full',
      runtime,
      async (i) => {
        const { sessionId } = await runtime.createSession({ title: `session ${SESSIONS + i}` });
        ids.push(sessionId);
        await runtime.submitTurn({ sessionId, input: 'hello' });
        await runtime.settled(sessionId);
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
  if (Number(idle.n) < 2 * SESSIONS) throw new Error(`expected ${2 * SESSIONS} idle threads, found ${idle.n}`);
  await runtime.close();
  await opened.dispose();
  return { memory, notes };
}
