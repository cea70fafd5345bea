import { type ChildProcessByStdio, type SpawnSyncReturns, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { removeAfterFile } from '../../runtime/test/support/temp-dirs.js';

export const repoRoot = resolve(import.meta.dirname, '../../..');
export const bin = resolve(repoRoot, 'node_modules/.bin/oar');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run the real `oar` binary in `cwd`. */
export function oarIn(cwd: string, args: string[], input?: string, env: NodeJS.ProcessEnv = {}): CliResult {
  const result: SpawnSyncReturns<string> = spawnSync(bin, args, {
    cwd,
    input,
    encoding: 'utf8',
    env: { ...process.env, ...env },
    timeout: 60_000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

export function spawnOar(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  return spawn(bin, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
}

/** The output and exit code of a spawned process, once it closes (this process's event loop keeps running). */
export function outputOf(child: ChildProcessByStdio<null, Readable, Readable>): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

/** A new directory under os.tmpdir(), removed after the test file (kept when one of its tests failed). */
export function tempDir(prefix = 'oar-cli-'): string {
  return removeAfterFile(mkdtempSync(join(tmpdir(), prefix)));
}

export function writeJson(dir: string, name: string, value: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(value, null, 2));
  return path;
}

/** NDJSON lines of `--json` output, without the trailing result line. */
export function ndjson(stdout: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}
export const FIXTURES = join(repoRoot, 'packages/cli/test/fixtures');
