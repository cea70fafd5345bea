import { mkdirSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { defineRunner, type Runner } from '@oar/runner-sdk';
import { describe, expect, it } from 'vitest';
import {
  boundRunner,
  discoverRunners,
  type RunnerPackage,
  readRunnerPackage,
} from '../../src/agent-runners/packages.js';
import { inProcessTransport } from '../../src/agent-runners/transport.js';
import { OarConfigSchema } from '../../src/config/oar-config.js';
import { OarRuntimeError } from '../../src/kernel/errors.js';
import { tempDir } from '../support/temp-dirs.js';

/** Discovery: every package is asked with LIST_AGENT_RUNNERS; bad manifests and claimed ids are skipped, not fatal. */

const base = { label: { en_US: 'x' }, capabilities: {}, permissions: {}, context: {} };

/** A package directory (its oar-runner.json) and the runner it serves in-process, which lists `manifests` raw. */
function pkg(plugin: string, manifests: unknown[]): { dir: string; runner: Runner } {
  const dir = tempDir('oar-runner-pkg-');
  writeFileSync(join(dir, 'oar-runner.json'), JSON.stringify({ plugin, command: 'node', args: ['x.mjs'] }));
  return { dir, runner: listing(manifests) };
}

/** A runner served in-process whose LIST answer is exactly `manifests`. */
function listing(manifests: unknown[]): Runner {
  const runner = defineRunner({ runners: [] });
  // A runner whose LIST answer is exactly `manifests`, valid or not (defineRunner would refuse bad ones).
  const raw: Runner = {
    ...runner,
    connect: (write, limits) => {
      const peer = runner.connect(write, limits);
      const receive = peer.receive.bind(peer);
      peer.receive = (line: string) => {
        const frame = JSON.parse(line) as { id: string; method?: string };
        if (frame.method === 'LIST_AGENT_RUNNERS')
          void write(JSON.stringify({ id: frame.id, kind: 'end', data: { runners: manifests } }));
        else receive(line);
      };
      return peer;
    },
  };
  return raw;
}

describe('runner discovery', () => {
  it('keeps valid runners and skips a bad manifest, a foreign id and a claimed id with diagnostics', async () => {
    const a = pkg('acme/tools', [
      { ...base, id: 'plugin:acme/tools/good', name: 'good' },
      { ...base, id: 'plugin:acme/tools/bad', name: 'bad', permissions: { models: ['fly'] } },
      { ...base, id: 'plugin:other/pkg/x', name: 'x' },
    ]);
    const b = pkg('acme/tools', [
      { ...base, id: 'plugin:acme/tools/good', name: 'good' },
      { ...base, id: 'plugin:acme/tools/second', name: 'second' },
    ]);
    const missing = tempDir('oar-runner-none-');
    const runners = new Map([
      [a.dir, a.runner],
      [b.dir, b.runner],
    ]);
    const found = await discoverRunners(
      [a.dir, b.dir, missing],
      {},
      {
        transportOf: (p: RunnerPackage) => inProcessTransport(runners.get(p.dir) as Runner),
      },
    );
    expect(found.runners.map((r) => [r.id, r.package])).toEqual([
      ['plugin:acme/tools/good', a.dir],
      ['plugin:acme/tools/second', b.dir],
    ]);
    expect(found.diagnostics).toEqual([
      {
        package: a.dir,
        runner: 'plugin:acme/tools/bad',
        pointer: '/runners/1/permissions/models/0',
        reason: expect.any(String),
      },
      {
        package: a.dir,
        runner: 'plugin:other/pkg/x',
        pointer: '/runners/2/id',
        reason: expect.stringContaining('acme/tools'),
      },
      { package: b.dir, runner: 'plugin:acme/tools/good', pointer: '/id', reason: expect.stringContaining(a.dir) },
      { package: missing, pointer: '', reason: expect.stringContaining('oar-runner.json') },
    ]);
  });
});

describe('a runner that cannot start', () => {
  it('is skipped with the error line of its stderr, redacted', async () => {
    const dir = tempDir('oar-runner-broken-');
    writeFileSync(
      join(dir, 'oar-runner.json'),
      JSON.stringify({ plugin: 'acme/broken', command: 'node', args: ['x.mjs'] }),
    );
    writeFileSync(
      join(dir, 'x.mjs'),
      "console.error('loading'); throw new Error('boom: token sk-proj-Qw3eRt5yUi7oPa9sDf1gHj2kLz4xCv6bNm8');\n",
    );
    const found = await discoverRunners([dir], process.env);
    expect(found.runners).toEqual([]);
    expect(found.diagnostics[0]?.reason).toMatch(/LIST_AGENT_RUNNERS failed: .*stderr: .*Error: boom/);
    expect(found.diagnostics[0]?.reason).not.toContain('sk-proj-Qw3eRt5yUi7oPa9sDf1gHj2kLz4xCv6bNm8');
  });
});

/** Write `files` (path → JSON value or text) under `root`. */
function files(root: string, tree: Record<string, unknown>): void {
  for (const [path, content] of Object.entries(tree)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), typeof content === 'string' ? content : JSON.stringify(content));
  }
}

describe('npm package entries (npm:<name>)', () => {
  it('resolves installed packages from node_modules with Node resolution and names a missing one', async () => {
    const project = tempDir('oar-runner-npm-');
    files(project, {
      // The manifest in package.json's oarRunner field; found from a sub-directory through the parent's node_modules.
      'node_modules/@acme/oar-runner-a/package.json': {
        name: '@acme/oar-runner-a',
        version: '1.0.0',
        oarRunner: { plugin: 'acme/a', command: 'node', args: ['runner.mjs'] },
      },
      // oar-runner.json, and `exports` that hide package.json from require.resolve.
      'node_modules/plain-runner/package.json': { name: 'plain-runner', exports: { '.': './index.js' } },
      'node_modules/plain-runner/index.js': '',
      'node_modules/plain-runner/oar-runner.json': { plugin: 'acme/plain', command: 'node', args: ['x.mjs'] },
      // Installed, but not a runner package.
      'node_modules/left-pad/package.json': { name: 'left-pad', version: '1.3.0' },
      // A bad oarRunner field.
      'node_modules/bad-runner/package.json': { name: 'bad-runner', oarRunner: { plugin: 'nope', command: 'node' } },
      // A broken oar-runner.json is an error, never replaced by the package.json field.
      'node_modules/broken-json/oar-runner.json': '{not json',
      'node_modules/broken-json/package.json': {
        name: 'broken-json',
        oarRunner: { plugin: 'acme/broken', command: 'node' },
      },
      'apps/web/.keep': '',
    });
    const baseDir = join(project, 'apps/web');
    const dirA = realpathSync(join(project, 'node_modules/@acme/oar-runner-a'));
    const dirPlain = realpathSync(join(project, 'node_modules/plain-runner'));
    const served = new Map([
      [dirA, listing([{ ...base, id: 'plugin:acme/a/one', name: 'one' }])],
      [dirPlain, listing([{ ...base, id: 'plugin:acme/plain/two', name: 'two' }])],
    ]);
    const started: string[] = [];
    const found = await discoverRunners(
      [
        'npm:@acme/oar-runner-a',
        'npm:@acme/missing',
        'npm:plain-runner',
        'npm:left-pad',
        'npm:bad-runner',
        'npm:Not A Name',
        'npm:broken-json',
      ],
      {},
      {
        baseDir,
        transportOf: (p: RunnerPackage) => {
          started.push(p.dir);
          return inProcessTransport(served.get(p.dir) as Runner);
        },
      },
    );
    // The others load; only resolved, valid packages are started.
    expect(found.runners.map((r) => [r.id, r.package])).toEqual([
      ['plugin:acme/a/one', dirA],
      ['plugin:acme/plain/two', dirPlain],
    ]);
    expect(started).toEqual([dirA, dirPlain]);
    expect(found.diagnostics).toEqual([
      {
        package: 'npm:@acme/missing',
        pointer: '',
        reason: `npm package @acme/missing is not installed in ${join(baseDir, 'node_modules')} or a parent's node_modules`,
      },
      { package: 'npm:left-pad', pointer: '', reason: expect.stringMatching(/oar-runner\.json.*"oarRunner" field/) },
      {
        package: 'npm:bad-runner',
        pointer: '/oarRunner/plugin',
        reason: expect.stringContaining('package.json "oarRunner"'),
      },
      { package: 'npm:Not A Name', pointer: '', reason: '"Not A Name" is not an npm package name' },
      {
        package: 'npm:broken-json',
        pointer: '',
        reason: expect.stringMatching(/^cannot read oar-runner\.json: .*JSON/),
      },
    ]);
  });

  it('is checked by the config schema: npm: needs a package name', () => {
    const ok = OarConfigSchema.safeParse({ runners: { packages: ['npm:@acme/oar-runner-a', 'npm:x', 'dir'] } });
    expect(ok.success).toBe(true);
    const bad = OarConfigSchema.safeParse({ runners: { packages: ['dir', 'npm:@Acme/A B'] } });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.path).toEqual(['runners', 'packages', 1]);
    expect(bad.error?.issues[0]?.message).toContain('npm package name');
  });

  it('records an npm-bound runner with its package directory, which reads back as the same package', async () => {
    const project = tempDir('oar-runner-npm-bind-');
    files(project, {
      'node_modules/@acme/oar-runner-a/package.json': {
        name: '@acme/oar-runner-a',
        oarRunner: { plugin: 'acme/a', command: 'node', args: ['runner.mjs'], description: 'A' },
      },
    });
    const dir = realpathSync(join(project, 'node_modules/@acme/oar-runner-a'));
    const byPlugin = await boundRunner({ id: 'plugin:acme/a/one', config: {} }, ['npm:@acme/oar-runner-a'], project);
    expect(byPlugin.package).toBe(dir);
    const named = await boundRunner(
      { id: 'plugin:acme/a/one', package: 'npm:@acme/oar-runner-a', config: {} },
      [],
      project,
    );
    expect(named.package).toBe(dir);
    // What a worker reads when the run starts: the manifest from package.json, started in the package's directory.
    expect(await readRunnerPackage(dir)).toEqual({
      plugin: 'acme/a',
      command: 'node',
      args: ['runner.mjs'],
      description: 'A',
      dir,
    });
    const missing = await boundRunner({ id: 'plugin:acme/b/x', package: 'npm:@acme/b', config: {} }, [], project).catch(
      (error: unknown) => error,
    );
    expect(missing).toBeInstanceOf(OarRuntimeError);
    expect((missing as OarRuntimeError).code).toBe('unknown_runner');
    expect((missing as OarRuntimeError).message).toContain('npm package @acme/b is not installed');
  });
});
