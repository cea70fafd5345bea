import { randomUUID } from 'node:crypto';
import type { RuntimeEvent } from '@oar/protocol';
import { EventLog, eventRow, replay, type Store, TimeTravel } from '@oar/runtime';
import { foldEvents } from '../../packages/console/src/model.js';
import type { OarEvent } from '../../packages/console/src/types.js';
import { type BenchOutput, log, median, type ReplayResult, timed } from './common.js';
import { type OpenedStore, openPostgres, openSqlite, readLoopScript, runTurn, scriptedRuntime } from './oar.js';

const SIZES = [10_000, 100_000];
const TEMPLATE_STEPS = 100;
/** Timed repetitions (median reported); the 100k replay runs once to keep `npm run bench` within minutes. */
const repeats = (events: number) => (events <= 10_000 ? 3 : 1);

/** Ids the runtime generates per turn (turn, task, run, artifact); each synthesized turn gets its own. */
const TURN_SCOPED_ID = /\b(?:turn|task|run|art)_[0-9a-f]{20}\b/g;

/**
 * Real events of one OAR turn (TEMPLATE_STEPS `read` steps and an answer) recorded by the runtime on SQLite: the
 * session prefix (session.created, thread.started) and the turn itself.
 */
export async function recordTemplate(): Promise<{ prefix: RuntimeEvent[]; turn: RuntimeEvent[] }> {
  const opened = await openSqlite('replay-template');
  try {
    const { runtime } = await scriptedRuntime(opened.store, readLoopScript(TEMPLATE_STEPS), {
      contextBudgetTokens: 1_000_000,
    });
    const { sessionId } = await runtime.createSession({ title: 'replay template' });
    await runTurn(runtime, sessionId, `Read the ${TEMPLATE_STEPS} notes one by one, then answer.`);
    await runtime.close();
    const events = await runtime.log.read(sessionId);
    const start = events.findIndex((e) => e.type === 'turn.submitted');
    return { prefix: events.slice(0, start), turn: events.slice(start) };
  } finally {
    await opened.dispose();
  }
}

/**
 * A session of exactly `count` events: the template's prefix, then copies of its turn, each with fresh turn, task,
 * run and artifact ids, fresh event ids and gap-free sequences (the last copy may stop mid-turn).
 */
export function synthesize(template: { prefix: RuntimeEvent[]; turn: RuntimeEvent[] }, count: number): RuntimeEvent[] {
  const sessionId = `ses_bench_${count}`;
  const events: RuntimeEvent[] = [];
  const push = (json: string) => {
    const event = JSON.parse(json) as RuntimeEvent;
    event.eventId = randomUUID();
    event.sessionId = sessionId;
    event.sequence = events.length + 1;
    events.push(event);
  };
  for (const event of template.prefix) push(JSON.stringify(event));
  const turnJson = template.turn.map((e) => JSON.stringify(e));
  for (let copy = 0; events.length < count; copy++) {
    for (const json of turnJson) {
      if (events.length >= count) break;
      push(json.replace(TURN_SCOPED_ID, (id) => `${id}c${copy}`));
    }
  }
  return events;
}

async function insert(store: Store, events: RuntimeEvent[]): Promise<string> {
  const sessionId = events[0]!.sessionId;
  const now = new Date().toISOString();
  await store.transaction(async (tx) => {
    await tx
      .insertInto('oar_sessions')
      .values({
        id: sessionId,
        runtime_id: events[0]!.runtimeId,
        title: 'replay bench',
        created_at: now,
        updated_at: now,
        last_sequence: events.length,
      })
      .execute();
    for (let i = 0; i < events.length; i += 500) {
      await tx
        .insertInto('oar_events')
        .values(events.slice(i, i + 500).map((event) => eventRow(sessionId, event)))
        .execute();
    }
  });
  return sessionId;
}

/**
 * Load each session's events from the store (EventLog.read: SELECT + JSON.parse) and, when `withReplay`, rebuild
 * its read models with replay() — the pure projection, so it only needs measuring on one store.
 */
async function measureStore(
  opened: OpenedStore,
  sessions: RuntimeEvent[][],
  withReplay: boolean,
): Promise<ReplayResult[]> {
  const eventLog = new EventLog(opened.store, 'rt_bench');
  const results: ReplayResult[] = [];
  for (const events of sessions) {
    const sessionId = await insert(opened.store, events);
    const loads: number[] = [];
    const replays: number[] = [];
    let turns = 0;
    for (let r = 0; r < repeats(events.length); r++) {
      const loaded = await timed(() => eventLog.read(sessionId));
      if (loaded.value.length !== events.length) throw new Error('loaded a different number of events');
      loads.push(loaded.ms);
      if (!withReplay) continue;
      const replayed = await timed(() => replay(loaded.value));
      replays.push(replayed.ms);
      turns = [...replayed.value.threads.values()][0]?.turns.length ?? 0;
    }
    if (withReplay && events.length === 10_000) await timeTravel(eventLog, sessionId, events);
    const result: ReplayResult = {
      store: opened.label,
      events: events.length,
      loadMs: median(loads),
      ...(withReplay ? { turns, replayMs: median(replays) } : {}),
    };
    log(
      `replay ${opened.label} ${events.length} events: load ${result.loadMs.toFixed(0)} ms` +
        (withReplay ? `, replay() ${result.replayMs?.toFixed(0)} ms (${turns} turns)` : ''),
    );
    results.push(result);
  }
  return results;
}

/** What a time-travel scrub costs on a 10,000-event session: the server's `snapshotAt` and the console's fold. */
const travelNotes: string[] = [];

async function timeTravel(eventLog: EventLog, sessionId: string, events: RuntimeEvent[]): Promise<void> {
  const travel = new TimeTravel((id, after, limit) => eventLog.read(id, { after, limit }));
  const cold = await timed(() => travel.at(sessionId, events.length));
  const positions = Array.from({ length: 20 }, (_, i) => Math.max(1, events.length - 1 - i * 487));
  const warm = await timed(async () => {
    for (const at of positions) await travel.at(sessionId, at);
  });
  const fold = await timed(() => {
    for (const at of [2_500, 5_000, 7_500, events.length]) foldEvents(events as unknown as OarEvent[], at);
  });
  travelNotes.push(
    `time travel on a 10,000-event session: the server's snapshotAt ${cold.ms.toFixed(0)} ms for the first position (it builds the checkpoints), then ${(warm.ms / positions.length).toFixed(1)} ms per position (20 positions across the session); the console's fold of the log up to a position ${(fold.ms / 4).toFixed(1)} ms per position`,
  );
  log(`replay: ${travelNotes.at(-1)}`);
}

export async function run(): Promise<BenchOutput> {
  const template = await recordTemplate();
  log(`replay template: ${template.turn.length} events per ${TEMPLATE_STEPS}-step turn`);
  const sessions = SIZES.map((size) => synthesize(template, size));
  const replayResults: ReplayResult[] = [];
  const notes: string[] = travelNotes;
  const sqlite = await openSqlite('replay');
  try {
    replayResults.push(...(await measureStore(sqlite, sessions, true)));
  } finally {
    await sqlite.dispose();
  }
  const pg = await openPostgres('replay');
  if ('unavailable' in pg) notes.push(`PostgreSQL replay load skipped: ${pg.unavailable}`);
  else {
    try {
      replayResults.push(...(await measureStore(pg, sessions, false)));
    } finally {
      await pg.dispose();
    }
  }
  return { replay: replayResults, notes };
}
