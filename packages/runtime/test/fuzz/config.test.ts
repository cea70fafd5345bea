import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import {
  buildRuntime,
  loadConfig,
  MODEL_PROVIDERS,
  OarConfigSchema,
  OarRuntimeError,
  PERMISSION_MODES,
  Store,
} from '../../src/index.js';

/**
 * Config files as a user (or an attacker) might write them: any JSON value, any text, and objects shaped like
 * oar.config.json with every field sometimes valid and sometimes not. `loadConfig` returns a config or throws an
 * OarRuntimeError with a code; a config it accepts builds a runtime (`buildRuntime` + `checkBinding`) or fails the
 * same way — never a TypeError, a ZodError or anything else.
 *
 * A fixed seed (fast-check prints it, with the failing case's path); OAR_FUZZ_SEED / OAR_FUZZ_RUNS explore more.
 */
const SEED = Number(process.env.OAR_FUZZ_SEED ?? 20_151_115);
const runs = (n: number) => ({
  seed: SEED,
  numRuns: Math.max(1, Math.round(n * Number(process.env.OAR_FUZZ_RUNS ?? 1))),
});

const dir = mkdtempSync(join(tmpdir(), 'oar-fuzz-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const FIXTURE_TOOLS = join(import.meta.dirname, '../../../cli/test/fixtures/count-tools.mjs');
writeFileSync(join(dir, 'script.json'), JSON.stringify({ steps: [{ protocol: { kind: 'answer', message: 'hi' } }] }));
writeFileSync(join(dir, 'not-a-script.json'), '{"steps": 5}');
writeFileSync(join(dir, 'throws.mjs'), "throw new Error('boom while loading');\n");
writeFileSync(join(dir, 'syntax.mjs'), 'export const = ;\n');
writeFileSync(join(dir, 'empty.mjs'), 'export const nothing = 1;\n');
writeFileSync(join(dir, 'half-tools.mjs'), "export const tools = [{ name: 'half', execute() {} }];\n");
writeFileSync(join(dir, 'shadow.mjs'), "export default [{ name: 'read', execute() {}, input: 5 }];\n");
mkdirSync(join(dir, 'ws'));
writeFileSync(join(dir, 'a-file'), 'not a directory\n');

/** The error is the runtime's structured error: a code, a message, a retryable flag. */
function structured(error: unknown): void {
  if (!(error instanceof OarRuntimeError)) {
    throw new Error(
      `not an OarRuntimeError: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`,
      {
        cause: error,
      },
    );
  }
  expect(error.code).toMatch(/^[a-z][a-z0-9_]*$/);
  expect(error.code).not.toBe('internal_error');
  expect(typeof error.error.message).toBe('string');
  expect(typeof error.error.retryable).toBe('boolean');
}

let files = 0;
function configFile(text: string): string {
  const file = join(dir, `config-${files++}.json`);
  writeFileSync(file, text);
  return file;
}

const anything = fc.jsonValue({ maxDepth: 2 });
const path = fc.constantFrom('.', 'ws', 'missing-dir', 'a-file', '/', '', dir, join(dir, 'ws'));
const modelSpec = fc.oneof(
  { arbitrary: fc.constant('script:script.json'), weight: 4 },
  {
    arbitrary: fc.constantFrom(
      'script:not-a-script.json',
      'script:missing.json',
      'openai:gpt-4.1',
      'anthropic:claude-sonnet-4',
      'openai-compatible:local',
      'local',
      'mysql:x',
      'script:',
      ':',
      '',
    ),
    weight: 2,
  },
  { arbitrary: fc.string(), weight: 1 },
);
const MODULES = [
  FIXTURE_TOOLS,
  './throws.mjs',
  './syntax.mjs',
  './empty.mjs',
  './half-tools.mjs',
  './shadow.mjs',
  './missing.mjs',
  'node:fs',
  'no-such-package-oar-fuzz',
  '',
];
const RULE_PATHS = ['**', 'secrets/**', '../**', '/etc/**', '', '[', '**/*(a*)*'];

/**
 * A config whose fields are each drawn from values that are valid or nearly so (`noise` > 0: sometimes anything
 * instead), so that most configs load and the build and binding checks are reached too.
 */
function configArb(noise: number) {
  const maybe = <T>(valid: fc.Arbitrary<T>, other: fc.Arbitrary<unknown> = anything) =>
    noise === 0 ? valid : fc.oneof({ arbitrary: valid, weight: noise }, { arbitrary: other, weight: 1 });
  const agent = fc.record(
    {
      name: maybe(fc.constantFrom('main', 'helper', 'a.b-c'), fc.string()),
      description: fc.string(),
      capabilities: fc.array(fc.string(), { maxLength: 2 }),
      systemPrompt: fc.string(),
      model: modelSpec,
      carrier: maybe(fc.constantFrom('tool', 'text'), fc.string()),
      tools: fc.array(fc.constantFrom('read', 'write', 'count', 'nope'), { maxLength: 3 }),
      runner: maybe(
        fc.record(
          {
            id: maybe(fc.constantFrom('plugin:a/b/c', 'plugin:oar/local-agent/default'), fc.string()),
            config: maybe(fc.dictionary(fc.string(), fc.jsonValue(), { maxKeys: 2 })),
          },
          { requiredKeys: [] },
        ),
      ),
    },
    { requiredKeys: [] },
  );
  // Each provider with the fields it takes (noise: the others too).
  const model = fc.oneof(
    fc.record(
      {
        provider: fc.constantFrom('openai', 'anthropic'),
        model: fc.constantFrom('gpt-4.1', 'x'),
        baseURL: fc.constant('http://127.0.0.1:9/v1'),
        apiKeyEnv: fc.constantFrom('OAR_FUZZ_KEY', 'PATH'),
      },
      { requiredKeys: ['provider', 'model'] },
    ),
    fc.record(
      {
        provider: fc.constant('openai-compatible'),
        model: fc.constantFrom('local-model', 'x'),
        baseURL: fc.constant('http://127.0.0.1:9/v1'),
        apiKeyEnv: fc.constantFrom('OAR_FUZZ_KEY', 'PATH'),
        name: fc.constantFrom('local', 'gateway'),
      },
      { requiredKeys: ['provider', 'model', 'baseURL'] },
    ),
    fc.record({
      provider: fc.constant('script'),
      file: fc.constantFrom('script.json', 'missing.json', 'not-a-script.json'),
    }),
    ...(noise > 0
      ? [
          fc.record(
            {
              provider: fc.oneof(fc.constantFrom(...MODEL_PROVIDERS), fc.string()),
              model: fc.constantFrom('gpt-4.1', ''),
              baseURL: fc.constantFrom('http://127.0.0.1:9/v1', 'not a url', 'ftp://x'),
              apiKeyEnv: fc.constantFrom('OAR_FUZZ_KEY', 'lower-case', ''),
              file: fc.constantFrom('script.json', 'missing.json'),
              name: fc.string(),
            },
            { requiredKeys: ['provider'] },
          ),
        ]
      : []),
  );
  const rule = fc.record(
    {
      decision: maybe(fc.constantFrom('allow', 'deny', 'ask'), fc.string()),
      tool: maybe(fc.constantFrom('read', 'write', '*', 'count', 'mcp__*'), fc.constant('')),
      executor: maybe(fc.constantFrom('tool', 'agent', 'human'), fc.string()),
      capability: fc.constantFrom('test', 'network'),
      paths: maybe(
        fc.array(fc.constantFrom(...RULE_PATHS.filter(Boolean)), { minLength: 1, maxLength: 2 }),
        fc.array(fc.constantFrom(...RULE_PATHS), { maxLength: 2 }),
      ),
      readOnly: fc.boolean(),
      destructive: fc.boolean(),
      command: maybe(fc.constantFrom('git status', 'rm -rf', 'npm test'), fc.constantFrom('', 'git  push', ' ')),
      reason: fc.string(),
    },
    { requiredKeys: ['decision'] },
  );
  const limits = fc.record(
    {
      maxSteps: fc.integer({ min: 1, max: 10_000 }),
      maxParallel: fc.integer({ min: 1, max: 64 }),
      maxSubagentDepth: fc.integer({ min: 0, max: 8 }),
      toolTimeoutMs: fc.integer({ min: 1, max: 600_000 }),
      contextBudgetTokens: fc.integer({ min: 512, max: 1_000_000 }),
      observationTokens: fc.integer({ min: 16, max: 100_000 }),
      graphObservationTokens: fc.integer({ min: 16, max: 100_000 }),
      maxArtifactBytes: fc.integer({ min: 1, max: 10_000_000 }),
      toolWorkerToolCalls: fc.integer({ min: 0, max: 300 }),
      toolWorkerModelCalls: fc.integer({ min: 1, max: 64 }),
      toolWorkerTokens: fc.integer({ min: 500, max: 1_000_000 }),
    },
    { requiredKeys: [] },
  );
  // Steps over bound and unknown tools, with references that are fine, dangling or misspelt.
  const stepId = fc.constantFrom('a', 'b', 'c', 'bad id');
  const mapping = fc.oneof(
    fc.constant({ $input: 'path' }),
    fc.record({ $step: stepId }),
    fc.constant({ $literal: { $input: 'x' } }),
    fc.constant({ $inptu: 'x' }),
    fc.string(),
  );
  const pipeline = fc.record(
    {
      name: maybe(fc.constantFrom('build', 'release'), fc.string()),
      description: fc.string(),
      inputSchema: maybe(fc.constant({ type: 'object' }), fc.jsonValue()),
      steps: fc.array(
        fc.record(
          {
            id: stepId,
            tool: maybe(fc.constantFrom('read', 'glob', 'write'), fc.string()),
            input: fc.dictionary(fc.constantFrom('filePath', 'content', 'pattern'), mapping, { maxKeys: 2 }),
            depends: fc.array(stepId, { maxLength: 2 }),
          },
          { requiredKeys: ['id', 'tool'] },
        ),
        { maxLength: 3 },
      ),
    },
    { requiredKeys: ['name', 'steps'] },
  );
  const service = fc.record(
    {
      name: maybe(fc.constantFrom('crm', 'billing'), fc.string()),
      url: maybe(fc.constantFrom('https://api.example.com/{id}', 'http://127.0.0.1:9/x'), fc.string()),
      method: maybe(fc.constantFrom('GET', 'POST', 'PUT'), fc.string()),
      auth: maybe(
        fc.constantFrom({ type: 'bearer', tokenEnv: 'SVC_TOKEN' }, { type: 'header', header: 'X-Key', valueEnv: 'K' }),
        fc.jsonValue(),
      ),
      headers: maybe(fc.constantFrom({ 'X-Client': 'oar' }, { Authorization: 'Bearer x' })),
      retries: maybe(fc.integer({ min: 0, max: 10 }), fc.integer()),
      timeoutMs: maybe(fc.integer({ min: 1, max: 600_000 }), fc.integer()),
    },
    { requiredKeys: ['name', 'url'] },
  );
  const hook = fc.record(
    {
      name: maybe(fc.constantFrom('guard', 'audit'), fc.string()),
      point: maybe(
        fc.constantFrom('before_tool_call', 'after_tool_call', 'before_model_call', 'turn_end'),
        fc.string(),
      ),
      command: maybe(fc.constantFrom(['/nonexistent/hook'], ['./hooks/x.sh', '--flag']), fc.jsonValue()),
      module: maybe(fc.constantFrom('./hooks/x.mjs'), fc.jsonValue()),
      matcher: maybe(
        fc.constantFrom({ tools: ['write', 'docs.*'] }, { agents: ['main'] }, { tools: [] }),
        fc.jsonValue(),
      ),
      timeoutMs: maybe(fc.integer({ min: 10, max: 600_000 }), fc.integer()),
      onFailure: maybe(fc.constantFrom('deny', 'allow'), fc.string()),
    },
    { requiredKeys: ['name', 'point'] },
  );
  const mcpServer = fc.record(
    {
      name: maybe(fc.constantFrom('docs', 'tracker'), fc.string()),
      command: maybe(fc.constantFrom('/nonexistent/mcp'), fc.jsonValue()),
      url: maybe(fc.constantFrom('http://127.0.0.1:9/mcp', 'ftp://x'), fc.string()),
      auth: maybe(fc.constantFrom({ env: 'MCP_TOKEN', scheme: 'Bearer' }), fc.jsonValue()),
      connectTimeoutMs: maybe(fc.integer({ min: 100, max: 2_000 }), fc.integer()),
    },
    { requiredKeys: ['name'] },
  );
  return fc.record(
    {
      $schema: fc.string(),
      workspace: path,
      model: modelSpec,
      toolWorkerModel: maybe(modelSpec),
      models: maybe(fc.dictionary(fc.constantFrom('local', 'other'), model, { maxKeys: 2 })),
      agent: maybe(agent),
      agents: maybe(fc.array(agent, { maxLength: 2 })),
      tools: maybe(
        fc.record(
          {
            builtin: fc.array(maybe(fc.constantFrom('read', 'glob', 'grep', 'write', 'edit'), fc.string()), {
              maxLength: 3,
            }),
            modules: fc.array(fc.constantFrom(...MODULES), { maxLength: 2 }),
            exec: maybe(
              fc.record(
                {
                  env: fc.array(maybe(fc.constantFrom('PATH', 'HOME'), fc.string()), { maxLength: 2 }),
                  readOnlyCommands: fc.array(maybe(fc.constantFrom('ls', 'git log'), fc.string()), { maxLength: 2 }),
                  sandbox: maybe(
                    fc.record(
                      {
                        profile: maybe(fc.constantFrom('bwrap', 'none'), fc.string()),
                        network: fc.boolean(),
                        unsandboxed: maybe(fc.constantFrom('ask', 'deny', 'allow'), fc.string()),
                        hide: fc.array(maybe(fc.constantFrom('/srv/x'), fc.string()), { maxLength: 1 }),
                      },
                      { requiredKeys: [] },
                    ),
                  ),
                  timeoutMs: fc.integer({ min: -1, max: 200_000 }),
                },
                { requiredKeys: [] },
              ),
            ),
          },
          { requiredKeys: [] },
        ),
      ),
      permissions: maybe(
        fc.record(
          { mode: maybe(fc.constantFrom(...PERMISSION_MODES), fc.string()), rules: fc.array(rule, { maxLength: 3 }) },
          { requiredKeys: [] },
        ),
      ),
      limits: maybe(limits),
      budgets: maybe(
        fc.record(
          {
            turn: fc.record(
              { tokens: fc.integer({ min: -1, max: 100_000 }), costUsd: fc.double({ min: 0, max: 5 }) },
              { requiredKeys: [] },
            ),
            session: fc.record(
              { modelCalls: fc.integer({ min: 0, max: 50 }), wallTimeMs: fc.integer({ min: 1, max: 10_000 }) },
              { requiredKeys: [] },
            ),
            onExceeded: fc.constantFrom('wait', 'fail', 'explode'),
            lowAt: fc.double({ min: 0, max: 1.5 }),
          },
          { requiredKeys: [] },
        ),
      ),
      providerLimits: maybe(
        fc.dictionary(
          fc.constantFrom('openai', 'openai:gpt-4.1', 'oar-script', ''),
          fc.record(
            { maxConcurrency: fc.integer({ min: 0, max: 5 }), requestsPerMinute: fc.integer({ min: 1, max: 600 }) },
            { requiredKeys: [] },
          ),
          { maxKeys: 2 },
        ),
      ),
      queuePolicy: maybe(fc.constantFrom('queue', 'reject')),
      worker: maybe(fc.record({ leaseTtlMs: fc.integer({ min: 100, max: 3_600_000 }) }, { requiredKeys: [] })),
      retention: maybe(
        fc.record(
          {
            artifacts: fc.record(
              {
                maxAgeDays: fc.double({ min: 0.01, max: 365, noNaN: true }),
                keep: fc.array(fc.constantFrom('file-version:*', 'run_*/x', 'report.json'), { maxLength: 2 }),
                sweepEveryMinutes: fc.integer({ min: 1, max: 600 }),
                batchSize: fc.integer({ min: 1, max: 5000 }),
              },
              { requiredKeys: ['maxAgeDays'] },
            ),
          },
          { requiredKeys: [] },
        ),
      ),
      onProtocolFailure: maybe(fc.constantFrom('fail', 'plain_text')),
      secrets: maybe(fc.record({ env: fc.array(fc.constantFrom('MY_TOKEN', 'OTHER_SECRET'), { maxLength: 2 }) })),
      pipelines: maybe(fc.array(pipeline, { maxLength: 2 })),
      services: maybe(fc.array(service, { maxLength: 2 })),
      hooks: maybe(fc.array(hook, { maxLength: 2 })),
      mcp: maybe(fc.record({ servers: fc.array(mcpServer, { maxLength: 2 }) }, { requiredKeys: [] })),
      runners: maybe(
        fc.record({
          // Directories and npm: entries (a valid name, an invalid one, one that is not installed).
          packages: fc.array(
            maybe(
              fc.constantFrom('/nonexistent/runner', '.', 'npm:@acme/oar-runner-x', 'npm:left-pad', 'npm:Not A Name'),
              fc.string(),
            ),
            { maxLength: 2 },
          ),
        }),
      ),
      schedules: maybe(
        fc.array(
          fc.record(
            {
              scheduleId: fc.constantFrom('nightly', 'bad id!'),
              cron: fc.constantFrom('0 3 * * *', '* * * * * *', 'every night'),
              timezone: maybe(fc.constantFrom('Europe/Paris', 'Mars/Olympus')),
              start: fc.constantFrom(
                { kind: 'session', input: 'report' },
                { kind: 'turn', sessionId: 'ses_x', input: 'ping' },
                { kind: 'job', items: ['a'], prompt: '{{item}}' },
                { kind: 'never' },
              ),
              catchUp: maybe(fc.constantFrom('skip', 'run_once', 'always')),
              budget: maybe(fc.record({ session: fc.record({ tokens: fc.integer({ min: -1, max: 1000 }) }) })),
            },
            { requiredKeys: ['scheduleId', 'cron', 'start'] },
          ),
          { maxLength: 2 },
        ),
      ),
      ...(noise > 0 ? { extra: anything } : {}),
    },
    { requiredKeys: [] },
  );
}
/** Mostly near-valid configs (so loading succeeds and the build is reached), sometimes noisy ones. */
const configShaped = fc.oneof({ arbitrary: configArb(0), weight: 3 }, { arbitrary: configArb(4), weight: 2 });

describe('config files never fail unstructured', () => {
  it('knows every field of the config schema (a new field needs a generator here)', () => {
    expect(Object.keys(OarConfigSchema.shape).sort()).toEqual(
      [
        '$schema',
        'store',
        'workspace',
        'model',
        'toolWorkerModel',
        'models',
        'agent',
        'agents',
        'tools',
        'permissions',
        'limits',
        'budgets',
        'providerLimits',
        'queuePolicy',
        'worker',
        'retention',
        'onProtocolFailure',
        'secrets',
        'pipelines',
        'services',
        'hooks',
        'mcp',
        'runners',
        'schedules',
      ].sort(),
    );
  });

  it('any JSON value: a config or an OarRuntimeError', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.jsonValue(), configShaped), async (value) => {
        const file = configFile(JSON.stringify(value));
        await loadConfig(file, dir).then(
          ({ config }) => expect(OarConfigSchema.safeParse(config).success).toBe(true),
          structured,
        );
      }),
      runs(200),
    );
  });

  it('any text: a config or an OarRuntimeError', async () => {
    const text = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.jsonValue().map((v) => `\uFEFF${JSON.stringify(v)}`),
      fc.jsonValue().map((v) => JSON.stringify(v, null, 2).slice(0, -1)),
      fc.uint8Array({ maxLength: 100 }).map((bytes) => Buffer.from(bytes).toString('latin1')),
    );
    await fc.assert(
      fc.asyncProperty(text, async (content) => {
        await loadConfig(configFile(content), dir).then(() => undefined, structured);
      }),
      runs(200),
    );
    // A missing named config, and a directory given as the config.
    await loadConfig(join(dir, 'missing.json'), dir).then(() => expect.unreachable(), structured);
    await loadConfig('ws', dir).then(() => expect.unreachable(), structured);
  });

  it('a config that loads builds a runtime, or fails with an OarRuntimeError', async () => {
    await fc.assert(
      fc.asyncProperty(configShaped, async (value) => {
        let loaded: Awaited<ReturnType<typeof loadConfig>>;
        try {
          loaded = await loadConfig(configFile(JSON.stringify(value)), dir);
        } catch (error) {
          structured(error);
          return;
        }
        try {
          const { runtime, store } = await buildRuntime(loaded.config, loaded.baseDir, {
            cwd: dir,
            env: {},
            store: ':memory:',
            worker: false,
            resumeOnStart: false,
          });
          try {
            await runtime.checkBinding();
          } finally {
            await runtime.close();
            await store.close();
          }
        } catch (error) {
          structured(error);
        }
      }),
      runs(200),
    );
  }, 120_000);
});

/** Store.open settles within 15 s: a store, or an OarRuntimeError. */
async function openOrRefuse(url: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Store.open(${JSON.stringify(url)}) did not settle in 15 s`)), 15_000);
  });
  try {
    const store = await Promise.race([Store.open(url, { cwd: dir }), limit]);
    await store.close();
  } catch (error) {
    structured(error);
  } finally {
    clearTimeout(timer);
  }
}

describe('store URLs never fail unstructured', () => {
  it.each([
    ':memory:',
    'sqlite::memory:',
    'file:nested/dir/oar.db',
    'sqlite:rel.db',
    '/proc/nope/oar.db',
    join(dir, 'a-file', 'oar.db'),
    join(dir, 'ws'),
    'mysql://user@localhost/db',
    'postgres://',
    'postgres://postgres@127.0.0.1:1/nope',
    'postgres://postgres@127.0.0.1:5432/test?schema=Bad-Name',
    'postgresql://%zz@/x',
    'postgres://[::1',
    '',
  ])('%s: a store, or an OarRuntimeError within a bounded time', openOrRefuse, 30_000);

  it('random strings as store paths', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.string({ maxLength: 30 }).map((s) => s.replaceAll('/', '_')),
        openOrRefuse,
      ),
      runs(30),
    );
  }, 120_000);
});
