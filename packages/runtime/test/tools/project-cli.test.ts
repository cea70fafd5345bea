import { generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type RuntimeEvent, ToolAgentOutputSchema } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelScript } from '../../src/index.js';
import { type Harness, harness } from '../engine/harness.js';
import { act, allEvents, answer, ofType, payload } from '../engine/helpers.js';
import { tempDir } from '../support/temp-dirs.js';

/**
 * project_cli end to end (Agent Tool Protocol): a real business CLI on the SDK (fixtures/business/cli.mjs) run as
 * a subprocess behind one tool, under a scripted model, on a real SQLite store.
 */
const FIXTURES = fileURLToPath(new URL('../fixtures/business/', import.meta.url));
const KEY = 'fixture-hs256-secret-0123456789abcdef';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
  delete process.env.FIXTURE_CLI_KEY;
  delete process.env.FIXTURE_LOG;
});

const cliCall = (id: string, module: string, method: string, input: Record<string, unknown>) => ({
  id,
  type: 'tool',
  name: 'project_cli',
  args: { module, method, input },
});

async function start(
  script: ModelScript,
  overrides: Record<string, unknown> = {},
  options: { permissions?: { mode: 'default' | 'accept-edits' | 'bypass' } } = {},
) {
  const log = join(tempDir('oar-cli-log-'), 'starts.log');
  process.env.FIXTURE_CLI_KEY = KEY;
  process.env.FIXTURE_LOG = log;
  h = await harness(script, {
    cli: {
      command: [process.execPath, join(FIXTURES, 'cli.mjs')],
      allow: ['calendar.*', 'contacts.read'],
      env: ['FIXTURE_LOG'],
      cwd: FIXTURES,
      timeoutMs: 5_000,
      credential: { algorithm: 'HS256', keyEnv: 'FIXTURE_CLI_KEY' },
      skills: { calendar: join(FIXTURES, 'skills/calendar.md'), contacts: join(FIXTURES, 'skills/contacts.md') },
      enabledSkills: ['calendar'],
      postProcessors: join(FIXTURES, 'post-processors.mjs'),
      ...overrides,
    },
    bindTools: [],
    ...options,
  });
  const { sessionId } = await h.runtime.createSession();
  // Processes started for calls (the manifest's --describe, once per bound binding, is not a call).
  const starts = () =>
    existsSync(log)
      ? readFileSync(log, 'utf8')
          .trim()
          .split('\n')
          .filter((line) => line !== '["--describe"]').length
      : 0;
  return { sessionId, log, starts };
}

async function run(sessionId: string, input = 'go'): Promise<RuntimeEvent[]> {
  await h?.runtime.submitTurn({ sessionId, input });
  await h?.runtime.settled(sessionId);
  return allEvents(h as Harness, sessionId);
}

const record = (event: RuntimeEvent | undefined) => ToolAgentOutputSchema.parse(payload(event).toolAgentOutput);
const observation = (event: RuntimeEvent | undefined) =>
  payload(event).observation as { status: string; content?: string; summary?: string };

describe('project_cli', () => {
  it('runs a whitelisted method: the record, its ui_hints, the full JSON view and the credential of the session', async () => {
    const { sessionId } = await start({
      steps: [
        act([cliCall('r1', 'calendar', 'read', { mode: 'day', date: '2026-12-01', owner_id: 'mallory' })]),
        answer('ok'),
      ],
    });
    const events = await run(sessionId);
    const result = ofType(events, 'tool.result')[0];
    const out = record(result);
    expect(out).toMatchObject({
      tool_name: 'project_cli',
      tool_call_id: result?.toolCallId,
      tool_call_args: { module: 'calendar', method: 'read' },
      status: 'success',
      error: null,
      result: { module: 'calendar', method: 'read', data: { count: 1 } },
    });
    // Identity is the credential OAR issued (the local user, the default workspace, this one operation); the
    // `owner_id` in the input is only data.
    const data = out.result?.data as Record<string, unknown>;
    expect(data.owner).toMatch(/^user:/);
    expect(data.workspace).toBe('default');
    expect(data.ops).toEqual(['calendar.read']);
    expect(data.asked_owner).toBe('mallory');
    expect(out.ui_hints).toEqual([
      {
        type: 'list',
        title: 'Events',
        items: [{ id: 'evt_1', title: 'Project sync', subtitle: '2026-12-01T10:00:00+08:00' }],
      },
    ]);
    // The model sees the compact JSON of the result with its status, whole (the tool's default policy is full).
    const seen = observation(result);
    expect(JSON.parse(seen.content ?? '')).toEqual({ status: 'success', ...out.result });
    // The record is also an artifact.
    const ref = payload(result).toolAgentOutputRef as string;
    const artifactId = ref.replace('artifact://', '');
    const artifact = await h?.runtime.getArtifact({ sessionId, artifactId });
    expect(JSON.parse(Buffer.from(artifact?.bytes ?? []).toString('utf8'))).toEqual(payload(result).toolAgentOutput);
    // The effective whitelist is recorded with the turn's catalog.
    const catalog = payload(ofType(events, 'tool.catalog.resolved')[0]).tools as { operations?: string[] }[];
    // (allow: calendar.*, contacts.read) ∩ the router's methods.
    const operations = catalog[0]?.operations ?? [];
    expect(operations).toEqual(
      expect.arrayContaining(['calendar.read', 'calendar.create', 'calendar.delete', 'contacts.read']),
    );
    expect(operations.every((op) => /^calendar\.[a-z_]+$/.test(op) || op === 'contacts.read')).toBe(true);
    // Facts per method: the read ran without asking.
    expect(ofType(events, 'permission.evaluated').map((e) => payload(e).decision)).toEqual(['allow']);
  });

  it('refuses a naive datetime before spawning, shows input_schema, and the corrected call succeeds', async () => {
    const { sessionId, starts } = await start(
      {
        steps: [
          act([cliCall('c1', 'calendar', 'create', { title: 'Sync', start_at: '2026-12-01T10:00:00' })]),
          act([cliCall('c2', 'calendar', 'create', { title: 'Sync', start_at: '2026-12-01T10:00:00+08:00' })]),
          answer('created'),
        ],
      },
      { allow: ['calendar.create'] },
      { permissions: { mode: 'accept-edits' } },
    );
    // The manifest was read once (--describe) when the session's tools were bound.
    const events = await run(sessionId);
    const failed = ofType(events, 'tool.failed')[0];
    expect(payload(failed).error).toMatchObject({ code: 'invalid_action_input' });
    const out = record(failed);
    expect(out.status).toBe('failure');
    expect(out.error).toMatchObject({ code: 'INVALID_ACTION_INPUT', module: 'calendar', method: 'create' });
    expect(out.error?.input_schema).toMatchObject({ start_at: 'datetime with offset' });
    expect(observation(failed).content).toContain('datetime with offset');
    // Nobody was asked about a call that could not run, and no process started for it: only --describe and c2.
    const created = ofType(events, 'tool.result')[0];
    expect(record(created)).toMatchObject({ status: 'success', result: { data: { id: 'evt_new' } } });
    expect(record(created).ui_hints[0]).toMatchObject({ type: 'calendar_event' });
    expect(starts()).toBe(1);
  });

  it('refuses a method outside the whitelist: no question, no process', async () => {
    const { sessionId, starts } = await start(
      { steps: [act([cliCall('d1', 'calendar', 'delete', { event_id: 'evt_1' })]), answer('done')] },
      { allow: ['calendar.read'] },
    );
    const events = await run(sessionId);
    const refused = ofType(events, 'tool.failed')[0];
    expect(payload(refused).error).toMatchObject({ code: 'action_not_allowed' });
    expect(record(refused).error).toMatchObject({ code: 'ACTION_NOT_ALLOWED', module: 'calendar', method: 'delete' });
    expect(ofType(events, 'action.required')).toHaveLength(0);
    expect(ofType(events, 'tool.started')).toHaveLength(0);
    expect(starts()).toBe(0);
  });

  it('answers the old command/subcommand/args shape with a correction naming the new one (no alias)', async () => {
    const { sessionId, starts } = await start({
      steps: [
        act([
          { id: 'old', type: 'tool', name: 'project_cli', args: { command: 'calendar', subcommand: 'read', args: [] } },
        ]),
        answer('gave up'),
      ],
    });
    const events = await run(sessionId);
    const text = JSON.stringify(events);
    expect(text).toContain("Remove the property 'command'");
    expect(text).toContain('{ module: string, method: string, input: object }');
    expect(ofType(events, 'tool.started')).toHaveLength(0);
    expect(starts()).toBe(0);
  });

  it('asks before calendar.delete in default mode; a session grant names the exact operation', async () => {
    const { sessionId } = await start({
      steps: [
        act([cliCall('d1', 'calendar', 'delete', { event_id: 'evt_1' })]),
        act([
          cliCall('d2', 'calendar', 'delete', { event_id: 'evt_2' }),
          cliCall('c1', 'calendar', 'create', { title: 'x', start_at: '2026-12-01T10:00:00Z' }),
        ]),
        answer('done'),
      ],
    });
    await h?.runtime.submitTurn({ sessionId, input: 'delete' });
    await h?.runtime.settled(sessionId);
    let events = await allEvents(h as Harness, sessionId);
    const asked = ofType(events, 'action.required')[0];
    expect(payload(asked).toolName).toBe('project_cli calendar.delete');
    expect((payload(asked).scope as { operation?: string }).operation).toBe('calendar.delete');
    await h?.runtime.respondAction({ sessionId, actionId: asked?.actionId as string, decision: 'approve_for_session' });
    await h?.runtime.settled(sessionId);
    events = await allEvents(h as Harness, sessionId);
    const grant = ofType(events, 'permission.resolved').map((e) => payload(e).grant)[0];
    expect(grant).toMatchObject({ tool: 'project_cli', operation: 'calendar.delete' });
    // The second delete is covered by the grant; the create (another operation) is asked about.
    const decisions = ofType(events, 'permission.evaluated').map((e) => [payload(e).operation, payload(e).decision]);
    expect(decisions).toContainEqual(['calendar.delete', 'allow']);
    expect(decisions).toContainEqual(['calendar.create', 'ask']);
  });

  it('rules match an operation glob', async () => {
    const { sessionId, starts } = await start({
      steps: [
        act([cliCall('c1', 'calendar', 'create', { title: 'x', start_at: '2026-12-01T10:00:00Z' })]),
        answer('no'),
      ],
    });
    await h?.runtime.updateBinding({
      sessionId,
      update: {
        permissions: { mode: 'bypass', rules: [{ decision: 'deny', tool: 'project_cli', operation: 'calendar.c*' }] },
      },
    });
    const events = await run(sessionId);
    expect(ofType(events, 'permission.evaluated').map((e) => payload(e).decision)).toEqual(['deny']);
    expect(starts()).toBe(0);
  });

  it('loads a skill with read_skill; the description lists enabled skills only', async () => {
    const { sessionId } = await start({
      steps: [act([{ id: 's1', type: 'runtime', name: 'read_skill', args: { skill: 'calendar' } }]), answer('read')],
    });
    const tools = await h?.runtime.getToolInventory({ sessionId });
    const description = JSON.stringify(tools);
    expect(description).toContain('calendar: calendar — read and create events');
    expect(description).not.toContain('contacts — look people up');
    const events = await run(sessionId);
    const done = ofType(events, 'run.status').find(
      (e) => payload(e).phase === 'action' && payload(e).status === 'completed',
    );
    expect((payload(done).observation as { content?: string }).content).toContain('Times need an offset');
  });

  it('runs a whitelisted method with no skill of its module enabled (skills never authorize)', async () => {
    const { sessionId, starts } = await start({
      steps: [act([cliCall('c1', 'contacts', 'read', { query: 'Ada' })]), answer('found')],
    });
    const events = await run(sessionId);
    expect(record(ofType(events, 'tool.result')[0])).toMatchObject({
      status: 'success',
      result: { module: 'contacts', method: 'read', data: { count: 1 } },
      // Its post-processor returns hints that do not parse: none are shown rather than something wrong.
      ui_hints: [],
    });
    expect(starts()).toBe(1);
  });

  it('a partial success is status partial: the record and the model name what was not done', async () => {
    const { sessionId } = await start(
      { steps: [act([cliCall('p1', 'calendar', 'partial', { with: ['bob@example.com', 'nobody'] })]), answer('ok')] },
      {},
      { permissions: { mode: 'bypass' } },
    );
    const events = await run(sessionId);
    const result = ofType(events, 'tool.result')[0];
    const out = record(result);
    expect(out).toMatchObject({
      status: 'partial',
      result: {
        data: { invited: ['bob@example.com'] },
        partial: { not_done: ['nobody'], reason: 'not an email address' },
      },
    });
    expect(JSON.parse(observation(result).content ?? '')).toMatchObject({
      status: 'partial',
      partial: { not_done: ['nobody'] },
    });
  });

  it('signs with EdDSA: OAR holds the private key, the CLI verifies with the public one', async () => {
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    process.env.FIXTURE_CLI_PRIVATE_KEY = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    process.env.FIXTURE_CLI_PUBLIC_KEY = publicKey.export({ type: 'spki', format: 'pem' }).toString();
    try {
      const { sessionId } = await start(
        { steps: [act([cliCall('w1', 'whoami', 'read', {})]), answer('me')] },
        {
          command: [process.execPath, join(FIXTURES, 'eddsa-cli.mjs')],
          allow: ['whoami.read'],
          credential: {
            algorithm: 'EdDSA',
            keyEnv: 'FIXTURE_CLI_PRIVATE_KEY',
            verifyKeyEnv: 'FIXTURE_CLI_PUBLIC_KEY',
            per: 'run',
            ttlSeconds: 600,
          },
          skills: {},
          enabledSkills: [],
          postProcessors: undefined,
        },
      );
      const events = await run(sessionId);
      const data = record(ofType(events, 'tool.result')[0]).result?.data as { sub: string; ops: string[] };
      expect(data.sub).toMatch(/^user:/);
      // A per-run credential is scoped to the run's whole allowed set.
      expect(data.ops).toEqual(['whoami.read']);
      // The private key never reached the CLI, nor the record.
      expect(JSON.stringify(events)).not.toContain('PRIVATE KEY');
    } finally {
      delete process.env.FIXTURE_CLI_PRIVATE_KEY;
      delete process.env.FIXTURE_CLI_PUBLIC_KEY;
    }
  });
});
