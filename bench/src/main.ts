import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  type AppendResult,
  type BenchOutput,
  type ConcurrencyMemory,
  type ConcurrencyResult,
  type GrowthResult,
  type MemoryResult,
  midMedian,
  poolSteps,
  REPORT_RUNS,
  RESULT_PREFIX,
  type ReplayResult,
  type ScaleOutResult,
  type ServeLoadResult,
  STEPS,
  type StartupResult,
  type StepResult,
} from './common.js';

/**
 * `npm run bench`: every benchmark in its own Node process (so one library's modules, JIT state and heap do not
 * colour another's figures), one after the other (never in parallel: they would compete for the 2 cores), then
 * one report with the ratios against the peers measured in this same run.
 *
 *   npm run bench                              all benchmarks
 *   BENCH_ONLY=replay,append npm run bench     a subset (or `--only replay,append` when running tsx directly)
 *   BENCH_ONLY=startup npm run bench           the CLI's start-up against a bare `node -e 0` (STARTUP_RUNS=20)
 *   BENCH_JSON=results.json npm run bench      also write the raw results (or `--json results.json`)
 *   BENCH_ROUNDS=5 npm run bench               the compared step benchmarks in 5 rounds (default 3; or `--rounds 5`)
 *
 * The step benchmarks whose figures are divided by one another (COMPARED) run in interleaved rounds: round 1 runs
 * each of them once, in ORDER, each in a fresh process, then round 2 the same, and so on. A ratio is taken within a
 * round, where both figures were measured seconds apart under the same machine load (the machine is shared: a ratio
 * of figures minutes apart measures the load as much as the code), and reported as the rounds' median and range.
 * The rounds share one report's runs (REPORT_RUNS, passed to the children as BENCH_RUNS), so a report pools as many
 * runs per system as a single pass did and takes well under twice as long. Everything else runs once, after them.
 */
const ORDER = [
  'oar-sqlite',
  'oar-postgres',
  'langgraph',
  'langgraph-postgres',
  'openai-agents',
  'floor',
  'replay',
  'memory',
  'append',
  'growth',
  'concurrency',
  'serve-load',
  'scale-out',
  'startup',
];

/** The agent-loop step benchmarks compared with one another (OAR ÷ peer, OAR ÷ floor): run in rounds. */
const COMPARED = new Set(['oar-sqlite', 'oar-postgres', 'langgraph', 'langgraph-postgres', 'openai-agents', 'floor']);

const { values } = parseArgs({
  options: { only: { type: 'string' }, json: { type: 'string' }, rounds: { type: 'string' } },
});
const only = values.only ?? process.env.BENCH_ONLY;
const jsonPath = values.json ?? process.env.BENCH_JSON;
const roundCount = Number(values.rounds ?? process.env.BENCH_ROUNDS ?? 3);
const selected = only ? only.split(',').map((s) => s.trim()) : ORDER;
for (const name of selected) {
  if (!ORDER.includes(name)) throw new Error(`unknown benchmark "${name}"; known: ${ORDER.join(', ')}`);
}
if (!Number.isInteger(roundCount) || roundCount < 1) throw new Error('BENCH_ROUNDS must be a whole number ≥ 1');
/** Measured runs per child in a round: together the rounds run (at least) one report's runs. */
const runsPerRound = Math.ceil(REPORT_RUNS / roundCount);

const child = fileURLToPath(new URL('./child.ts', import.meta.url));

function runChild(name: string, env: Record<string, string> = {}): Promise<BenchOutput> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', child, name], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, ...env },
    });
    let stdout = '';
    proc.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    proc.on('error', reject);
    proc.on('close', (code) => {
      const line = stdout.split('\n').find((l) => l.startsWith(RESULT_PREFIX));
      for (const other of stdout.split('\n')) {
        if (other !== '' && !other.startsWith(RESULT_PREFIX)) process.stderr.write(`  [${name}] ${other}\n`);
      }
      if (code !== 0 || !line) reject(new Error(`benchmark ${name} failed (exit code ${code})`));
      else resolve(JSON.parse(line.slice(RESULT_PREFIX.length)) as BenchOutput);
    });
  });
}

// ----- formatting ------------------------------------------------------------------------------------------------

function table(headers: string[], rows: (string | number)[][], align?: ('l' | 'r')[]): string {
  const cells = rows.map((r) => r.map(String));
  const widths = headers.map((h, i) => Math.max(h.length, ...cells.map((r) => (r[i] ?? '').length)));
  const pad = (text: string, i: number) =>
    (align?.[i] ?? (i === 0 ? 'l' : 'r')) === 'l' ? text.padEnd(widths[i]!) : text.padStart(widths[i]!);
  const line = (r: string[]) => `| ${r.map(pad).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => ((align?.[i] ?? (i === 0 ? 'l' : 'r')) === 'l' ? `:${'-'.repeat(w + 1)}` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  return [line(headers), rule, ...cells.map(line)].join('\n');
}

const f = (n: number | undefined, digits = 2) => (n === undefined || Number.isNaN(n) ? '–' : n.toFixed(digits));
const int = (n: number) => Math.round(n).toLocaleString('en-US');
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}×`;

/** One round of the compared step benchmarks: their step rows, and the load each child started under. */
interface Round {
  round: number;
  /** `os.loadavg()[0]` when each benchmark's child process started, by benchmark. */
  loadAverage: Record<string, number>;
  steps: StepResult[];
}

type StepPick = (s: StepResult) => boolean;
type Stat = 'p50' | 'p99';

/** `a` ÷ `b` within one round, when it measured both. */
function ratioIn(round: Round, a: StepPick, b: StepPick, stat: Stat = 'p50'): number | undefined {
  const [x, y] = [round.steps.find(a), round.steps.find(b)];
  return x && y ? x[stat] / y[stat] : undefined;
}

interface RoundRatios {
  values: number[];
  median: number;
  min: number;
  max: number;
}

/** A ratio taken within each round that measured both sides, and the median and range of those. */
function overRounds(rounds: readonly Round[], a: StepPick, b: StepPick, stat: Stat = 'p50'): RoundRatios | undefined {
  const values = rounds.map((r) => ratioIn(r, a, b, stat)).filter((v): v is number => v !== undefined);
  if (values.length === 0) return undefined;
  return { values, median: midMedian(values), min: Math.min(...values), max: Math.max(...values) };
}

/** "0.39×" from one round; "0.39× (0.35–0.42)" from several: their median and, in brackets, their range. */
function roundsRatio(r: RoundRatios | undefined): string {
  if (!r) return '–';
  return r.values.length === 1 ? `${f(r.median)}×` : `${f(r.median)}× (${f(r.min)}–${f(r.max)})`;
}

const sameRow =
  (s: StepResult): StepPick =>
  (t) =>
    t.system === s.system && t.store === s.store;
const isFloor = (s: { system: string }) => s.system.startsWith('floor');

/** Each system's rows of all rounds as one (common.ts poolSteps), in the order they first ran. */
function pooled(rounds: readonly Round[]): StepResult[] {
  const rows = rounds.flatMap((r) => r.steps);
  return rows.filter((s, i) => rows.findIndex(sameRow(s)) === i).map((s) => poolSteps(rows.filter(sameRow(s))));
}

function stepsSection(steps: StepResult[], rounds: readonly Round[]): string[] {
  const pooledText =
    rounds.length > 1
      ? `pooled over the measured runs of all ${rounds.length} rounds (${runsPerRound} per round).\n` +
        'Ratios: p50 ÷ p50 (p99 ÷ p99) within each round, their median over the rounds and, in brackets, their range.'
      : 'pooled over the measured runs.';
  const out = [
    `## Agent loop: ${STEPS} steps, one trivial read tool call per step, then an answer (zero-latency model)`,
    '',
    'Per-step overhead = time from the end of one model call to the start of the next (tool call, persistence,',
    `context assembly, bookkeeping); ${pooledText}`,
    '',
    table(
      [
        'system',
        'store',
        'runs',
        'p50 ms/step',
        'p99 ms/step',
        'mean',
        'p50 steps 1-20',
        'p50 steps 181-200',
        'run s',
        'records',
        'records/s',
      ],
      steps.map((s) => [
        s.system,
        s.store,
        s.runs,
        f(s.p50),
        f(s.p99),
        f(s.mean),
        f(s.firstP50),
        f(s.lastP50),
        f(s.runMs / 1000, 1),
        s.records === undefined ? '–' : `${int(s.records)} ${s.recordsLabel ?? ''}`,
        s.records === undefined ? '–' : int(s.records / (s.runMs / 1000)),
      ]),
      ['l', 'l'],
    ),
    '',
    ...steps.filter((s) => s.note).map((s) => `- ${s.system}, ${s.store}: ${s.note}; durable: ${s.durable}`),
  ];
  const oar = steps.filter((s) => s.system.startsWith('OAR'));
  const peers = steps.filter((s) => !s.system.startsWith('OAR') && !isFloor(s));
  // Every OAR row against the peers on SQLite or in memory (as in earlier reports); OAR on PostgreSQL against
  // LangGraph's PostgresSaver rows (same store) in a second table.
  const groups: [string, StepResult[], StepResult[]][] = [
    ['Ratios OAR / peer (per-step overhead; > 1 means OAR is slower)', oar, peers.filter((p) => !isPostgres(p))],
    [
      'Ratios OAR PostgreSQL / LangGraph PostgresSaver (per-step overhead; > 1 means OAR is slower)',
      oar.filter(isPostgres),
      peers.filter(isPostgres),
    ],
  ];
  for (const [title, mine, group] of groups) {
    if (mine.length === 0 || group.length === 0) continue;
    out.push(
      '',
      `### ${title}`,
      '',
      table(
        ['OAR', ...group.flatMap((p) => [`÷ ${p.system} p50`, 'p99'])],
        mine.map((o) => [
          `${o.system}, ${o.store}`,
          ...group.flatMap((p) =>
            (['p50', 'p99'] as const).map((stat) => roundsRatio(overRounds(rounds, sameRow(o), sameRow(p), stat))),
          ),
        ]),
      ),
    );
  }
  return out;
}

const isPostgres = (s: { store: string }) => s.store.startsWith('PostgreSQL');

function replaySection(replay: ReplayResult[]): string[] {
  const out = [
    '## Replay: rebuild read models from the log',
    '',
    'Synthesized from the events of a real 100-step OAR turn (fresh ids per copy), stored in one session and thread.',
    '',
    table(
      ['store', 'events', 'turns', 'load ms', 'load ms/1k', 'replay() ms', 'replay() ms/1k'],
      replay.map((r) => [
        r.store,
        int(r.events),
        r.turns ?? '–',
        f(r.loadMs, 0),
        f((r.loadMs / r.events) * 1000),
        f(r.replayMs, 0),
        r.replayMs === undefined ? '–' : f((r.replayMs / r.events) * 1000),
      ]),
      ['l'],
    ),
    '',
  ];
  for (const store of new Set(replay.map((r) => r.store))) {
    const rows = replay.filter((r) => r.store === store).sort((a, b) => a.events - b.events);
    const small = rows[0];
    const large = rows.at(-1);
    if (!small || !large || small === large) continue;
    const size = large.events / small.events;
    out.push(`- ${store}: load ${int(large.events)}/${int(small.events)} = ${ratio(large.loadMs, small.loadMs)}`);
    if (small.replayMs !== undefined && large.replayMs !== undefined) {
      out.push(
        `- replay() ${int(large.events)}/${int(small.events)} = ${ratio(large.replayMs, small.replayMs)} ` +
          `(linear growth would be ${size}×)`,
      );
    }
  }
  return out;
}

function memorySection(memory: MemoryResult[]): string[] {
  return [
    '## Memory: 1,000 sessions, each with an idle main thread (SQLite store, heap after a full GC)',
    '',
    table(
      ['phase', 'sessions', 'heap before MB', 'heap after MB', 'bytes/session', 'RSS after MB', 'phase s'],
      memory.map((m) => [
        m.phase,
        int(m.sessions),
        f(m.heapBeforeMb, 1),
        f(m.heapAfterMb, 1),
        int(m.bytesPerSession),
        f(m.rssAfterMb, 0),
        f(m.ms / 1000, 1),
      ]),
      ['l'],
    ),
  ];
}

function appendSection(append: AppendResult[]): string[] {
  return [
    '## Raw append throughput: EventLog.append of model.delta events (one transaction per append)',
    '',
    'Each append once with commits that wait for the disk (`flushed`: every command) and once with commits that do',
    'not (`relaxed`: a worker step boundary of read-only work, packages/runtime/src/log/durability.ts).',
    '',
    table(
      ['store', 'commit', 'batch', 'events', 'ms', 'events/s', 'ms/append'],
      append.map((a) => [
        a.store,
        a.commit,
        a.batch,
        int(a.events),
        f(a.ms, 0),
        int((a.events / a.ms) * 1000),
        f(a.ms / (a.events / a.batch), 3),
      ]),
      ['l', 'l'],
    ),
  ];
}

function growthSection(growth: GrowthResult[]): string[] {
  const g0 = growth[0];
  return [
    `## Growth: one OAR turn of ${g0 ? int(g0.steps) : '–'} steps (one read each, every step its own file), context budget 1M`,
    '',
    'Per-step overhead as in the agent loop; step n is the gap after model call n.',
    '',
    table(
      [
        'store',
        'steps',
        'p50 1-20',
        'p50 181-200',
        'p50 951-1000',
        '181-200 ÷ 1-20',
        '951-1000 ÷ 1-20',
        'p50 all',
        'p99 all',
        'turn s',
        'events',
        'context at the last step',
      ],
      growth.map((g) => [
        g.store,
        int(g.steps),
        f(g.firstP50),
        f(g.midP50),
        f(g.lastP50),
        ratio(g.midP50, g.firstP50),
        ratio(g.lastP50, g.firstP50),
        f(g.p50),
        f(g.p99),
        f(g.runMs / 1000, 1),
        int(g.events),
        g.lastContextTokens === undefined
          ? '–'
          : `${int(g.lastContextTokens)} tokens, ${g.lastContextOmissions ?? 0} omissions`,
      ]),
      ['l'],
    ),
  ];
}

function concurrencySection(rows: ConcurrencyResult[], memory: ConcurrencyMemory[]): string[] {
  const out = ['## Concurrency: many sessions running turns at once on one runtime (SQLite)', ''];
  if (rows.length > 0) {
    const r0 = rows[0]!;
    const reads = r0.stepsPerTurn - 1;
    out.push(
      'Each row: a fresh runtime on a fresh SQLite file and N fresh sessions, each running its turns one after the',
      `other, all sessions at once; a turn is ${reads} read step${reads === 1 ? '' : 's'} and an answer ` +
        `(${r0.stepsPerTurn} model calls).`,
      'Turns per session are chosen to keep the benchmark under 3 minutes on 2 cores.',
      'Event-loop lag: monitorEventLoopDelay (10 ms resolution, subtracted) over the measured phase; with fewer than',
      '100 samples (a loop that seldom reaches its timers) p99 is the largest sample.',
      '',
      table(
        [
          'sessions',
          'model ms',
          'turns/session',
          'turns',
          'phase s',
          'turns/s',
          'lag p50 ms',
          'lag p99 ms',
          'lag max ms',
          'lag samples',
          'RSS peak MB',
        ],
        rows.map((r) => [
          int(r.sessions),
          r.latencyMs,
          r.turnsPerSession,
          int(r.turns),
          f(r.ms / 1000, 1),
          f((r.turns / r.ms) * 1000, 1),
          f(r.lagP50Ms, 0),
          f(r.lagP99Ms, 0),
          f(r.lagMaxMs, 0),
          int(r.lagSamples),
          f(r.rssPeakMb, 0),
        ]),
        ['r'],
      ),
    );
  }
  if (memory.length > 0) {
    const m0 = memory[0]!;
    out.push(
      '',
      `Heap per session (after a full GC): ${int(m0.idleSessions)} sessions created on one runtime, then N of them in a`,
      'turn at once, each turn held at its model call; active = idle bytes + extra heap of the active sessions ÷ N.',
      '',
      table(
        ['sessions in a turn', 'sessions', 'bytes/idle session', 'bytes/active session', 'heap MB', 'RSS MB'],
        memory.map((m) => [
          int(m.sessions),
          int(m.idleSessions),
          int(m.bytesPerIdleSession),
          int(m.bytesPerActiveSession),
          f(m.heapMb, 1),
          f(m.rssMb, 0),
        ]),
        ['r'],
      ),
    );
  }
  return out;
}

function serveLoadSection(rows: ServeLoadResult[]): string[] {
  return [
    '## `oar serve` under load (loopback, SQLite)',
    '',
    'Sessions run turns back to back (a scripted model, 20 ms per call; three `read` steps and an answer) while SSE',
    'clients follow them; half-way the server process is killed (SIGKILL) and started again on the same store and',
    'port. Every client reconnects with its Last-Event-ID; at the end its sequence is compared with the log.',
    'Latency: from an event’s commit timestamp to its arrival at a client, outside the restart window. RSS and',
    'event-loop lag p99: the server process (the larger of its two runs).',
    '',
    table(
      [
        'sessions',
        'SSE clients',
        's',
        'turns/s',
        'events delivered',
        'gaps',
        'duplicates',
        'reconnects',
        'latency p50',
        'latency p99',
        'server RSS',
        'lag p99',
      ],
      rows.map((r) => [
        r.sessions,
        r.clients,
        f(r.seconds, 1),
        f(r.turnsPerSecond, 1),
        int(r.events),
        r.gaps,
        r.duplicates,
        r.reconnects,
        `${f(r.latencyP50Ms, 1)} ms`,
        `${f(r.latencyP99Ms, 1)} ms`,
        `${f(r.rssMb, 0)} MB`,
        `${f(r.lagP99Ms, 0)} ms`,
      ]),
    ),
  ];
}

function scaleOutSection(r: ScaleOutResult): string[] {
  const rows = r.throughput;
  const one = (workload: string) => rows.find((x) => x.workload === workload && x.workers === 1);
  const top = rows.reduce((n, x) => Math.max(n, x.workers), 0);
  const io = rows.find((x) => x.workload === 'I/O-bound' && x.workers === top);
  const range = (ms: number[]) => {
    if (ms.length === 0) return '–';
    const [low, high] = [Math.min(...ms), Math.max(...ms)];
    return low === high ? `${f(low, 0)} ms` : `${f(low, 0)}–${f(high, 0)} ms`;
  };
  const out = [
    `## Scale-out on PostgreSQL: \`oar worker\` processes${r.quick ? ' (SCALE_OUT_QUICK: small counts, not figures)' : ''}`,
    '',
  ];
  if (rows.length > 0) {
    out.push(
      `Each worker is a process of the built \`oar\` binary with \`--concurrency ${r.concurrency}\`; a turn is ${r.toolSteps} steps of one`,
      'tool call each, then the answer. One turn per session; enough sessions to keep every thread busy. Rate: turns',
      'completed between the end of the submissions and the moment fewer turns are left than threads (steady state).',
      `CPU busy and CPU ms/turn: the whole machine (${r.cores} cores: workers, PostgreSQL, the bench, anything else running)`,
      'over that window; workers’ CPU ms/turn: the `oar worker` processes alone.',
      '',
      table(
        [
          'workload',
          'model ms',
          'tool ms',
          'workers',
          'threads',
          'turns',
          'window s',
          'turns/min',
          '÷ 1 worker',
          'CPU busy',
          'CPU ms/turn',
          'workers’ CPU ms/turn',
        ],
        rows.map((x) => {
          const base = one(x.workload);
          return [
            x.workload,
            x.modelMs,
            x.toolMs,
            x.workers,
            x.workers * x.concurrency,
            x.turns,
            f(x.windowSeconds, 1),
            int(x.turnsPerMinute),
            base ? ratio(x.turnsPerMinute, base.turnsPerMinute) : '–',
            `${f(x.cpuBusyPercent, 0)}%`,
            f(x.cpuMsPerTurn, 0),
            f(x.workerCpuMsPerTurn, 0),
          ];
        }),
        ['l'],
      ),
      '',
    );
  }
  if (io) {
    const base = one('I/O-bound');
    // What 2 cores can do at most: the CPU a turn costs (workers, PostgreSQL, the bench) against the cores.
    const cap = (r.cores * 60_000) / io.cpuMsPerTurn;
    const limit =
      io.cpuBusyPercent >= 85
        ? `the machine's ${r.cores} cores were ${f(io.cpuBusyPercent, 0)}% busy at ${top} workers; a turn cost about ${f(io.cpuMsPerTurn, 0)} ms of CPU (${f(io.workerCpuMsPerTurn, 0)} ms of it in the \`oar worker\` processes, the rest in PostgreSQL, the bench and anything else running), which caps this machine near ${int(cap)} turns/min whatever the number of workers. Past ${r.cores} busy processes these figures are CPU-bound; with workers on machines of their own the waits (model, tools) overlap and only the database is shared`
        : `the CPU was ${f(io.cpuBusyPercent, 0)}% busy at ${top} workers (about ${f(io.cpuMsPerTurn, 0)} ms of CPU per turn, ${f(io.workerCpuMsPerTurn, 0)} ms of it in the workers), so what is left is the store's round trips per step and the workers' own scheduling`;
    out.push(
      `Scaling 1 → ${top} workers, I/O-bound: ${base ? ratio(io.turnsPerMinute, base.turnsPerMinute) : '–'} (linear: ${top}.00×). What limits it: ${limit}.`,
      '',
    );
  }
  if (r.takeover.length > 0) {
    out.push(
      'Takeover: from the signal to the worker to the first event another worker commits in its thread; "lease left"',
      'is what the lease (`worker.leaseTtlMs`) still had at the signal. At its poll (every second) a running worker',
      'takes over an expired lease, and a lease of a process of its own machine that no longer exists (SIGKILL here);',
      'a stopped process (SIGSTOP) still exists, so its lease has to run out. A worker that starts takes a dead',
      'process’s lease over at once.',
      '',
      table(
        ['signal to the worker', 'lease', 'samples', 'to running again', 'mean', 'lease left at the signal'],
        r.takeover.map((t) => [
          t.path,
          `${f(t.leaseTtlMs / 1000, 0)} s`,
          t.ms.length,
          range(t.ms),
          `${f(t.ms.reduce((a, b) => a + b, 0) / t.ms.length, 0)} ms`,
          range(t.leaseLeftMs),
        ]),
        ['l'],
      ),
      '',
    );
  }
  const d = r.delivery;
  if (d) {
    out.push(
      `Event delivery: an API node (\`oar serve --no-worker\`), ${d.workers} workers, ${d.sessions} sessions with one SSE client each,`,
      `${d.turns} turns submitted over HTTP; latency from an event’s timestamp (taken in its append transaction, in a`,
      'worker) to its arrival at the client (through LISTEN/NOTIFY and the API node’s read of the log).',
      '',
      table(
        ['sessions', 'turns', 's', 'events delivered', 'gaps', 'duplicates', 'samples', 'p50', 'p99', 'max'],
        [
          [
            d.sessions,
            d.turns,
            f(d.seconds, 1),
            int(d.events),
            d.gaps,
            d.duplicates,
            int(d.samples),
            `${f(d.p50Ms, 0)} ms`,
            `${f(d.p99Ms, 0)} ms`,
            `${f(d.maxMs, 0)} ms`,
          ],
        ],
      ),
    );
  }
  return out;
}

/** The performance issue's targets, each with this run's figure (or "not run"). */
function startupSection(rows: StartupResult[]): string[] {
  return [
    '## CLI start-up',
    '',
    `Wall time from spawn to exit, ${rows[0]?.runs ?? 0} runs each, round-robin after a warm-up round; ratio: p50 ÷ \`node -e 0\`'s p50.`,
    '',
    table(
      ['command', 'p50 ms', 'p90 ms', 'ratio'],
      rows.map((r) => [r.command, f(r.p50Ms, 0), f(r.p90Ms, 0), `${r.ratio.toFixed(2)}×`]),
      ['l', 'r', 'r', 'r'],
    ),
  ];
}

const OAR_1M = 'OAR, context budget 1M';
// The same runs with the peers' plain read tool: the runtime's own cost, without OAR's path confinement.
const OAR_PEERS_TOOL = "OAR, context budget 1M, peers' read tool";
const LANGGRAPH_SYNC = 'LangGraph durability=sync';
const pick =
  (system: string, store: (store: string) => boolean): StepPick =>
  (s) =>
    s.system === system && store(s.store);
const onSqlite = (store: string) => store.startsWith('SQLite');
const onPostgres = (store: string) => store.startsWith('PostgreSQL');

/** A ratio of two step rows the summary quotes: with a target (`max`), or only reported. */
interface StepRatio {
  goal: string;
  /** Its name in the round-by-round table. */
  short: string;
  a: StepPick;
  b: StepPick;
  max?: number;
  source: string;
}

const STEP_RATIOS: StepRatio[] = [
  {
    goal: 'per-step p50: OAR SQLite (context budget 1M) ÷ LangGraph SqliteSaver sync',
    short: 'OAR SQLite ÷ LangGraph SqliteSaver sync',
    a: pick(OAR_1M, onSqlite),
    b: pick(LANGGRAPH_SYNC, (s) => s.includes('SqliteSaver')),
    max: 0.2,
    source: 'oar-sqlite, langgraph',
  },
  {
    goal: 'per-step p50: OAR SQLite (context budget 1M) ÷ OpenAI Agents SDK',
    short: 'OAR SQLite ÷ OpenAI Agents SDK',
    a: pick(OAR_1M, onSqlite),
    b: (s) => s.system === 'OpenAI Agents SDK',
    max: 0.5,
    source: 'oar-sqlite, openai-agents',
  },
  {
    goal: 'per-step p50: OAR PostgreSQL (context budget 1M) ÷ LangGraph PostgresSaver sync',
    short: 'OAR PostgreSQL ÷ LangGraph PostgresSaver sync',
    a: pick(OAR_1M, onPostgres),
    b: pick(LANGGRAPH_SYNC, (s) => s.includes('PostgresSaver')),
    max: 0.5,
    source: 'oar-postgres, langgraph-postgres',
  },
  {
    goal: "same, peers' read tool: OAR SQLite ÷ LangGraph SqliteSaver sync",
    short: "peers' read tool: OAR SQLite ÷ LangGraph SqliteSaver sync",
    a: pick(OAR_PEERS_TOOL, onSqlite),
    b: pick(LANGGRAPH_SYNC, (s) => s.includes('SqliteSaver')),
    max: 0.2,
    source: 'oar-sqlite, langgraph',
  },
  {
    goal: "same, peers' read tool: OAR SQLite ÷ OpenAI Agents SDK",
    short: "peers' read tool: OAR SQLite ÷ OpenAI Agents SDK",
    a: pick(OAR_PEERS_TOOL, onSqlite),
    b: (s) => s.system === 'OpenAI Agents SDK',
    max: 0.5,
    source: 'oar-sqlite, openai-agents',
  },
  {
    goal: "same, peers' read tool: OAR PostgreSQL ÷ LangGraph PostgresSaver sync",
    short: "peers' read tool: OAR PostgreSQL ÷ LangGraph PostgresSaver sync",
    a: pick(OAR_PEERS_TOOL, onPostgres),
    b: pick(LANGGRAPH_SYNC, (s) => s.includes('PostgresSaver')),
    max: 0.5,
    source: 'oar-postgres, langgraph-postgres',
  },
  // How far a step is from what its SQL alone costs (floor.ts): the part of the step that is OAR's JavaScript,
  // the tool and the event loop.
  {
    goal: 'gap to the floor: OAR SQLite step p50 (context budget 1M) ÷ floor p50',
    short: 'OAR SQLite ÷ floor',
    a: pick(OAR_1M, onSqlite),
    b: isFloor,
    source: 'oar-sqlite, floor',
  },
  {
    goal: "gap to the floor: OAR SQLite step p50 (peers' read tool) ÷ floor p50",
    short: "peers' read tool: OAR SQLite ÷ floor",
    a: pick(OAR_PEERS_TOOL, onSqlite),
    b: isFloor,
    source: 'oar-sqlite, floor',
  },
];

/**
 * Each round's ratios (the summary quotes their median), with the load average each child started under; nothing
 * when no ratio was measured.
 */
function roundsSection(rounds: readonly Round[]): string[] {
  const names = [...new Set(rounds.flatMap((r) => Object.keys(r.loadAverage)))];
  const ratios = STEP_RATIOS.flatMap(({ short, a, b }) => {
    const over = overRounds(rounds, a, b);
    if (!over) return [];
    const each = rounds.map((r) => ratioIn(r, a, b));
    return [[short, ...each.map((v) => (v === undefined ? '–' : `${f(v)}×`)), `${f(over.median)}×`]];
  });
  if (ratios.length === 0) return [];
  const loads = names.map((name) => [
    `load average at the start of ${name}`,
    ...rounds.map((r) => f(r.loadAverage[name])),
    '',
  ]);
  const runs = `${runsPerRound} measured run${runsPerRound === 1 ? '' : 's'} per system`;
  return [
    '',
    '### Step ratios round by round',
    '',
    `Each round ran ${names.join(', ')} one after the other, each in a fresh process (${runs});`,
    'p50 ÷ p50 within the round. Load average: `os.loadavg()[0]` (1 minute) when the child started; the child that',
    'runs adds about 1 to it.',
    '',
    table(['p50 ÷ p50', ...rounds.map((r) => `round ${r.round}`), 'median'], [...ratios, ...loads]),
  ];
}

function summarySection(all: Required<BenchOutput>, ran: readonly string[], rounds: readonly Round[]): string[] {
  type Row = [goal: string, measured: string, target: string, met: string, source: string];
  const rows: Row[] = [];
  const verdict = (ok: boolean) => (ok ? 'yes' : 'no');
  const notRun = (goal: string, target: string, source: string): Row => [goal, 'not run', target, '–', source];
  const oarSqlite = all.steps.find(pick(OAR_1M, onSqlite));
  for (const { goal, a, b, max, source } of STEP_RATIOS) {
    const target = max === undefined ? 'report' : `≤ ${max.toFixed(2)}×`;
    const [x, y, over] = [all.steps.find(a), all.steps.find(b), overRounds(rounds, a, b)];
    if (!x || !y || !over) {
      rows.push(notRun(goal, target, source));
      continue;
    }
    rows.push([
      goal,
      `${roundsRatio(over)}; pooled ${f(x.p50)} ÷ ${f(y.p50)} ms`,
      target,
      max === undefined ? '–' : verdict(over.median <= max),
      source,
    ]);
  }

  const growth = all.growth[0];
  const growthRow = (goal: string, last: (g: GrowthResult) => number, max: number): Row => {
    if (growth) {
      const value = last(growth) / growth.firstP50;
      return [
        goal,
        `${value.toFixed(2)}× (${f(last(growth))} ÷ ${f(growth.firstP50)} ms)`,
        `≤ ${max}×`,
        verdict(value <= max),
        'growth',
      ];
    }
    return notRun(goal, `≤ ${max}×`, 'growth');
  };
  if (!growth && oarSqlite) {
    // Without the growth benchmark, the 200-step turn of oar-sqlite still gives steps 181-200 ÷ 1-20.
    const value = oarSqlite.lastP50 / oarSqlite.firstP50;
    rows.push([
      'growth: p50 steps 181-200 ÷ 1-20 (budget 1M)',
      `${value.toFixed(2)}× (${f(oarSqlite.lastP50)} ÷ ${f(oarSqlite.firstP50)} ms)`,
      '≤ 1.3×',
      verdict(value <= 1.3),
      'oar-sqlite (200-step turn)',
    ]);
  } else {
    rows.push(growthRow('growth: p50 steps 181-200 ÷ 1-20 (budget 1M)', (g) => g.midP50, 1.3));
  }
  rows.push(growthRow('growth: p50 steps 951-1000 ÷ 1-20 of a 1,000-step turn', (g) => g.lastP50, 1.5));

  const largest = Math.max(0, ...all.concurrency.map((c) => c.sessions));
  const latencies = [...new Set(all.concurrency.map((c) => c.latencyMs))];
  if (all.concurrency.length === 0) {
    rows.push(
      notRun('1,000 concurrent sessions (SQLite): event-loop lag p99', '< 50 ms', 'concurrency'),
      notRun('1,000 concurrent sessions (SQLite): event-loop lag worst', '< 250 ms', 'concurrency'),
      notRun('turns/s at 1,000 sessions vs 100 sessions', 'report', 'concurrency'),
    );
  } else {
    for (const latency of latencies) {
      const big = all.concurrency.find((c) => c.sessions === largest && c.latencyMs === latency);
      const small = all.concurrency.find((c) => c.sessions === 100 && c.latencyMs === latency);
      if (!big) continue;
      const label = `${int(big.sessions)} concurrent sessions (SQLite, model ${latency} ms)`;
      rows.push(
        [
          `${label}: event-loop lag p99`,
          `${f(big.lagP99Ms, 0)} ms`,
          '< 50 ms',
          verdict(big.lagP99Ms < 50),
          'concurrency',
        ],
        [
          `${label}: event-loop lag worst`,
          `${f(big.lagMaxMs, 0)} ms`,
          '< 250 ms',
          verdict(big.lagMaxMs < 250),
          'concurrency',
        ],
      );
      const tps = (c: ConcurrencyResult) => (c.turns / c.ms) * 1000;
      rows.push([
        `turns/s at ${int(big.sessions)} sessions vs 100 (model ${latency} ms)`,
        small
          ? `${f(tps(big), 1)} vs ${f(tps(small), 1)} turns/s (${ratio(tps(big), tps(small))})`
          : `${f(tps(big), 1)} turns/s`,
        'report',
        '–',
        'concurrency',
      ]);
    }
  }

  const append = (store: (s: string) => boolean, commit: AppendResult['commit']) =>
    all.append.find((a) => a.batch === 100 && a.commit === commit && store(a.store));
  // The targets were set when every SQLite commit skipped the disk: what a relaxed commit does now. The flushed rate
  // (what a command's append costs) is reported beside it.
  for (const [name, test, min, commit] of [
    ['SQLite', (s: string) => s.startsWith('SQLite'), 50_000, 'relaxed'],
    ['SQLite', (s: string) => s.startsWith('SQLite'), 0, 'flushed'],
    ['PostgreSQL', (s: string) => s.startsWith('PostgreSQL'), 10_000, 'relaxed'],
    ['PostgreSQL', (s: string) => s.startsWith('PostgreSQL'), 0, 'flushed'],
  ] as const) {
    const goal = `event append rate, ${name}, batches of 100, ${commit} commits`;
    const a = append(test, commit);
    const target = min > 0 ? `≥ ${int(min)} events/s` : 'report';
    if (!a) rows.push(notRun(goal, target, 'append'));
    else {
      const rate = (a.events / a.ms) * 1000;
      rows.push([goal, `${int(rate)} events/s`, target, min > 0 ? verdict(rate >= min) : '–', 'append']);
    }
  }

  const replay = all.replay.find((r) => r.events === 100_000 && r.replayMs !== undefined);
  if (!replay) rows.push(notRun('replay 100k events → read models', '≤ 0.3 s', 'replay'));
  else {
    rows.push([
      'replay 100k events → read models',
      `${((replay.replayMs ?? 0) / 1000).toFixed(2)} s replay() (+ ${(replay.loadMs / 1000).toFixed(2)} s to load them)`,
      '≤ 0.3 s',
      verdict((replay.replayMs ?? 0) <= 300),
      `replay (${replay.store})`,
    ]);
  }

  const memoryRow = (phase: string, goal: string) => {
    const m = all.memory.find((x) => x.phase === phase);
    if (!m) return notRun(goal, '≤ 2 KB (2,048 B)', 'memory');
    return [
      goal,
      `${int(m.bytesPerSession)} B`,
      '≤ 2 KB (2,048 B)',
      verdict(m.bytesPerSession <= 2048),
      'memory',
    ] as Row;
  };
  rows.push(
    memoryRow('created, thread idle', 'memory per idle session (just created)'),
    memoryRow('after one completed turn each', 'memory per idle session (after one completed turn)'),
    memoryRow(
      'one more session with one turn, cache full',
      'memory per idle session after a turn, at scale (the read-model cache full)',
    ),
  );
  const active = [...all.concurrencyMemory].sort((a, b) => b.sessions - a.sessions)[0];
  rows.push(
    active
      ? [
          `memory per active session (${int(active.sessions)} in a turn at once)`,
          `${int(active.bytesPerActiveSession)} B`,
          'report',
          '–',
          'concurrency',
        ]
      : notRun('memory per active session', 'report', 'concurrency'),
  );

  const load = all.serveLoad[0];
  rows.push(
    load
      ? [
          `oar serve: ${load.clients} SSE clients over a server kill, every sequence gap- and duplicate-free`,
          `${load.gaps} gaps, ${load.duplicates} duplicates`,
          '0',
          verdict(load.gaps === 0 && load.duplicates === 0),
          'serve-load',
        ]
      : notRun('oar serve: SSE clients over a server kill, gap- and duplicate-free', '0', 'serve-load'),
    load
      ? [
          `oar serve: event delivery latency p99 (${load.sessions} sessions)`,
          `${f(load.latencyP99Ms, 1)} ms`,
          'report',
          '–',
          'serve-load',
        ]
      : notRun('oar serve: event delivery latency p99', 'report', 'serve-load'),
  );

  const scale = all.scaleOut[0];
  const ioAt = (workers: number) =>
    scale?.throughput.find((x) => x.workload === 'I/O-bound' && x.workers === workers)?.turnsPerMinute;
  const [io1, io4] = [ioAt(1), ioAt(4)];
  rows.push(
    scale && io1 && io4
      ? [
          'scale-out: I/O-bound turns/min, 4 workers ÷ 1 (PostgreSQL)',
          `${ratio(io4, io1)} (${int(io4)} ÷ ${int(io1)} turns/min)`,
          'close to linear (4×)',
          verdict(io4 / io1 >= 3.2),
          'scale-out',
        ]
      : notRun('scale-out: I/O-bound turns/min, 4 workers ÷ 1 (PostgreSQL)', 'close to linear (4×)', 'scale-out'),
    scale?.delivery
      ? [
          'scale-out: event delivery p99, worker → SSE client on an API node',
          `${f(scale.delivery.p99Ms, 0)} ms (p50 ${f(scale.delivery.p50Ms, 0)} ms)`,
          'report',
          '–',
          'scale-out',
        ]
      : notRun('scale-out: event delivery p99, worker → SSE client on an API node', 'report', 'scale-out'),
  );

  const starts = all.startup.filter((r) => r.command.startsWith('oar ') && !r.opensStore);
  if (starts.length === 0)
    rows.push(notRun('CLI start-up: oar --version, --help, inspect --help ÷ node -e 0', '≤ 5×', 'startup'));
  for (const r of starts) {
    rows.push([
      `CLI start-up: ${r.command} ÷ node -e 0 (p50)`,
      `${r.ratio.toFixed(2)}× (${f(r.p50Ms, 0)} ms)`,
      '≤ 5×',
      verdict(r.ratio <= 5),
      'startup',
    ]);
  }

  return [
    '## Summary: the performance issue’s targets',
    '',
    `Benchmarks run: ${ran.join(', ')}.`,
    '',
    table(['goal', 'measured', 'target', 'met', 'source'], rows, ['l', 'l', 'l', 'l', 'l']),
    ...(rounds.length > 1
      ? [
          '',
          `Step ratios: the median of the ${rounds.length} rounds' ratios (each p50 ÷ p50 within one round), their range`,
          'in brackets, and the p50s pooled over all rounds; "met" compares the median with the target.',
        ]
      : []),
    ...roundsSection(rounds),
  ];
}

/** Installed versions of the libraries that take part (peers and OAR's own drivers). */
function packageVersions(): string {
  const names = [
    '@langchain/langgraph',
    '@langchain/core',
    '@langchain/langgraph-checkpoint',
    '@langchain/langgraph-checkpoint-sqlite',
    '@langchain/langgraph-checkpoint-postgres',
    '@openai/agents',
    'better-sqlite3',
    'pg',
    'kysely',
    'ai',
    'zod',
  ];
  const roots = [new URL('../node_modules/', import.meta.url), new URL('../../node_modules/', import.meta.url)];
  return names
    .map((name) => {
      for (const root of roots) {
        const file = new URL(`${name}/package.json`, root);
        if (existsSync(file))
          return `${name} ${(JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version}`;
      }
      return `${name} (not installed)`;
    })
    .join(', ');
}

// ----- run -------------------------------------------------------------------------------------------------------

const started = Date.now();
const cpu = cpus();
const machine = `${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}, ${process.platform}-${process.arch}`;
process.stderr.write(`OAR benchmarks on ${machine}\n`);
const merged: Required<BenchOutput> = {
  steps: [],
  replay: [],
  memory: [],
  append: [],
  growth: [],
  concurrency: [],
  concurrencyMemory: [],
  serveLoad: [],
  scaleOut: [],
  startup: [],
  versions: {},
  notes: [],
};
const ran = ORDER.filter((n) => selected.includes(n));

async function runBenchmark(name: string, env: Record<string, string> = {}, label = ''): Promise<BenchOutput> {
  process.stderr.write(`\n▶ ${name}${label}\n`);
  const t = Date.now();
  const output = await runChild(name, env);
  process.stderr.write(`  (${((Date.now() - t) / 1000).toFixed(1)} s)\n`);
  return output;
}

/** Everything but the step rows, which the rounds collect (and pool afterwards). */
function merge(output: BenchOutput): void {
  for (const key of [
    'replay',
    'memory',
    'append',
    'growth',
    'concurrency',
    'concurrencyMemory',
    'serveLoad',
    'scaleOut',
    'startup',
    'notes',
  ] as const) {
    merged[key].push(...((output[key] ?? []) as never[]));
  }
  Object.assign(merged.versions, output.versions);
}

const compared = ran.filter((n) => COMPARED.has(n));
const rounds: Round[] = [];
for (let round = 1; compared.length > 0 && round <= roundCount; round++) {
  const current: Round = { round, loadAverage: {}, steps: [] };
  for (const name of compared) {
    const load = loadavg()[0]!;
    current.loadAverage[name] = load;
    const output = await runBenchmark(
      name,
      { BENCH_RUNS: String(runsPerRound) },
      ` (round ${round}/${roundCount}, load average ${f(load)})`,
    );
    current.steps.push(...(output.steps ?? []));
    merge(output);
  }
  rounds.push(current);
}
merged.steps.push(...pooled(rounds));
for (const name of ran.filter((n) => !COMPARED.has(n))) {
  const output = await runBenchmark(name);
  merged.steps.push(...(output.steps ?? []));
  merge(output);
}
// A round benchmark's note (a database it could not reach) comes once per round.
merged.notes = [...new Set(merged.notes)];

const versions = [
  packageVersions(),
  ...Object.entries(merged.versions).map(([name, version]) => `${name} ${version}`),
].join(', ');
const report: string[] = [`# OAR benchmark report`, '', `Machine: ${machine}`, '', `Versions: ${versions}`, ''];
if (merged.steps.length > 0) report.push(...stepsSection(merged.steps, rounds), '');
if (merged.replay.length > 0) report.push(...replaySection(merged.replay), '');
if (merged.memory.length > 0) report.push(...memorySection(merged.memory), '');
if (merged.append.length > 0) report.push(...appendSection(merged.append), '');
if (merged.growth.length > 0) report.push(...growthSection(merged.growth), '');
if (merged.concurrency.length > 0 || merged.concurrencyMemory.length > 0) {
  report.push(...concurrencySection(merged.concurrency, merged.concurrencyMemory), '');
}
if (merged.serveLoad.length > 0) report.push(...serveLoadSection(merged.serveLoad), '');
for (const result of merged.scaleOut) report.push(...scaleOutSection(result), '');
if (merged.startup.length > 0) report.push(...startupSection(merged.startup), '');
if (merged.notes.length > 0) report.push('## Notes', '', ...merged.notes.map((n) => `- ${n}`), '');
report.push(...summarySection(merged, ran, rounds), '');
report.push(`Total time: ${((Date.now() - started) / 1000).toFixed(0)} s`);
process.stdout.write(`\n${report.join('\n')}\n`);
if (jsonPath) {
  // `steps`: each system pooled over the rounds; `rounds`: each round's own rows and load averages; `ratios`: the
  // summary's step ratios, round by round. The samples behind the statistics stay out (thousands of numbers).
  const ratios = STEP_RATIOS.map(({ goal, a, b }) => {
    const over = overRounds(rounds, a, b);
    return {
      goal,
      rounds: rounds.map((r) => ratioIn(r, a, b) ?? null),
      ...(over ? { median: over.median, min: over.min, max: over.max } : {}),
    };
  });
  const json = { machine, roundCount, runsPerRound, ...merged, rounds, ratios };
  writeFileSync(jsonPath, `${JSON.stringify(json, (key, value) => (key === 'samples' ? undefined : value), 2)}\n`);
}
