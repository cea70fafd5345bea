import { afterEach, describe, expect, it } from 'vitest';
import { type FakeOpenAI, fakeOpenAI } from '../../runtime/test/support/fake-openai.js';
import { tempDir, writeJson } from './cli-helpers.js';
import { oar } from './processes.js';

/**
 * The real `oar` binary pointed at another model server with OPENAI_BASE_URL (docs/models.md), and the failures a
 * first user meets, told in OAR's terms: what to put in oar.config.json, never AI SDK code (`openai.chat(…)`), and
 * an MCP server's connect limit by the name of its setting (docs/mcp.md), never `tools.modules`.
 */
let fake: FakeOpenAI | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const ANSWER = {
  kind: 'answer' as const,
  toolCalls: [
    { name: 'AgentProtocolOutput', arguments: JSON.stringify({ kind: 'answer', message: 'Hello from the gateway.' }) },
  ],
};

describe('oar run against another OpenAI server', { timeout: 120_000 }, () => {
  it('OPENAI_BASE_URL sends openai: models there, key and all', async () => {
    fake = await fakeOpenAI(() => ANSWER, { responses: 'responses' });
    const run = await oar(tempDir(), ['run', '--model', 'openai:fake-model', 'hello'], {
      OPENAI_API_KEY: 'sk-test-gateway',
      OPENAI_BASE_URL: fake.baseURL,
    });
    expect(run.code, run.err).toBe(0);
    expect(run.out).toContain('Hello from the gateway.');
    expect(fake.requests[0]).toMatchObject({
      url: '/v1/responses',
      headers: { authorization: 'Bearer sk-test-gateway' },
    });
  });

  it('a Chat Completions server behind openai: says which oar.config.json entry to write', async () => {
    fake = await fakeOpenAI(() => ANSWER, { responses: 'chat' });
    const run = await oar(tempDir(), ['run', '--model', 'openai:fake-model', 'hello'], {
      OPENAI_API_KEY: 'sk-test',
      OPENAI_BASE_URL: fake.baseURL,
    });
    expect(run.code).toBe(1);
    expect(run.out).toContain('"provider": "openai-compatible"');
    expect(run.out).toContain('oar.config.json');
    expect(`${run.out}${run.err}`).not.toMatch(/openai\.chat\(|createOpenAI/);
  });

  it('a missing key names the variable and apiKeyEnv', async () => {
    const run = await oar(tempDir(), ['run', '--model', 'openai:gpt-4.1', 'hello'], { OPENAI_API_KEY: '' });
    expect(run.code).toBe(2);
    const { error } = JSON.parse(run.err) as { error: { code: string; details: { hint: string } } };
    expect(error.code).toBe('model_credentials_missing');
    expect(error.details.hint).toMatch(/set OPENAI_API_KEY .*"apiKeyEnv"/);
  });
});

describe('an MCP server that does not connect in time', { timeout: 120_000 }, () => {
  it('names connectTimeoutMs, not tools.modules', async () => {
    const cwd = tempDir();
    writeJson(cwd, 'script.json', { steps: [{ protocol: { kind: 'answer', message: 'unused' } }] });
    writeJson(cwd, 'oar.config.json', {
      model: 'script:script.json',
      mcp: {
        servers: [
          { name: 'slow', command: 'node', args: ['-e', 'setInterval(() => {}, 1000)'], connectTimeoutMs: 300 },
        ],
      },
    });
    const run = await oar(cwd, ['run', 'hello']);
    expect(run.code).toBe(2);
    const { error } = JSON.parse(run.err) as {
      error: { code: string; details: { hint: string; connectTimeoutMs: number } };
    };
    expect(error.code).toBe('binding_unavailable');
    expect(error.details.connectTimeoutMs).toBe(300);
    expect(error.details.hint).toContain('"connectTimeoutMs" of the server "slow" in "mcp.servers"');
    expect(run.err).not.toContain('tools.modules');
  });
});
