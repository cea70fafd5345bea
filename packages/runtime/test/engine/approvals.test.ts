import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../../src/index.js';
import { type Harness, harness } from './harness.js';
import { act, actionRows, allEvents, answer, ofType, payload, recordingModel, types } from './helpers.js';

let h: Harness | undefined;
const extra: Harness[] = [];
afterEach(async () => {
  for (const x of [h, ...extra]) {
    await x?.runtime.close();
    await x?.store.close();
  }
  extra.length = 0;
  h = undefined;
});

const writeCall = (id: string, content = 'hello\n', filePath = 'out.txt') => ({
  id,
  type: 'tool',
  name: 'write',
  args: { filePath, content },
});

async function pendingApproval(x: Harness, sessionId: string, threadId: string) {
  await x.runtime.settled(sessionId);
  const read = await x.runtime.getThreadRead({ sessionId, threadId });
  expect(read.status).toBe('blocked');
  expect(read.pendingRequests).toHaveLength(1);
  const request = read.pendingRequests[0];
  expect(request?.actionType).toBe('tool_approval');
  return { read, actionId: request?.actionId as string };
}

describe('approvals', () => {
  it('asks before a write in default mode, and runs it once approved', async () => {
    h = await harness({ steps: [act([writeCall('w1')]), answer('Written.')] });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write out.txt' });
    const { read, actionId } = await pendingApproval(h, sessionId, threadId);
    expect(read.turns.at(-1)?.status).toBe('waiting_permission');
    expect(existsSync(join(h.workspace, 'out.txt'))).toBe(false);
    let events = await allEvents(h, sessionId);
    expect(types(events)).not.toContain('tool.started');
    const required = ofType(events, 'action.required')[0];
    expect(payload(required)).toMatchObject({ actionType: 'tool_approval', toolName: 'write', graphActionId: 'w1' });
    expect(payload(ofType(events, 'permission.evaluated')[0])).toMatchObject({ decision: 'ask' });

    await h.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    await h.runtime.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'out.txt'), 'utf8')).toBe('hello\n');
    const after = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(after.pendingRequests).toEqual([]);
    expect(after.lastOutcome).toMatchObject({ status: 'completed', answer: 'Written.' });
    events = await allEvents(h, sessionId);
    const t = types(events);
    expect(t.indexOf('action.resolved')).toBeLessThan(t.indexOf('tool.started'));
    expect(payload(ofType(events, 'permission.resolved')[0])).toMatchObject({ decision: 'allow', grantScope: 'once' });
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a denied write has no effect, and the model is told permission_denied', async () => {
    const recorder = recordingModel({ steps: [act([writeCall('w1')]), answer('Understood, not written.')] });
    h = await harness({ steps: [] }, { model: recorder.model });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write out.txt' });
    const { actionId } = await pendingApproval(h, sessionId, threadId);
    await h.runtime.respondAction({ sessionId, actionId, decision: 'deny', reason: 'not today' });
    await h.runtime.settled(sessionId);
    expect(existsSync(join(h.workspace, 'out.txt'))).toBe(false);
    const events = await allEvents(h, sessionId);
    expect(types(events)).not.toContain('tool.started');
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read).find((a) => a.actionId === 'w1')).toMatchObject({
      status: 'denied',
      error: { code: 'permission_denied' },
    });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Understood, not written.' });
    // The second model call saw the denial.
    expect(recorder.prompts).toHaveLength(2);
    expect(recorder.prompts[1]?.text).toContain('permission_denied');
    expect(payload(ofType(events, 'permission.resolved')[0])).toMatchObject({ decision: 'deny' });
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('approve_for_session grants the same path for later turns without asking', async () => {
    h = await harness({
      steps: [
        act([writeCall('w1', 'one\n')]),
        answer('First.'),
        act([writeCall('w2', 'two\n')]),
        answer('Second.'),
        act([writeCall('w3', 'three\n', 'other.txt')]),
        answer('Third.'),
      ],
    });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'first write' });
    const { actionId } = await pendingApproval(h, sessionId, threadId);
    await h.runtime.respondAction({ sessionId, actionId, decision: 'approve_for_session' });
    await h.runtime.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'out.txt'), 'utf8')).toBe('one\n');

    await h.runtime.submitTurn({ sessionId, input: 'second write' });
    await h.runtime.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'out.txt'), 'utf8')).toBe('two\n');
    let read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Second.' });
    let events = await allEvents(h, sessionId);
    expect(ofType(events, 'action.required')).toHaveLength(1);
    const evaluated = ofType(events, 'permission.evaluated');
    expect(payload(evaluated.at(-1))).toMatchObject({ decision: 'allow', source: 'human' });

    // The grant is exactly that path: another file asks again.
    await h.runtime.submitTurn({ sessionId, input: 'third write' });
    await h.runtime.settled(sessionId);
    read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.pendingRequests).toHaveLength(1);
    expect(existsSync(join(h.workspace, 'other.txt'))).toBe(false);
    events = await allEvents(h, sessionId);
    expect(ofType(events, 'action.required')).toHaveLength(2);
  });

  it('read-only mode denies writes without asking', async () => {
    h = await harness(
      { steps: [act([writeCall('w1')]), answer('Cannot write.')] },
      { permissions: { mode: 'read-only' } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write' });
    await h.runtime.settled(sessionId);
    expect(existsSync(join(h.workspace, 'out.txt'))).toBe(false);
    const events = await allEvents(h, sessionId);
    expect(types(events)).not.toContain('action.required');
    expect(types(events)).not.toContain('tool.started');
    expect(payload(ofType(events, 'permission.evaluated')[0])).toMatchObject({ decision: 'deny', source: 'mode' });
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(actionRows(read)[0]).toMatchObject({ status: 'denied', error: { code: 'permission_denied' } });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Cannot write.' });
  });

  it('a deny rule stops a write even in bypass mode', async () => {
    h = await harness(
      { steps: [act([writeCall('w1', 'x', 'secrets/key.txt'), writeCall('w2', 'y', 'ok.txt')]), answer('Done.')] },
      {
        permissions: {
          mode: 'bypass',
          rules: [{ decision: 'deny', paths: ['secrets/**'], reason: 'no secrets' }],
        },
      },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write both' });
    await h.runtime.settled(sessionId);
    expect(existsSync(join(h.workspace, 'secrets/key.txt'))).toBe(false);
    expect(readFileSync(join(h.workspace, 'ok.txt'), 'utf8')).toBe('y');
    const events = await allEvents(h, sessionId);
    const denied = ofType(events, 'permission.evaluated').find((e) => payload(e).graphActionId === 'w1');
    expect(payload(denied)).toMatchObject({ decision: 'deny', source: 'rule' });
    expect(JSON.stringify(payload(denied))).toContain('no secrets');
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    const w1 = actionRows(read).find((a) => a.actionId === 'w1');
    expect(w1).toMatchObject({ status: 'denied', error: { code: 'permission_denied' } });
    expect(w1?.error?.message).toContain('no secrets');
  });

  it('pending approvals survive a restart and are never auto-approved', async () => {
    const script = { steps: [act([writeCall('w1')]), answer('Written after restart.')] };
    h = await harness(script);
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write' });
    const { actionId } = await pendingApproval(h, sessionId, threadId);
    await h.runtime.close();
    await h.store.close();

    // A new runtime on the same SQLite file: still pending, nothing ran.
    const store = await Store.open(join(h.dir, 'oar.db'));
    const second = await harness(script, { store, workspaceRoot: h.workspace });
    extra.push(second);
    await second.runtime.settled(sessionId);
    const read = await second.runtime.getThreadRead({ sessionId, threadId });
    expect(read.status).toBe('blocked');
    expect(read.pendingRequests.map((p) => p.actionId)).toEqual([actionId]);
    expect(existsSync(join(h.workspace, 'out.txt'))).toBe(false);
    expect(types(await allEvents(second, sessionId))).not.toContain('tool.started');

    await second.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    await second.runtime.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'out.txt'), 'utf8')).toBe('hello\n');
    const after = await second.runtime.getThreadRead({ sessionId, threadId });
    expect(after.lastOutcome).toMatchObject({ status: 'completed', answer: 'Written after restart.' });
    expect((await second.runtime.replaySession(sessionId)).differences).toEqual([]);
    h = undefined;
  });

  it('two writes in one graph each get their own decision', async () => {
    h = await harness({
      steps: [act([writeCall('w1', '1', 'a.txt'), writeCall('w2', '2', 'b.txt')]), answer('Both.')],
    });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'two writes' });
    await h.runtime.settled(sessionId);
    let read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.pendingRequests).toHaveLength(2);
    const [first, second] = read.pendingRequests;
    await h.runtime.respondAction({ sessionId, actionId: first?.actionId as string, decision: 'approve' });
    await h.runtime.settled(sessionId);
    read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.status).toBe('blocked');
    expect(read.pendingRequests.map((p) => p.actionId)).toEqual([second?.actionId]);
    expect(readFileSync(join(h.workspace, 'a.txt'), 'utf8')).toBe('1');
    expect(existsSync(join(h.workspace, 'b.txt'))).toBe(false);
    await h.runtime.respondAction({ sessionId, actionId: second?.actionId as string, decision: 'deny' });
    await h.runtime.settled(sessionId);
    read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(existsSync(join(h.workspace, 'b.txt'))).toBe(false);
    expect(actionRows(read).map((a) => [a.actionId, a.status])).toEqual([
      ['w1', 'completed'],
      ['w2', 'denied'],
    ]);
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Both.' });
  });

  it('an ask rule offers approve|deny only, and approve_for_session is refused', async () => {
    h = await harness(
      { steps: [act([writeCall('w1')]), answer('ok')] },
      { permissions: { mode: 'accept-edits', rules: [{ decision: 'ask', tool: 'write', reason: 'review writes' }] } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write' });
    const { actionId } = await pendingApproval(h, sessionId, threadId);
    const required = ofType(await allEvents(h, sessionId), 'action.required')[0];
    expect(payload(required).decisions).toEqual(['approve', 'deny']);
    await expect(
      h.runtime.respondAction({ sessionId, actionId, decision: 'approve_for_session' }),
    ).rejects.toMatchObject({
      code: 'invalid_decision',
    });
    // Still pending; a valid decision works.
    await h.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    await h.runtime.settled(sessionId);
    expect(existsSync(join(h.workspace, 'out.txt'))).toBe(true);
  });

  it('interrupting a turn that waits for approval cancels it; the decision is gone', async () => {
    h = await harness({ steps: [act([writeCall('w1')]), answer('next turn')] });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write' });
    const { actionId } = await pendingApproval(h, sessionId, threadId);
    expect((await h.runtime.interruptTurn({ sessionId })).interrupted).toBe(true);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.status).toBe('idle');
    expect(read.pendingRequests).toEqual([]);
    expect(read.lastOutcome).toMatchObject({ status: 'cancelled', error: { code: 'interrupted' } });
    await expect(h.runtime.respondAction({ sessionId, actionId, decision: 'approve' })).rejects.toMatchObject({
      code: 'action_not_found',
    });
    expect(existsSync(join(h.workspace, 'out.txt'))).toBe(false);
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'task.cancelled')).toHaveLength(1);
    await h.runtime.submitTurn({ sessionId, input: 'hello' });
    await h.runtime.settled(sessionId);
    expect((await h.runtime.getThreadRead({ sessionId, threadId })).lastOutcome).toMatchObject({
      status: 'completed',
      answer: 'next turn',
    });
  });
});
