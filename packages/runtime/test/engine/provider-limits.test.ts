import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { bindingModel, ProviderLimiter } from '../../src/index.js';
import { type FakeOpenAI, type FakeReply, fakeOpenAI } from '../support/fake-openai.js';
import { assertEventsConform } from '../support/schemas.js';
import { tempDir } from '../support/temp-dirs.js';
import { type Harness, harness } from './harness.js';
import { allEvents, ofType, payload, types, waitForEvent } from './helpers.js';

/**
 * Models as a shared resource of the process (issue 16 §3, §1, §2): limits per provider and model shared by every
 * session, a 429's retry-after pausing that model for every caller, the idle-stream timeout, and the capability
 * checks of a chain's candidates (`task.profile.resolved`, exclusions with reasons).
 */
let h: Harness | undefined;
let server: FakeOpenAI | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  await server?.close();
  h = undefined;
  server = undefined;
});

const answerCall = (message: string): FakeReply => ({
  kind: 'answer',
  toolCalls: [{ name: 'AgentProtocolOutput', arguments: JSON.stringify({ kind: 'answer', message }) }],
});

const resourceWaits = (events: RuntimeEvent[]) =>
  ofType(events, 'thread.updated')
    .map((e) => payload(e).resourceWait)
    .filter((w): w is Record<string, unknown> => typeof w === 'object' && w !== null);

function script(dir: string, name: string, steps: unknown[]): string {
  const file = join(dir, `${name}.json`);
  writeFileSync(file, JSON.stringify({ steps }));
  return file;
}

describe('provider limits', () => {
  it('a concurrency limit is shared by the sessions of the process; the waiting call shows waiting_resource', async () => {
    const dir = tempDir('oar-limits-');
    const file = script(dir, 'slow', [{ protocol: { kind: 'answer', message: 'slow answer' }, delayMs: 300 }]);
    const limiter = new ProviderLimiter({ script: { maxConcurrency: 1 } });
    h = await harness(
      { steps: [] },
      {
        defaultModel: `script:${file}`,
        providerLimits: limiter,
        model: (agent, binding) => bindingModel(agent, binding, {}),
      },
    );
    const a = await h.runtime.createSession();
    const b = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId: a.sessionId, input: 'one' });
    await waitForEvent(h, a.sessionId, 'model.requested');
    await h.runtime.submitTurn({ sessionId: b.sessionId, input: 'two' });
    // While A's call runs, B's waits for the slot, visibly.
    await waitForEvent(h, b.sessionId, 'thread.updated', (e) => payload(e).resourceWait !== undefined);
    const { snapshot } = await h.runtime.getSession({ sessionId: b.sessionId, limit: 0 });
    const waitingTurn = snapshot.threads[0]?.turns[0];
    expect(waitingTurn?.status).toBe('waiting_resource');
    expect(waitingTurn?.limitState).toMatchObject({ kind: 'provider', reason: 'concurrency', key: 'script' });
    await h.runtime.settled(a.sessionId);
    await h.runtime.settled(b.sessionId);
    const eventsA = await allEvents(h, a.sessionId);
    const eventsB = await allEvents(h, b.sessionId);
    expect(resourceWaits(eventsA)).toEqual([]);
    expect(resourceWaits(eventsB)[0]).toMatchObject({ kind: 'provider', reason: 'concurrency', limit: 1 });
    // B's call started after A's ended: never two at once.
    const endA = Date.parse(ofType(eventsA, 'model.completed')[0]?.timestamp ?? '');
    const resumedB = ofType(eventsB, 'thread.updated').find((e) => payload(e).resourceWait === null);
    expect(Date.parse(resumedB?.timestamp ?? '')).toBeGreaterThanOrEqual(endA);
    expect(ofType(eventsB, 'turn.completed')).toHaveLength(1);
    expect(limiter.running('script')).toBe(0);
    assertEventsConform(eventsB);
    expect((await h.runtime.replaySession(b.sessionId)).differences).toEqual([]);
  });

  it('a 429 retry-after pauses that model for every caller in the process, not only the one retrying', async () => {
    server = await fakeOpenAI((index) =>
      index === 0
        ? { kind: 'error', status: 429, headers: { 'retry-after-ms': '400' } }
        : { ...answerCall('after the pause'), chunkDelayMs: 5 },
    );
    h = await harness(
      { steps: [] },
      {
        defaultModel: 'fake',
        models: { fake: { provider: 'openai-compatible', model: 'fake-model', baseURL: server.baseURL } },
        limits: { modelRetryInitialDelayMs: 5, modelRetryMaxDelayMs: 5_000 },
        model: (agent, binding) => bindingModel(agent, binding, {}),
      },
    );
    const a = await h.runtime.createSession();
    const b = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId: a.sessionId, input: 'first' });
    await waitForEvent(h, a.sessionId, 'rate_limit.hit');
    await h.runtime.submitTurn({ sessionId: b.sessionId, input: 'second' });
    await h.runtime.settled(a.sessionId);
    await h.runtime.settled(b.sessionId);
    const eventsB = await allEvents(h, b.sessionId);
    // B never hit the 429 itself: it waited for the pause A was told of, a limit OAR enforced (no provider status).
    expect(ofType(eventsB, 'rate_limit.hit').map((e) => e.payload)).toEqual([
      expect.objectContaining({ enforcedBy: 'oar_process_limits', reason: 'rate_limited' }),
    ]);
    expect(ofType(eventsB, 'rate_limit.hit')[0]?.payload).not.toHaveProperty('statusCode');
    expect(resourceWaits(eventsB)[0]).toMatchObject({
      kind: 'provider',
      reason: 'rate_limited',
      key: 'openai-compatible:fake-model',
    });
    expect(server.requests).toHaveLength(3);
    const [limited, ...after] = server.requests;
    for (const request of after) expect(request.at - (limited?.at ?? 0)).toBeGreaterThanOrEqual(350);
    expect(payload(ofType(eventsB, 'turn.completed')[0])).toMatchObject({ answer: 'after the pause' });
    assertEventsConform(eventsB);
  });
});

describe('idle-stream timeout', () => {
  it('a stream that stalls mid-way fails as timeout (idle) at idleTimeoutMs, is retried, and answers', async () => {
    server = await fakeOpenAI((index) =>
      index === 0 ? { ...answerCall('never finished'), stallAfter: 1 } : answerCall('second try'),
    );
    h = await harness(
      { steps: [] },
      {
        defaultModel: 'fake',
        models: {
          fake: {
            provider: 'openai-compatible',
            model: 'fake-model',
            baseURL: server.baseURL,
            idleTimeoutMs: 300,
            timeoutMs: 20_000,
          },
        },
        limits: { modelRetryInitialDelayMs: 5 },
        model: (agent, binding) => bindingModel(agent, binding, {}),
      },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const failed = payload(ofType(events, 'model.failed')[0]);
    expect(failed).toMatchObject({ failureClass: 'timeout', attempt: 1 });
    expect(failed.error).toMatchObject({ code: 'model_timeout', details: { idle: true, idleTimeoutMs: 300 } });
    expect(failed.durationMs as number).toBeGreaterThanOrEqual(280);
    expect(failed.durationMs as number).toBeLessThan(5_000);
    expect(typeof failed.retryInMs).toBe('number');
    // The stalled connection was closed by the client.
    expect(server.requests[0]?.closedAt).toBeDefined();
    expect(payload(ofType(events, 'turn.completed')[0])).toMatchObject({ answer: 'second try' });
    assertEventsConform(events);
  });
});

describe('capability checks', () => {
  const answer = (message: string) => ({ protocol: { kind: 'answer', message } });

  it('a candidate whose window cannot hold the prompt, or that cannot call tools, is excluded with the reason', async () => {
    const dir = tempDir('oar-caps-');
    const models = {
      notools: { provider: 'script' as const, file: script(dir, 'notools', [answer('x')]), toolCalling: false },
      small: { provider: 'script' as const, file: script(dir, 'small', [answer('x')]), contextWindow: 1_000 },
      big: { provider: 'script' as const, file: script(dir, 'big', [answer('From the big one.')]) },
    };
    h = await harness(
      { steps: [] },
      {
        defaultModel: ['notools', 'big', 'small'],
        models,
        model: (agent, binding) => bindingModel(agent, binding, {}),
      },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const order = types(events).filter((t) => t.startsWith('task.profile') || t.startsWith('routing.'));
    expect(order).toEqual(['task.profile.resolved', 'routing.candidates.resolved', 'routing.decided']);
    const profile = ofType(events, 'task.profile.resolved')[0];
    expect(profile?.taskProfile).toMatchObject({ carrier: 'tool', requirements: { toolCalling: true } });
    expect(payload(profile).promptTokenEstimate as number).toBeGreaterThan(0);
    const resolved = payload(ofType(events, 'routing.candidates.resolved')[0]);
    expect(resolved.candidateCount).toBe(1);
    expect(resolved.excluded).toMatchObject([
      { spec: 'notools', capabilityGap: 'tool_calling' },
      { spec: 'small', capabilityGap: 'context_window', contextWindow: 1_000 },
    ]);
    expect(payload(ofType(events, 'routing.decided')[0])).toMatchObject({ selectedModel: 'big' });
    expect(payload(ofType(events, 'turn.completed')[0])).toMatchObject({ answer: 'From the big one.' });
    assertEventsConform(events);
  });

  it('a later step whose prompt outgrew a candidate records the new profile and routing with its request', async () => {
    const dir = tempDir('oar-caps-');
    const read = {
      protocol: {
        kind: 'act',
        message: 'reading',
        calls: [{ id: 'r1', type: 'tool', name: 'read', args: { filePath: 'README.md' }, result: 'full' }],
      },
    };
    const models = {
      big: { provider: 'script' as const, file: script(dir, 'big', [read, answer('Read.')]) },
      // Room for the first prompt (about 1,700 tokens), not for the second with the README's 2,000-token result.
      small: { provider: 'script' as const, file: script(dir, 'small', []), contextWindow: 2_600, maxOutputTokens: 16 },
    };
    h = await harness(
      { steps: [] },
      {
        defaultModel: ['big', 'small'],
        models,
        files: { 'README.md': `# Long\n\n${'A line of the readme. '.repeat(400)}` },
        model: (agent, binding) => bindingModel(agent, binding, {}),
      },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read it' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const resolved = ofType(events, 'routing.candidates.resolved').map((e) => payload(e).excluded);
    expect(resolved).toMatchObject([[], [{ spec: 'small', capabilityGap: 'context_window' }]]);
    expect(ofType(events, 'task.profile.resolved')).toHaveLength(2);
    const requests = ofType(events, 'model.requested').map((e) => e.sequence);
    const second = ofType(events, 'routing.candidates.resolved')[1]?.sequence ?? 0;
    expect(second).toBeLessThan(requests[1] ?? 0);
    expect(payload(ofType(events, 'turn.completed')[0])).toMatchObject({ answer: 'Read.' });
    assertEventsConform(events);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('no candidate has what the call needs: routing.not_possible names the gap, the turn fails no_model', async () => {
    const dir = tempDir('oar-caps-');
    const models = {
      small: { provider: 'script' as const, file: script(dir, 'small', [answer('x')]), contextWindow: 1_000 },
    };
    h = await harness(
      { steps: [] },
      { defaultModel: 'small', models, model: (agent, binding) => bindingModel(agent, binding, {}) },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(payload(ofType(events, 'routing.not_possible')[0])).toMatchObject({
      reason: 'capability_gap',
      capabilityGap: 'context_window',
    });
    expect(ofType(events, 'model.requested')).toEqual([]);
    expect(payload(ofType(events, 'turn.failed')[0]).error).toMatchObject({ code: 'no_model' });
    assertEventsConform(events);
  });
});
