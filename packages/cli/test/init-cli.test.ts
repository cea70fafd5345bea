import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { loadConfig } from '@oar/runtime';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { ndjson, oarIn, repoRoot, tempDir, writeJson } from './cli-helpers.js';

/**
 * `oar init` through the real binary, in a fresh folder: the config it writes names the schema @oar/runtime ships
 * (and validates against it), loads with the runtime's own loader, drives a turn in which the example agent takes
 * part; `.oar/` lands in .gitignore once; an existing config is never overwritten without --force.
 */

const SHIPPED_SCHEMA = join(repoRoot, 'packages/runtime/schemas/oar.config.schema.json');

function configIn(dir: string): Record<string, unknown> {
  return JSON.parse(readFileSync(join(dir, 'oar.config.json'), 'utf8')) as Record<string, unknown>;
}

describe('oar init', () => {
  it('writes a config that its $schema accepts, the loader loads and a turn runs with', async () => {
    const dir = tempDir('oar-init-');
    writeFileSync(join(dir, '.gitignore'), 'node_modules'); // no final newline: .oar/ still gets a line of its own
    const result = oarIn(dir, ['init']);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain('Next steps:');
    expect(result.stdout).toContain('npx oar run');

    const config = configIn(dir);
    // `$schema` is a path relative to the project that resolves to the schema file the package ships.
    expect(typeof config.$schema).toBe('string');
    const schemaFile = resolve(dir, config.$schema as string);
    expect(schemaFile).toBe(SHIPPED_SCHEMA);
    const schema = JSON.parse(readFileSync(schemaFile, 'utf8'));
    const validate = new Ajv2020({ strict: false, allErrors: true, validateFormats: false }).compile(schema);
    expect(validate(config), JSON.stringify(validate.errors)).toBe(true);

    const { config: loaded } = await loadConfig(undefined, dir);
    expect(loaded.agents.map((agent) => agent.name)).toEqual(['reviewer']);
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toBe('node_modules\n.oar/\n');

    // A turn under the written config (a scripted model in place of the configured one): the main agent delegates
    // to the example sub-agent, which reads a file with the tools the config gives it.
    writeFileSync(join(dir, 'README.md'), '# A project\n\nIt says hello.\n');
    writeJson(dir, 'script.json', {
      steps: [
        {
          protocol: {
            kind: 'act',
            calls: [{ id: 'review', type: 'agent', name: 'reviewer', args: { prompt: 'Review README.md' } }],
          },
        },
        { protocol: { kind: 'answer', message: 'The reviewer read the README.' } },
      ],
      agents: {
        reviewer: {
          steps: [
            {
              protocol: {
                kind: 'act',
                calls: [{ id: 'read', type: 'tool', name: 'read', args: { filePath: 'README.md' } }],
              },
            },
            { protocol: { kind: 'answer', message: 'README.md says hello; nothing to fix.' } },
          ],
        },
      },
    });
    const run = oarIn(dir, ['run', '--model', 'script:script.json', '--json', 'Review this project']);
    expect(run.code, run.stderr).toBe(0);
    const events = ndjson(run.stdout);
    const delegated = events.find((event) => event.type === 'subagent.completed');
    expect(delegated?.payload, run.stdout).toMatchObject({
      graphActionId: 'review',
      summary: 'README.md says hello; nothing to fix.',
    });
    expect(run.stdout).toContain('The reviewer read the README.');
    expect(existsSync(join(dir, '.oar/oar.db'))).toBe(true);
  }, 120_000); // two `oar` processes, each a few seconds on a busy machine

  it('refuses to overwrite a config without --force, with a structured error, and changes nothing', () => {
    const dir = tempDir('oar-init-');
    writeFileSync(join(dir, 'oar.config.json'), '{"model": "anthropic:claude-sonnet-4-5"}\n');
    const refused = oarIn(dir, ['init']);
    expect(refused.code).toBe(2);
    const error = JSON.parse(refused.stderr).error;
    expect(error).toMatchObject({ code: 'config_exists', retryable: false });
    expect(error.details.file).toBe(join(dir, 'oar.config.json'));
    expect(error.message).toContain('--force');
    expect(readFileSync(join(dir, 'oar.config.json'), 'utf8')).toBe('{"model": "anthropic:claude-sonnet-4-5"}\n');
    expect(existsSync(join(dir, '.gitignore'))).toBe(false);

    const forced = oarIn(dir, ['init', '--force']);
    expect(forced.code, forced.stderr).toBe(0);
    expect(configIn(dir).agents).toBeDefined();
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toBe('.oar/\n');
    // A second forced init finds .oar/ ignored already and does not repeat it.
    const again = oarIn(dir, ['init', '--force']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toContain('already ignores .oar/');
    expect(readFileSync(join(dir, '.gitignore'), 'utf8')).toBe('.oar/\n');
  }, 120_000); // three `oar` processes
});
