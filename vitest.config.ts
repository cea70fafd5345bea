import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { LongestFirst } from './scripts/vitest-sequencer.js';

/**
 * The suite is one project per package (`npx vitest run --project cli`), all in one pool of workers.
 * docs/testing.md says how it is organised and where its time goes.
 *
 * Workers: one more than the cores (three on two). Vitest's default, one fewer than the cores, is ONE worker on a
 * 2-core machine, every file after the other, while much of the suite's time is waiting (on PostgreSQL, sockets, a
 * child's timeout, lease expiry, the absence windows). Measured on an idle 2-core machine (docs/testing.md): two
 * workers kept 1.68 cores busy, three 1.85, and took the run from 540 s to 418–477 s. OAR_TEST_WORKERS overrides it
 * (1: file after file, easier to read when debugging).
 */
const WORKERS = Number(process.env.OAR_TEST_WORKERS) || availableParallelism() + 1;

/** A project for one package's (or the examples') tests, inheriting the settings below. */
const project = (
  name: string,
  include: string[],
  extra: { isolate?: boolean; testTimeout?: number; hookTimeout?: number } = {},
) => ({
  extends: true as const,
  test: { name, include, ...extra },
});

export default defineConfig({
  test: {
    testTimeout: 30_000,
    // Hooks do a test's kind of work (compile the published schemas, open stores, start servers): the same limit.
    hookTimeout: 30_000,
    // Every event the runtime writes is checked against the OAR profile (production skips it: see event-log.ts).
    env: { OAR_VALIDATE_EVENTS: '1' },
    // The JSON report lets .ci/run print one plain "N passed, N failed" line that CI can read, and
    // scripts/test-times.mjs read where the time went.
    reporters: ['default', 'json'],
    outputFile: { json: 'node_modules/.cache/oar/vitest-results.json' },
    // Builds the `oar` binary and the example CLIs once, before any file runs (a no-op when they are current).
    globalSetup: ['./scripts/vitest-global-setup.ts'],
    pool: 'forks',
    maxWorkers: WORKERS,
    // The longest files start first, whatever their project (see the sequencer).
    sequence: { sequencer: LongestFirst },
    projects: [
      // Pure functions and schemas: no temporary directories, stores or processes, nothing a file leaves behind for
      // the next, so one worker process runs many files without re-importing the package for each.
      project('protocol', ['packages/protocol/test/**/*.test.ts'], { isolate: false }),
      project('runner-sdk', ['packages/runner-sdk/test/**/*.test.ts']),
      project('tool-cli', ['packages/tool-cli/test/**/*.test.ts']),
      project('runtime', ['packages/runtime/test/**/*.test.ts']),
      project('server', ['packages/server/test/**/*.test.ts']),
      project('console', ['packages/console/test/**/*.test.ts']),
      // Real `oar` processes, several per test: on a loaded machine a test that takes 12 s idle took over 30 s
      // (compact-cli, in CI). The limit still only catches hangs.
      project('cli', ['packages/cli/test/**/*.test.ts'], { testTimeout: 90_000, hookTimeout: 90_000 }),
      project('examples', ['examples/*/test/**/*.test.ts']),
    ],
  },
});
