import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { defineRunner, type Runner } from '@oar/runner-sdk';
import { describe, expect, it } from 'vitest';
import { discoverRunners, type RunnerPackage } from '../../src/runners/packages.js';
import { inProcessTransport } from '../../src/runners/transport.js';
import { tempDir } from '../support/temp-dirs.js';

/** Discovery: every package is asked with LIST_AGENT_RUNNERS; bad manifests and claimed ids are skipped, not fatal. */

const base = { label: { en_US: 'x' }, capabilities: {}, permissions: {}, context: {} };

/** A package directory (its oar-runner.json) and the runner it serves in-process, which lists `manifests` raw. */
function pkg(plugin: string, manifests: unknown[]): { dir: string; runner: Runner } {
  const dir = tempDir('oar-runner-pkg-');
  writeFileSync(join(dir, 'oar-runner.json'), JSON.stringify({ plugin, command: 'node', args: ['x.mjs'] }));
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
  return { dir, runner: raw };
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
    const found = await discoverRunners([a.dir, b.dir, missing], {}, (p: RunnerPackage) =>
      inProcessTransport(runners.get(p.dir) as Runner),
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
