import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type RuntimeEvent, validateEventProfile } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { readSse, type TestServer, testServer, until } from './support.js';

/** rollbackThread and getArtifactCheckpoints over a real socket: versions, a dry run, a conflict, the rollback. */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const writeStep = (id: string, filePath: string, content: string) => ({
  protocol: {
    kind: 'act',
    message: 'Writing.',
    calls: [{ id, type: 'tool', name: 'write', args: { filePath, content } }],
  },
});
const answer = (message: string) => ({ protocol: { kind: 'answer', message } });

describe('the rollback routes', () => {
  it('lists file versions, plans, refuses a conflict and rolls a thread back with its files', async () => {
    t = await testServer({
      script: {
        steps: [writeStep('w1', 'a.txt', 'one\n'), answer('1'), writeStep('w2', 'a.txt', 'two\n'), answer('2')],
      },
      files: { 'a.txt': 'zero\n' },
      runtime: { permissions: { mode: 'accept-edits' } },
    });
    const { body: session } = await t.json<{ sessionId: string; threadId: string }>('POST', '/v1/sessions', {
      body: {},
    });
    const base = `/v1/sessions/${session.sessionId}`;
    const turns: string[] = [];
    for (const input of ['first', 'second']) {
      const submitted = await t.json<{ turnId: string }>('POST', `${base}/turns`, { body: { input } });
      turns.push(submitted.body.turnId);
      await until(async () => {
        const read = await t?.json<{ status: string; turns: { status: string }[] }>(
          'GET',
          `${base}/threads/${session.threadId}`,
        );
        return read?.body.turns.length === turns.length && read.body.turns.every((turn) => turn.status === 'completed');
      });
    }
    const file = join(t.workspace, 'a.txt');
    expect(readFileSync(file, 'utf8')).toBe('two\n');

    const versions = await t.json<{ versionCount: number; files: { path: string; versions: { turnId: string }[] }[] }>(
      'GET',
      `${base}/artifact-checkpoints?threadId=${session.threadId}`,
    );
    expect(versions.status).toBe(200);
    expect(versions.body.versionCount).toBe(2);
    expect(versions.body.files[0]?.versions.map((v) => v.turnId)).toEqual(turns);

    const operator = await t.keyOf('operator');
    const plan = await t.json<{ status: string; files: { path: string; action: string }[] }>(
      'POST',
      `${base}/rollback`,
      {
        key: operator,
        body: { turnId: turns[1], dryRun: true },
      },
    );
    expect(plan.body).toMatchObject({ status: 'planned', files: [{ path: 'a.txt', action: 'restore' }] });

    writeFileSync(file, 'edited by hand\n');
    const conflict = await t.json<{ error: { code: string; retryable: boolean; details: { conflicts: unknown[] } } }>(
      'POST',
      `${base}/rollback`,
      { key: operator, body: { turnId: turns[1] } },
    );
    expect([conflict.status, conflict.body.error.code, conflict.body.error.retryable]).toEqual([
      409,
      'rollback_conflict',
      false,
    ]);
    expect(conflict.body.error.details.conflicts).toEqual([
      expect.objectContaining({ path: 'a.txt', reason: 'changed_outside' }),
    ]);
    writeFileSync(file, 'two\n');

    const viewer = await t.keyOf('viewer');
    expect((await t.json('POST', `${base}/rollback`, { key: viewer, body: { turnId: turns[1] } })).status).toBe(403);
    // A client following the stream: after the rollback, snapshot.updated and the rebuilt snapshot.
    const last = (await t.json<{ events: { sequence: number }[] }>('GET', `${base}/events?limit=1000`)).body.events.at(
      -1,
    )?.sequence as number;
    const following = fetch(`${t.url}${base}/events?after=${last}`, {
      headers: { accept: 'text/event-stream', authorization: `Bearer ${viewer}` },
    }).then((response) => readSse(response, (m) => m.some((x) => x.event === 'snapshot')));
    const done = await t.json<{ status: string; removedTurns: string[]; rollbackId: string }>(
      'POST',
      `${base}/rollback`,
      {
        key: operator,
        body: { turnId: turns[1] },
      },
    );
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ status: 'completed', removedTurns: [turns[1]] });
    expect(readFileSync(file, 'utf8')).toBe('one\n');
    const streamed = await following;
    expect(streamed.map((m) => m.event)).toEqual([
      'history.rollback.started',
      'history.rollback.completed',
      'snapshot.updated',
      'snapshot',
    ]);
    const updated = JSON.parse(streamed[2]?.data as string) as RuntimeEvent;
    expect(validateEventProfile(updated)).toEqual([]);
    expect(updated).toMatchObject({
      type: 'snapshot.updated',
      sequence: last + 2,
      payload: { readModel: 'session_snapshot', reason: 'history.rollback.completed', causeSequence: last + 2 },
    });
    expect(streamed[3]?.id).toBe(String(last + 2));
    const rebuilt = JSON.parse(streamed[3]?.data as string) as { threads: { turns: unknown[] }[] };
    expect(rebuilt.threads[0]?.turns).toHaveLength(1);
    const read = await t.json<{ turns: { turnId: string }[] }>('GET', `${base}/threads/${session.threadId}`);
    expect(read.body.turns.map((turn) => turn.turnId)).toEqual([turns[0]]);
    const { body } = await t.json<{ events: { type: string; payload: { requestedBy?: string } }[] }>(
      'GET',
      `${base}/events`,
    );
    expect(body.events.filter((e) => e.type.startsWith('history.rollback')).map((e) => e.type)).toEqual([
      'history.rollback.started',
      'history.rollback.completed',
    ]);
    expect(body.events.find((e) => e.type === 'history.rollback.started')?.payload.requestedBy).toMatch(/^api_key:/);

    const unknown = await t.json<{ error: { code: string } }>('POST', `${base}/rollback`, {
      key: operator,
      body: { turnId: 'turn_nope' },
    });
    expect([unknown.status, unknown.body.error.code]).toEqual([404, 'turn_not_found']);
    const bad = await t.json<{ error: { code: string } }>('POST', `${base}/rollback`, {
      key: operator,
      body: { turnId: turns[0], files: 'some' },
    });
    expect(bad.status).toBe(400);
    expect(existsSync(file)).toBe(true);
  });
});
