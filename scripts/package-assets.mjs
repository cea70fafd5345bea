// Fills what a published package ships from outside its own folder: `node scripts/package-assets.mjs [NAME…]`
// (NAME: a folder under packages/; none: every public package). Run by the root `npm run build` (so `oar serve` and
// `oar demo --tools business` find the same files in this repository as in an installed package) and by each
// package's `prepack` (so `npm pack` / `npm publish` always ship fresh copies). The copies are git-ignored.
//   - every public package: the repository's LICENSE (npm ships a package folder's LICENSE whatever `files` says);
//   - server: the web console's built files (packages/console/dist → packages/server/console), served by `oar serve`;
//   - cli: the example business CLI (examples/business-cli: its built modules and skills) that
//     `oar demo --tools business` runs behind project_cli.
import {
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const PUBLIC = ['protocol', 'runtime', 'server', 'cli', 'runner-sdk', 'tool-cli'];

function fail(message) {
  console.error(`package-assets: ${message}`);
  process.exit(1);
}

/** The files under `dir` that `keep` accepts, by relative path, with their bytes. */
function filesOf(dir, keep) {
  const files = new Map();
  if (!existsSync(dir)) return files;
  for (const path of readdirSync(dir, { recursive: true })) {
    const full = join(dir, path);
    if (statSync(full).isFile() && keep(full)) files.set(path, readFileSync(full));
  }
  return files;
}

/**
 * Make `to` a copy of `from` (only the files `keep` accepts). An identical copy is left alone, so packing after a
 * build writes nothing under a process that reads it (`oar serve`, a running demo); a changed one is built beside
 * it and swapped in by two renames, never emptied in place.
 */
function replaceWith(from, to, keep = () => true) {
  const wanted = filesOf(from, keep);
  const present = filesOf(to, () => true);
  const same = wanted.size === present.size && [...wanted].every(([path, bytes]) => present.get(path)?.equals(bytes));
  if (same) return;
  const next = `${to}.next`;
  const old = `${to}.old`;
  rmSync(next, { recursive: true, force: true });
  rmSync(old, { recursive: true, force: true });
  mkdirSync(next, { recursive: true });
  for (const [path, bytes] of wanted) {
    mkdirSync(dirname(join(next, path)), { recursive: true });
    writeFileSync(join(next, path), bytes);
  }
  if (existsSync(to)) renameSync(to, old);
  renameSync(next, to);
  rmSync(old, { recursive: true, force: true });
}

const ASSETS = {
  server: () => {
    const dist = join(root, 'packages/console/dist');
    if (!existsSync(join(dist, 'index.html'))) fail(`the console is not built (${dist}): run \`npm run build\` first`);
    replaceWith(dist, join(root, 'packages/server/console'));
  },
  cli: () => {
    const example = join(root, 'examples/business-cli');
    if (!existsSync(join(example, 'dist/cli.js'))) {
      fail(`the example business CLI is not built (${example}/dist): run \`npm run build\` first`);
    }
    const target = join(root, 'packages/cli/examples/business-cli');
    // Only what runs: the compiled modules (no declarations, no source maps into sources that are not shipped).
    replaceWith(join(example, 'dist'), join(target, 'dist'), (source) => !/\.(d\.ts|map)$/.test(source));
    replaceWith(join(example, 'skills'), join(target, 'skills'));
  },
};

const names = process.argv.slice(2);
for (const name of names.length > 0 ? names : PUBLIC) {
  if (!PUBLIC.includes(name)) fail(`"${name}" is not a public package (${PUBLIC.join(', ')})`);
  cpSync(join(root, 'LICENSE'), join(root, 'packages', name, 'LICENSE'));
  ASSETS[name]?.();
}
