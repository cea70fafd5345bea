import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * Vitest's globalSetup (vitest.config.ts): build once, before any test file starts, what the end-to-end tests run
 * as real processes — the `oar` binary (packages/cli and the packages it depends on), the tool-cli SDK and the
 * example business CLI. `tsc -b` is incremental: after `npm test`'s typecheck (which builds the same projects) it
 * only checks that every output is current (about a second). No test file builds anything itself, so files running
 * side by side never race to write the same dist/ folder, and a bare `npx vitest run` never tests a stale binary.
 */
const root = join(import.meta.dirname, '..');
const PROJECTS = ['packages/cli', 'packages/tool-cli', 'examples/business-cli'];

export default function setup(): void {
  // Every project inherits this globalSetup (extends: true) and Vitest runs each project's in the one main process:
  // build on the first call only.
  const state = globalThis as { oarTestBuild?: true };
  if (state.oarTestBuild) return;
  state.oarTestBuild = true;
  try {
    execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-b', ...PROJECTS], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    // `oar demo --tools business` runs the copy of the business CLI the cli package ships: refresh it too.
    execFileSync(process.execPath, [join(root, 'scripts/package-assets.mjs'), 'cli'], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: Buffer; stderr?: Buffer };
    throw new Error(`building ${PROJECTS.join(', ')} for the end-to-end tests failed:\n${stdout}${stderr}`);
  }
}
