import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../src/main.js';
import { bin } from './cli-helpers.js';

/**
 * Random command lines: the argument parser and every command's validation, in-process through `main(argv)` (the
 * binary's whole body), plus a few through the real binary. Whatever the arguments, `oar` ends with a documented
 * exit code (README: 0 ok, 1 failed, 2 usage error or bad input, 3 waiting, 130 interrupted) — never 70
 * (`internal_error`, a bug) — and a usage error (2) prints exactly one structured error `{"error": {code, message,
 * retryable}}` on stderr.
 *
 * A fixed seed (fast-check prints it, with the failing case's path); OAR_FUZZ_SEED / OAR_FUZZ_RUNS explore more.
 * Not generated: `events --follow` (it runs until Ctrl-C by design) and a protocol command without a file (it
 * would read this process's standard input; the binary runs below cover that with an empty stdin).
 */
const SEED = Number(process.env.OAR_FUZZ_SEED ?? 20_151_115);
const runs = (n: number) => ({
  seed: SEED,
  numRuns: Math.max(1, Math.round(n * Number(process.env.OAR_FUZZ_RUNS ?? 1))),
});
/** README and docs/errors.md: 0 ok, 1 failed, 2 bad input, 3 waiting, 74 store failed, 75 try later, 130 interrupted. */
const DOCUMENTED_EXITS = [0, 1, 2, 3, 74, 75, 130];

const root = mkdtempSync(join(tmpdir(), 'oar-fuzz-argv-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const home = process.cwd();
const savedKeys: Record<string, string | undefined> = {};
beforeAll(() => {
  // No real provider may be reached, whatever model spec the fuzzer picks.
  for (const key of Object.keys(process.env).filter((k) => /API_KEY$/.test(k))) {
    savedKeys[key] = process.env[key];
    delete process.env[key];
  }
});
afterAll(() => {
  for (const [key, value] of Object.entries(savedKeys)) if (value !== undefined) process.env[key] = value;
});
afterEach(() => {
  process.chdir(home);
  vi.restoreAllMocks();
});

let cases = 0;
/** A fresh working directory with a few files the arguments can name. */
function workdir(): string {
  const cwd = join(root, `case-${cases++}`);
  mkdirSync(cwd);
  writeFileSync(join(cwd, 'script.json'), JSON.stringify({ steps: [{ protocol: { kind: 'answer', message: 'ok' } }] }));
  writeFileSync(
    join(cwd, 'act.json'),
    JSON.stringify({ kind: 'act', calls: [{ id: 'a', type: 'tool', name: 'read' }] }),
  );
  writeFileSync(join(cwd, 'junk.json'), '{"steps": [');
  writeFileSync(join(cwd, 'transcript.json'), JSON.stringify({ turns: [{ kind: 'user', text: 'hi' }] }));
  writeFileSync(join(cwd, 'oar.config.json'), JSON.stringify({ model: 'script:script.json' }));
  writeFileSync(join(cwd, 'bad.config.json'), JSON.stringify({ model: 5, nope: true }));
  mkdirSync(join(cwd, 'dir'));
  return cwd;
}

/** The real ids and store the placeholders (REAL below) stand for; made in beforeAll. */
const real: Record<string, string> = {};

beforeAll(async () => {
  // main() imports what a command needs when the command runs (a fast `oar --help`): import it once here, so the
  // 20 s bound of each run below is about the command, not about the first load of the engine.
  await Promise.all([
    import('../src/runtime-actions.js'),
    import('../src/session-driver.js'),
    import('../src/io.js'),
    import('@oar/runtime'),
    import('@oar/protocol'),
  ]);
  const shared = join(root, 'shared');
  mkdirSync(shared);
  const store = join(shared, 'oar.db');
  const write = { id: 'w1', type: 'tool', name: 'write', args: { filePath: 'out.txt', content: 'hi\n' } };
  writeFileSync(
    join(shared, 'waits.json'),
    JSON.stringify({
      steps: [{ protocol: { kind: 'act', calls: [write] } }, { protocol: { kind: 'answer', message: 'written' } }],
    }),
  );
  writeFileSync(
    join(shared, 'answers.json'),
    JSON.stringify({ steps: [{ protocol: { kind: 'answer', message: 'hi' } }] }),
  );
  const waiting = await inProcess(['run', '--json', '--store', store, '--model', 'script:waits.json', 'write'], shared);
  const done = await inProcess(['run', '--json', '--store', store, '--model', 'script:answers.json', 'hello'], shared);
  expect(waiting.code, waiting.stderr).toBe(3);
  expect(done.code, done.stderr).toBe(0);
  const events = (out: string) =>
    out
      .split('\n')
      .filter((l) => l.startsWith('{"type"'))
      .map((l) => JSON.parse(l) as { type: string; sessionId: string; actionId?: string });
  real.SESSION_WAITING = events(waiting.stdout)[0]?.sessionId ?? '';
  real.SESSION_DONE = events(done.stdout)[0]?.sessionId ?? '';
  real.ACTION_PENDING = events(waiting.stdout).find((e) => e.type === 'action.required')?.actionId ?? '';
  real.SHARED_STORE = store;
  expect(Object.values(real).every(Boolean), JSON.stringify(real)).toBe(true);
}, 120_000);

/** argv with the placeholders replaced by the real ids and store. */
const concrete = (argv: string[]) =>
  argv.map((a) => a.replace(/SESSION_WAITING|SESSION_DONE|ACTION_PENDING|SHARED_STORE/g, (m) => real[m] ?? m));

// ----- generators ----------------------------------------------------------------------------------------------

/** A word without "/" (so no path leaves the case's directory) and never "-" alone (standard input). */
const word = fc.string({ maxLength: 12 }).map((s) => s.replaceAll('/', '_').replace(/^-$/, '_'));
const value = fc.oneof(
  fc.constantFrom(
    'script.json',
    'script:script.json',
    'script:junk.json',
    'script:missing.json',
    'openai:gpt-4.1',
    'nope:model',
    'act.json',
    'junk.json',
    'transcript.json',
    'bad.config.json',
    'oar.config.json',
    'missing.json',
    'dir',
    'dir/x.db',
    'mysql://u@h/db',
    'postgres://postgres@127.0.0.1:1/nope',
    'ses_nope',
    'act_nope',
    'thr_nope',
    'approve',
    'deny',
    'approve_for_session',
    'maybe',
    'allow',
    'proc_nope',
    '{}',
    '{"filePath": "script.json"}',
    'tool',
    'text',
    'full',
    'hybrid',
    'default',
    'bypass',
    'carrier',
    'dsl',
    'event',
    'snapshot',
    '0',
    '-1',
    '3.5',
    '1e9',
    'NaN',
    '',
    ' ',
  ),
  word,
);
/** Flags that take a value. */
const VALUED = new Set([
  '--store',
  '--config',
  '--model',
  '--workspace',
  '--session',
  '--agent',
  '--runner',
  '--attach',
  '--title',
  '--after',
  '--reason',
  '--text',
  '--thread',
  '--out',
  '--permission-mode',
  '--carrier',
  '--catalog',
  '--history',
  '--mode',
  '--budget',
  '--turn-cost',
  '--session-tokens',
  '--on-exceeded',
  '--low-at',
  '--turn',
  '--task',
  '--input',
  '--wait',
  '--at',
  '--id',
]);
const STORE = ['--store', '--config'];
/** Each command with its positionals (how many, at most) and its own options, so most cases get past the parser. */
const COMMANDS: { command: string[]; positionals: [number, number]; options: string[] }[] = [
  {
    command: ['run'],
    positionals: [1, 1],
    options: [
      ...STORE,
      '--model',
      '--agent',
      '--runner',
      '--workspace',
      '--session',
      '--json',
      '--approve-all',
      '--deny-all',
      '--title',
      '--attach',
    ],
  },
  { command: ['resume'], positionals: [0, 2], options: [...STORE, '--all', '--json', '--approve-all', '--deny-all'] },
  { command: ['respond'], positionals: [3, 3], options: [...STORE, '--reason', '--text', '--json'] },
  { command: ['interrupt'], positionals: [1, 1], options: [...STORE, '--thread', '--reason', '--json'] },
  {
    command: ['limit'],
    positionals: [1, 1],
    options: [...STORE, '--turn-cost', '--session-tokens', '--on-exceeded', '--low-at', '--reason', '--json'],
  },
  { command: ['session', 'show'], positionals: [1, 1], options: STORE },
  {
    command: ['session', 'update'],
    positionals: [1, 1],
    options: [...STORE, '--model', '--workspace', '--permission-mode', '--from-config', '--json'],
  },
  { command: ['sessions'], positionals: [0, 0], options: [...STORE, '--json'] },
  { command: ['events'], positionals: [1, 1], options: [...STORE, '--json', '--after'] },
  { command: ['inspect'], positionals: [1, 1], options: [...STORE, '--json'] },
  { command: ['environment'], positionals: [1, 1], options: [...STORE, '--json', '--thread'] },
  { command: ['replay'], positionals: [1, 1], options: [...STORE, '--repair'] },
  {
    command: ['permission', 'evaluate'],
    positionals: [2, 2],
    options: [...STORE, '--input', '--thread', '--turn', '--json'],
  },
  {
    command: ['permission', 'resolve'],
    positionals: [3, 3],
    options: [...STORE, '--for-session', '--reason', '--json'],
  },
  {
    command: ['process', 'write'],
    positionals: [2, 3],
    options: [...STORE, '--close', '--reason', '--wait', '--json'],
  },
  { command: ['process', 'terminate'], positionals: [2, 2], options: [...STORE, '--reason', '--wait', '--json'] },
  { command: ['fork'], positionals: [1, 1], options: [...STORE, '--at', '--id', '--title', '--json'] },
  {
    command: ['export'],
    positionals: [1, 1],
    options: [...STORE, '--evidence', '--out', '--review', '--thread', '--turn', '--task', '--markdown'],
  },
  {
    command: ['protocol', 'check'],
    positionals: [0, 0],
    options: ['--carrier', '--catalog', '--history', '--allow-plain', '--no-validate'],
  },
  { command: ['protocol', 'transcript'], positionals: [0, 0], options: ['--mode', '--budget'] },
  { command: ['schema'], positionals: [1, 1], options: [] },
  { command: ['runners', 'list'], positionals: [0, 0], options: ['--config', '--json'] },
  { command: ['demo'], positionals: [0, 0], options: ['--store', '--json'] },
];
const ANY_OPTIONS = [...VALUED, '--json', '--all', '--help', '--version', '-h', '-V', '--bogus', '-x', '--'];

/**
 * Placeholders replaced when a case runs: a real session (waiting for a decision, or answered), its pending
 * decision, and the store that holds them (see beforeAll).
 */
const REAL = ['SESSION_WAITING', 'SESSION_DONE', 'ACTION_PENDING', 'SHARED_STORE'];
const arg = fc.oneof({ arbitrary: fc.constantFrom(...REAL), weight: 2 }, { arbitrary: value, weight: 3 });
const option = (names: string[]) =>
  fc
    .tuple(fc.constantFrom(...names), arg, fc.boolean())
    .map(([name, v, inline]) => (VALUED.has(name) ? (inline ? [`${name}=${v}`] : [name, v]) : [name]));

const argvArb = fc
  .oneof(...COMMANDS.map((spec) => ({ arbitrary: fc.constant(spec), weight: spec.command[0] === 'demo' ? 1 : 8 })))
  .chain((spec) =>
    fc
      .record({
        positionals: fc.array(arg, { minLength: spec.positionals[0], maxLength: spec.positionals[1] }),
        options: fc.array(spec.options.length > 0 ? option(spec.options) : fc.constant<string[]>([]), {
          maxLength: 4,
        }),
        noise: fc.oneof(
          { arbitrary: fc.constant<string[][]>([]), weight: 4 },
          {
            arbitrary: fc.array(
              fc.oneof(
                option(ANY_OPTIONS),
                arg.map((a) => [a]),
              ),
              { minLength: 1, maxLength: 2 },
            ),
            weight: 1,
          },
        ),
        file: fc.constantFrom('act.json', 'junk.json', 'transcript.json', 'missing.json', 'dir'),
      })
      .map(({ positionals, options, noise, file }) => {
        const argv = [...spec.command, ...positionals, ...options.flat(), ...noise.flat()];
        // Protocol commands read standard input without a file: give them one (see the comment at the top).
        if (spec.command[0] === 'protocol') argv.push(file);
        return argv;
      }),
  );
/** Anything at all: random words and flags, any command or none. */
const wildArgv = fc
  .array(
    fc.oneof(
      option(ANY_OPTIONS),
      arg.map((a) => [a]),
      word.map((w) => [w]),
    ),
    { maxLength: 5 },
  )
  .map((parts) => parts.flat());

// ----- checks --------------------------------------------------------------------------------------------------

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The documented exit code; on an error exit (2, 74, 75), exactly one structured error on stderr. 0, 1, 3 and 130
 * report a result (on stdout), so their stderr may carry notes.
 */
function wellBehaved(argv: string[], outcome: Outcome): void {
  const context = `oar ${JSON.stringify(argv)} → exit ${outcome.code}\nstderr: ${outcome.stderr}`;
  expect(DOCUMENTED_EXITS, context).toContain(outcome.code);
  if ([0, 1, 3, 130].includes(outcome.code ?? -1)) return;
  const lines = outcome.stderr.trim().split('\n');
  expect(lines, context).toHaveLength(1);
  let parsed: { error?: { code?: unknown; message?: unknown; retryable?: unknown } };
  try {
    parsed = JSON.parse(lines[0] ?? '');
  } catch {
    throw new Error(`stderr is not a structured error: ${context}`);
  }
  expect(parsed.error?.code, context).toEqual(expect.stringMatching(/^[a-z][a-z0-9_]*$/));
  expect(typeof parsed.error?.message, context).toBe('string');
  expect(typeof parsed.error?.retryable, context).toBe('boolean');
}

/** Run `main(argv)` in this process, in `cwd`, capturing what it writes. */
async function inProcess(argv: string[], cwd: string): Promise<Outcome> {
  let stdout = '';
  let stderr = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout += chunk.toString();
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stderr += chunk.toString();
    return true;
  });
  process.chdir(cwd);
  let timer: NodeJS.Timeout | undefined;
  try {
    const hang = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`oar ${JSON.stringify(argv)} did not finish in 20 s`)), 20_000);
    });
    const code = await Promise.race([main(argv), hang]);
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
    process.chdir(home);
    vi.restoreAllMocks();
  }
}

describe('random command lines', () => {
  it('in-process: a documented exit code, and a structured error for every usage error', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof({ arbitrary: argvArb, weight: 5 }, { arbitrary: wildArgv, weight: 1 }),
        async (generated) => {
          const argv = concrete(generated);
          const outcome = await inProcess(argv, workdir());
          wellBehaved(argv, outcome);
        },
      ),
      runs(200),
    );
  }, 300_000);

  it('through the binary (empty standard input): the same', () => {
    const samples = fc.sample(fc.oneof(argvArb, wildArgv), { seed: SEED, numRuns: 6 });
    for (const generated of [['protocol', 'check'], ['protocol', 'transcript', '-'], ...samples]) {
      const argv = concrete(generated);
      const cwd = workdir();
      const result = spawnSync(bin, argv, {
        cwd,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: 60_000,
      });
      const outcome = { code: result.status, stdout: result.stdout, stderr: result.stderr };
      wellBehaved(argv, outcome);
    }
  }, 300_000);

  it('a command group without its subcommand answers with one structured error', async () => {
    for (const argv of [[], ['session'], ['protocol'], ['permission'], ['process'], ['help', 'nope']]) {
      wellBehaved(argv, await inProcess(argv, workdir()));
    }
  });
});
