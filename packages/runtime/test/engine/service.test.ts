import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ServiceSchema } from '../../src/config/pipelines.js';
import { buildRequest } from '../../src/executors/service.js';
import { Store } from '../../src/index.js';
import { idempotencyKey } from '../../src/scheduler/bracket.js';
import { assertEventsConform } from '../support/schemas.js';
import { SecretScanner } from '../support/secret-scan.js';
import { type Harness, harness } from './harness.js';
import { act, actionRows, allEvents, answer, dsl, ofType, payload, recordingModel, waitFor } from './helpers.js';

/**
 * The `service` executor against a real HTTP server on a free local port: success, HTTP errors, retry of an
 * idempotent method only, timeouts, bad JSON, interrupts, and a bearer token that never enters the record.
 */

interface Seen {
  method: string;
  url: string;
  authorization?: string;
  body: string;
}

let server: Server;
let base: string;
let seen: Seen[];
/** The `Idempotency-Key` header of each request, in order. */
let keys: (string | undefined)[];
/** What the server does with the n-th request (0-based); the default answers JSON echoing the request. */
let handler: (req: IncomingMessage, res: ServerResponse, n: number, body: string) => void;
let h: Harness | undefined;
const TOKEN_ENV = 'OAR_SVC_TEST_TOKEN';
const token = `tok${randomBytes(18).toString('hex')}`;

beforeEach(async () => {
  seen = [];
  keys = [];
  handler = (req, res, _n, body) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ method: req.method, url: req.url, auth: req.headers.authorization, body }));
  };
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const n = seen.length;
      keys.push(req.headers['idempotency-key'] as string | undefined);
      seen.push({
        method: req.method ?? '',
        url: req.url ?? '',
        ...(req.headers.authorization ? { authorization: req.headers.authorization } : {}),
        body,
      });
      handler(req, res, n, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  process.env[TOKEN_ENV] = token;
});

afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  delete process.env[TOKEN_ENV];
});

/** A session whose model calls service `name` once with `input`, then answers. */
async function callService(
  service: Record<string, unknown>,
  input: Record<string, unknown>,
  options: { permissions?: Record<string, unknown> } = {},
) {
  const recorder = recordingModel({
    steps: [dsl([{ id: 'call', executor: { type: 'service', target: service.name }, input }]), answer('done')],
  });
  h = await harness(
    { steps: [] },
    {
      model: recorder.model,
      services: [service as never],
      permissions: (options.permissions ?? { mode: 'bypass', rules: [] }) as never,
    },
  );
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'call it' });
  await h.runtime.settled(sessionId);
  const read = await h.runtime.getThreadRead({ sessionId, threadId });
  const events = await allEvents(h, sessionId);
  return { read, events, sessionId, prompts: recorder.prompts, row: actionRows(read)[0] };
}

const issues = {
  name: 'issues',
  description: 'Looks up issues of a repository.',
  capabilities: ['tracker'],
  url: '',
  method: 'GET',
  inputSchema: {
    type: 'object',
    properties: {
      repo: { type: 'string' },
      state: { type: 'string' },
      labels: { type: 'array', items: { type: 'string' } },
    },
    required: ['repo'],
  },
  auth: { type: 'bearer', tokenEnv: TOKEN_ENV },
  retryDelayMs: 1,
};

describe('service executor', () => {
  it('calls the service with the token, fills the URL and query from the input, and stores the JSON answer', async () => {
    const { events, row, prompts, read } = await callService(
      { ...issues, url: `${base}/repos/{repo}/issues` },
      { repo: 'oar/main', state: 'open', labels: ['bug', 'p1'] },
      { permissions: { mode: 'default', rules: [{ decision: 'allow', executor: 'service', tool: 'issues' }] } },
    );
    expect(seen).toEqual([
      {
        method: 'GET',
        url: '/repos/oar%2Fmain/issues?state=open&labels=bug&labels=p1',
        authorization: `Bearer ${token}`,
        body: '',
      },
    ]);
    expect(row).toMatchObject({ actionId: 'call', status: 'completed' });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'done' });
    assertEventsConform(events);
    const result = ofType(events, 'tool.result')[0];
    expect(payload(result)).toMatchObject({ toolName: 'issues', executor: 'service', status: 200, attempts: 1 });
    // The default result policy (summary) shows the answer; the token in it is masked.
    expect(payload(result).observation).toMatchObject({
      status: 'completed',
      content: expect.stringContaining('"auth": "Bearer [REDACTED:env_secret]"'),
    });
    expect(prompts[0]?.text).toContain('## Services');
    expect(prompts[0]?.text).toContain('issues: Looks up issues of a repository. (capabilities: tracker)');
  });

  it('the token never enters the record, even when the service echoes it back', async () => {
    const { events } = await callService({ ...issues, url: `${base}/echo` }, { repo: 'x' });
    // The server really saw it and really sent it back: the answer echoes the Authorization header.
    expect(seen[0]?.authorization).toBe(`Bearer ${token}`);
    expect(ofType(events, 'tool.result')).toHaveLength(1);
    const scanner = new SecretScanner([
      {
        label: 'svc_token',
        value: token,
        fragments: [token.slice(3, 19), token.slice(20, 36)],
      },
    ]);
    const sessionId = events[0]?.sessionId as string;
    const hits = [
      ...scanner.text(JSON.stringify(events), 'events'),
      ...scanner.text(JSON.stringify(await h?.runtime.exportEvidence(sessionId)), 'evidence'),
    ];
    // Every artifact and every table, as bytes.
    await h?.store.close();
    hits.push(...(await scanner.sqlite(join(h?.dir ?? '', 'oar.db'))));
    if (h) h.store = await Store.open(join(h.dir, 'oar.db'));
    expect(hits).toEqual([]);
    expect(JSON.stringify(events)).toContain('[REDACTED');
  });

  it('a 4xx is a structured, non-retryable error after one attempt', async () => {
    handler = (_req, res) => {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end('{"message":"no such repo"}');
    };
    const { row, events } = await callService({ ...issues, url: `${base}/repos/{repo}` }, { repo: 'nope' });
    expect(seen).toHaveLength(1);
    expect(row).toMatchObject({
      status: 'failed',
      error: { code: 'service_http_error', retryable: false, message: expect.stringContaining('HTTP 404') },
    });
    const failed = ofType(events, 'tool.failed')[0];
    expect(payload(failed).error).toMatchObject({ details: { status: 404, body: '{"message":"no such repo"}' } });
    assertEventsConform(events);
  });

  it('retries an idempotent method after 5xx and succeeds, each retry visible', async () => {
    handler = (_req, res, n) => {
      if (n < 2) {
        res.writeHead(503, { 'content-type': 'text/plain' });
        res.end('busy');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true}');
    };
    const { row, events } = await callService(
      { ...issues, url: `${base}/x`, method: 'PUT', retries: 2 },
      { repo: 'r' },
    );
    expect(seen.map((s) => s.method)).toEqual(['PUT', 'PUT', 'PUT']);
    expect(seen[0]?.body).toBe('{"repo":"r"}');
    expect(row).toMatchObject({ status: 'completed' });
    const progress = ofType(events, 'tool.progress');
    expect(progress.map((e) => payload(e).attempt)).toEqual([2, 3]);
    expect(payload(progress[0]).error).toMatchObject({ code: 'service_http_error', details: { status: 503 } });
    expect(payload(ofType(events, 'tool.result')[0])).toMatchObject({ attempts: 3 });
    assertEventsConform(events);
  });

  it('sends every attempt of one call with the same Idempotency-Key, the one its tool.started records', async () => {
    handler = (_req, res, n) => {
      res.writeHead(n === 0 ? 503 : 200, { 'content-type': 'application/json' });
      res.end(n === 0 ? '{}' : '{"ok":true}');
    };
    const { row, events, sessionId } = await callService(
      { ...issues, url: `${base}/x`, method: 'PUT', retries: 2 },
      { repo: 'r' },
    );
    expect(row).toMatchObject({ status: 'completed' });
    const started = ofType(events, 'tool.started')[0];
    const key = payload(started).idempotencyKey as string;
    expect(key).toMatch(/^idem_[0-9a-f]{32}$/);
    expect(keys).toEqual([key, key]);
    // Derived from the session, the call and the attempt: the same call's next attempt would get another one.
    expect(idempotencyKey(sessionId, started?.toolCallId ?? '', 1)).toBe(key);
    expect(idempotencyKey(sessionId, started?.toolCallId ?? '', 2)).not.toBe(key);
    // A POST carries its key too (its server can refuse to create twice).
    await h?.runtime.close();
    await h?.store.close();
    const post = await callService({ ...issues, url: `${base}/create`, method: 'POST' }, { repo: 'r' });
    const postKey = payload(ofType(post.events, 'tool.started')[0]).idempotencyKey;
    expect(keys.at(-1)).toBe(postKey);
    expect(postKey).not.toBe(key);
  });

  it('never retries a POST, even after a retryable failure', async () => {
    handler = (_req, res) => {
      res.writeHead(503);
      res.end();
    };
    const { row, events } = await callService({ ...issues, url: `${base}/create`, method: 'POST' }, { repo: 'r' });
    expect(seen).toHaveLength(1);
    expect(row).toMatchObject({ status: 'failed', error: { code: 'service_http_error', retryable: true } });
    expect(ofType(events, 'tool.progress')).toHaveLength(0);
    // Not idempotent: its start was recorded as such (a crash mid-call would make it `lost`, not re-run).
    expect(payload(ofType(events, 'tool.started')[0])).toMatchObject({ idempotent: false, maxAttempts: 1 });
    expect(ServiceSchema.safeParse({ ...issues, url: base, method: 'POST', retries: 1 }).success).toBe(false);
  });

  it('a service that does not answer in time fails with service_timeout', async () => {
    handler = () => {
      // Never answers.
    };
    const started = Date.now();
    const { row } = await callService({ ...issues, url: `${base}/slow`, timeoutMs: 150, retries: 1 }, { repo: 'r' });
    expect(row).toMatchObject({ status: 'failed', error: { code: 'service_timeout', retryable: true } });
    expect(seen).toHaveLength(2);
    expect(Date.now() - started).toBeLessThan(5000);
  });

  it('a JSON answer that does not parse is service_bad_json; an unreachable service is service_network_error', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"truncated":');
    };
    const bad = await callService({ ...issues, url: `${base}/bad` }, { repo: 'r' });
    expect(bad.row).toMatchObject({ status: 'failed', error: { code: 'service_bad_json', retryable: false } });
    await h?.runtime.close();
    await h?.store.close();
    h = undefined;

    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const down = await callService({ ...issues, url: `http://127.0.0.1:${port}/`, retries: 0 }, { repo: 'r' });
    expect(down.row).toMatchObject({ status: 'failed', error: { code: 'service_network_error', retryable: true } });
  });

  it('a missing token fails before anything is sent', async () => {
    delete process.env[TOKEN_ENV];
    const { row } = await callService({ ...issues, url: `${base}/x` }, { repo: 'r' });
    expect(row).toMatchObject({ status: 'failed', error: { code: 'service_auth_missing' } });
    expect(seen).toHaveLength(0);
  });

  it('an interrupt aborts the call in flight at once', async () => {
    handler = () => {
      // Never answers: only the interrupt ends the call.
    };
    h = await harness(
      {
        steps: [
          dsl([{ id: 'hang', executor: { type: 'service', target: 'issues' }, input: { repo: 'r' } }]),
          answer('later'),
        ],
      },
      {
        services: [{ ...issues, url: `${base}/hang`, timeoutMs: 60_000 } as never],
        permissions: { mode: 'bypass', rules: [] },
      },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await waitFor(async () => seen.length === 1);
    const started = Date.now();
    const result = await h.runtime.interruptTurn({ sessionId, reason: 'stop' });
    expect(result).toMatchObject({ interrupted: true, status: 'cancelled' });
    expect(Date.now() - started).toBeLessThan(5000);
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({ status: 'cancelled', error: { code: 'interrupted' } });
  });

  it('is reachable from the default tool carrier: a call with type "service"', async () => {
    h = await harness(
      {
        steps: [act([{ id: 'svc', type: 'service', name: 'issues', args: { repo: 'r' } }]), answer('carried')],
      },
      { services: [{ ...issues, url: `${base}/carrier` } as never], permissions: { mode: 'bypass', rules: [] } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({ actionId: 'svc', status: 'completed' });
    expect(seen.map((s) => s.url)).toEqual(['/carrier?repo=r']);
  });

  it('builds bodies for POST and refuses credentials in static headers', () => {
    const service = ServiceSchema.parse({ name: 's', url: 'https://api.example.com/items/{id}', method: 'POST' });
    expect(buildRequest(service, { id: 7, name: 'x' }, {})).toMatchObject({
      url: 'https://api.example.com/items/7',
      body: '{"name":"x"}',
      headers: { 'content-type': 'application/json' },
    });
    expect(buildRequest(service, { name: 'x' }, {})).toMatchObject({ error: { code: 'invalid_input' } });
    expect(
      ServiceSchema.safeParse({ name: 's', url: 'https://x.test', headers: { Authorization: 'Bearer abc' } }).success,
    ).toBe(false);
  });
});

describe('a service call a crash left in flight', () => {
  const crashed: Store[] = [];
  afterEach(async () => {
    for (const store of crashed.splice(0)) await store.close();
  });

  /**
   * A POST whose first request never gets an answer while the runtime that sent it "dies" (abandoned, never closed);
   * a second runtime on the same store takes the thread over once the lease runs out. The server remembers what it
   * did by Idempotency-Key, as a payment API does.
   */
  async function crashMidPost(extra: Record<string, unknown>) {
    const done = new Map<string, { bookingId: string }>();
    handler = (req, res, n) => {
      const key = req.headers['idempotency-key'] as string;
      if (req.method === 'POST') {
        const booking = done.get(key) ?? { bookingId: `bk_${done.size + 1}` };
        done.set(key, booking);
        if (n === 0) return; // acted, but the answer never comes back: the runtime dies meanwhile
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(booking));
        return;
      }
      if (req.url?.startsWith('/broken/')) {
        res.writeHead(503);
        res.end();
        return;
      }
      const found = done.get(decodeURIComponent(req.url?.split('/').at(-1) ?? ''));
      res.writeHead(found ? 200 : 404, { 'content-type': 'application/json' });
      res.end(JSON.stringify(found ?? { error: 'no such booking' }));
    };
    const service = { ...issues, name: 'book', url: `${base}/bookings`, method: 'POST', ...extra };
    const script = {
      steps: [
        // Persisted (a graph declared without persistence is not resumed, whatever its calls are).
        dsl([{ id: 'b', executor: { type: 'service', target: 'book' }, input: { repo: 'r' } }], { persist: true }),
        answer('after restart'),
      ],
    };
    const options = {
      services: [service as never],
      permissions: { mode: 'bypass' as const },
      worker: { leaseTtlMs: 300, pollMs: 50 },
    };
    const first = await harness(script, options);
    crashed.push(first.store);
    const { sessionId, threadId } = await first.runtime.createSession();
    await first.runtime.submitTurn({ sessionId, input: 'book it' });
    await waitFor(async () => seen.length === 1);
    first.runtime.worker?.abandon();
    const store = await Store.open(join(first.dir, 'oar.db'));
    h = await harness(script, { ...options, store, workspaceRoot: first.workspace });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    return { read, events: await allEvents(h, sessionId), done };
  }

  it('idempotentByKey: retried under the same key instead of lost; the server acted once', async () => {
    const { read, events, done } = await crashMidPost({ idempotentByKey: true });
    expect(seen.map((s) => s.method)).toEqual(['POST', 'POST']);
    expect(keys[1]).toBe(keys[0]);
    expect(done.size).toBe(1);
    expect(ofType(events, 'tool.failed')).toEqual([]);
    expect(ofType(events, 'tool.started').map((e) => payload(e).idempotentByKey)).toEqual([true, true]);
    expect(actionRows(read)[0]).toMatchObject({ status: 'completed' });
    expect(
      ServiceSchema.safeParse({ ...issues, url: base, method: 'POST', retries: 1, idempotentByKey: true }).success,
    ).toBe(true);
  });

  it('reconcile: a GET by key finds the effect, and the lost call ends completed with the evidence', async () => {
    const { read, events } = await crashMidPost({ reconcile: { url: `${base}/bookings/{idempotencyKey}` } });
    expect(seen.map((s) => s.method)).toEqual(['POST', 'GET']);
    expect(seen[1]?.url).toBe(`/bookings/${keys[0]}`);
    expect(seen[1]?.authorization).toBe(`Bearer ${token}`);
    expect(ofType(events, 'tool.failed')[0]?.status).toBe('lost');
    const resolved = ofType(events, 'action.resolved')[0];
    expect(payload(resolved)).toMatchObject({
      decision: 'happened',
      resolvedBy: 'service:book',
      evidence: { status: 200, reply: { service: 'book', status: 200 } },
    });
    expect(JSON.stringify(payload(resolved).evidence)).toContain('bk_1');
    expect(actionRows(read)[0]).toMatchObject({ status: 'completed' });
    expect(read.unreconciledActions).toBeUndefined();
  });

  it('reconcile: a 404 by key says it did not happen; a 5xx leaves it to a person', async () => {
    const { read } = await crashMidPost({ reconcile: { url: `${base}/bookings/missing-{idempotencyKey}` } });
    expect(actionRows(read)[0]).toMatchObject({ status: 'failed', error: { code: 'not_happened' } });
    await h?.runtime.close();
    await h?.store.close();
    h = undefined;
    seen = [];
    keys = [];
    const unsure = await crashMidPost({ reconcile: { url: `${base}/broken/{idempotencyKey}` } });
    expect(unsure.read.unreconciledActions).toHaveLength(1);
    expect(actionRows(unsure.read)[0]).toMatchObject({ status: 'lost' });
    const warning = ofType(unsure.events, 'runtime.warning').find((e) => payload(e).code === 'reconcile_failed');
    expect(payload(warning)).toMatchObject({ details: { by: 'service:book', cause: { code: 'service_http_error' } } });
  });
});
