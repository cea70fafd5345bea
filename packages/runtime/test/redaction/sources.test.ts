import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  applyBindingUpdate,
  bindingHash,
  type SessionBinding,
  SessionBindingSchema,
} from '../../src/config/binding.js';
import { OarConfigSchema } from '../../src/config/oar-config.js';
import {
  bindingSecrets,
  dotenvSecrets,
  envSecrets,
  findDotenvFiles,
  secretEnvNames,
} from '../../src/redaction/index.js';

const dirs: string[] = [];
function workspace(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'oar-redaction-src-'));
  dirs.push(dir);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), content);
  }
  return dir;
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('secretEnvNames', () => {
  it('always names the provider key variables, plus apiKeyEnv, headersEnv and secrets.env', () => {
    expect(secretEnvNames({ models: {} })).toEqual(['ANTHROPIC_API_KEY', 'COHERE_API_KEY', 'OPENAI_API_KEY']);
    expect(
      secretEnvNames({
        models: {
          local: { provider: 'openai-compatible', model: 'm', baseURL: 'http://x/v1', apiKeyEnv: 'LOCAL_KEY' },
          azure: { provider: 'openai', model: 'gpt', headersEnv: { 'api-key': 'AZURE_KEY' } },
        },
        secrets: { env: ['GITHUB_TOKEN', 'OPENAI_API_KEY'] },
      }),
    ).toEqual(['ANTHROPIC_API_KEY', 'AZURE_KEY', 'COHERE_API_KEY', 'GITHUB_TOKEN', 'LOCAL_KEY', 'OPENAI_API_KEY']);
  });

  it('envSecrets reads the values, skipping unset and empty variables', () => {
    expect(envSecrets(['A', 'B', 'C'], { A: 'value-a', B: '', C: undefined })).toEqual([
      { value: 'value-a', kind: 'env_secret' },
    ]);
  });
});

describe('.env files of the workspace', () => {
  it('finds .env* files at any reasonable depth, not templates, not in dependencies or VCS data', async () => {
    const dir = workspace({
      '.env': 'A=1',
      '.env.local': 'A=1',
      '.env.example': 'A=1',
      'apps/web/.env.production': 'A=1',
      'apps/web/.env.sample': 'A=1',
      'node_modules/pkg/.env': 'A=1',
      '.git/.env': 'A=1',
      'a/b/c/d/e/f/.env': 'A=1',
      'src/env.ts': 'export {}',
    });
    const files = await findDotenvFiles(dir);
    expect(files.map((file) => file.slice(dir.length + 1))).toEqual(['.env', '.env.local', 'apps/web/.env.production']);
    expect((await findDotenvFiles(dir, { maxDepth: 10 })).length).toBe(4);
  });

  it('reads their secret values; a FIFO or a huge file named .env neither blocks nor counts', async () => {
    const dir = workspace({
      '.env': 'SESSION_SECRET=s3ss10n-secret\nNODE_ENV=development\n',
      'big/.env': `TOKEN=${'x'.repeat(300_000)}`,
    });
    try {
      execFileSync('mkfifo', [join(dir, 'fifo')]);
      symlinkSync(join(dir, 'fifo'), join(dir, '.env.fifo'));
    } catch {
      // no mkfifo here: the regular-file checks still run
    }
    const started = Date.now();
    const secrets = await dotenvSecrets(dir);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(secrets).toEqual([{ value: 's3ss10n-secret', kind: 'dotenv' }]);
  });

  it('does not follow a symlinked directory out of the workspace', async () => {
    const outside = workspace({ '.env': 'OUTSIDE_SECRET=outside-value' });
    const dir = workspace({ '.env': 'INSIDE_SECRET=inside-value' });
    symlinkSync(outside, join(dir, 'linked'));
    expect((await dotenvSecrets(dir)).map((s) => s.value)).toEqual(['inside-value']);
  });

  it('bindingSecrets: the environment secrets, then the workspace .env values', async () => {
    const dir = workspace({ '.env': 'API_TOKEN=from-dotenv-1' });
    const secrets = await bindingSecrets(
      { models: {}, secrets: { env: ['GITHUB_TOKEN'] }, workspaceRoot: dir },
      { OPENAI_API_KEY: 'sk-env-value-1', GITHUB_TOKEN: 'ghp_value_2', UNRELATED: 'not-a-secret' },
    );
    expect(secrets).toEqual([
      { value: 'ghp_value_2', kind: 'env_secret' },
      { value: 'sk-env-value-1', kind: 'env_secret' },
      { value: 'from-dotenv-1', kind: 'dotenv' },
    ]);
  });
});

describe('the secrets.env field', () => {
  it('config: defaults to no names, takes env var NAMES, rejects values and unknown fields', () => {
    // Left out means none — and, for `session update --from-config`, "not said", unlike an explicit empty list.
    expect(OarConfigSchema.parse({}).secrets).toBeUndefined();
    expect(OarConfigSchema.parse({ secrets: { env: [] } }).secrets).toEqual({ env: [] });
    expect(OarConfigSchema.parse({ secrets: { env: ['GITHUB_TOKEN'] } }).secrets).toEqual({ env: ['GITHUB_TOKEN'] });
    expect(OarConfigSchema.safeParse({ secrets: { env: ['ghp-abc123'] } }).success).toBe(false);
    expect(OarConfigSchema.safeParse({ secrets: { env: ['A'], values: ['x'] } }).success).toBe(false);
  });

  it('binding: optional (bindings recorded before it still parse), names only', () => {
    const binding: SessionBinding = {
      mainAgent: { name: 'main', description: '', capabilities: [], carrier: 'tool' },
      agents: [],
      models: {},
      workspaceRoot: '/tmp',
      tools: [],
      toolModules: [],
      permissions: { mode: 'default', rules: [] },
      limits: {
        maxSteps: 1,
        maxParallel: 1,
        maxSubagentDepth: 0,
        toolTimeoutMs: 1,
        contextBudgetTokens: 512,
        observationTokens: 16,
        graphObservationTokens: 16,
        maxArtifactBytes: 1,
      },
      queuePolicy: 'queue',
      onProtocolFailure: 'fail',
    };
    expect(SessionBindingSchema.parse(binding)).toEqual(binding);
    expect(applyBindingUpdate(binding, { secrets: { env: ['GITHUB_TOKEN'] } }).secrets).toEqual({
      env: ['GITHUB_TOKEN'],
    });
    expect(SessionBindingSchema.safeParse({ ...binding, secrets: { env: ['sk-live'] } }).success).toBe(false);
    // Names as a new session records them (sorted, unique); an empty list clears them, to the very binding (and
    // hash) of one that never had any, while a field-by-field diff still sees `secrets` change.
    const named = applyBindingUpdate(binding, { secrets: { env: ['B_TOKEN', 'A_TOKEN', 'B_TOKEN'] } });
    expect(named.secrets).toEqual({ env: ['A_TOKEN', 'B_TOKEN'] });
    const cleared = applyBindingUpdate(named, { secrets: { env: [] } });
    expect(cleared.secrets).toBeUndefined();
    expect('secrets' in cleared).toBe(true);
    expect(JSON.stringify(cleared)).toBe(JSON.stringify(binding));
    expect(bindingHash(cleared)).toBe(bindingHash(binding));
    expect(applyBindingUpdate(named, { model: 'script:x.json' }).secrets).toEqual(named.secrets);
  });
});
