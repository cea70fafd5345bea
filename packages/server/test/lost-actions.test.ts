import { type AnyTool, defineTool, type ModelScript, ToolRegistry } from '@oar/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { crashMidCall, readSse, type TestServer, testServer, until } from './support.js';

/**
 * Lost actions over the wire (docs/reliability.md "Reconciling a lost action"): a runtime dies in the middle of a
 * booking in each of two sessions, the server's runtime takes the threads over and records both lost; they are
 * listed across the workspace and answered over HTTP (retry: the booking runs again, under a new key) and in an AG-UI
 * resume (happened).
 */

let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

/** A booking tool: not idempotent, so a call cut short by a crash is lost. `hang`: its calls never return. */
function booking(keys: (string | undefined)[], hang: boolean): AnyTool {
  return defineTool<{ room: string }>({
    name: 'book',
    description: 'Books a room.',
    input: z.strictObject({ room: z.string() }),
    isReadOnly: false,
    isConcurrencySafe: false,
    isDestructive: false,
    isIdempotent: false,
    interruptBehavior: 'block',
    capabilities: ['calendar'],
    async execute(input, context) {
      keys.push(context.idempotencyKey);
      if (hang) await new Promise(() => undefined);
      return { text: `booked ${input.room}` };
    },
  });
}

const SCRIPT = {
  steps: [
    {
      protocol: {
        kind: 'act',
        calls: [{ id: 'a', type: 'tool', name: 'book', args: { room: 'a' } }],
      },
    },
    { protocol: { kind: 'answer', message: 'after restart' } },
    { protocol: { kind: 'answer', message: 'after retry' } },
  ],
} as ModelScript;

interface Unreconciled {
  sessionId: string;
  threadId: string;
  actionId: string;
  graphActionId: string;
  toolName: string;
  idempotencyKey: string;
  prompt: string;
}

describe('lost actions over HTTP and AG-UI', () => {
  it('are listed across the workspace and answered by the decision route and an AG-UI resume', async () => {
    const crashedKeys: (string | undefined)[] = [];
    const keys: (string | undefined)[] = [];
    const [sessionId, other] = ['lost-retried', 'lost-happened'];
    t = await testServer({
      script: SCRIPT,
      runtime: {
        tools: new ToolRegistry([booking(keys, false)]),
        permissions: { mode: 'bypass' },
        worker: { leaseTtlMs: 300, pollMs: 50 },
      },
      before: crashMidCall({
        sessionIds: [sessionId, other],
        script: SCRIPT,
        tools: new ToolRegistry([booking(crashedKeys, true)]),
      }),
    });
    const server = t;
    const listed = async () =>
      (await server.json<{ decisions: unknown[]; unreconciled: Unreconciled[] }>('GET', '/v1/decisions')).body;
    await until(async () => (await listed()).unreconciled.length === 2, 20_000);
    const { decisions, unreconciled } = await listed();
    expect(decisions).toEqual([]);
    expect(unreconciled.map((u) => u.sessionId).sort()).toEqual([other, sessionId].sort());
    for (const u of unreconciled) {
      expect(u).toMatchObject({ graphActionId: 'a', toolName: 'book' });
      expect(crashedKeys).toContain(u.idempotencyKey);
    }
    const first = unreconciled.find((u) => u.sessionId === sessionId) as Unreconciled;
    const second = unreconciled.find((u) => u.sessionId === other) as Unreconciled;
    const decide = (u: Unreconciled, body: unknown) =>
      server.json<Record<string, unknown>>('POST', `/v1/sessions/${u.sessionId}/actions/${u.actionId}/decision`, {
        body,
      });

    // An approval's word is not an answer to "did it happen?".
    const wrong = await decide(first, { decision: 'approve' });
    expect(wrong.status).toBeGreaterThanOrEqual(400);
    expect(wrong.body).toMatchObject({ error: { code: 'invalid_decision', retryable: false } });

    // retry: the booking runs again in a turn of its own, under a new key, and the model sees it.
    const retried = await decide(first, { decision: 'retry', reason: 'the calendar has no such booking' });
    expect(retried.status).toBe(200);
    expect(retried.body).toMatchObject({ decision: 'retry', threadId: first.threadId });
    expect(typeof retried.body.turnId).toBe('string');
    const thread = async () =>
      (
        await server.json<{ lastOutcome?: { answer?: string }; unreconciledActions?: unknown[] }>(
          'GET',
          `/v1/sessions/${sessionId}/threads/${first.threadId}`,
        )
      ).body;
    await until(async () => (await thread()).lastOutcome?.answer === 'after retry', 20_000);
    expect(keys).toHaveLength(1);
    expect(keys[0]).toMatch(/^idem_[0-9a-f]{32}$/);
    expect(crashedKeys).not.toContain(keys[0]);
    expect((await thread()).unreconciledActions).toBeUndefined();
    expect((await listed()).unreconciled.map((u) => u.sessionId)).toEqual([other]);

    // happened, in an AG-UI resume: recorded with who said so; no turn runs, so the run finishes at once.
    const response = await server.call('POST', '/v1/agui', {
      headers: { accept: 'text/event-stream' },
      body: {
        threadId: other,
        runId: 'resume-lost',
        protocolVersion: '1.0',
        messages: [],
        tools: [],
        context: [],
        resume: [
          {
            interruptId: second.actionId,
            status: 'resolved',
            payload: { decision: 'happened', reason: 'the room shows the booking' },
          },
        ],
      },
    });
    expect(response.status).toBe(200);
    const events = (await readSse(response, (m) => m.some((x) => /RUN_FINISHED|RUN_ERROR/.test(x.data)), 20_000)).map(
      (m) => JSON.parse(m.data) as { type: string },
    );
    expect(events.map((e) => e.type)).toEqual(['RUN_STARTED', 'STATE_SNAPSHOT', 'RUN_FINISHED']);
    expect((await listed()).unreconciled).toEqual([]);
    const answerOf = async (u: Unreconciled) =>
      (
        await server.json<{ events: { type: string; actionId?: string; payload: Record<string, unknown> }[] }>(
          'GET',
          `/v1/sessions/${u.sessionId}/events?limit=1000`,
        )
      ).body.events.find((e) => e.type === 'action.resolved' && e.actionId === u.actionId)?.payload;
    expect(await answerOf(first)).toMatchObject({ decision: 'retry', resolvedBy: expect.stringMatching(/^api_key:/) });
    expect(await answerOf(second)).toMatchObject({
      decision: 'happened',
      reason: 'the room shows the booking',
      resolvedBy: expect.stringMatching(/^api_key:/),
    });
    // Answered once: the same answer again is refused with how it was answered.
    const again = await decide(second, { decision: 'not_happened' });
    expect(again.body).toMatchObject({ error: { code: 'decision_already_resolved' } });
  });
});
