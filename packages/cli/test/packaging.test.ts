import { type SpawnSyncReturns, spawn, spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  writeFileSync,
} from 'node:fs';
import { rm } from 'node:fs/promises';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outputOf, repoRoot, writeJson } from './cli-helpers.js';
import { readmeProgram } from './readme-program.js';

/**
 * The packages as a user gets them: every public package is packed (`npm run pack`, the packages' prepack
 * included), the tarballs are installed into a fresh project under os.tmpdir() — a folder that has never seen this
 * repository — and there the `oar` binary runs its version, both demos, `oar serve` with the console, and `oar init`;
 * README's embedding program type-checks (`tsc`, strict, library declarations included) and runs one turn on
 * SQLite with a scripted model. The packed manifests are checked too: files (no tests, fixtures or sources),
 * license, engines, exports, aligned versions, and every module a package imports at run time among its
 * dependencies.
 *
 * The npm cache is warm after `npm ci`, so `--prefer-offline` installs without the network; better-sqlite3's native
 * addon is the repository's own build (reuseSqliteAddon).
 */

interface PackedFile {
  path: string;
}
interface Packed {
  name: string;
  version: string;
  filename: string;
  files: PackedFile[];
}
interface Manifest {
  name: string;
  version: string;
  private?: boolean;
  license?: string;
  description?: string;
  repository?: { type: string; url: string; directory: string };
  engines?: { node?: string };
  bin?: Record<string, string>;
  types?: string;
  exports?: Record<string, unknown>;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

const rootManifest = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
  engines: { node: string };
  devDependencies: Record<string, string>;
};

/** The workspace packages under packages/ that are not private: what `npm run pack` must pack. */
const PUBLIC = readdirSync(join(repoRoot, 'packages'))
  .map((dir) => JSON.parse(readFileSync(join(repoRoot, 'packages', dir, 'package.json'), 'utf8')) as Manifest)
  .filter((manifest) => manifest.private !== true)
  .map((manifest) => manifest.name)
  .sort();

/**
 * npm's environment for a project outside the repository: an `npm test` run passes its own settings down
 * (npm_config_local_prefix names this repository; npm_package_* describe it), which would send the install back here.
 */
function npmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    const lower = key.toLowerCase();
    if (lower === 'init_cwd' || lower === 'npm_command' || lower === 'npm_config_local_prefix') continue;
    if (/^npm_(package|lifecycle)_|^npm_config_(workspace|include_workspace_root)/.test(lower)) continue;
    env[key] = value;
  }
  // better-sqlite3's prebuilt download is unreachable in CI: build it, as `npm ci` does (.ci/run).
  env.npm_config_build_from_source = 'true';
  return env;
}

/** How long each phase took, printed after the file (the figures of docs/testing.md come from here). */
const timings: Record<string, number> = {};

function run(label: string, command: string, args: string[], cwd: string, timeoutMs: number): SpawnSyncReturns<string> {
  const started = Date.now();
  const result = spawnSync(command, args, { cwd, env: npmEnv(), encoding: 'utf8', timeout: timeoutMs });
  timings[label] = Date.now() - started;
  return result;
}

function ok(result: SpawnSyncReturns<string>, what: string): string {
  if (result.status !== 0) {
    throw new Error(
      `${what} exited ${result.status} (${result.signal ?? 'no signal'}):\n${result.stdout}\n${result.stderr}`,
    );
  }
  return result.stdout;
}

function outside(dir: string): boolean {
  const path = relative(realpathSync(repoRoot), realpathSync(dir));
  return path.startsWith('..') || isAbsolute(path);
}

/**
 * The packages a module imports by name (not node: built-ins, not relative paths). A specifier is one word-like
 * token: SQL in a template (`i."from", …`) is not an import. In the `oar` binary's bundle, the inlined libraries keep
 * their doc comments (`* import { sql } from 'kysely'`): there only esbuild's own statements count, a top-level
 * `import … from "x";` line or an `import("x")` of an external.
 */
function importedPackages(source: string, bundled = false): Set<string> {
  const names = new Set<string>();
  const specifiers = bundled
    ? /^import\b[^\n]*?["']([@\w][\w./@-]*)["'];$|\bimport\("([@\w][\w./@-]*)"\)/gm
    : /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"]([@\w][\w./@-]*)['"]/g;
  for (const [, first, second] of source.matchAll(specifiers)) {
    const specifier = first ?? second;
    if (!specifier || specifier.startsWith('.') || specifier.startsWith('node:')) continue;
    const name = specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0];
    if (name && !builtinModules.includes(name)) names.add(name);
  }
  return names;
}

function modulesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return (readdirSync(dir, { recursive: true }) as string[])
    .filter((path) => path.endsWith('.js'))
    .map((path) => join(dir, path));
}

/**
 * better-sqlite3's native addon, taken from the repository's own install when the versions match (else rebuilt).
 * Compiling SQLite tests better-sqlite3, not OAR, and costs minutes of the suite's two cores; the files our packages
 * ship, their dependency tree and the resolution of every module are still the ones a user's install gets.
 */
function reuseSqliteAddon(project: string): void {
  const version = (dir: string) =>
    (JSON.parse(readFileSync(join(dir, 'better-sqlite3', 'package.json'), 'utf8')) as { version: string }).version;
  const ours = join(repoRoot, 'node_modules');
  const theirs = join(project, 'node_modules');
  const addon = join('better-sqlite3', 'build', 'Release', 'better_sqlite3.node');
  if (version(ours) === version(theirs) && existsSync(join(ours, addon))) {
    mkdirSync(dirname(join(theirs, addon)), { recursive: true });
    copyFileSync(join(ours, addon), join(theirs, addon));
    return;
  }
  ok(run('npm rebuild better-sqlite3', 'npm', ['rebuild', 'better-sqlite3'], project, 900_000), 'npm rebuild');
}

describe('the packed packages, installed outside the repository', () => {
  // Not tempDir(): removing an installed project takes longer than a hook's usual limit; see afterAll.
  const packs = mkdtempSync(join(tmpdir(), 'oar-packs-'));
  const project = mkdtempSync(join(tmpdir(), 'oar-project-'));
  let packed: Packed[] = [];
  const started = Date.now();

  beforeAll(() => {
    expect(outside(packs) && outside(project), `${packs} and ${project} must be outside ${repoRoot}`).toBe(true);
    const pack = run(
      'npm run pack',
      'npm',
      ['run', '--silent', 'pack', '--', '--pack-destination', packs, '--json'],
      repoRoot,
      300_000,
    );
    packed = JSON.parse(ok(pack, 'npm run pack')) as Packed[];

    // npm 11 lists dependencies' install scripts for approval (allowScripts); this one builds the SQLite driver.
    writeJson(project, 'package.json', {
      name: 'oar-consumer',
      private: true,
      type: 'module',
      allowScripts: { 'better-sqlite3': true },
    });
    const install = run(
      'npm install',
      'npm',
      [
        'install',
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        // Install scripts are skipped: the only one that matters, better-sqlite3's native build, is reused below.
        '--ignore-scripts',
        ...packed.map((entry) => join(packs, entry.filename)),
        // The TypeScript a user's project has (the repository's versions, so the npm cache has them), and the
        // declarations @ai-sdk/provider's types import without depending on them.
        `typescript@${rootManifest.devDependencies.typescript}`,
        `@types/node@${rootManifest.devDependencies['@types/node']}`,
        '@types/json-schema@^7.0.15',
      ],
      project,
      900_000,
    );
    ok(install, 'npm install');
    reuseSqliteAddon(project);
  }, 1_200_000);

  afterAll(async () => {
    timings.total = Date.now() - started;
    console.info(
      `[packaging] ${Object.entries(timings)
        .map(([label, ms]) => `${label}: ${(ms / 1000).toFixed(1)} s`)
        .join(', ')}`,
    );
    // A few hundred MB of node_modules, the compiled SQLite driver included.
    await Promise.all([packs, project].map((dir) => rm(dir, { recursive: true, force: true })));
  }, 600_000);

  it('packs every public package, with its license and without tests, fixtures or sources', () => {
    expect(packed.map((entry) => entry.name).sort()).toEqual(PUBLIC);
    for (const entry of packed) {
      const paths = entry.files.map((file) => file.path);
      expect(paths, entry.name).toContain('LICENSE');
      expect(paths, entry.name).toContain('package.json');
      const stray = paths.filter(
        (path) =>
          // The demo's sample workspace is a project of its own, src/ included: data, not this package's sources.
          (/(^|\/)(test|tests|fixtures|src)\//.test(path) && !path.startsWith('demo/workspace/')) ||
          /\.test\.|\.map$|tsbuildinfo$/.test(path) ||
          (path.endsWith('.ts') && !path.endsWith('.d.ts')),
      );
      expect(stray, entry.name).toEqual([]);
    }
    const files = (name: string) => packed.find((entry) => entry.name === name)?.files.map((file) => file.path) ?? [];
    expect(files('@oar/server')).toContain('console/index.html');
    expect(files('@oar/runtime')).toContain('schemas/oar.config.schema.json');
    expect(files('@oar/cli')).toEqual(
      expect.arrayContaining(['bin/oar.js', 'bundle/oar.js', 'demo/script.json', 'examples/business-cli/dist/cli.js']),
    );
  });

  it('has publishable manifests: one version, pinned internal dependencies, license, engines, exports', () => {
    const manifests = PUBLIC.map(
      (name) => JSON.parse(readFileSync(join(project, 'node_modules', name, 'package.json'), 'utf8')) as Manifest,
    );
    const version = manifests[0]?.version;
    for (const manifest of manifests) {
      expect(manifest.version, manifest.name).toBe(version);
      expect(manifest.license, manifest.name).toBe('Apache-2.0');
      expect(manifest.description, manifest.name).toBeTruthy();
      expect(manifest.engines?.node, manifest.name).toBe(rootManifest.engines.node);
      expect(manifest.repository?.directory, manifest.name).toBe(`packages/${manifest.name.slice('@oar/'.length)}`);
      expect(manifest.types, manifest.name).toBeTruthy();
      expect(manifest.exports?.['.'], manifest.name).toBeDefined();
      for (const [dependency, range] of Object.entries(manifest.dependencies ?? {})) {
        if (dependency.startsWith('@oar/')) expect(range, `${manifest.name} → ${dependency}`).toBe(version);
      }
    }
    expect(manifests.find((manifest) => manifest.name === '@oar/cli')?.bin).toEqual({ oar: './bin/oar.js' });
  });

  it('depends on every package its modules import at run time', () => {
    for (const name of PUBLIC) {
      const dir = join(project, 'node_modules', name);
      const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Manifest;
      const declared = new Set([name, ...Object.keys(manifest.dependencies ?? {})]);
      // bundle/: the `oar` binary's bundle, where what it does not inline (its externals) is imported by name.
      const modules = ['dist', 'bundle', 'bin', 'examples'].flatMap((folder) => modulesUnder(join(dir, folder)));
      const missing = new Set<string>();
      for (const file of modules) {
        const bundled = relative(dir, file).startsWith('bundle');
        for (const imported of importedPackages(readFileSync(file, 'utf8'), bundled)) {
          if (!declared.has(imported)) missing.add(`${imported} (${relative(dir, file)})`);
        }
      }
      expect([...missing], name).toEqual([]);
    }
  });

  it('installs the tarballs themselves: nothing links into the repository', () => {
    const lock = readFileSync(join(project, 'package-lock.json'), 'utf8');
    expect(lock).not.toContain(realpathSync(repoRoot));
    const manifest = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as Manifest;
    for (const spec of Object.values(manifest.dependencies ?? {})) {
      if (spec.startsWith('file:')) expect(spec).toMatch(/^file:.*\.tgz$/);
    }
    for (const name of PUBLIC) {
      const installed = realpathSync(join(project, 'node_modules', name));
      expect(relative(realpathSync(project), installed).startsWith('node_modules'), installed).toBe(true);
    }
  });

  it('runs `npx oar --version`', () => {
    const result = run('oar --version', 'npx', ['--no-install', 'oar', '--version'], project, 60_000);
    const cli = JSON.parse(readFileSync(join(repoRoot, 'packages/cli/package.json'), 'utf8')) as Manifest;
    expect(ok(result, 'oar --version').trim()).toBe(cli.version);
  }, 120_000);

  it('runs `npx oar demo`', () => {
    const result = run('oar demo', 'npx', ['--no-install', 'oar', 'demo'], project, 180_000);
    const stdout = ok(result, 'oar demo');
    expect(stdout).toContain(`The full record is the event log of session`);
    // The demo's approved write landed in its copy of the sample workspace, in this project.
    expect(existsSync(join(project, '.oar/demo-workspace/REVIEW.md'))).toBe(true);
  }, 300_000);

  it('runs `npx oar demo --tools business` with the business CLI the package ships', () => {
    const result = run(
      'oar demo --tools business',
      'npx',
      ['--no-install', 'oar', 'demo', '--tools', 'business'],
      project,
      180_000,
    );
    const stdout = ok(result, 'oar demo --tools business');
    expect(stdout).toContain('project_cli');
    expect(existsSync(join(project, '.oar/demo-business/business.db'))).toBe(true);
  }, 300_000);

  it('serves the web console that @oar/server ships', async () => {
    const child = spawn(join(project, 'node_modules/.bin/oar'), ['serve', '--port', '0'], {
      cwd: project,
      env: npmEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output = outputOf(child);
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const check = () => {
          const match = /serving at (http:\/\/\S+)/.exec(stdout);
          // The banner is one write: the URL, the console, the API and the key come together.
          if (match?.[1] && /API:/.test(stdout)) return resolve(match[1]);
          if (child.exitCode !== null) return reject(new Error(`oar serve exited ${child.exitCode}: ${stdout}`));
          setTimeout(check, 50);
        };
        check();
      });
      expect(stdout).toContain(`console: ${url}/`);
      const page = await fetch(`${url}/`);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<div id="app">');
    } finally {
      child.kill('SIGTERM');
      await output;
    }
  }, 120_000);

  it('runs `oar init`, then README’s embedding program type-checks and runs one turn on SQLite', () => {
    ok(run('oar init', 'npx', ['--no-install', 'oar', 'init'], project, 60_000), 'oar init');
    const config = JSON.parse(readFileSync(join(project, 'oar.config.json'), 'utf8')) as { $schema: string };
    expect(config.$schema).toBe('./node_modules/@oar/runtime/schemas/oar.config.schema.json');
    expect(existsSync(join(project, config.$schema))).toBe(true);

    const program = readmeProgram();
    writeFileSync(join(project, 'main.mts'), program);
    writeFileSync(join(project, 'main.mjs'), program);
    writeJson(project, 'tsconfig.json', {
      compilerOptions: {
        module: 'nodenext',
        target: 'es2022',
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        types: ['node'],
      },
      files: ['main.mts'],
    });
    ok(run('tsc --noEmit', 'npx', ['--no-install', 'tsc', '-p', '.'], project, 300_000), 'tsc');

    writeJson(project, 'hello.json', {
      steps: [
        {
          protocol: {
            kind: 'act',
            calls: [{ id: 'manifest', type: 'tool', name: 'read', args: { filePath: 'package.json' } }],
          },
        },
        { protocol: { kind: 'answer', message: 'A project that uses OAR.' } },
      ],
    });
    const turn = run('node main.mjs', process.execPath, ['main.mjs', 'script:hello.json'], project, 120_000);
    const stdout = ok(turn, 'node main.mjs');
    expect(stdout).toContain('tool.result');
    expect(stdout).toContain('turn.completed');
    expect(stdout).toMatch(/status:\s*'completed'/);
    expect(stdout).toContain('A project that uses OAR.');
    expect(existsSync(join(project, '.oar/oar.db'))).toBe(true);
  }, 600_000);
});
