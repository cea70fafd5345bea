import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import {
  type AppendResult,
  type BenchOutput,
  type MemoryResult,
  RESULT_PREFIX,
  type ReplayResult,
  STEPS,
  type StepResult,
} from './common.js';

/**
 * `npm run bench`: every benchmark in its own Node process (so one library's modules, JIT state and heap do not
 * colour another's figures), one after the other (never in parallel: they would compete for the 2 cores), then
 * one report with the ratios against the peers measured in this same run.
 *
 *   npm run bench                              all benchmarks
 *   BENCH_ONLY=replay,append npm run bench     a subset (or `--only replay,append` when running tsx directly)
 *   BENCH_JSON=results.json npm run bench      also write the raw results (or `--json results.json`)
 */
const ORDER = ['oar-sqlite', 'oar-postgres', 'langgraph', 'openai-agents', 'replay', 'memory', 'append'];

const { values } = parseArgs({
  options: { only: { type: 'string' }, json: { type: 'string' } },
});
const only = values.only ?? process.env.BENCH_ONLY;
const jsonPath = values.json ?? process.env.BENCH_JSON;
const selected = only ? only.split(',').map((s) => s.trim()) : ORDER;
for (const name of selected) {
  if (!ORDER.includes(name)) throw new Error(`unknown benchmark "${name}"; known: ${ORDER.join(', ')}`);
}

const child = fileURLToPath(new URL('./child.ts', import.meta.url));

function runChild(name: string): Promise<BenchOutput> {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', child, name], {
      stdio: ['ignore', 'pipe', 'inherit'],
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

function stepsSection(steps: StepResult[]): string[] {
  const out = [
    `## Agent loop: ${STEPS} steps, one trivial read tool call per step, then an answer (zero-latency model)`,
    '',
    'Per-step overhead = time from the end of one model call to the start of the next (tool call, persistence,',
    'context assembly, bookkeeping); pooled over the measured runs.',
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
  const peers = steps.filter((s) => !s.system.startsWith('OAR'));
  if (oar.length > 0 && peers.length > 0) {
    out.push(
      '',
      '### Ratios OAR / peer (per-step overhead; > 1 means OAR is slower)',
      '',
      table(
        ['OAR', ...peers.flatMap((p) => [`÷ ${p.system} p50`, 'p99'])],
        oar.map((o) => [
          `${o.system}, ${o.store}`,
          ...peers.flatMap((p) => [ratio(o.p50, p.p50), ratio(o.p99, p.p99)]),
        ]),
      ),
    );
  }
  return out;
}

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
    table(
      ['store', 'batch', 'events', 'ms', 'events/s', 'ms/append'],
      append.map((a) => [
        a.store,
        a.batch,
        int(a.events),
        f(a.ms, 0),
        int((a.events / a.ms) * 1000),
        f(a.ms / (a.events / a.batch), 3),
      ]),
      ['l'],
    ),
  ];
}

// ----- run -------------------------------------------------------------------------------------------------------

const started = Date.now();
const cpu = cpus();
const machine = `${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, Node ${process.version}, ${process.platform}-${process.arch}`;
process.stderr.write(`OAR benchmarks on ${machine}\n`);
const merged: Required<BenchOutput> = { steps: [], replay: [], memory: [], append: [], notes: [] };
for (const name of ORDER.filter((n) => selected.includes(n))) {
  process.stderr.write(`\n▶ ${name}\n`);
  const t = Date.now();
  const output = await runChild(name);
  process.stderr.write(`  (${((Date.now() - t) / 1000).toFixed(1)} s)\n`);
  for (const key of ['steps', 'replay', 'memory', 'append', 'notes'] as const) {
    merged[key].push(...((output[key] ?? []) as never[]));
  }
}

const report: string[] = [`# OAR benchmark report`, '', `Machine: ${machine}`, ''];
if (merged.steps.length > 0) report.push(...stepsSection(merged.steps), '');
if (merged.replay.length > 0) report.push(...replaySection(merged.replay), '');
if (merged.memory.length > 0) report.push(...memorySection(merged.memory), '');
if (merged.append.length > 0) report.push(...appendSection(merged.append), '');
if (merged.notes.length > 0) report.push('## Notes', '', ...merged.notes.map((n) => `- ${n}`), '');
report.push(`Total time: ${((Date.now() - started) / 1000).toFixed(0)} s`);
process.stdout.write(`\n${report.join('\n')}\n`);
if (jsonPath) writeFileSync(jsonPath, `${JSON.stringify({ machine, ...merged }, null, 2)}\n`);
