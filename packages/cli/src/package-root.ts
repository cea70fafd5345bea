import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * This package's folder (the one with its package.json), where the files it ships beside its code live (demo/,
 * examples/). Found by walking up from the running module because the same code runs from two depths: `dist/*.js`
 * (tsc's output, the library export) and `bundle/*.js` (the `oar` binary's bundle, scripts/package-assets.mjs).
 */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${fileURLToPath(import.meta.url)}`);
    dir = parent;
  }
  return dir;
}
