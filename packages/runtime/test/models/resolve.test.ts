import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type ModelConfig, parseModelSpec } from '../../src/config/models.js';
import { OarRuntimeError } from '../../src/kernel/errors.js';
import { resolveModel } from '../../src/models/resolve.js';
import { removeAfterFile } from '../support/temp-dirs.js';

const cwd = removeAfterFile(mkdtempSync(join(tmpdir(), 'oar-resolve-')));
writeFileSync(
  join(cwd, 'hello.json'),
  JSON.stringify({ steps: [{ text: 'main' }], agents: { reviewer: { steps: [{ text: 'review' }] } } }),
);
const env = { OPENAI_API_KEY: 'sk-test-openai', ANTHROPIC_API_KEY: 'sk-ant-test', DEEPSEEK_KEY: 'sk-deepseek' };

async function failure(promise: Promise<unknown>): Promise<OarRuntimeError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(OarRuntimeError);
    return error as OarRuntimeError;
  }
  throw new Error('expected a rejection');
}

describe('parseModelSpec', () => {
  it('parses every spec form', () => {
    expect(parseModelSpec('openai:gpt-4.1')).toEqual({ kind: 'hosted', provider: 'openai', model: 'gpt-4.1' });
    expect(parseModelSpec('anthropic:claude-sonnet-4-5')).toEqual({
      kind: 'hosted',
      provider: 'anthropic',
      model: 'claude-sonnet-4-5',
    });
    expect(parseModelSpec('openai-compatible:deepseek')).toEqual({ kind: 'compatible', name: 'deepseek' });
    expect(parseModelSpec('script:scripts/a:b.json')).toEqual({ kind: 'script', file: 'scripts/a:b.json' });
    expect(parseModelSpec('fast')).toEqual({ kind: 'named', name: 'fast' });
    expect(parseModelSpec('google:gemini')).toEqual({ kind: 'named', name: 'google:gemini' });
  });

  it('rejects an empty model after the prefix', () => {
    expect(() => parseModelSpec('openai:')).toThrow(/names no model/);
    expect(() => parseModelSpec('  ')).toThrow(/empty model spec/);
  });
});

describe('resolveModel', () => {
  it('resolves openai:<model> with the key from OPENAI_API_KEY', async () => {
    const { model, info } = await resolveModel('openai:gpt-4.1', { cwd, env });
    expect(model.modelId).toBe('gpt-4.1');
    expect(model.provider).toMatch(/^openai\./);
    expect(info).toEqual({
      provider: 'openai',
      modelId: 'gpt-4.1',
      spec: 'openai:gpt-4.1',
      supportsForcedToolChoice: true,
    });
  });

  it('resolves anthropic:<model>', async () => {
    const { model, info } = await resolveModel('anthropic:claude-sonnet-4-5', { cwd, env });
    expect(model.modelId).toBe('claude-sonnet-4-5');
    expect(model.provider).toMatch(/^anthropic/);
    expect(info.provider).toBe('anthropic');
    expect(info.supportsForcedToolChoice).toBe(true);
  });

  it('resolves script:FILE relative to cwd, and a sub-agent section', async () => {
    const main = await resolveModel('script:hello.json', { cwd, env: {} });
    expect(main.model.provider).toBe('oar-script');
    expect(main.info).toEqual({
      provider: 'script',
      modelId: 'hello',
      spec: 'script:hello.json',
      supportsForcedToolChoice: true,
    });
    const reviewer = await resolveModel('script:hello.json', { cwd, env: {}, agent: 'reviewer' });
    expect(reviewer.info.modelId).toBe('hello:reviewer');
    const missing = await failure(resolveModel('script:hello.json', { cwd, env: {}, agent: 'planner' }));
    expect(missing.code).toBe('script_agent_missing');
    const absent = await failure(resolveModel('script:absent.json', { cwd, env: {} }));
    expect(absent.code).toBe('invalid_model_script');
  });

  it('resolves configured names, openai-compatible:<name> and a script entry', async () => {
    const models: Record<string, ModelConfig> = {
      deepseek: {
        provider: 'openai-compatible',
        model: 'deepseek-chat',
        baseURL: 'https://api.deepseek.com/v1',
        apiKeyEnv: 'DEEPSEEK_KEY',
        forcedToolChoice: false,
      },
      fast: { provider: 'openai', model: 'gpt-4.1-mini' },
      demo: { provider: 'script', file: 'hello.json' },
    };
    const deepseek = await resolveModel('openai-compatible:deepseek', { cwd, env, models });
    expect(deepseek.model.provider).toBe('deepseek.chat');
    expect(deepseek.model.modelId).toBe('deepseek-chat');
    expect(deepseek.info).toMatchObject({ provider: 'openai-compatible', supportsForcedToolChoice: false });
    expect((await resolveModel('deepseek', { cwd, env, models })).info.modelId).toBe('deepseek-chat');
    expect((await resolveModel('fast', { cwd, env, models })).info).toMatchObject({
      provider: 'openai',
      modelId: 'gpt-4.1-mini',
    });
    expect((await resolveModel('demo', { cwd, env, models })).info).toMatchObject({
      provider: 'script',
      modelId: 'hello',
    });
    const notCompatible = await failure(resolveModel('openai-compatible:fast', { cwd, env, models }));
    expect(notCompatible.code).toBe('unknown_model');
  });

  it('fails with model_credentials_missing naming the env var, never reading process.env', async () => {
    const openai = await failure(resolveModel('openai:gpt-4.1', { cwd, env: {} }));
    expect(openai.error).toMatchObject({ code: 'model_credentials_missing', retryable: false });
    expect(openai.message).toContain('OPENAI_API_KEY');
    const anthropic = await failure(
      resolveModel('anthropic:claude-sonnet-4-5', { cwd, env: { ANTHROPIC_API_KEY: ' ' } }),
    );
    expect(anthropic.message).toContain('ANTHROPIC_API_KEY');
    const models: Record<string, ModelConfig> = {
      custom: { provider: 'openai', model: 'gpt-4.1', apiKeyEnv: 'MY_OPENAI_KEY' },
      azureish: {
        provider: 'openai-compatible',
        model: 'gpt-4.1',
        baseURL: 'https://example.invalid/v1',
        headersEnv: { 'api-key': 'AZURE_KEY' },
      },
    };
    const custom = await failure(resolveModel('custom', { cwd, env, models }));
    expect(custom.error.details).toEqual({
      model: 'custom',
      envVar: 'MY_OPENAI_KEY',
      hint: expect.stringContaining('set MY_OPENAI_KEY'),
    });
    const header = await failure(resolveModel('azureish', { cwd, env, models }));
    expect(header.message).toContain('AZURE_KEY');
  });

  it('fails with unknown_model for unknown providers and names', async () => {
    const provider = await failure(resolveModel('google:gemini-2.5', { cwd, env }));
    expect(provider.error).toMatchObject({ code: 'unknown_model', retryable: false });
    const name = await failure(
      resolveModel('nope', { cwd, env, models: { fast: { provider: 'openai', model: 'x' } } }),
    );
    expect(name.message).toContain('configured: fast');
    const compatible = await failure(resolveModel('openai-compatible:missing', { cwd, env }));
    expect(compatible.code).toBe('unknown_model');
  });

  it('rejects a misconfigured entry, including a key pasted where an env var name belongs', async () => {
    const models = {
      leaky: { provider: 'openai', model: 'gpt-4.1', apiKeyEnv: 'sk-proj-abc123' },
      incomplete: { provider: 'openai-compatible', model: 'm' },
    } as Record<string, ModelConfig>;
    const leaky = await failure(resolveModel('leaky', { cwd, env, models }));
    expect(leaky.code).toBe('invalid_model_config');
    expect(leaky.message).toContain('never the key itself');
    expect(JSON.stringify(leaky.error)).not.toContain('sk-proj');
    const incomplete = await failure(resolveModel('incomplete', { cwd, env, models }));
    expect(incomplete.message).toContain('needs "baseURL"');
  });
});
