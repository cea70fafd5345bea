import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/test/**/*.test.ts'],
    testTimeout: 30_000,
    // The JSON report lets .ci/run print one plain "N passed, N failed" line that CI can read.
    reporters: ['default', 'json'],
    outputFile: { json: 'node_modules/.cache/oar/vitest-results.json' },
  },
});
