import { randomUUID } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ActionDecision } from '@oar/protocol';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { type Harness, harness } from './harness.js';
import { act, actionRows, allEvents, answer, errorCode, ofType, payload } from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

describe('control-plane errors', () => {
  it('unknown ids and invalid commands throw OarRuntimeError with stable codes', async () => {
    h = await harness({ steps: [] });
    const { sessionId, threadId } = await h.runtime.createSession();
    const rt = h.runtime;
    expect(await errorCode(rt.respondAction({ sessionId: 'ses_nope', actionId: 'act_x', decision: 'approve' }))).toBe(
      'session_not_found',
    );
    expect(await errorCode(rt.respondAction({ sessionId, actionId: 'act_nope', decision: 'approve' }))).toBe(
      'action_not_found',
    );
    expect(
      await errorCode(rt.respondAction({ sessionId, actionId: 'act_x', decision: 'maybe' as ActionDecision })),
    ).toBe('invalid_decision');
    expect(await errorCode(rt.getThreadRead({ sessionId, threadId: 'thr_nope' }))).toBe('thread_not_found');
    expect(await errorCode(rt.getThreadRead({ sessionId: 'ses_nope', threadId }))).toBe('thread_not_found');
    expect(await errorCode(rt.retryTask({ sessionId, taskId: 'task_nope' }))).toBe('task_not_found');
    expect(await errorCode(rt.cancelTask({ sessionId, taskId: 'task_nope' }))).toBe('task_not_found');
    expect(await errorCode(rt.submitTurn({ sessionId: 'ses_nope', input: 'hi' }))).toBe('session_not_found');
    expect(await errorCode(rt.submitTurn({ sessionId, threadId: 'thr_nope', input: 'hi' }))).toBe('thread_not_found');
    expect(await errorCode(rt.getSession({ sessionId: 'ses_nope' }))).toBe('session_not_found');
    expect(await errorCode(rt.removeQueuedTurn({ sessionId, threadId, turnId: 'turn_nope' }))).toBe(
      'queued_turn_not_found',
    );
    expect(await errorCode(rt.createSession({ agent: 'ghost' }))).toBe('unknown_agent');
    // Nothing was written by the failed commands.
    expect((await allEvents(h, sessionId)).map((e) => e.type)).toEqual(['session.created', 'thread.started']);
  });

  it('an answered decision says so: responding twice is decision_already_resolved', async () => {
    h = await harness({
      steps: [act([{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'a.txt', content: 'a' } }]), answer('ok')],
    });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    const actionId = read.pendingRequests[0]?.actionId as string;
    await h.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    expect(await errorCode(h.runtime.respondAction({ sessionId, actionId, decision: 'deny' }))).toBe(
      'decision_already_resolved',
    );
    await h.runtime.settled(sessionId);
    expect(ofType(await allEvents(h, sessionId), 'action.resolved')).toHaveLength(1);
  });
});

describe('retry_task', () => {
  it('a failed task retried gets a second attempt; the failed one stays on record', async () => {
    h = await harness({
      steps: [
        act([{ id: 'r', type: 'tool', name: 'read', args: { filePath: 'later.txt' } }]),
        answer('It does not exist yet.'),
        answer('Now it exists.'),
      ],
    });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read later.txt' });
    await h.runtime.settled(sessionId);
    let { snapshot } = await h.runtime.getSession({ sessionId });
    const task = snapshot.tasks[0];
    expect(task?.status).toBe('failed');
    const taskId = task?.taskId as string;
    expect(await errorCode(h.runtime.cancelTask({ sessionId, taskId }))).toBe('task_not_active');

    writeFileSync(join(h.workspace, 'later.txt'), 'finally here\n');
    const retry = await h.runtime.retryTask({ sessionId, taskId });
    await h.runtime.settled(sessionId);
    ({ snapshot } = await h.runtime.getSession({ sessionId }));
    const retried = snapshot.tasks.find((t) => t.taskId === taskId);
    expect(retried?.status).toBe('completed');
    expect(retried?.attempts).toHaveLength(2);
    expect(retried?.attempts?.[0]).toMatchObject({ status: 'failed', attemptCount: 1 });
    expect(retried?.attempts?.[1]).toMatchObject({ status: 'completed', attemptCount: 2, runId: retry.runId });
    expect(retried?.attempts?.[0]?.runId).not.toBe(retry.runId);

    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'task.retrying').map((e) => payload(e).nextAttempt)).toEqual([2]);
    const results = ofType(events, 'tool.result');
    expect(results).toHaveLength(1);
    expect(results[0]?.runId).toBe(retry.runId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ turnId: retry.turnId, status: 'completed', answer: 'Now it exists.' });
    // Only failed tasks are retried.
    expect(await errorCode(h.runtime.retryTask({ sessionId, taskId }))).toBe('task_not_retryable');
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });
});

describe('limits', () => {
  it('maxSteps: a model that keeps acting fails the turn with step_budget_exceeded', async () => {
    h = await harness(
      {
        steps: [
          act([{ id: 'r1', type: 'tool', name: 'read', args: { filePath: 'README.md' } }]),
          act([{ id: 'r2', type: 'tool', name: 'read', args: { filePath: 'README.md' } }]),
          act([{ id: 'r3', type: 'tool', name: 'read', args: { filePath: 'README.md' } }]),
        ],
      },
      { limits: { maxSteps: 2 } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'loop' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'model.requested')).toHaveLength(2);
    expect(ofType(events, 'tool.result')).toHaveLength(2);
    const failed = ofType(events, 'turn.failed')[0];
    expect(payload(failed)).toMatchObject({ error: { code: 'step_budget_exceeded', details: { maxSteps: 2 } } });
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.status).toBe('idle');
    expect(read.lastOutcome).toMatchObject({ status: 'failed', error: { code: 'step_budget_exceeded' } });
  });
});

describe('workspace confinement', () => {
  it('reading ../outside fails with path_outside_workspace and records a sandbox violation', async () => {
    const outsideName = `outside-${randomUUID()}.txt`;
    h = await harness({
      steps: [
        act([{ id: 'esc', type: 'tool', name: 'read', args: { filePath: `../${outsideName}` } }]),
        answer('Denied.'),
      ],
    });
    const outside = join(h.workspace, '..', outsideName);
    writeFileSync(outside, 'secret');
    onTestFinished(() => rmSync(outside, { force: true }));
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'escape' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const failed = ofType(events, 'tool.failed')[0];
    expect(payload(failed)).toMatchObject({ error: { code: 'path_outside_workspace' } });
    const violation = ofType(events, 'sandbox.violation')[0];
    expect(payload(violation)).toMatchObject({ toolName: 'read', kind: 'path_outside_workspace' });
    expect(violation?.sequence).toBeLessThan(failed?.sequence ?? 0);
    expect(JSON.stringify(events)).not.toContain('secret');
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({ status: 'failed', error: { code: 'path_outside_workspace' } });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Denied.' });
  });
});

describe('scoped state', () => {
  it('session and thread state are events: set, read, delete, replayed', async () => {
    h = await harness({ steps: [] });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.setState({ sessionId, key: 'plan', value: { step: 1 } });
    await h.runtime.setState({ sessionId, threadId, key: 'cursor', value: 42 });
    await h.runtime.setState({ sessionId, key: 'tmp', value: 'x' });
    await h.runtime.setState({ sessionId, key: 'tmp', value: null });
    expect(await h.runtime.getState({ sessionId })).toEqual({ plan: { step: 1 } });
    expect(await h.runtime.getState({ sessionId, key: 'plan' })).toEqual({ plan: { step: 1 } });
    expect(await h.runtime.getState({ sessionId, key: 'missing' })).toEqual({});
    expect(await h.runtime.getState({ sessionId, threadId })).toEqual({ cursor: 42 });
    const updates = ofType(await allEvents(h, sessionId), 'session.updated').map((e) => payload(e).changed);
    expect(updates).toEqual([['state.plan'], ['state.tmp'], ['state.tmp']]);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
    expect(await errorCode(h.runtime.setState({ sessionId, key: 'bad key!', value: 1 }))).toBe('invalid_state_key');
    expect(await errorCode(h.runtime.setState({ sessionId, key: 'k', value: 'x'.repeat(300_000) }))).toBe(
      'invalid_state_value',
    );
    expect(await errorCode(h.runtime.setState({ sessionId: 'ses_nope', key: 'k', value: 1 }))).toBe(
      'session_not_found',
    );
    expect(await errorCode(h.runtime.getState({ sessionId, threadId: 'thr_nope' }))).toBe('thread_not_found');
  });
});

describe('routing facts', () => {
  it('an agent no model can serve records routing.not_possible and fails the turn with no_model', async () => {
    h = await harness(
      { steps: [] },
      {
        model: () => {
          throw new Error('no provider configured');
        },
      },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'hello' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(payload(ofType(events, 'routing.not_possible')[0])).toMatchObject({ candidateCount: 0, reason: 'no_model' });
    expect(ofType(events, 'model.requested')).toEqual([]);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'failed', error: { code: 'no_model' } });
  });
});
