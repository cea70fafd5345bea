import { statSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The order test files start in (vitest.config.ts `sequence.sequencer`): longest first, across all projects.
 *
 * Vitest's own order runs one project after the other (alphabetically), so every end-to-end file of packages/cli
 * starts at once and the last file to start may be one that takes minutes, with the other workers idle meanwhile.
 * Starting the longest files first keeps every worker busy to the end. The files named in `LONGEST` start first
 * (a clean clone, as in CI, has no record of durations); then files with no duration in Vitest's cache
 * (node_modules/.vite: new or renamed, they may be long), larger first; then the rest, longest last run first.
 * docs/testing.md lists the slowest files and the command that measures them.
 */
export const LONGEST = [
  // npm-installs the packed packages, compiling better-sqlite3: mostly one compiler process.
  'packages/cli/test/packaging.test.ts',
  // The two files that race several `oar` processes against lease expiry, with the console's Chromium between
  // them: with two workers they do not run at the same time while the packaging test holds the other worker.
  'packages/cli/test/scale-out.test.ts',
  'packages/console/test/console.e2e.test.ts',
  'packages/cli/test/leases-cli.test.ts',
];

export class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const root = this.ctx.config.root;
    const path = (spec: TestSpecification) => relative(root, spec.moduleId);
    const lastDuration = (spec: TestSpecification) =>
      this.ctx.cache.getFileTestResults(`${spec.project.name}:${path(spec)}`)?.duration;
    // Sort keys [tier, rank], compared in turn (see above).
    const key = (spec: TestSpecification): [number, number] => {
      const at = LONGEST.indexOf(path(spec));
      if (at >= 0) return [0, at];
      const duration = lastDuration(spec);
      return duration === undefined ? [1, -statSync(spec.moduleId).size] : [2, -duration];
    };
    const keys = new Map(files.map((spec) => [spec, key(spec)]));
    return [...files].sort((a, b) => {
      const [aTier, aRank] = keys.get(a) as [number, number];
      const [bTier, bRank] = keys.get(b) as [number, number];
      return aTier - bTier || aRank - bRank;
    });
  }
}
