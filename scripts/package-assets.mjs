// Fills what a published package ships from outside its own folder: `node scripts/package-assets.mjs [NAME…]`
// (NAME: a folder under packages/; none: every public package). Run by the root `npm run build` (so `oar serve` and
// `oar demo --tools business` find the same files in this repository as in an installed package) and by each
// package's `prepack` (so `npm pack` / `npm publish` always ship fresh copies). The copies are git-ignored.
//   - every public package: the repository's LICENSE (npm ships a package folder's LICENSE whatever `files` says);
//   - server: the web console's built files (packages/console/dist → packages/server/console), served by `oar serve`;
//   - cli: the `oar` binary's bundle (packages/cli/bundle, see bundleCli), and the example business CLI
//     (examples/business-cli: its built modules and skills) that `oar demo --tools business` runs behind project_cli.
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
import { dirname, join, relative, resolve } from 'node:path';

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
 * Make the folder `to` hold exactly `wanted` (relative path → bytes). An identical folder is left alone, so packing
 * after a build writes nothing under a process that reads it (`oar serve`, a running demo, an `oar` process of a
 * test); a changed one is built beside it and swapped in by two renames, never emptied in place.
 */
function replaceWithFiles(wanted, to) {
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

/** Make `to` a copy of `from` (only the files `keep` accepts). */
function replaceWith(from, to, keep = () => true) {
  replaceWithFiles(filesOf(from, keep), to);
}

/**
 * Those dependencies stay outside the `oar` binary's bundle and are loaded from node_modules: better-sqlite3 is a
 * native addon, re2js is loaded by path into the pattern-matching worker (runtime/src/tools/match-worker.ts), pg
 * requires its optional native binding, and OpenTelemetry (its SDK loaded only when OTEL_* turns tracing on) keeps its
 * global state. Each is a dependency of @oar/cli for that reason.
 */
const BUNDLE_EXTERNAL = [
  'better-sqlite3',
  're2js',
  'pg',
  '@opentelemetry/api',
  '@opentelemetry/sdk-trace-base',
  '@opentelemetry/exporter-trace-otlp-http',
];

/**
 * The `oar` binary's bundle (packages/cli/bundle, run by bin/oar.js): src/bin.ts and every module it imports, in
 * one file per lazily imported part (`splitting`), so `oar --version` still loads no runtime. Built from tsc's
 * output (dist/), which must be current. CommonJS dependencies inside an ES module bundle call `require` for Node's
 * built-ins: the banner gives them one.
 */
const BUNDLE_META = 'packages/cli/bundle.meta.json';

async function bundleCli() {
  const entry = join(root, 'packages/cli/dist/bin.js');
  if (!existsSync(entry)) fail(`the cli is not built (${entry}): run \`npm run build\` first`);
  const { build } = await import('esbuild');
  const outdir = join(root, 'packages/cli/bundle');
  const result = await build({
    absWorkingDir: root,
    entryPoints: { oar: entry },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    outdir,
    chunkNames: 'chunks/[name]-[hash]',
    external: BUNDLE_EXTERNAL,
    banner: {
      js: "import { createRequire as __oarRequire } from 'node:module'; const require = __oarRequire(import.meta.url);",
    },
    legalComments: 'none',
    logLevel: 'error',
    write: false,
    metafile: true,
  });
  const files = new Map(result.outputFiles.map((file) => [relative(outdir, file.path), Buffer.from(file.contents)]));
  replaceWithFiles(files, outdir);
  // Which modules went into which file (paths relative to the repository), for the test that checks what a command
  // loads (packages/cli/test/usage-cli.test.ts). Not shipped.
  writeFileSync(join(root, BUNDLE_META), JSON.stringify(result.metafile));
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
    return bundleCli();
  },
};

const names = process.argv.slice(2);
for (const name of names.length > 0 ? names : PUBLIC) {
  if (!PUBLIC.includes(name)) fail(`"${name}" is not a public package (${PUBLIC.join(', ')})`);
  cpSync(join(root, 'LICENSE'), join(root, 'packages', name, 'LICENSE'));
  await ASSETS[name]?.();
}
