import { afterEach, describe, expect, it, vi } from 'vitest';
import { type AgentConfig, OarRuntimeError } from '../../src/index.js';
import { EventLog } from '../../src/log/event-log.js';
import { assertEventsConform } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, errorCode, ofType, payload, waitForEvent } from './helpers.js';

/**
 * Sub-agents driven by a person or client (issue 29 §1): spawn_subagent, send_subagent_input (`subagent.input`),
 * wait_subagents, close_subagent and resume_subagent — and a model's delegated child given more input later, whose
 * later turns now show in its parent's list of sub-agents.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const researcher: AgentConfig = {
  name: 'researcher',
  description: 'Looks things up',
  capabilities: ['research'],
  carrier: 'tool',
};

const subagent = async (sessionId: string, subagentId: string) =>
  (await (h as Harness).runtime.listSubagents({ sessionId })).find((s) => s.subagentId === subagentId);

describe('sub-agents driven by a client', () => {
  it('spawns one, waits for it, gives it more input, closes it and reopens it; the parent records every step', async () => {
    h = await harness(
      {
        steps: [],
        agents: {
          researcher: {
            steps: [
              { ...answer('Found three sources.'), delayMs: 150 },
              answer('The second source is the best.'),
              answer('Back again.'),
            ],
          },
        },
      },
      { agents: [researcher] },
    );
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    const spawned = await rt.spawnSubagent({
      sessionId,
      agent: 'researcher',
      input: 'Find sources on durable execution',
      subagentId: 'sub_research',
    });
    expect(spawned).toMatchObject({ subagentId: 'sub_research', duplicate: false });
    // The same spawn again is the same sub-agent.
    const again = {
      sessionId,
      agent: 'researcher',
      input: 'Find sources on durable execution',
      subagentId: 'sub_research',
    };
    expect(await rt.spawnSubagent(again)).toMatchObject({ childThreadId: spawned.childThreadId, duplicate: true });

    const waited = await rt.waitSubagents({ sessionId, subagentIds: ['sub_research'], timeoutMs: 10_000 });
    expect(waited.timedOut).toBe(false);
    expect(waited.subagents).toMatchObject([
      { subagentId: 'sub_research', status: 'completed', parentThreadId: threadId, agent: 'researcher' },
    ]);
    const child = await rt.getThreadRead({ sessionId, threadId: spawned.childThreadId });
    expect(child.lastOutcome).toMatchObject({ answer: 'Found three sources.' });

    // More input: a turn of the child, `subagent.input` on the parent, and the entry runs, then completes.
    const more = await rt.sendSubagentInput({ sessionId, subagentId: 'sub_research', input: 'Which one is best?' });
    expect(more.threadId).toBe(spawned.childThreadId);
    expect((await rt.waitSubagents({ sessionId, timeoutMs: 10_000 })).timedOut).toBe(false);
    expect((await subagent(sessionId, 'sub_research'))?.status).toBe('completed');

    await rt.closeSubagent({ sessionId, subagentId: 'sub_research', reason: 'done for now' });
    expect((await subagent(sessionId, 'sub_research'))?.status).toBe('closed');
    expect(await errorCode(rt.sendSubagentInput({ sessionId, subagentId: 'sub_research', input: 'x' }))).toBe(
      'thread_closed',
    );
    // Reopened with its turn in one append: no crash can leave it open without the input.
    const appends = vi.spyOn(EventLog.prototype, 'append');
    const reopened = await rt.resumeSubagent({ sessionId, subagentId: 'sub_research', input: 'One more thing.' });
    const resumeAppends = appends.mock.calls.filter(([, drafts]) => drafts.some((d) => d.type === 'subagent.status'));
    appends.mockRestore();
    expect(resumeAppends.map(([, drafts]) => drafts.map((d) => d.type))).toEqual([
      ['thread.updated', 'subagent.status', 'turn.submitted', 'subagent.input'],
    ]);
    expect(reopened.turnId).toEqual(expect.any(String));
    await rt.settled(sessionId);
    expect((await subagent(sessionId, 'sub_research'))?.status).toBe('completed');
    expect((await rt.getThreadRead({ sessionId, threadId: spawned.childThreadId })).lastOutcome).toMatchObject({
      turnId: reopened.turnId,
      answer: 'Back again.',
    });
    expect(await errorCode(rt.resumeSubagent({ sessionId, subagentId: 'sub_research' }))).toBe('subagent_not_closed');

    const events = await allEvents(h, sessionId);
    const onParent = events.filter((e) => e.threadId === threadId && e.type.startsWith('subagent.')).map((e) => e.type);
    // Its end is recorded once (its first turn); later turns are statuses of their own.
    expect(onParent).toEqual([
      'subagent.spawned',
      'subagent.status',
      'subagent.completed',
      'subagent.input',
      'subagent.status',
      'subagent.status',
      'subagent.closed',
      'subagent.status',
      'subagent.input',
      'subagent.status',
      'subagent.status',
    ]);
    expect(payload(ofType(events, 'subagent.input')[0])).toMatchObject({
      childThreadId: spawned.childThreadId,
      turnId: more.turnId,
      input: 'Which one is best?',
    });
    assertEventsConform(events);
    expect((await rt.replaySession(sessionId)).differences).toEqual([]);
  });

  it('refuses what it cannot do, and a wait that runs out says so', async () => {
    h = await harness(
      { steps: [], agents: { researcher: { steps: [{ ...answer('slow'), delayMs: 5_000 }] } } },
      { agents: [researcher] },
    );
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    expect(await errorCode(rt.spawnSubagent({ sessionId, agent: 'ghost', input: 'x' }))).toBe('unknown_agent');
    expect(await errorCode(rt.spawnSubagent({ sessionId, agent: 'researcher', input: ' ' }))).toBe('invalid_input');
    expect(await errorCode(rt.sendSubagentInput({ sessionId, subagentId: 'sub_nope', input: 'x' }))).toBe(
      'subagent_not_found',
    );
    expect(await errorCode(rt.waitSubagents({ sessionId, subagentIds: ['sub_nope'] }))).toBe('subagent_not_found');
    const { subagentId, childThreadId } = await rt.spawnSubagent({
      sessionId,
      agent: 'researcher',
      input: 'take your time',
      subagentId: 'sub_slow',
    });
    expect(
      await errorCode(
        rt.spawnSubagent({ sessionId, agent: 'researcher', input: 'other work', subagentId: 'sub_slow' }),
      ),
    ).toBe('subagent_exists');
    await waitForEvent(h, sessionId, 'model.requested', (e) => e.threadId === childThreadId);
    const waited = await rt.waitSubagents({ sessionId, subagentIds: [subagentId], timeoutMs: 100 });
    expect(waited).toMatchObject({ timedOut: true, subagents: [{ subagentId, status: 'running' }] });
    // Input while it works waits in its queue; closing withdraws it with the close, then stops the running turn.
    const queued = await rt.sendSubagentInput({ sessionId, subagentId, input: 'and then this', ifBusy: 'enqueue' });
    expect(queued.status).toBe('queued');
    await rt.closeSubagent({ sessionId, subagentId });
    await rt.settled(sessionId);
    const child = await rt.getThreadRead({ sessionId, threadId: childThreadId });
    expect(child.turns?.map((t) => t.status)).toEqual(['cancelled', 'cancelled']);
    expect((await subagent(sessionId, subagentId))?.status).toBe('closed');
    expect((await rt.waitSubagents({ sessionId, subagentIds: [subagentId], timeoutMs: 100 })).timedOut).toBe(false);
    expect(await errorCode(rt.resumeSubagent({ sessionId, subagentId, input: '  ' }))).toBe('invalid_input');
    expect((await subagent(sessionId, subagentId))?.status).toBe('closed');
  });

  it('a wait whose caller went away (its signal aborted) ends at once, as if it ran out', async () => {
    h = await harness(
      { steps: [], agents: { researcher: { steps: [{ ...answer('slow'), delayMs: 3_000 }] } } },
      { agents: [researcher] },
    );
    const { sessionId } = await h.runtime.createSession();
    const { subagentId, childThreadId } = await h.runtime.spawnSubagent({ sessionId, agent: 'researcher', input: 'x' });
    await waitForEvent(h, sessionId, 'model.requested', (e) => e.threadId === childThreadId);
    const caller = new AbortController();
    setTimeout(() => caller.abort(), 50);
    // Without the abort this waits 10 minutes: the test would time out long before.
    const waited = await h.runtime.waitSubagents(
      { sessionId, subagentIds: [subagentId], timeoutMs: 600_000 },
      { signal: caller.signal },
    );
    expect(waited).toMatchObject({ timedOut: true, subagents: [{ subagentId, status: 'running' }] });
    await h.runtime.closeSubagent({ sessionId, subagentId });
  });

  it('a spawn deeper than limits.maxSubagentDepth is subagent_depth_exceeded, recording nothing', async () => {
    h = await harness(
      { steps: [], agents: { researcher: { steps: [answer('done'), answer('done')] } } },
      { agents: [researcher], limits: { maxSubagentDepth: 1 } },
    );
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    const first = await rt.spawnSubagent({ sessionId, agent: 'researcher', input: 'one level' });
    await rt.settled(sessionId);
    const before = (await allEvents(h, sessionId)).length;
    const error = await rt
      .spawnSubagent({ sessionId, agent: 'researcher', input: 'two levels', threadId: first.childThreadId })
      .catch((e: unknown) => e as OarRuntimeError);
    expect(error).toBeInstanceOf(OarRuntimeError);
    expect((error as OarRuntimeError).error).toMatchObject({
      code: 'subagent_depth_exceeded',
      retryable: false,
      details: { depth: 2, maxSubagentDepth: 1 },
    });
    expect((await allEvents(h, sessionId)).length).toBe(before);
  });

  it("interrupting the parent's turn leaves a spawned sub-agent working", async () => {
    h = await harness(
      {
        steps: [{ ...answer('never'), delayMs: 30_000 }],
        agents: { researcher: { steps: [{ ...answer('Done on my own.'), delayMs: 300 }] } },
      },
      { agents: [researcher] },
    );
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    await rt.submitTurn({ sessionId, input: 'a long turn' });
    await waitForEvent(h, sessionId, 'model.requested', (e) => e.threadId === threadId);
    const { subagentId, childThreadId } = await rt.spawnSubagent({ sessionId, agent: 'researcher', input: 'research' });
    await waitForEvent(h, sessionId, 'model.requested', (e) => e.threadId === childThreadId);
    expect(await rt.interruptTurn({ sessionId, threadId })).toMatchObject({ interrupted: true, status: 'cancelled' });
    await rt.settled(sessionId);
    const child = await rt.getThreadRead({ sessionId, threadId: childThreadId });
    expect(child.lastOutcome).toMatchObject({ status: 'completed', answer: 'Done on my own.' });
    expect((await subagent(sessionId, subagentId))?.status).toBe('completed');
  });

  it("a model's delegated child given more input later reports that turn to its parent too", async () => {
    h = await harness(
      {
        steps: [
          act([{ id: 'r', type: 'agent', name: 'researcher', args: { prompt: 'Find sources' } }]),
          answer('Delegated.'),
        ],
        agents: { researcher: { steps: [answer('Found them.'), answer('Here is more.')] } },
      },
      { agents: [researcher] },
    );
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    await rt.submitTurn({ sessionId, input: 'research' });
    await rt.settled(sessionId);
    const [sub] = await rt.listSubagents({ sessionId, threadId });
    expect(sub?.status).toBe('completed');
    const more = await rt.sendSubagentInput({ sessionId, subagentId: sub?.subagentId as string, input: 'More?' });
    await waitForEvent(
      h,
      sessionId,
      'subagent.status',
      (e) => payload(e).childTurnId === more.turnId && payload(e).status === 'completed',
    );
    await rt.settled(sessionId);
    expect((await subagent(sessionId, sub?.subagentId as string))?.status).toBe('completed');
    const events = await allEvents(h, sessionId);
    // The delegation answered its action once; the later turn is the sub-agent's own, with no action to answer.
    expect(ofType(events, 'subagent.completed').map((e) => payload(e).graphActionId)).toEqual(['r']);
    expect(ofType(events, 'subagent.input').map((e) => payload(e).turnId)).toEqual([more.turnId]);
    assertEventsConform(events);
  });
});
