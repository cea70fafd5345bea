import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunnerTask } from 'vitest';
import { afterAll } from 'vitest';

/**
 * Temporary directories of one test file, removed after its last test (and after the file's own afterAll hooks,
 * which close the stores and runtimes in them: this hook is registered first, so it runs last). A file with a
 * failed test keeps them for inspection and prints where they are; a green run leaves nothing in os.tmpdir().
 *
 * Importing this module registers the hook for the importing test file (each test file has its own module
 * instance), so helpers that make directories (the engine harness, the CLI helpers) clean up for every file that
 * uses them.
 */
const created = new Set<string>();

/** A new directory under os.tmpdir(), removed after the current test file. */
export function tempDir(prefix = 'oar-test-'): string {
  return removeAfterFile(mkdtempSync(join(tmpdir(), prefix)));
}

/** Remove `dir` (made elsewhere) after the current test file; returns it. */
export function removeAfterFile(dir: string): string {
  created.add(dir);
  return dir;
}

function failed(task: RunnerTask): boolean {
  if (task.result?.state === 'fail') return true;
  return 'tasks' in task && task.tasks.some(failed);
}

// Vitest parses the first parameter as a fixture list: it must be an object pattern, even an empty one.
// biome-ignore lint/correctness/noEmptyPattern: see above
afterAll(({}, file) => {
  const dirs = [...created];
  created.clear();
  if (failed(file as RunnerTask)) {
    if (dirs.length > 0) console.warn(`a test failed: its temporary directories are kept:\n  ${dirs.join('\n  ')}`);
    return;
  }
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});
