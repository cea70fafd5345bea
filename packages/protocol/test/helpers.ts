import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

export function readRepoJson<T = unknown>(relative: string): T {
  return JSON.parse(readFileSync(resolve(repoRoot, relative), 'utf8')) as T;
}

export function readRepoText(relative: string): string {
  return readFileSync(resolve(repoRoot, relative), 'utf8');
}
