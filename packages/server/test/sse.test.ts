import { Writable } from 'node:stream';
import { type RuntimeEvent, validateEventProfile } from '@oar/protocol';
import type { ModelScript } from '@oar/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { createApp, createLogger } from '../src/index.js';
import { Inflight } from '../src/inflight.js';
import { readSse, type SseMessage, type TestServer, testServer, until } from './support.js';

/**
 * The live event stream (issue: `oar serve`, section 2) over a real socket: resumable by `Last-Event-ID` and by
 * `after` with no gap and no duplicate, a snapshot first for a client without a cursor, `snapshot.repaired` for a
 * cursor the server cannot resume from, live deltas without ids, and a final cursor when the server closes.
 */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const SLOW_STEPS: ModelScript = {
  description: 'five reads with a pause before each step, then an answer',
  steps: [
    ...Array.from({ length: 5 }, (_, i) => ({
      delayMs: 150,
      protocol: {
        kind: 'act',
        message: `reading ${i}`,
        calls: [{ id: `read_${i}`, type: 'tool', name: 'read', args: { filePath: 'README.md' } }],
      },
    })),
    { delayMs: 150, protocol: { kind: 'answer', message: 'All read.' } },
  ],
} as ModelScript;

function stream(
  s: TestServer,
  sessionId: string,
  options: { after?: number; lastEventId?: string; key?: string } = {},
) {
  return fetch(
    `${s.url}/v1/sessions/${sessionId}/events${options.after !== undefined ? `?after=${options.after}` : ''}`,
    {
      headers: {
        accept: 'text/event-stream',
        authorization: `Bearer ${options.key ?? s.adminKey}`,
        ...(options.lastEventId !== undefined ? { 'last-event-id': options.lastEventId } : {}),
      },
    },
  );
}

const durable = (messages: SseMessage[]) =>
  messages.filter((m) => m.id !== undefined && m.event !== 'snapshot').map((m) => JSON.parse(m.data) as RuntimeEvent);
const ended = (messages: SseMessage[]) => messages.some((m) => m.event === 'turn.completed');

async function newSession(s: TestServer): Promise<string> {
  const { body } = await s.json<{ sessionId: string }>('POST', '/v1/sessions', { body: {} });
  return body.sessionId;
}

describe('the session event stream', () => {
  it('gives a fresh client the snapshot, then every event live; a reconnect by Last-Event-ID misses nothing', async () => {
    t = await testServer({ script: SLOW_STEPS });
    const sessionId = await newSession(t);
    const first = await stream(t, sessionId);
    expect(first.headers.get('content-type')).toContain('text/event-stream');
    await t.json('POST', `/v1/sessions/${sessionId}/turns`, { body: { input: 'read it all' } });
    // Disconnect part-way: after the second tool result.
    const part = await readSse(first, (m) => m.filter((x) => x.event === 'tool.result').length >= 2);
    expect(part[0]?.event).toBe('snapshot');
    expect(part[0]?.id).toBe('2'); // session.created and thread.started
    const lastId = part.filter((m) => m.id !== undefined).at(-1)?.id as string;
    const rest = await readSse(await stream(t, sessionId, { lastEventId: lastId }), ended);
    expect(rest.some((m) => m.event === 'snapshot')).toBe(false);
    const joined = [...durable(part), ...durable(rest)];
    const log = await t.runtime.log.read(sessionId);
    const upTo = joined.at(-1)?.sequence as number;
    // No gap, no duplicate: exactly the log's events 3..N, in order.
    expect(joined.map((e) => e.sequence)).toEqual(
      log.filter((e) => e.sequence > 2 && e.sequence <= upTo).map((e) => e.sequence),
    );
    expect(joined.map((e) => e.eventId)).toEqual(
      log.filter((e) => e.sequence > 2 && e.sequence <= upTo).map((e) => e.eventId),
    );
  });

  it('resumes by ?after the same way, and a resuming client gets durable events only', async () => {
    t = await testServer({ script: SLOW_STEPS });
    const sessionId = await newSession(t);
    await t.json('POST', `/v1/sessions/${sessionId}/turns`, { body: { input: 'read it all' } });
    const live = await readSse(await stream(t, sessionId, { after: 0 }), ended);
    // Deltas streamed while it ran: live-only, without an id.
    const deltas = live.filter((m) => m.event === 'model.delta');
    expect(deltas.length).toBeGreaterThan(0);
    expect(deltas.every((m) => m.id === undefined)).toBe(true);
    const log = await t.runtime.log.read(sessionId);
    const end = durable(live).at(-1)?.sequence as number;
    expect(durable(live).map((e) => e.sequence)).toEqual(log.filter((e) => e.sequence <= end).map((e) => e.sequence));
    // Later, from the middle: durable events only, exactly the log's.
    const resumed = await readSse(await stream(t, sessionId, { after: 10 }), ended);
    expect(resumed.some((m) => m.event === 'model.delta')).toBe(false);
    expect(durable(resumed).map((e) => e.sequence)).toEqual(
      log.filter((e) => e.sequence > 10 && e.sequence <= end).map((e) => e.sequence),
    );
  });

  it('a cursor past the session’s end or not a sequence gets snapshot.repaired and a fresh snapshot', async () => {
    t = await testServer();
    const sessionId = await newSession(t);
    for (const lastEventId of ['999', 'ses_other:12']) {
      const messages = await readSse(await stream(t, sessionId, { lastEventId }), (m) =>
        m.some((x) => x.event === 'snapshot'),
      );
      expect(messages.map((m) => m.event).slice(0, 2)).toEqual(['snapshot.repaired', 'snapshot']);
      const repaired = JSON.parse(messages[0]?.data as string) as {
        payload: { requestedCursor: unknown; resumedAfter: number };
      };
      expect(repaired.payload.resumedAfter).toBe(2);
      // A whole event of the profile (ids, time, runtime, sequence), like every other on the stream.
      expect(validateEventProfile(repaired)).toEqual([]);
      expect(repaired).toMatchObject({ type: 'snapshot.repaired', sessionId, sequence: 2 });
      expect(String(repaired.payload.requestedCursor)).toBe(lastEventId);
      expect(messages[1]?.id).toBe('2');
    }
  });

  it('accepts the key as ?access_token for a browser EventSource, and never logs it', async () => {
    t = await testServer();
    const sessionId = await newSession(t);
    const viewer = await t.keyOf('viewer');
    const response = await fetch(`${t.url}/v1/sessions/${sessionId}/events?access_token=${viewer}`, {
      headers: { accept: 'text/event-stream' },
    });
    expect(response.status).toBe(200);
    const messages = await readSse(response, (m) => m.some((x) => x.event === 'snapshot'));
    expect(messages[0]?.event).toBe('snapshot');
    // Not on other routes.
    expect((await fetch(`${t.url}/v1/sessions?access_token=${viewer}`)).status).toBe(401);
    await until(() => t?.logs.some((l) => l.includes('/events')) === true);
    expect(t.logs.join('\n')).not.toContain(viewer);
  });

  it('ends every open stream with server.closing and its cursor when the server shuts down', async () => {
    t = await testServer();
    const sessionId = await newSession(t);
    const response = await stream(t, sessionId);
    const reading = readSse(response, (m) => m.some((x) => x.event === 'server.closing'));
    await until(async () => true);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const closing = t.server.close();
    const messages = await reading;
    await closing;
    const last = messages.at(-1);
    expect(last?.event).toBe('server.closing');
    expect(JSON.parse(last?.data as string)).toMatchObject({ cursor: 2 });
    // Closed: the port no longer answers.
    await expect(fetch(`${t.url}/v1/health`)).rejects.toThrow();
  });

  it('holds many open streams without a listener-leak warning, and ends them all at shutdown', async () => {
    // Each open stream listens for the server's shutdown: past Node's default of 10 it used to warn of a leak.
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.name);
    process.on('warning', onWarning);
    try {
      t = await testServer();
      const sessionId = await newSession(t);
      const readings = [];
      for (let i = 0; i < 25; i++) {
        readings.push(readSse(await stream(t, sessionId), (m) => m.some((x) => x.event === 'server.closing')));
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
      const closing = t.server.close();
      const all = await Promise.all(readings);
      await closing;
      expect(all.map((messages) => messages.at(-1)?.event)).toEqual(Array(25).fill('server.closing'));
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((name) => name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('the workspace feed lists the sessions, then each one that changes — never another workspace’s', async () => {
    t = await testServer();
    const first = await newSession(t);
    await t.json('POST', '/v1/workspaces', { body: { name: 'Other', workspaceId: 'other' } });
    const otherKey = (
      await t.json<{ key: string }>('POST', '/v1/keys', {
        body: { name: 'o', scope: 'operator', workspaceId: 'other' },
      })
    ).body.key;
    const feed = await fetch(`${t.url}/v1/events`, {
      headers: { accept: 'text/event-stream', authorization: `Bearer ${t.adminKey}` },
    });
    const reading = readSse(feed, (m) => m.some((x) => x.event === 'session.changed' && x.data.includes(first)));
    await new Promise((resolve) => setTimeout(resolve, 200));
    // A session of the other workspace changes first: it must not show.
    const { body: foreign } = await t.json<{ sessionId: string }>('POST', '/v1/sessions', { key: otherKey, body: {} });
    await t.json('POST', `/v1/sessions/${first}/turns`, { body: { input: 'What does the README say?' } });
    const messages = await reading;
    expect(messages[0]?.event).toBe('sessions');
    expect(
      (JSON.parse(messages[0]?.data as string) as { sessions: { sessionId: string }[] }).sessions.map(
        (s) => s.sessionId,
      ),
    ).toEqual([first]);
    expect(messages.map((m) => m.data).join('\n')).not.toContain(foreign.sessionId);
    const changed = messages
      .filter((m) => m.event === 'session.changed')
      .map((m) => JSON.parse(m.data) as { sessionId: string; events: number });
    expect(changed.every((c) => c.sessionId === first)).toBe(true);
    expect(changed.at(-1)?.events).toBeGreaterThan(2);
  });

  it('cuts off a client that takes nothing, so its stream holds no server memory (it resumes with its cursor)', async () => {
    t = await testServer();
    const sessionId = await newSession(t);
    const inflight = new Inflight();
    // The app in process: its response body is never read, so the second write waits, past slowClientMs.
    const { app } = createApp({
      runtime: t.runtime,
      logger: createLogger({ destination: new Writable({ write: (_c, _e, done) => done() }) }),
      inflight,
      streams: { slowClientMs: 200 },
    });
    const response = await app.request(`/v1/sessions/${sessionId}/events?after=0`, {
      headers: { accept: 'text/event-stream', authorization: `Bearer ${t.adminKey}` },
    });
    expect(response.status).toBe(200);
    const cut = await Promise.race([
      inflight.drained().then(() => 'cut off'),
      new Promise((resolve) => setTimeout(() => resolve('still open'), 5_000)),
    ]);
    expect(cut).toBe('cut off');
    await response.body?.cancel();
  });
});
