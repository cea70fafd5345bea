import type { RuntimeEvent, SessionSnapshot } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { type TestServer, testServer } from './support.js';

/**
 * exportReview over a real socket (issue 29 §4, docs/review.md): the review pack of a session or turn as JSON or
 * Markdown (`?format=markdown` or `Accept: text/markdown`), the approval given through the API with the key that
 * gave it, 404 for ids the session does not have; every export recorded and listed by the session snapshot.
 */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const write = { id: 'w1', type: 'tool', name: 'write', args: { filePath: 'notes.txt', content: 'hello\nworld\n' } };

describe('GET /v1/sessions/{id}/exports/review', () => {
  it('JSON and Markdown, the approver by key, 404 for unknown ids, recorded as evidence.changed', async () => {
    t = await testServer({
      script: {
        steps: [
          { protocol: { kind: 'act', message: 'Writing.', calls: [write] } },
          { protocol: { kind: 'answer', message: 'Done.' } },
        ],
      },
    });
    const { body: session } = await t.json<{ sessionId: string; threadId: string }>('POST', '/v1/sessions', {
      body: {},
    });
    const { sessionId, threadId } = session;
    const submitted = await t.json<{ turnId: string }>('POST', `/v1/sessions/${sessionId}/turns`, {
      body: { input: 'write the notes' },
    });
    expect(submitted.status).toBe(202);
    await t.runtime.settled(sessionId);
    const waiting = await t.json<{ snapshot: SessionSnapshot }>('GET', `/v1/sessions/${sessionId}?limit=0`);
    const actionId = waiting.body.snapshot.threads[0]?.pendingRequests[0]?.actionId as string;
    const decided = await t.call('POST', `/v1/sessions/${sessionId}/actions/${actionId}/decision`, {
      body: { decision: 'approve' },
    });
    expect(decided.status).toBe(200);
    await t.runtime.settled(sessionId);
    const resolved = (await t.runtime.log.read(sessionId)).find((e) => e.type === 'action.resolved') as RuntimeEvent;
    const approver = (resolved.payload as { resolvedBy: string }).resolvedBy;
    expect(approver).toMatch(/^api_key:/);

    const base = `/v1/sessions/${sessionId}/exports/review`;
    const viewer = await t.keyOf('viewer');
    const json = await t.json<{
      format: string;
      reviewId: string;
      digest: string;
      scope: Record<string, string>;
      changes: { path: string; created: boolean; diff: string }[];
      approvals: { actionId: string; decision: string; resolvedBy: string }[];
    }>('GET', `${base}?turnId=${submitted.body.turnId}`, { key: viewer });
    expect(json.status).toBe(200);
    expect(json.body).toMatchObject({
      format: 'oar.review.v1',
      scope: { sessionId, threadId, turnId: submitted.body.turnId },
      approvals: [{ actionId, decision: 'approve', resolvedBy: approver }],
      changes: [{ path: 'notes.txt', created: true }],
    });
    expect(json.body.changes[0]?.diff).toBe('--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1,2 @@\n+hello\n+world');

    const asked: { query: string; headers: Record<string, string> }[] = [
      { query: '?format=markdown', headers: {} },
      { query: '', headers: { accept: 'text/markdown' } },
    ];
    let recorded: RuntimeEvent | undefined;
    for (const request of asked) {
      const markdown = await t.call('GET', `${base}${request.query}`, { headers: request.headers });
      expect(markdown.status).toBe(200);
      expect(markdown.headers.get('content-type')).toMatch(/^text\/markdown/);
      const text = await markdown.text();
      expect(text).toMatch(new RegExp(`^# Review of session \`${sessionId}\`\\n`));
      expect(text).toContain('```diff\n--- /dev/null\n+++ b/notes.txt\n');
      expect(text).toContain(`| approve | ${approver} | write |`);
      const fact = (await t.runtime.log.read(sessionId)).at(-1) as RuntimeEvent;
      expect(fact.type).toBe('evidence.changed');
      if (!recorded) {
        expect(fact.evidenceId).toBe(markdown.headers.get('x-oar-review-id'));
        expect((fact.payload as { digest: string }).digest).toBe(markdown.headers.get('x-oar-review-digest'));
        recorded = fact;
      } else {
        // The same export again with nothing new since: not recorded twice (polling never grows the log).
        expect(fact.eventId).toBe(recorded.eventId);
      }
    }
    // JSON wins when asked for by name, whatever the Accept header.
    const named = await t.call('GET', `${base}?format=json`, { headers: { accept: 'text/markdown' } });
    expect(named.headers.get('content-type')).toMatch(/^application\/json/);

    const refused: [string, number, string][] = [];
    for (const query of ['turnId=turn_nope', 'threadId=thr_nope', 'taskId=task_nope', 'format=pdf']) {
      const answer = await t.json<{ error: { code: string } }>('GET', `${base}?${query}`);
      refused.push([query, answer.status, answer.body.error.code]);
    }
    expect(refused).toEqual([
      ['turnId=turn_nope', 404, 'turn_not_found'],
      ['threadId=thr_nope', 404, 'thread_not_found'],
      ['taskId=task_nope', 404, 'task_not_found'],
      ['format=pdf', 400, 'invalid_input'],
    ]);
    const noSession = await t.json<{ error: { code: string } }>('GET', '/v1/sessions/ses_nope/exports/review');
    expect([noSession.status, noSession.body.error.code]).toEqual([404, 'session_not_found']);

    // The other exports are recorded too; the snapshot lists every export's ref, in order.
    expect((await t.call('GET', `/v1/sessions/${sessionId}/exports/replay`)).status).toBe(200);
    expect((await t.call('GET', `/v1/sessions/${sessionId}/exports/evidence`)).status).toBe(200);
    const facts = (await t.runtime.log.read(sessionId)).filter((e) => e.type === 'evidence.changed');
    // The turn's review and the session's (asked for again three times, with nothing new: recorded once).
    expect(facts.map((e) => (e.payload as { kind: string }).kind)).toEqual(['review', 'review', 'replay', 'evidence']);
    const { body } = await t.json<{ snapshot: SessionSnapshot }>('GET', `/v1/sessions/${sessionId}?limit=0`);
    expect(body.snapshot.evidenceRefs).toEqual(facts.map((e) => (e.payload as { ref: string }).ref));
    const summary = body.snapshot.threads[0]?.evidenceSummary;
    expect(summary?.exports?.map((e) => e.exportId)).toEqual(facts.map((e) => e.evidenceId));
    expect(summary?.auditNotes).toContain(`decisions: 1 approve by ${approver}`);
    expect(body.snapshot.telemetrySummary).toMatchObject({ status: 'unavailable', joinStatus: 'unavailable' });
  });
});
