import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../../src/index.js';
import { type PlantedSecrets, plantedSecrets, SecretScanner, writeSecretWorkspace } from '../support/secret-scan.js';
import { dropSchema, POSTGRES_URL, postgresUnavailable } from '../support/stores.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer } from './helpers.js';

/**
 * Secrets never enter the record. Seen: a `.env` read by the `read` tool landed verbatim in events, artifacts,
 * the replay and evidence exports and read models; a provider error body that echoed the API key went into the log.
 * Here known secrets are planted in the environment, in workspace files, in tool outputs, in model outputs and in a
 * provider error body; a turn runs over them; then the database (raw bytes and every table), every export and
 * every artifact are scanned for any of them: zero hits.
 */

const open: Harness[] = [];
const restoreEnv: (() => void)[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
  for (const restore of restoreEnv.splice(0)) restore();
});

function plantEnv(planted: PlantedSecrets): void {
  const before = Object.fromEntries(Object.keys(planted.env).map((name) => [name, process.env[name]]));
  Object.assign(process.env, planted.env);
  restoreEnv.push(() => {
    for (const [name, value] of Object.entries(before)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  });
}

/** A turn that carries every planted secret through each way in: tool output, model output, provider error. */
function script(planted: PlantedSecrets) {
  const openaiKey = planted.byLabel('openai_key').value;
  const github = planted.byLabel('github_pat').value;
  const session = planted.byLabel('dotenv_session_secret').value;
  return {
    steps: [
      // Turn 1: a provider error whose body echoes the API key (the turn fails with it).
      { error: { message: `401 Unauthorized: invalid api key ${openaiKey} for this project`, statusCode: 401 } },
      // Turn 2: tool outputs and a model answer full of secrets.
      act([
        { id: 'config', type: 'tool', name: 'read', args: { filePath: 'src/config.ts' } },
        { id: 'deploy', type: 'tool', name: 'read', args: { filePath: 'scripts/deploy.sh' } },
        { id: 'dotenv', type: 'tool', name: 'read', args: { filePath: '.env' } },
        { id: 'search', type: 'tool', name: 'grep', args: { pattern: 'password|Bearer|secret' } },
      ]),
      answer(`Found the token ${github} and the session secret ${session}; rotate both.`),
    ],
  };
}

async function runAndScan(h: Harness, planted: PlantedSecrets, scanStore: () => Promise<unknown[]>): Promise<void> {
  const { sessionId, threadId } = await h.runtime.createSession({ title: 'secrets' });
  await h.runtime.submitTurn({ sessionId, input: 'Check the model connection.' });
  await h.runtime.settled(sessionId);
  const failed = await h.runtime.getThreadRead({ sessionId, threadId });
  expect(failed.lastOutcome).toMatchObject({ status: 'failed', error: { code: 'model_auth' } });
  await h.runtime.submitTurn({ sessionId, input: 'Review the configuration of this project.' });
  await h.runtime.settled(sessionId);
  const read = await h.runtime.getThreadRead({ sessionId, threadId });
  expect(read.lastOutcome).toMatchObject({ status: 'completed' });
  const events = await allEvents(h, sessionId);
  // The secrets were really there to leak: the tools read them and the model said them.
  expect(events.some((e) => e.type === 'tool.result')).toBe(true);
  const redacted = events.filter((e) => e.type === 'output.redacted');
  expect(redacted.length).toBeGreaterThan(0);
  // Default rules keep `.env` from being read at all.
  expect(JSON.stringify(events)).toContain('permission_denied');

  const scanner = new SecretScanner(planted.all);
  const hits = [
    ...scanner.text(JSON.stringify(events), 'events'),
    ...scanner.text(JSON.stringify(await h.runtime.exportReplay(sessionId)), 'replay export'),
    ...scanner.text(JSON.stringify(await h.runtime.exportEvidence(sessionId)), 'evidence export'),
    ...scanner.text(JSON.stringify(await h.runtime.getSession({ sessionId, limit: 10_000 })), 'snapshot'),
    ...scanner.text(JSON.stringify(read), 'thread read model'),
    ...((await scanStore()) as never[]),
  ];
  expect(hits).toEqual([]);
  // And the redaction facts never carry values either: counts and kinds only.
  expect(scanner.text(JSON.stringify(redacted), 'output.redacted')).toEqual([]);
}

describe('secrets never enter the record', () => {
  it('on SQLite: the database file, its tables, exports and artifacts hold none of the planted secrets', async () => {
    const planted = plantedSecrets();
    plantEnv(planted);
    const h = await harness(script(planted), {
      files: {},
      permissions: { mode: 'bypass' },
      secrets: { env: planted.secretEnvNames },
    });
    open.push(h);
    await writeSecretWorkspace(h.workspace, planted);
    await runAndScan(h, planted, async () => {
      await h.store.close();
      const scanner = new SecretScanner(planted.all);
      const hits = await scanner.sqlite(join(h.dir, 'oar.db'));
      // Reopened for the afterEach close.
      h.store = await Store.open(join(h.dir, 'oar.db'));
      return hits;
    });
  });

  it('on PostgreSQL: every table of the schema holds none of the planted secrets', async () => {
    const unavailable = await postgresUnavailable();
    if (unavailable && process.env.CI) throw new Error(`PostgreSQL is required in CI: ${unavailable.message}`);
    if (unavailable) {
      console.warn(`SKIPPED PostgreSQL secret scan: ${unavailable.message}`);
      return;
    }
    const schema = `oar_t_${randomBytes(6).toString('hex')}`;
    const planted = plantedSecrets();
    plantEnv(planted);
    const h = await harness(script(planted), {
      files: {},
      storeUrl: `${POSTGRES_URL}?schema=${schema}`,
      permissions: { mode: 'bypass' },
      secrets: { env: planted.secretEnvNames },
    });
    open.push(h);
    try {
      await writeSecretWorkspace(h.workspace, planted);
      await runAndScan(h, planted, () => new SecretScanner(planted.all).postgres(POSTGRES_URL, schema));
    } finally {
      await dropSchema(schema);
    }
  });
});
