import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts', 'examples/*/test/**/*.test.ts'],
    testTimeout: 30_000,
    // Every event the runtime writes is checked against the OAR profile (production skips it: see event-log.ts).
    env: { OAR_VALIDATE_EVENTS: '1' },
    // The JSON report lets .ci/run print one plain "N passed, N failed" line that CI can read.
    reporters: ['default', 'json'],
    outputFile: { json: 'node_modules/.cache/oar/vitest-results.json' },
  },
});
