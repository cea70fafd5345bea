import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { repoRoot } from './cli-helpers.js';

/**
 * The embedding program of README's "Use OAR in your project", as written there: readme-library.test.ts runs it in
 * the workspace (SQLite and PostgreSQL), packaging.test.ts type-checks and runs it from the packed packages.
 */
export function readmeProgram(): string {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## Use OAR in your project'));
  const match = /```ts\n([\s\S]*?)```/.exec(section);
  if (!match?.[1]) throw new Error('README has no ts block under "## Use OAR in your project"');
  return match[1];
}
