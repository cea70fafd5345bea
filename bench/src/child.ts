import { type BenchOutput, emit } from './common.js';

/** Runs one benchmark in this process (main.ts starts one process per benchmark) and prints its result line. */
const BENCHMARKS: Record<string, () => Promise<BenchOutput>> = {
  'oar-sqlite': async () => (await import('./oar-steps.js')).run('sqlite'),
  'oar-postgres': async () => (await import('./oar-steps.js')).run('postgres'),
  langgraph: async () => (await import('./peer-langgraph.js')).run('sqlite'),
  'langgraph-postgres': async () => (await import('./peer-langgraph.js')).run('postgres'),
  'openai-agents': async () => (await import('./peer-openai-agents.js')).run(),
  floor: async () => (await import('./floor.js')).run(),
  replay: async () => (await import('./replay.js')).run(),
  memory: async () => (await import('./memory.js')).run(),
  append: async () => (await import('./append.js')).run(),
  growth: async () => (await import('./growth.js')).run(),
  concurrency: async () => (await import('./concurrency.js')).run(),
  'serve-load': async () => (await import('./serve-load.js')).run(),
  'scale-out': async () => (await import('./scale-out.js')).run(),
  startup: async () => (await import('./startup.js')).run(),
};

const name = process.argv[2];
if (name !== undefined) {
  const bench = BENCHMARKS[name];
  if (!bench) {
    process.stderr.write(`unknown benchmark "${name}"; known: ${Object.keys(BENCHMARKS).join(', ')}\n`);
    process.exit(2);
  }
  emit(await bench());
  // Peer libraries may keep handles (timers, pools) open; the result is out, so end the process.
  process.exit(0);
}
