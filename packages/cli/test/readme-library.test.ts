import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { POSTGRES_URL, postgresUnavailable } from '../../runtime/test/support/stores.js';
import { repoRoot, tempDir } from './cli-helpers.js';
import { readmeProgram } from './readme-program.js';

/**
 * The README's embedding program ("Use OAR in your project"), run as written (only the store URL swapped for
 * PostgreSQL) in a real Node process: it must answer, and after `close()` no timer may keep the process alive (seen
 * before: the program hung for ~10 s on PostgreSQL before exiting, held by the pool's idle timers).
 */

function runSnippet(storeUrl?: string) {
  const cwd = tempDir('oar-readme-');
  mkdirSync(join(cwd, 'examples/scripts'), { recursive: true });
  cpSync(join(repoRoot, 'examples/scripts/read-and-answer.json'), join(cwd, 'examples/scripts/read-and-answer.json'));
  writeFileSync(join(cwd, 'README.md'), '# A project\n\nIt says hello.\n');
  let code = readmeProgram();
  if (storeUrl) code = code.replace(`Store.open('.oar/oar.db')`, `Store.open(${JSON.stringify(storeUrl)})`);
  // What still holds the event loop once the snippet has closed everything.
  code += `\nconsole.log('ACTIVE ' + JSON.stringify(process.getActiveResourcesInfo()));\n`;
  // Placed inside the repository so that '@oar/runtime' resolves to the workspace package.
  const dir = join(repoRoot, 'node_modules/.cache/oar');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `readme-snippet-${process.pid}-${Date.now()}.mjs`);
  writeFileSync(file, code);
  // The program takes its model spec as its argument: here the scripted model that reads README.md and answers.
  return spawnSync(process.execPath, [file, 'script:examples/scripts/read-and-answer.json'], {
    cwd,
    encoding: 'utf8',
    timeout: 60_000,
  });
}

function check(result: ReturnType<typeof runSnippet>) {
  expect(result.status, result.stderr).toBe(0);
  expect(result.stdout).toContain('turn.completed');
  expect(result.stdout).toMatch(/status:\s*'completed'/);
  // Sockets may still be closing at this point; a timer would hold the process (a pool's idle timeout did).
  const active = JSON.parse(/ACTIVE (.*)/.exec(result.stdout)?.[1] ?? '[]') as string[];
  expect(active.filter((resource) => /Timeout|Immediate/.test(resource))).toEqual([]);
}

describe('README library example', () => {
  it('runs as written on SQLite and leaves nothing running after close()', () => {
    check(runSnippet());
  });

  describe('on PostgreSQL', async () => {
    const unavailable = await postgresUnavailable();
    const inCi = process.env.CI === 'true' || process.env.CI === '1';
    if (unavailable && !inCi) {
      console.warn(`[oar tests] SKIPPING the README example on PostgreSQL: ${unavailable.message}`);
      it.skip('runs on PostgreSQL', () => undefined);
      return;
    }
    it('runs with a postgres:// store and leaves nothing running after close()', () => {
      if (unavailable) throw unavailable;
      const schema = `oar_readme_${process.pid}_${Date.now()}`;
      check(runSnippet(`${POSTGRES_URL}?schema=${schema}`));
    });
  });
});
