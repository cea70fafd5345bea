import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from './harness.js';
import { act, actionRows, allEvents, answer, dsl, flakyTool, ofType, payload, registryWith } from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const readMissing = { executor: { type: 'tool', target: 'read' }, input: { filePath: 'missing.txt' } };
const readReadme = { executor: { type: 'tool', target: 'read' }, input: { filePath: 'README.md' } };
const writeFile = (filePath: string) => ({
  executor: { type: 'tool', target: 'write' },
  input: { filePath, content: 'x' },
});

async function actionsOf(x: Harness, sessionId: string, threadId: string) {
  const read = await x.runtime.getThreadRead({ sessionId, threadId });
  return Object.fromEntries(actionRows(read).map((a) => [a.actionId, a]));
}

describe('dependencies and failure policy', () => {
  it('skips the dependents of a failed action with dependency_failed (carrier)', async () => {
    h = await harness({
      steps: [
        act([
          { id: 'a', type: 'tool', name: 'read', args: { filePath: 'missing.txt' } },
          { id: 'b', type: 'tool', name: 'read', args: { filePath: 'README.md' }, depends: 'a' },
          { id: 'c', type: 'tool', name: 'read', args: { filePath: 'README.md' }, depends: ['b'] },
          { id: 'd', type: 'tool', name: 'read', args: { filePath: 'README.md' } },
        ]),
        answer('a failed.'),
      ],
    });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const actions = await actionsOf(h, sessionId, threadId);
    expect(actions.a).toMatchObject({ status: 'failed', error: { code: 'not_found' } });
    expect(actions.b).toMatchObject({ status: 'skipped', error: { code: 'dependency_failed' } });
    expect(actions.c).toMatchObject({ status: 'skipped', error: { code: 'dependency_failed' } });
    expect(actions.d?.status).toBe('completed');
    const events = await allEvents(h, sessionId);
    const started = ofType(events, 'tool.started').map((e) => payload(e).graphActionId);
    expect(started.sort()).toEqual(['a', 'd']);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'a failed.' });
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('failure_policy abort cancels the rest of the graph, including actions already queued', async () => {
    h = await harness(
      {
        steps: [
          dsl([
            { id: 'a', ...readMissing, failure_policy: 'abort' },
            { id: 'w', ...writeFile('after.txt') },
            { id: 'b', ...readReadme, depends_on: ['w'] },
          ]),
          answer('Aborted.'),
        ],
      },
      { permissions: { mode: 'bypass' } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const actions = await actionsOf(h, sessionId, threadId);
    expect(actions.a?.status).toBe('failed');
    expect(actions.w).toMatchObject({ status: 'cancelled', error: { code: 'graph_aborted' } });
    expect(actions.b?.status).toBe('cancelled');
    expect(existsSync(join(h.workspace, 'after.txt'))).toBe(false);
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'tool.started').map((e) => payload(e).graphActionId)).toEqual(['a']);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Aborted.' });
  });

  it('failure_policy abort also ends an action waiting for approval, and withdraws its request', async () => {
    h = await harness({
      steps: [
        dsl([
          { id: 'w', ...writeFile('after.txt') },
          { id: 'a', ...readMissing, failure_policy: 'abort' },
        ]),
        answer('Aborted while asking.'),
      ],
    });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    const byId = Object.fromEntries(actionRows(read).map((a) => [a.actionId, a]));
    expect(byId.a?.status).toBe('failed');
    expect(byId.w).toMatchObject({ status: 'cancelled', error: { code: 'graph_aborted' } });
    expect(read.pendingRequests).toEqual([]);
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Aborted while asking.' });
    const required = ofType(await allEvents(h, sessionId), 'action.required')[0];
    await expect(
      h.runtime.respondAction({ sessionId, actionId: required?.actionId as string, decision: 'approve' }),
    ).rejects.toMatchObject({ code: 'action_not_found' });
    await h.runtime.settled(sessionId);
    expect(existsSync(join(h.workspace, 'after.txt'))).toBe(false);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('failure_policy ask_model skips the rest and hands the decision to the model', async () => {
    h = await harness(
      {
        steps: [
          dsl([
            { id: 'a', ...readMissing, failure_policy: 'ask_model' },
            { id: 'w', ...writeFile('after.txt') },
            { id: 'b', ...readReadme, depends_on: ['w'] },
          ]),
          answer('Deciding.'),
        ],
      },
      { permissions: { mode: 'bypass' } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const actions = await actionsOf(h, sessionId, threadId);
    expect(actions.a?.status).toBe('failed');
    expect(actions.w).toMatchObject({ status: 'skipped', error: { code: 'awaiting_model_decision' } });
    expect(actions.b?.status).toBe('skipped');
    expect(existsSync(join(h.workspace, 'after.txt'))).toBe(false);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Deciding.' });
  });

  it('failure_policy max_attempts retries a failed tool before its failure counts', async () => {
    const counter = { calls: 0 };
    h = await harness(
      {
        steps: [
          dsl([
            {
              id: 'f',
              executor: { type: 'tool', target: 'flaky' },
              input: { label: 'x' },
              failure_policy: { max_attempts: 3 },
            },
            { id: 'after', ...readReadme, depends_on: ['f'] },
          ]),
          answer('Recovered.'),
        ],
      },
      { tools: registryWith(flakyTool(counter, 2)) },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    expect(counter.calls).toBe(3);
    const events = await allEvents(h, sessionId);
    const started = ofType(events, 'tool.started').filter((e) => payload(e).graphActionId === 'f');
    expect(started.map((e) => payload(e).attempt)).toEqual([1, 2, 3]);
    expect(ofType(events, 'tool.failed')).toHaveLength(2);
    expect(ofType(events, 'task.retrying').map((e) => payload(e).nextAttempt)).toEqual([2, 3]);
    const pending = ofType(events, 'run.status').filter(
      (e) => payload(e).graphActionId === 'f' && payload(e).status === 'pending',
    );
    expect(pending.map((e) => payload(e).attempt)).toEqual([2, 3]);
    const actions = await actionsOf(h, sessionId, threadId);
    expect(actions.f).toMatchObject({ status: 'completed', attempt: 3 });
    expect(actions.after?.status).toBe('completed');
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Recovered.' });
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('"retry" gives two attempts; when both fail the failure counts (dependents skipped)', async () => {
    const counter = { calls: 0 };
    h = await harness(
      {
        steps: [
          dsl([
            { id: 'f', executor: { type: 'tool', target: 'flaky' }, input: { label: 'x' }, failure_policy: 'retry' },
            { id: 'after', ...readReadme, depends_on: ['f'] },
          ]),
          answer('Gave up.'),
        ],
      },
      { tools: registryWith(flakyTool(counter, 5)) },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    expect(counter.calls).toBe(2);
    const actions = await actionsOf(h, sessionId, threadId);
    expect(actions.f).toMatchObject({ status: 'failed', attempt: 2, error: { code: 'upstream_failed' } });
    expect(actions.after).toMatchObject({ status: 'skipped', error: { code: 'dependency_failed' } });
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'task.retrying')).toHaveLength(1);
  });

  it('a single attempt (the default) is not retried', async () => {
    const counter = { calls: 0 };
    h = await harness(
      {
        steps: [act([{ id: 'f', type: 'tool', name: 'flaky', args: { label: 'x' } }]), answer('Failed once.')],
      },
      { tools: registryWith(flakyTool(counter, 1)) },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    expect(counter.calls).toBe(1);
    expect(ofType(await allEvents(h, sessionId), 'task.retrying')).toHaveLength(0);
  });
});
