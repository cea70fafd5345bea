import { afterEach, describe, expect, it } from 'vitest';
import { type TestServer, testServer, until } from './support.js';

/** forkSession over a real socket: a new session from an event of another, its errors, and workspace isolation. */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

describe('the fork route', () => {
  it('forks at an event; the fork lists, reads and runs as its own session; errors are structured', async () => {
    t = await testServer();
    const { body: session } = await t.json<{ sessionId: string; threadId: string }>('POST', '/v1/sessions', {
      body: { title: 'Origin' },
    });
    const base = `/v1/sessions/${session.sessionId}`;
    await t.json('POST', `${base}/turns`, { body: { input: 'read the readme' } });
    await until(async () => {
      const read = await t?.json<{ status: string; turns: unknown[] }>('GET', `${base}/threads/${session.threadId}`);
      return read?.body.status === 'idle' && read.body.turns.length === 1;
    });
    const { body } = await t.json<{ events: { sequence: number; type: string }[] }>('GET', `${base}/events`);
    const at = body.events.find((e) => e.type === 'turn.started')?.sequence as number;

    const forked = await t.json<{
      sessionId: string;
      forkedFrom: { sequence: number };
      events: number;
      threads: Record<string, string>;
    }>('POST', `${base}/fork`, { key: await t.keyOf('operator'), body: { at, title: 'What if' } });
    expect(forked.status).toBe(201);
    expect(forked.body).toMatchObject({ forkedFrom: { sequence: at }, events: at });
    const fork = await t.json<{ snapshot: { title: string; threads: { turns: { status: string }[] }[] } }>(
      'GET',
      `/v1/sessions/${forked.body.sessionId}`,
    );
    expect(fork.body.snapshot.title).toBe('What if');
    // Forked mid-turn: the fork's worker takes the turn up and finishes it there.
    await until(async () => {
      const read = await t?.json<{ turns: { status: string }[] }>(
        'GET',
        `/v1/sessions/${forked.body.sessionId}/threads/${forked.body.threads[session.threadId]}`,
      );
      return read?.body.turns[0]?.status === 'completed';
    });
    const listed = await t.json<{ sessions: { sessionId: string }[] }>('GET', '/v1/sessions');
    expect(listed.body.sessions.map((s) => s.sessionId)).toContain(forked.body.sessionId);

    const viewer = await t.keyOf('viewer');
    expect((await t.json('POST', `${base}/fork`, { key: viewer, body: {} })).status).toBe(403);
    const taken = await t.json<{ error: { code: string } }>('POST', `${base}/fork`, {
      body: { forkId: forked.body.sessionId },
    });
    expect([taken.status, taken.body.error.code]).toEqual([409, 'session_exists']);
    const past = await t.json<{ error: { code: string } }>('POST', `${base}/fork`, { body: { at: 100_000 } });
    expect([past.status, past.body.error.code]).toEqual([400, 'invalid_input']);
    const unknown = await t.json<{ error: { code: string } }>('POST', '/v1/sessions/ses_nope/fork', { body: {} });
    expect([unknown.status, unknown.body.error.code]).toEqual([404, 'session_not_found']);
  });
});
