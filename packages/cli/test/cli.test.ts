import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { removeAfterFile } from '../../runtime/test/support/temp-dirs.js';

const repoRoot = resolve(import.meta.dirname, '../../..');
const bin = resolve(repoRoot, 'node_modules/.bin/oar');

/** Runs the real installed `oar` binary (the workspace link npm creates), as a user would through npx. */
function oar(args: string[], input?: string) {
  const result = spawnSync(bin, args, { cwd: repoRoot, input, encoding: 'utf8' });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

const tmp = removeAfterFile(mkdtempSync(join(tmpdir(), 'oar-cli-')));
function file(name: string, content: string): string {
  const path = join(tmp, name);
  writeFileSync(path, content);
  return path;
}

describe('oar protocol check', () => {
  it('accepts the bundled example (the quick start command) and prints the declaration', () => {
    const run = oar(['protocol', 'check', '--catalog', 'examples/catalog.json', 'examples/act.json']);
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout);
    expect(out.ok).toBe(true);
    expect(out.recovered).toBe(false);
    expect(out.declaration.actions.map((a: { id: string }) => a.id)).toEqual([
      'find_manifests',
      'read_package',
      'review_package',
    ]);
    expect(out.errors).toBeUndefined();
  });

  it('reads standard input and exits 1 with structured errors when not ok', () => {
    const run = oar(
      ['protocol', 'check', '--catalog', 'examples/catalog.json', '-'],
      JSON.stringify({ kind: 'act', calls: [{ id: 'x', type: 'tool', name: 'rm', args: {} }] }),
    );
    expect(run.code).toBe(1);
    const out = JSON.parse(run.stdout);
    expect(out.ok).toBe(false);
    expect(out.errors[0]).toMatchObject({ code: 'unknown_tool', path: '/actions/0/executor/target' });
    expect(out.errors[0].hint).toContain('read');
  });

  it('reports repairs', () => {
    const run = oar(['protocol', 'check', '-'], JSON.stringify({ kind: 'answer', text: 'All done.' }));
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout).repairs).toEqual([
      { code: 'message_alias_renamed', detail: '"text" used instead of "message"' },
    ]);
  });

  it('checks raw assistant text with --carrier text', () => {
    const run = oar([
      'protocol',
      'check',
      '--carrier',
      'text',
      '--catalog',
      'examples/catalog.json',
      'examples/dsl-message.md',
    ]);
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout);
    expect(out.declaration.source.form).toBe('dsl');
    expect(out.declaration.actions[1].prompt).toMatch(/npm script/);
  });

  it('recovers a native call to a catalog tool and flags it', () => {
    const run = oar(
      ['protocol', 'check', '--catalog', 'examples/catalog.json', '-'],
      JSON.stringify({ name: 'glob', arguments: '{"pattern":"**/*.ts"}' }),
    );
    expect(run.code).toBe(0);
    expect(JSON.parse(run.stdout).recovered).toBe(true);
  });

  it('honours --history for dependencies and id reuse', () => {
    const input = JSON.stringify({
      kind: 'act',
      calls: [{ id: 'next', type: 'tool', name: 'read', args: { filePath: 'a' }, depends: 'earlier' }],
    });
    expect(oar(['protocol', 'check', '--catalog', 'examples/catalog.json', '-'], input).code).toBe(1);
    expect(
      oar(['protocol', 'check', '--catalog', 'examples/catalog.json', '--history', 'earlier', '-'], input).code,
    ).toBe(0);
  });

  it.each([
    [['protocol', 'check', '--carrier', 'xml', 'examples/act.json'], 'invalid_option'],
    [['protocol', 'check', 'does/not/exist.json'], 'file_unreadable'],
    [['protocol', 'check', '--catalog', 'README.md', 'examples/act.json'], 'invalid_json'],
    [['schema', 'nope'], 'unknown_schema'],
  ])('usage error %j exits 2 with a structured error', (args, code) => {
    const run = oar(args);
    expect(run.code).toBe(2);
    const error = JSON.parse(run.stderr.trim().split('\n').at(-1)!).error;
    expect(error).toMatchObject({ code, retryable: false });
    expect(error.message.length).toBeGreaterThan(5);
  });

  it('exits 2 on an unknown option or command', () => {
    expect(oar(['protocol', 'check', '--bogus']).code).toBe(2);
    expect(oar(['frobnicate']).code).toBe(2);
  });

  it('an invalid catalog file is a usage error', () => {
    const catalog = file('bad-catalog.json', JSON.stringify({ tools: [{ description: 'no name' }] }));
    const run = oar(['protocol', 'check', '--catalog', catalog, 'examples/act.json']);
    expect(run.code).toBe(2);
    expect(JSON.parse(run.stderr).error.code).toBe('invalid_catalog');
  });
});

describe('oar protocol transcript', () => {
  it('renders the bundled example', () => {
    const run = oar(['protocol', 'transcript', 'examples/transcript.json']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('<turn index="1">');
    expect(run.stdout).toContain('## User request');
    expect(run.stdout).toContain('Based on all turns above, decide the next step.');
  });

  it('rejects a malformed input file with exit 2', () => {
    const run = oar(['protocol', 'transcript', file('bad-transcript.json', '{"turns": 5}')]);
    expect(run.code).toBe(2);
    expect(JSON.parse(run.stderr).error.code).toBe('invalid_transcript_input');
  });
});

describe('oar schema', () => {
  it.each(['carrier', 'dsl', 'event', 'snapshot', 'ui'])('prints a compilable 2020-12 schema: %s', (name) => {
    const run = oar(['schema', name]);
    expect(run.code).toBe(0);
    const schema = JSON.parse(run.stdout);
    const ajv = new Ajv2020({ strict: false });
    expect(() => ajv.compile(schema)).not.toThrow();
  });

  it('the carrier schema is one object schema with no top-level combinators', () => {
    const schema = JSON.parse(oar(['schema', 'carrier']).stdout);
    expect(schema.type).toBe('object');
    expect(schema.anyOf ?? schema.oneOf ?? schema.allOf).toBeUndefined();
  });

  it('ui prints the ui_schema v1 wire format: versioned, one component type per UI hint kind, no markup', () => {
    const run = oar(['schema', 'ui']);
    expect(run.code).toBe(0);
    const schema = JSON.parse(run.stdout);
    expect(schema.title).toBe('OAR ui_schema (oar.ui/1)');
    expect(schema.properties.version).toMatchObject({ const: 'oar.ui/1' });
    const types = schema.properties.components.items.oneOf.map(
      (c: { properties: { type: { const: string } } }) => c.properties.type.const,
    );
    expect(types.sort()).toEqual(['calendar_event', 'card', 'confirmation', 'contact', 'key_value', 'list', 'table']);
    const validate = new Ajv2020({ strict: false }).compile(schema);
    const card = {
      id: 'c/0',
      type: 'card',
      title: 'Project sync',
      fields: [{ label: 'Owner', value: 'Ana' }],
      actions: [],
    };
    const ui = { version: 'oar.ui/1', tool_call_id: 'c', status: 'success', components: [card] };
    expect(validate(ui)).toBe(true);
    expect(validate({ ...ui, components: [{ ...card, html: '<b>x</b>' }] })).toBe(false);
    expect(oar(['schema', '--help']).stdout).toContain('ui');
  });

  it('--version and --help exit 0', () => {
    expect(oar(['--version']).stdout.trim()).toBe('0.1.0');
    expect(oar(['--help']).code).toBe(0);
  });
});
