import { randomBytes, randomInt } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { HooksSchema } from '../../src/config/hooks.js';
import { type ModelScript, type PermissionRule, type RuntimeOptions, Store } from '../../src/index.js';
import { SecretScanner } from '../support/secret-scan.js';
import { dropSchema, POSTGRES_URL, postgresUnavailable } from '../support/stores.js';
import { tempDir } from '../support/temp-dirs.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, payload, recordingModel, waitFor } from './helpers.js';

/**
 * Issue 15 §1: "the model sees the redacted form unless a permission rule explicitly allows a path". A read of a
 * file an allow rule NAMES (`.env.test`, not `**`) reaches the model unredacted for the rest of that turn; the
 * record — events, artifacts, exports, read models, the database bytes, stdout — still holds only the redacted
 * form. Without such a rule, and after a restart (the unredacted side channel is memory only), the model sees
 * `[REDACTED:<kind>]`.
 */

const open: Harness[] = [];
const stores: Store[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  for (const h of open.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
  for (const store of stores.splice(0)) await store.close();
});

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** A random secret: letters and digits, long enough that the redactor treats a `.env` value of it as a secret. */
function secret(): string {
  let out = 'Zq9';
  for (let i = 0; i < 29; i++) out += ALNUM[randomInt(ALNUM.length)];
  return out;
}

interface Planted {
  /** In `.env.test`, the file the explicit rule names. */
  allowed: string;
  /** In `.env` (never read: known to the redactor) and in `notes/creds.txt` (read under no explicit rule). */
  other: string;
}

/** `.env.test` holds `allowed`; `.env` holds `other`, which `notes/creds.txt` repeats (an ordinary file). */
function writeWorkspace(workspace: string, planted: Planted): void {
  writeFileSync(join(workspace, '.env.test'), `NODE_ENV=test\nTEST_API_TOKEN=${planted.allowed}\n`);
  writeFileSync(join(workspace, '.env'), `OTHER_SECRET=${planted.other}\n`);
  mkdirSync(join(workspace, 'notes'), { recursive: true });
  writeFileSync(join(workspace, 'notes/creds.txt'), `the staging token is ${planted.other}\n`);
}

/** Read both files, then answer quoting both secrets (the answer is recorded redacted whatever the model saw). */
function script(planted: Planted, more: ModelScript['steps'] = []): ModelScript {
  return {
    steps: [
      act([
        { id: 'env_test', type: 'tool', name: 'read', args: { filePath: '.env.test' }, result: 'full' },
        { id: 'creds', type: 'tool', name: 'read', args: { filePath: 'notes/creds.txt' }, result: 'full' },
      ]),
      answer(`The test token is ${planted.allowed} and the staging one ${planted.other}.`),
      ...more,
    ],
  };
}

const EXPLICIT: PermissionRule[] = [
  { decision: 'allow', tool: 'read', paths: ['.env.test'], reason: 'the tests read the test credentials' },
];

/** Everything the runtime records or prints about the session, scanned for the planted secrets. */
async function recordHits(h: Harness, sessionId: string, threadId: string, values: string[], output: string) {
  const scanner = new SecretScanner(values);
  const events = await allEvents(h, sessionId);
  return [
    ...scanner.text(JSON.stringify(events), 'events'),
    ...scanner.text(JSON.stringify(await h.runtime.exportReplay(sessionId)), 'replay export'),
    ...scanner.text(JSON.stringify(await h.runtime.exportEvidence(sessionId)), 'evidence export'),
    ...scanner.text(JSON.stringify(await h.runtime.getSession({ sessionId, limit: 10_000 })), 'snapshot'),
    ...scanner.text(JSON.stringify(await h.runtime.getThreadRead({ sessionId, threadId })), 'thread read model'),
    ...scanner.text(output, 'stdout/stderr and the live stream'),
  ];
}

/** What a live subscriber (model deltas included) gets, until stopped. */
function follow(h: Harness, sessionId: string) {
  const seen: RuntimeEvent[] = [];
  const controller = new AbortController();
  const done = (async () => {
    for await (const event of h.runtime.subscribe(sessionId, { signal: controller.signal, deltas: true })) {
      seen.push(event);
    }
  })();
  return {
    seen,
    async stop() {
      controller.abort();
      await done;
    },
  };
}

/** What the process writes to stdout and stderr while `fn` runs. */
async function capturingOutput<T>(fn: () => Promise<T>): Promise<{ result: T; output: string }> {
  const chunks: string[] = [];
  const capture = (chunk: unknown) => {
    chunks.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk as Uint8Array).toString('utf8'));
    return true;
  };
  const out = vi.spyOn(process.stdout, 'write').mockImplementation(capture);
  const err = vi.spyOn(process.stderr, 'write').mockImplementation(capture);
  try {
    return { result: await fn(), output: chunks.join('') };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

async function runTurn(
  rules: PermissionRule[],
  options: { storeUrl?: string; more?: ModelScript['steps']; runtime?: Partial<RuntimeOptions> } = {},
) {
  const { storeUrl, more } = options;
  const planted = { allowed: secret(), other: secret() };
  const recorder = recordingModel(script(planted, more));
  const h = await harness(script(planted, more), {
    files: {},
    model: recorder.model,
    permissions: { mode: 'default', rules },
    ...(storeUrl ? { storeUrl } : {}),
    ...options.runtime,
  });
  open.push(h);
  writeWorkspace(h.workspace, planted);
  const { result, output } = await capturingOutput(async () => {
    const { sessionId, threadId } = await h.runtime.createSession({ title: 'reveal' });
    const live = follow(h, sessionId);
    await h.runtime.submitTurn({ sessionId, input: 'Which tokens do the tests use?' });
    await h.runtime.settled(sessionId);
    await live.stop();
    return { sessionId, threadId, live: live.seen };
  });
  const { sessionId, threadId, live } = result;
  // The stream really carried the model's output (its answer quotes both values), delta by delta.
  expect(live.some((event) => event.type === 'model.delta')).toBe(true);
  const read = await h.runtime.getThreadRead({ sessionId, threadId });
  expect(read.lastOutcome).toMatchObject({ status: 'completed' });
  return { h, planted, recorder, sessionId, threadId, output: `${output}\n${JSON.stringify(live)}` };
}

/** The model's second request: the one that carries the two reads' observations. */
function secondPrompt(recorder: ReturnType<typeof recordingModel>): string {
  expect(recorder.prompts.length).toBeGreaterThanOrEqual(2);
  return recorder.prompts[1]?.text ?? '';
}

describe('the model sees what an allow rule names, the record never does', () => {
  it('SQLite: an allow rule naming .env.test shows the model its value; the store, exports and output hold none', async () => {
    const { h, planted, recorder, sessionId, threadId, output } = await runTurn(EXPLICIT);
    const seen = secondPrompt(recorder);
    // The explicitly allowed read reaches the model whole…
    expect(seen).toContain(planted.allowed);
    // …the other read (an ordinary file, allowed by the mode only) is redacted as recorded.
    expect(seen).not.toContain(planted.other);
    expect(seen).toContain('[REDACTED:dotenv]');

    const events = await allEvents(h, sessionId);
    // The record has the redacted form of the very observation the model saw whole, and says so.
    const results = ofType(events, 'tool.result').map((e) => JSON.stringify(payload(e).observation));
    expect(results.some((text) => text.includes('TEST_API_TOKEN=[REDACTED:dotenv]'))).toBe(true);
    expect(ofType(events, 'output.redacted').length).toBeGreaterThan(0);
    expect(await recordHits(h, sessionId, threadId, [planted.allowed, planted.other], output)).toEqual([]);

    // The database file itself (bytes, every table, artifacts included) holds neither secret.
    await h.store.close();
    const file = join(h.dir, 'oar.db');
    const bytes = await new SecretScanner([planted.allowed, planted.other]).sqlite(file);
    h.store = await Store.open(file);
    expect(bytes).toEqual([]);
  });

  it('the provider request is the only reader: traces and a before_model_call hook get the redacted form', async () => {
    const exporter = new InMemorySpanExporter();
    const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    // A hook that writes down the messages it is shown and lets the call go on unchanged.
    const dir = tempDir('oar-reveal-hook-');
    const hook = join(dir, 'hook.mjs');
    const seenByHook = join(dir, 'seen.jsonl');
    writeFileSync(
      hook,
      "import { appendFileSync, readFileSync } from 'node:fs';\n" +
        "const event = JSON.parse(readFileSync(0, 'utf8'));\n" +
        "appendFileSync(process.argv[2], JSON.stringify(event.messages) + '\\n');\n",
    );
    const hooks = HooksSchema.parse([
      { name: 'watch', point: 'before_model_call', command: [process.execPath, hook, seenByHook] },
    ]);
    const { recorder, planted } = await runTurn(EXPLICIT, {
      runtime: { tracing: { tracerProvider, captureContent: true }, hooks },
    });
    // The hook allowed without a rewrite: the model still got the value…
    expect(secondPrompt(recorder)).toContain(planted.allowed);
    // …while the hook saw it redacted, on both calls.
    const hookLines = readFileSync(seenByHook, 'utf8').trim().split('\n');
    expect(hookLines).toHaveLength(2);
    expect(hookLines[1]).toContain('TEST_API_TOKEN=[REDACTED:dotenv]');
    const values = [planted.allowed, planted.other];
    expect(new SecretScanner(values).text(readFileSync(seenByHook, 'utf8'), 'hook input')).toEqual([]);
    // And the spans, prompt content included, hold neither value.
    const spans = exporter.getFinishedSpans();
    const attributes = JSON.stringify(spans.map((span) => span.attributes));
    expect(attributes).toContain('gen_ai.input.messages');
    expect(attributes).toContain('[REDACTED:dotenv]');
    expect(new SecretScanner(values).text(attributes, 'spans')).toEqual([]);
  });

  it('a broad `**` allow names no file: .env.test stays denied and other reads stay redacted', async () => {
    const { h, planted, recorder, sessionId } = await runTurn([{ decision: 'allow', paths: ['**'] }]);
    const seen = secondPrompt(recorder);
    expect(seen).not.toContain(planted.allowed);
    expect(seen).not.toContain(planted.other);
    expect(seen).toContain('[REDACTED:dotenv]');
    const evaluated = ofType(await allEvents(h, sessionId), 'permission.evaluated').map((e) => payload(e));
    expect(evaluated).toContainEqual(expect.objectContaining({ decision: 'deny', source: 'default' }));
  });

  it('an allow rule naming an ordinary file reveals that read (the mode allowing it does not)', async () => {
    const { recorder, planted } = await runTurn([
      ...EXPLICIT,
      { decision: 'allow', tool: 'read', paths: ['notes/creds.txt'] },
    ]);
    const seen = secondPrompt(recorder);
    expect(seen).toContain(planted.allowed);
    expect(seen).toContain(planted.other);
  });

  it('a read an ask rule asked about stays redacted once a person approves it, though an allow rule names it', async () => {
    const planted = { allowed: secret(), other: secret() };
    const recorder = recordingModel(script(planted));
    const h = await harness(script(planted), {
      files: {},
      model: recorder.model,
      permissions: { mode: 'default', rules: [{ decision: 'ask', tool: 'read', paths: ['.env.test'] }, ...EXPLICIT] },
    });
    open.push(h);
    writeWorkspace(h.workspace, planted);
    const { sessionId } = await h.runtime.createSession({});
    await h.runtime.submitTurn({ sessionId, input: 'Which tokens do the tests use?' });
    await h.runtime.settled(sessionId);
    const [question] = ofType(await allEvents(h, sessionId), 'action.required');
    await h.runtime.respondAction({ sessionId, actionId: question?.actionId as string, decision: 'approve' });
    await h.runtime.settled(sessionId);
    const seen = secondPrompt(recorder);
    expect(seen).not.toContain(planted.allowed);
    expect(seen).toContain('[REDACTED:dotenv]');
  });

  it('a secret recognised only by its context stays redacted even in a read a rule names', async () => {
    const password = secret();
    const key = `sk-proj-${secret()}${secret()}`;
    const steps = [
      act([{ id: 'db', type: 'tool', name: 'read', args: { filePath: 'config/database.yml' }, result: 'full' }]),
      // The model repeats what it was shown: the key, with no context around it.
      answer(`The key is ${key}.`),
    ];
    const recorder = recordingModel({ steps });
    const h = await harness(
      { steps },
      {
        files: {},
        model: recorder.model,
        permissions: { mode: 'default', rules: [{ decision: 'allow', tool: 'read', paths: ['config/*.yml'] }] },
      },
    );
    open.push(h);
    mkdirSync(join(h.workspace, 'config'));
    // A provider key (recognised anywhere) and a URL password (recognised only inside the URL).
    writeFileSync(
      join(h.workspace, 'config/database.yml'),
      `openai_key: ${key}\nurl: postgres://app:${password}@db.internal:5432/app\n`,
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'What is the database password?' });
    await h.runtime.settled(sessionId);
    const seen = secondPrompt(recorder);
    expect(seen).toContain(key);
    expect(seen).not.toContain(password);
    expect(seen).toContain('[REDACTED:url_password]');
    // What the model could repeat is recognised on its own: nothing of either is recorded.
    expect(await recordHits(h, sessionId, threadId, [key, password], '')).toEqual([]);
  });

  it('the reveal lasts for the turn: the next turn replays the read redacted', async () => {
    const { h, planted, recorder, sessionId } = await runTurn(EXPLICIT, { more: [answer('Same as before.')] });
    expect(secondPrompt(recorder)).toContain(planted.allowed);
    await h.runtime.submitTurn({ sessionId, input: 'And again?' });
    await h.runtime.settled(sessionId);
    expect(recorder.prompts).toHaveLength(3);
    const third = recorder.prompts[2]?.text ?? '';
    expect(third).toContain('TEST_API_TOKEN=[REDACTED:dotenv]');
    expect(third).not.toContain(planted.allowed);
  });

  it('after a crash between the read and the next model call, the model gets the redacted form', async () => {
    const planted = { allowed: secret(), other: secret() };
    const steps = script(planted).steps;
    // The first process hangs in the model call that follows the reads; the second one makes that call again.
    const hanging = recordingModel({ steps: [steps[0]!, { ...steps[1]!, delayMs: 60_000 }] });
    const options = {
      files: {},
      permissions: { mode: 'default' as const, rules: EXPLICIT },
      worker: { leaseTtlMs: 300, pollMs: 50 },
    };
    const crashed = await harness({ steps }, { ...options, model: hanging.model });
    stores.push(crashed.store);
    writeWorkspace(crashed.workspace, planted);
    const { sessionId, threadId } = await crashed.runtime.createSession();
    await crashed.runtime.submitTurn({ sessionId, input: 'Which tokens do the tests use?' });
    await waitFor(async () => hanging.prompts.length >= 2);
    // Before the crash, the model was sent the value.
    expect(hanging.prompts[1]?.text).toContain(planted.allowed);
    crashed.runtime.worker?.abandon();

    const fresh = recordingModel({ steps });
    const store = await Store.open(join(crashed.dir, 'oar.db'));
    const second = await harness(
      { steps },
      { ...options, store, workspaceRoot: crashed.workspace, model: fresh.model },
    );
    open.push(second);
    await second.runtime.settled(sessionId);
    const read = await second.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed' });
    const after = fresh.prompts.at(-1)?.text ?? '';
    expect(after).toContain('TEST_API_TOKEN=[REDACTED:dotenv]');
    expect(after).not.toContain(planted.allowed);
  });

  it('PostgreSQL: the explicitly allowed read reaches the model, no table holds the value', async () => {
    const unavailable = await postgresUnavailable();
    if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
    if (unavailable) {
      console.warn(`SKIPPED PostgreSQL reveal test: ${unavailable.message}`);
      return;
    }
    const schema = `oar_t_${randomBytes(6).toString('hex')}`;
    try {
      const { planted, recorder, h, sessionId, threadId, output } = await runTurn(EXPLICIT, {
        storeUrl: `${POSTGRES_URL}?schema=${schema}`,
      });
      expect(secondPrompt(recorder)).toContain(planted.allowed);
      const values = [planted.allowed, planted.other];
      expect(await recordHits(h, sessionId, threadId, values, output)).toEqual([]);
      expect(await new SecretScanner(values).postgres(POSTGRES_URL, schema)).toEqual([]);
    } finally {
      for (const h of open.splice(0)) {
        await h.runtime.close();
        await h.store.close();
      }
      await dropSchema(schema);
    }
  });
});
