import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { UiHintSchema } from '@oar/protocol';
import { CliOutputSchema, CREDENTIAL_ENV, IDEMPOTENCY_KEY_ENV, issueCredential, ManifestSchema } from '@oar/tool-cli';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PostProcessorCall, postProcessors } from '../src/post-processors.js';

/**
 * The example business CLI as OAR runs it: the BUILT program as a real subprocess, its input on stdin, the
 * controlled credential and the verification key in its environment, one JSON object on stdout. Identity is the
 * credential's `sub` only; the post-processors turn its real results into UI hints valid against UiHintSchema.
 */

const root = fileURLToPath(new URL('../../../', import.meta.url));
const cliPath = join(root, 'examples/business-cli/dist/cli.js');
const SECRET = 'business-cli-test-secret-of-32-bytes-or-more';
const key = { algorithm: 'HS256' as const, secret: SECRET };
const ALL = ['calendar.*', 'contacts.*', 'memory.*'];

let dir: string;
let stores = 0;

beforeAll(() => {
  // dist/cli.js is built before any test file runs (vitest's globalSetup, scripts/vitest-global-setup.ts).
  dir = mkdtempSync(join(tmpdir(), 'oar-business-cli-'));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** A fresh store path (created and seeded by the CLI on first use). */
function freshStore(): string {
  stores += 1;
  return join(dir, `store-${stores}.db`);
}

function credential(sub = 'user:ada', ops = ALL, ttl = 300, ws = 'default', secret = SECRET) {
  return issueCredential({ sub, ws, ops, sid: 'ses_test', tcid: 'call_test' }, { ...key, secret }, ttl);
}

interface Run {
  status: number | null;
  stdout: string;
  output: ReturnType<typeof CliOutputSchema.parse>;
}

function run(argv: string[], input: unknown, env: Record<string, string>): Run {
  const child = spawnSync(process.execPath, [cliPath, ...argv], {
    input: typeof input === 'string' ? input : JSON.stringify(input),
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', ...env },
  });
  expect(child.stderr).toBe('');
  // Exactly one JSON object on stdout.
  expect(child.stdout.trim().split('\n')).toHaveLength(1);
  return { status: child.status, stdout: child.stdout, output: CliOutputSchema.parse(JSON.parse(child.stdout)) };
}

/** A caller bound to one store and one owner. */
async function as(store: string, sub = 'user:ada', ops = ALL, ws = 'default') {
  const env = { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: await credential(sub, ops, 300, ws) };
  return (module: string, method: string, input: unknown, extra: Record<string, string> = {}) =>
    run(['--store', store, module, method], input, { ...env, ...extra });
}

// biome-ignore lint/suspicious/noExplicitAny: test access to JSON data
function dataOf(r: Run): any {
  if (!r.output.ok) throw new Error(`expected success, got ${JSON.stringify(r.output.error)}`);
  return r.output.data;
}

function errorOf(r: Run) {
  if (r.output.ok) throw new Error(`expected a failure, got ${JSON.stringify(r.output)}`);
  return r.output.error;
}

const ids = (items: { id: string }[]) => items.map((i) => i.id);

describe('the example business CLI as a real process', () => {
  it('creates once per idempotency key: a repeated key (a retried call) gets the first result, nothing new', async () => {
    const store = freshStore();
    const ada = await as(store);
    const input = { title: 'Retro', start_at: '2026-12-02T15:00:00+01:00', end_at: '2026-12-02T16:00:00+01:00' };
    const count = () => dataOf(ada('calendar', 'read', { mode: 'day', date: '2026-12-02' })).items.length;
    const before = count();
    const first = dataOf(ada('calendar', 'create', input, { [IDEMPOTENCY_KEY_ENV]: 'idem_a' }));
    const again = dataOf(ada('calendar', 'create', input, { [IDEMPOTENCY_KEY_ENV]: 'idem_a' }));
    expect(again).toEqual(first);
    expect(count()).toBe(before + 1);
    // Another key (another attempt or call) creates another event; so does a call without a key (from a shell).
    const other = dataOf(ada('calendar', 'create', input, { [IDEMPOTENCY_KEY_ENV]: 'idem_b' }));
    expect(other.id).not.toBe(first.id);
    dataOf(ada('calendar', 'create', input));
    expect(count()).toBe(before + 3);
    // A key is the caller's own: another owner reusing it creates their own event.
    const bob = await as(store, 'user:bob');
    expect(dataOf(bob('calendar', 'create', input, { [IDEMPOTENCY_KEY_ENV]: 'idem_a' })).created).toBe(true);
  });

  it('reads a day: the owner’s events on that date, in their own offsets, with pending invites to them', async () => {
    const ada = await as(freshStore());
    const day = ada('calendar', 'read', { mode: 'day', date: '2026-12-01' });
    expect(day.status).toBe(0);
    expect(day.output).toMatchObject({ ok: true, module: 'calendar', method: 'read' });
    const data = dataOf(day);
    expect(data.count).toBe(2);
    expect(ids(data.items)).toEqual(['evt_ada_standup', 'evt_ada_review']);
    expect(data.items[0]).toMatchObject({ start_at: '2026-12-01T09:30:00+08:00', title: 'Team standup' });
    expect(data.items[1]).toMatchObject({ start_at: '2026-12-01T14:00:00+01:00' });
    const next = dataOf(ada('calendar', 'read', { mode: 'day', date: '2026-12-02' }));
    expect(ids(next.items)).toEqual(['evt_ada_lunch']);
    expect(next.invites).toMatchObject([{ id: 'inv_planning_ada', event_id: 'evt_bob_planning', status: 'pending' }]);
    const range = dataOf(
      ada('calendar', 'read', { mode: 'range', start_at: '2026-12-01T00:00:00Z', end_at: '2026-12-04T00:00:00Z' }),
    );
    expect(range.count).toBe(4);
  });

  it('a naive datetime, an unknown field or a missing mode field is INVALID_ACTION_INPUT with the schema as text', async () => {
    const ada = await as(freshStore());
    const naive = ada('calendar', 'read', {
      mode: 'range',
      start_at: '2026-12-01T00:00:00',
      end_at: '2026-12-02T00:00:00+08:00',
    });
    expect(naive.status).toBe(1);
    const error = errorOf(naive);
    expect(error).toMatchObject({ code: 'INVALID_ACTION_INPUT', module: 'calendar', method: 'read' });
    expect(error.input_schema).toMatchObject({
      mode: 'enum(day|range|event)',
      'date?': 'date (YYYY-MM-DD)',
      'start_at?': 'datetime with offset',
      'end_at?': 'datetime with offset',
    });
    expect(error.message).toContain('start_at');
    const create = errorOf(
      ada('calendar', 'create', { title: 'x', start_at: '2026-12-01T10:00:00', end_at: '2026-12-01T11:00:00+01:00' }),
    );
    expect(create.input_schema).toMatchObject({ start_at: 'datetime with offset', end_at: 'datetime with offset' });
    const missing = errorOf(ada('calendar', 'read', { mode: 'day' }));
    expect(missing).toMatchObject({ code: 'INVALID_ACTION_INPUT' });
    expect(missing.message).toContain('mode "day" needs date');
    expect(errorOf(ada('calendar', 'read', { mode: 'day', date: '2026-12-01', token: 'x' })).code).toBe(
      'INVALID_ACTION_INPUT',
    );
    expect(errorOf(ada('calendar', 'read', '{not json')).code).toBe('INPUT_NOT_JSON');
    expect(errorOf(ada('calendar', 'drop', {})).code).toBe('ACTION_NOT_ALLOWED');
  });

  it('create, then read shows it; update changes it; delete removes it (and deleting again is a no-op)', async () => {
    const ada = await as(freshStore());
    const created = ada('calendar', 'create', {
      title: 'Board meeting',
      start_at: '2026-12-03T08:00:00+08:00',
      end_at: '2026-12-03T09:30:00+08:00',
      location: 'Taipei',
      attendees: ['grace@example.com'],
    });
    expect(created.status).toBe(0);
    const { id, event } = dataOf(created);
    expect(id).toMatch(/^evt_/);
    expect(event).toMatchObject({ id, title: 'Board meeting', attendees: ['grace@example.com'] });
    const day = dataOf(ada('calendar', 'read', { mode: 'day', date: '2026-12-03' }));
    expect(ids(day.items)).toEqual([id, 'evt_ada_retro']);
    expect(dataOf(ada('calendar', 'read', { mode: 'event', event_id: id })).event).toMatchObject({
      location: 'Taipei',
    });

    const updated = dataOf(ada('calendar', 'update', { event_id: id, title: 'Board meeting (moved)' }));
    expect(updated).toMatchObject({ id, changed: ['title'], event: { title: 'Board meeting (moved)' } });
    expect(dataOf(ada('calendar', 'update', { event_id: id, title: 'Board meeting (moved)' })).changed).toEqual([]);
    expect(errorOf(ada('calendar', 'update', { event_id: id, end_at: '2026-12-03T07:00:00+08:00' })).message).toContain(
      'end_at must be after start_at',
    );

    expect(dataOf(ada('calendar', 'delete', { event_id: id }))).toMatchObject({
      id,
      deleted: true,
      already_deleted: false,
    });
    expect(ids(dataOf(ada('calendar', 'read', { mode: 'day', date: '2026-12-03' })).items)).toEqual(['evt_ada_retro']);
    expect(dataOf(ada('calendar', 'delete', { event_id: id }))).toMatchObject({ deleted: true, already_deleted: true });
    expect(errorOf(ada('calendar', 'read', { mode: 'event', event_id: id })).details).toMatchObject({
      reason: 'not_found',
    });
  });

  it('share invites the valid addresses and reports the rest as not done; the invitee sees and answers the invite', async () => {
    const store = freshStore();
    const ada = await as(store);
    const bob = await as(store, 'user:bob');
    const shared = ada('calendar', 'share', {
      event_id: 'evt_ada_review',
      with: ['bob@example.com', 'not-an-email', 'ada@example.com'],
    });
    expect(shared.status).toBe(0);
    expect(shared.output).toMatchObject({
      ok: true,
      data: { event_id: 'evt_ada_review', count: 1, created: 1, invites: [{ invitee: 'bob@example.com' }] },
      partial: {
        notDone: [
          { address: 'not-an-email', reason: 'not a valid email address' },
          { address: 'ada@example.com', reason: 'that is you, the owner of the event' },
        ],
      },
    });
    const inviteId = dataOf(shared).invites[0].id as string;
    // Bob sees the invite on that day (not ada's event itself), and answers it; answering again is a no-op.
    const bobDay = dataOf(bob('calendar', 'read', { mode: 'day', date: '2026-12-01' }));
    expect(ids(bobDay.items)).toEqual(['evt_bob_dentist']);
    expect(bobDay.invites).toMatchObject([{ id: inviteId, title: 'Design review', from: 'user:ada' }]);
    expect(dataOf(bob('calendar', 'accept_invite', { invite_id: inviteId }))).toMatchObject({
      id: inviteId,
      status: 'accepted',
      changed: true,
    });
    expect(dataOf(bob('calendar', 'accept_invite', { invite_id: inviteId })).changed).toBe(false);
    expect(dataOf(bob('calendar', 'reject_invite', { invite_id: inviteId })).status).toBe('rejected');
    // Ada cannot answer an invite addressed to bob.
    expect(errorOf(ada('calendar', 'accept_invite', { invite_id: inviteId })).details).toMatchObject({
      reason: 'not_found',
    });
    // Nothing valid at all: a failure, not an empty success.
    expect(errorOf(ada('calendar', 'share', { event_id: 'evt_ada_review', with: ['nope'] })).code).toBe(
      'HANDLER_FAILED',
    );
  });

  it('identity is credential.sub only: another owner’s event is invisible and cannot be deleted, owner_id or not', async () => {
    const store = freshStore();
    const ada = await as(store);
    const bob = await as(store, 'user:bob');
    const day = dataOf(ada('calendar', 'read', { mode: 'day', date: '2026-12-01' }));
    expect(ids(day.items)).not.toContain('evt_bob_dentist');
    expect(errorOf(ada('calendar', 'read', { mode: 'event', event_id: 'evt_bob_dentist' })).details).toMatchObject({
      reason: 'not_found',
    });
    // An owner_id in the input is not a way in: no method takes one (strict schemas), …
    const withOwner = ada('calendar', 'delete', { event_id: 'evt_bob_dentist', owner_id: 'user:bob' });
    expect(errorOf(withOwner).code).toBe('INVALID_ACTION_INPUT');
    expect(
      errorOf(ada('calendar', 'read', { mode: 'event', event_id: 'evt_bob_dentist', owner_id: 'user:bob' })).code,
    ).toBe('INVALID_ACTION_INPUT');
    // … and without it the event is simply not found for ada.
    expect(errorOf(ada('calendar', 'delete', { event_id: 'evt_bob_dentist' })).details).toMatchObject({
      reason: 'not_found',
    });
    expect(errorOf(ada('calendar', 'update', { event_id: 'evt_bob_dentist', title: 'mine' })).code).toBe(
      'HANDLER_FAILED',
    );
    expect(errorOf(ada('calendar', 'share', { event_id: 'evt_bob_dentist', with: ['x@example.com'] })).code).toBe(
      'HANDLER_FAILED',
    );
    // Bob's event is untouched.
    expect(dataOf(bob('calendar', 'read', { mode: 'event', event_id: 'evt_bob_dentist' })).event).toMatchObject({
      title: 'Dentist',
    });
    // Contacts and memory are per owner too.
    expect(ids(dataOf(ada('contacts', 'read', {})).items)).toEqual(['ct_alan', 'ct_grace', 'ct_linus']);
    expect(ids(dataOf(bob('contacts', 'read', {})).items)).toEqual(['ct_bob_ada']);
    expect(dataOf(ada('memory', 'update', { key: 'tz', value: '+08:00' }))).toMatchObject({ created: true });
    expect(dataOf(bob('memory', 'update', { key: 'tz', value: '+01:00' }))).toMatchObject({ created: true });
    expect(dataOf(ada('memory', 'update', { key: 'tz', value: '+09:00' }))).toMatchObject({
      created: false,
      previous: '+08:00',
    });
    // And per workspace: the same subject in another workspace sees nothing.
    const elsewhere = await as(store, 'user:ada', ALL, 'other');
    expect(dataOf(elsewhere('calendar', 'read', { mode: 'day', date: '2026-12-01' })).count).toBe(0);
  });

  it('contacts.read finds by query or id', async () => {
    const ada = await as(freshStore());
    expect(ids(dataOf(ada('contacts', 'read', { query: 'GRACE' })).items)).toEqual(['ct_grace']);
    expect(ids(dataOf(ada('contacts', 'read', { query: 'example.org' })).items)).toEqual(['ct_alan']);
    expect(dataOf(ada('contacts', 'read', { contact_id: 'ct_linus' })).items).toMatchObject([{ name: 'Linus Lee' }]);
    expect(dataOf(ada('contacts', 'read', { query: '%' })).count).toBe(0);
  });

  it('refuses a missing, expired, forged or out-of-scope credential, and a missing key, without echoing the token', async () => {
    const store = freshStore();
    const input = { mode: 'day', date: '2026-12-01' };
    const argv = ['--store', store, 'calendar', 'read'];
    expect(errorOf(run(argv, input, { BUSINESS_CLI_KEY: SECRET })).code).toBe('CREDENTIAL_MISSING');
    const expired = await credential('user:ada', ALL, -60);
    expect(errorOf(run(argv, input, { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: expired })).code).toBe(
      'CREDENTIAL_EXPIRED',
    );
    const forged = await credential('user:ada', ALL, 300, 'default', 'another-secret-another-secret-another');
    const forgedRun = run(argv, input, { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: forged });
    expect(forgedRun.status).toBe(1);
    expect(errorOf(forgedRun).code).toBe('CREDENTIAL_INVALID');
    expect(forgedRun.stdout).not.toContain(forged);
    const valid = await credential();
    expect(errorOf(run(argv, input, { [CREDENTIAL_ENV]: valid })).code).toBe('CREDENTIAL_INVALID');
    const readOnly = await as(store, 'user:ada', ['calendar.read']);
    expect(readOnly('calendar', 'read', input).status).toBe(0);
    expect(errorOf(readOnly('calendar', 'delete', { event_id: 'evt_ada_standup' })).code).toBe('ACTION_NOT_ALLOWED');
    expect(errorOf(readOnly('memory', 'update', { key: 'k', value: 'v' })).code).toBe('ACTION_NOT_ALLOWED');
    // The event survived the refused delete.
    expect(ids(dataOf(readOnly('calendar', 'read', input)).items)).toContain('evt_ada_standup');
  });

  it('usage errors exit 2 (no --store, junk arguments)', async () => {
    const env = { BUSINESS_CLI_KEY: SECRET, [CREDENTIAL_ENV]: await credential() };
    expect(run(['calendar', 'read'], { mode: 'day', date: '2026-12-01' }, env).status).toBe(2);
    expect(run(['--store', freshStore(), 'calendar'], {}, env).status).toBe(2);
  });

  it('--describe lists the nine methods with their input JSON Schema and facts', () => {
    const child = spawnSync(process.execPath, [cliPath, '--describe'], { encoding: 'utf8', env: { PATH: '' } });
    expect(child.status).toBe(0);
    const manifest = ManifestSchema.parse(JSON.parse(child.stdout));
    expect(manifest).toMatchObject({ name: 'business-cli', credential: { algorithm: 'HS256' } });
    const byName = Object.fromEntries(manifest.methods.map((m) => [`${m.module}.${m.method}`, m]));
    expect(Object.keys(byName).sort()).toEqual(Object.keys(postProcessors).sort());
    expect(Object.keys(byName)).toHaveLength(9);
    expect(byName['calendar.read']?.facts).toEqual({
      readOnly: true,
      destructive: false,
      idempotent: true,
      concurrencySafe: true,
      interrupt: 'cancel',
    });
    expect(byName['calendar.create']?.facts).toMatchObject({ readOnly: false, idempotent: false, interrupt: 'block' });
    expect(byName['calendar.update']?.facts).toMatchObject({ readOnly: false, idempotent: true });
    expect(byName['calendar.delete']?.facts).toMatchObject({ destructive: true, idempotent: true, interrupt: 'block' });
    expect(byName['calendar.share']?.facts).toMatchObject({ readOnly: false, destructive: false });
    expect(byName['calendar.accept_invite']?.facts).toMatchObject({ readOnly: false, idempotent: true });
    expect(byName['calendar.reject_invite']?.facts).toMatchObject({ readOnly: false, idempotent: true });
    expect(byName['contacts.read']?.facts).toMatchObject({ readOnly: true });
    expect(byName['memory.update']?.facts).toMatchObject({ readOnly: false, idempotent: true });
    expect(byName['calendar.read']?.inputSchema).toMatchObject({ type: 'object', additionalProperties: false });
  });
});

describe('the post-processors', () => {
  /** Calls of all nine methods against a real store, as OAR would hand them to the post-processors. */
  async function realCalls(): Promise<PostProcessorCall[]> {
    const store = freshStore();
    const ada = await as(store);
    const calls: PostProcessorCall[] = [];
    const record = (module: string, method: string, input: Record<string, unknown>) => {
      const r = ada(module, method, input);
      if (!r.output.ok) throw new Error(`${module}.${method} failed: ${JSON.stringify(r.output.error)}`);
      calls.push({
        module,
        method,
        input,
        data: r.output.data,
        status: r.output.partial ? 'partial' : 'success',
        ...(r.output.partial ? { partial: r.output.partial } : {}),
      });
      return r.output.data as Record<string, unknown>;
    };
    record('calendar', 'read', { mode: 'day', date: '2026-12-02' });
    record('calendar', 'read', {
      mode: 'range',
      start_at: '2026-12-01T00:00:00+08:00',
      end_at: '2026-12-03T00:00:00Z',
    });
    record('calendar', 'read', { mode: 'event', event_id: 'evt_ada_review' });
    const created = record('calendar', 'create', {
      title: 'Offsite',
      start_at: '2026-12-03T09:00:00+01:00',
      end_at: '2026-12-03T17:00:00+01:00',
      attendees: ['grace@example.com'],
    });
    const id = created.id as string;
    record('calendar', 'update', { event_id: id, location: 'Lisbon' });
    record('calendar', 'share', { event_id: id, with: ['alan@example.org', 'bad address'] });
    record('calendar', 'accept_invite', { invite_id: 'inv_planning_ada' });
    record('calendar', 'reject_invite', { invite_id: 'inv_planning_ada' });
    record('calendar', 'delete', { event_id: id });
    record('contacts', 'read', { query: 'example' });
    record('contacts', 'read', { contact_id: 'ct_grace' });
    record('memory', 'update', { key: 'preferred_zone', value: '+08:00' });
    return calls;
  }

  it('each of the nine methods yields hints that parse with UiHintSchema for its real result', async () => {
    const calls = await realCalls();
    const seen = new Set<string>();
    const hintsOf: Record<string, ReturnType<typeof UiHintSchema.parse>[][]> = {};
    for (const call of calls) {
      const name = `${call.module}.${call.method}`;
      const processor = postProcessors[name];
      expect(processor, name).toBeTypeOf('function');
      const hints = processor?.(call);
      expect(hints, name).toBeDefined();
      expect(hints?.length, name).toBeGreaterThan(0);
      const parsed = (hints ?? []).map((h) => UiHintSchema.parse(h));
      hintsOf[name] = [...(hintsOf[name] ?? []), parsed];
      seen.add(name);
    }
    expect([...seen].sort()).toEqual(Object.keys(postProcessors).sort());

    const [day, range, event] = hintsOf['calendar.read'] ?? [];
    expect(day?.[0]).toMatchObject({ type: 'list', items: [{ id: 'evt_ada_lunch', title: 'Lunch with Grace' }] });
    // The pending invite of that day: a card with accept / decline calls.
    expect(day?.[1]).toMatchObject({
      type: 'card',
      actions: [
        { type: 'call', module: 'calendar', method: 'accept_invite', input: { invite_id: 'inv_planning_ada' } },
        { type: 'call', method: 'reject_invite' },
      ],
    });
    expect(range?.[0]).toMatchObject({ type: 'table' });
    expect(event?.[0]).toMatchObject({
      type: 'calendar_event',
      event: { id: 'evt_ada_review', location: 'Berlin office' },
    });
    const [created] = hintsOf['calendar.create']?.[0] ?? [];
    expect(created).toMatchObject({ type: 'calendar_event', event: { title: 'Offsite' } });
    expect(created?.type === 'calendar_event' && created.actions?.map((a) => a.type === 'call' && a.method)).toEqual([
      'share',
      'delete',
    ]);
    expect(hintsOf['calendar.update']?.[0]?.[0]).toMatchObject({
      type: 'calendar_event',
      event: { location: 'Lisbon' },
    });
    const [share] = hintsOf['calendar.share']?.[0] ?? [];
    expect(share).toMatchObject({ type: 'confirmation', outcome: 'partial' });
    expect(share?.type === 'confirmation' && share.message).toContain('bad address');
    expect(hintsOf['calendar.delete']?.[0]?.[0]).toMatchObject({ type: 'confirmation', outcome: 'done' });
    expect(hintsOf['calendar.accept_invite']?.[0]?.[0]).toMatchObject({
      type: 'confirmation',
      title: 'Invite accepted',
    });
    expect(hintsOf['calendar.reject_invite']?.[0]?.[0]).toMatchObject({
      type: 'confirmation',
      title: 'Invite declined',
    });
    const [many, one] = hintsOf['contacts.read'] ?? [];
    expect(many?.map((h) => h.type)).toEqual(['contact', 'contact', 'contact']);
    expect(one).toMatchObject([
      { type: 'contact', contact: { id: 'ct_grace', name: 'Grace Hopper', phone: '+1 555 0100' } },
    ]);
    expect(hintsOf['memory.update']?.[0]).toMatchObject([
      { type: 'key_value', entries: [{ label: 'preferred_zone', value: '+08:00' }] },
    ]);
  });

  it('a read with many or no contacts is one list; a share with nothing left out is done', () => {
    const items = Array.from({ length: 5 }, (_, i) => ({ id: `ct_${i}`, name: `Person ${i}`, email: null }));
    const list = postProcessors['contacts.read']?.({
      module: 'contacts',
      method: 'read',
      input: {},
      data: { items, count: 5 },
      status: 'success',
    });
    expect(list?.map((h) => UiHintSchema.parse(h).type)).toEqual(['list']);
    const none = postProcessors['contacts.read']?.({
      module: 'contacts',
      method: 'read',
      input: { query: 'zz' },
      data: { query: 'zz', items: [], count: 0 },
      status: 'success',
    });
    expect(none).toMatchObject([{ type: 'list', items: [], empty: 'No contact matches “zz”' }]);
    const share = postProcessors['calendar.share']?.({
      module: 'calendar',
      method: 'share',
      input: { event_id: 'evt_1', with: ['a@b.co'] },
      data: {
        event_id: 'evt_1',
        title: 'T',
        invites: [{ id: 'inv_1', invitee: 'a@b.co', status: 'pending' }],
        count: 1,
      },
      status: 'success',
    });
    expect(share?.map((h) => UiHintSchema.parse(h))).toMatchObject([{ type: 'confirmation', outcome: 'done' }]);
  });

  it('are defensive: data of an unexpected shape gives no hints, never an exception', () => {
    const junk: unknown[] = [null, undefined, 42, 'text', [], {}, { items: 'x' }, { mode: 'event', event: { id: 1 } }];
    for (const [name, processor] of Object.entries(postProcessors)) {
      const [module = '', method = ''] = name.split('.');
      for (const data of junk) {
        expect(() => processor({ module, method, input: {}, data, status: 'success' }), name).not.toThrow();
        const hints = processor({ module, method, input: {}, data, status: 'success' });
        for (const hint of hints ?? []) expect(UiHintSchema.safeParse(hint).success, name).toBe(true);
      }
      expect(processor({ module, method, input: {}, data: null, status: 'success' }), name).toBeUndefined();
    }
  });
});
