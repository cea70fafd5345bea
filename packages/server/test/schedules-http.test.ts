import type { RuntimeEvent } from '@oar/protocol';
import type { ScheduleView } from '@oar/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { type TestServer, testServer, until } from './support.js';

/**
 * Schedules over HTTP (issue 30 §2, docs/schedules.md), through a real server on a real socket: create, list, get
 * with next and last firings, pause, resume, delete — a key reaches its own workspace's schedules only, and bad
 * input is a structured error naming the field.
 */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const SCRIPT = { steps: Array.from({ length: 20 }, () => ({ protocol: { kind: 'answer', message: 'done' } })) };
const NO_RATE_LIMIT = { rateLimit: { perMinute: 60_000, burst: 1_000 } };

describe('schedules over HTTP', () => {
  it('creates a schedule that fires a session with the schedule facts; pauses, resumes, deletes it', async () => {
    t = await testServer({ script: SCRIPT, serve: NO_RATE_LIMIT });
    const server = t;
    const operator = await server.keyOf('operator');
    const body = {
      scheduleId: 'every-second',
      cron: '* * * * * *',
      start: { kind: 'session', input: 'Summarise the day' },
      budget: { session: { tokens: 9_000 } },
    };
    // Its sessions' own budget is an admin's call, as a new session's binding is.
    const refused = await server.json<{ error: { code: string } }>('POST', '/v1/schedules', { key: operator, body });
    expect([refused.status, refused.body.error.code]).toEqual([403, 'forbidden']);
    const admin = await server.keyOf('admin');
    const created = await server.json<ScheduleView>('POST', '/v1/schedules', {
      key: admin,
      body: {
        scheduleId: 'every-second',
        cron: '* * * * * *',
        start: { kind: 'session', input: 'Summarise the day' },
        budget: { session: { tokens: 9_000 } },
      },
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ scheduleId: 'every-second', source: 'api', paused: false, overlap: 'skip' });
    expect(created.body.nextFirings).toHaveLength(3);
    const get = async () => (await server.json<ScheduleView>('GET', '/v1/schedules/every-second')).body;
    await until(async () => (await get()).lastFirings.some((f) => f.status === 'started'));
    const paused = await server.json<ScheduleView>('POST', '/v1/schedules/every-second/pause', { key: operator });
    expect(paused.body).toMatchObject({ paused: true, nextFirings: [] });
    const firing = (await get()).lastFirings.find((f) => f.status === 'started');
    const sessionId = firing?.started?.sessionId as string;
    const events = (await server.json<{ events: RuntimeEvent[] }>('GET', `/v1/sessions/${sessionId}/events?limit=100`))
      .body.events;
    expect(events[0]?.payload).toMatchObject({ schedule: { scheduleId: 'every-second', firedAt: firing?.fireAt } });
    const listed = await server.json<{ schedules: ScheduleView[] }>('GET', '/v1/schedules');
    expect(listed.body.schedules.map((s) => [s.scheduleId, s.paused])).toEqual([['every-second', true]]);
    const resumed = await server.json<ScheduleView>('POST', '/v1/schedules/every-second/resume', { key: operator });
    expect(resumed.body.paused).toBe(false);

    // Another workspace sees nothing of it.
    await server.json('POST', '/v1/workspaces', { body: { name: 'Other', workspaceId: 'other' } });
    const other = await server.keyOf('operator', 'other');
    const hidden = await server.json<{ error: { code: string } }>('GET', '/v1/schedules/every-second', { key: other });
    expect([hidden.status, hidden.body.error.code]).toEqual([404, 'schedule_not_found']);
    expect(
      (await server.json<{ schedules: unknown[] }>('GET', '/v1/schedules', { key: other })).body.schedules,
    ).toEqual([]);
    expect((await server.json('DELETE', '/v1/schedules/every-second', { key: other })).status).toBe(404);

    const removed = await server.json('DELETE', '/v1/schedules/every-second', { key: operator });
    expect(removed.body).toEqual({ scheduleId: 'every-second', removed: true });
    expect((await server.json('GET', '/v1/schedules/every-second')).status).toBe(404);
  });

  it('refuses bad input with structured errors naming the field', async () => {
    t = await testServer({ script: SCRIPT, serve: NO_RATE_LIMIT });
    const server = t;
    const bad = async (body: unknown, code: string, status: number, field?: string) => {
      const response = await server.json<{ error: { code: string; retryable: boolean; details: { field?: string } } }>(
        'POST',
        '/v1/schedules',
        { body },
      );
      expect([response.status, response.body.error?.code], JSON.stringify(response.body)).toEqual([status, code]);
      expect(response.body.error.retryable).toBe(false);
      if (field) expect(response.body.error.details.field).toBe(field);
    };
    const start = { kind: 'session', input: 'x' };
    await bad({ cron: 'whenever', start }, 'invalid_input', 400, 'cron');
    await bad({ cron: '0 3 * * *', timezone: 'Mars/Olympus', start }, 'invalid_input', 400, 'timezone');
    await bad(
      { cron: '0 3 * * *', start: { kind: 'turn', sessionId: 'ses_missing', input: 'x' } },
      'session_not_found',
      404,
    );
    await bad({ cron: '0 3 * * *', start, catchUp: 'always' }, 'invalid_input', 400);
    expect(
      (await server.json('POST', '/v1/schedules', { body: { scheduleId: 'dup', cron: '0 3 * * *', start } })).status,
    ).toBe(201);
    await bad({ scheduleId: 'dup', cron: '0 3 * * *', start }, 'schedule_exists', 409);
    const missing = await server.json<{ error: { code: string } }>('POST', '/v1/schedules/nope/pause');
    expect([missing.status, missing.body.error.code]).toEqual([404, 'schedule_not_found']);
  });
});
