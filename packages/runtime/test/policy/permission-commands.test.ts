import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from '../engine/harness.js';
import { act, allEvents, answer, dsl, errorCode, ofType, payload } from '../engine/helpers.js';
import { assertEventsConform } from '../support/schemas.js';

/**
 * The standard's `evaluate_permission` and `resolve_permission` as commands (docs/permissions.md "Permission
 * commands"): how the one authorization would judge a call now, recorded as `permission.evaluated` on the
 * thread's turn; and a pending tool approval answered in the permission's terms, recorded as `permission.resolved`.
 */
const open: Harness[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
});

const write = (id: string, filePath: string, content: string) => ({
  id,
  type: 'tool',
  name: 'write',
  args: { filePath, content },
});

async function pendingOf(h: Harness, sessionId: string) {
  await h.runtime.settled(sessionId);
  const { snapshot } = await h.runtime.getSession({ sessionId, limit: 0 });
  return snapshot.threads.flatMap((t) => t.pendingRequests);
}

describe('evaluate_permission', () => {
  it("judges a call as the executor would, records it on the thread's last turn, and follows grants", async () => {
    const h = await harness(
      { steps: [act([write('w1', 'notes.txt', 'one')]), answer('written')] },
      { permissions: { mode: 'default', rules: [{ decision: 'deny', tool: 'write', paths: ['secrets/**'] }] } },
    );
    open.push(h);
    const { sessionId, threadId } = await h.runtime.createSession();

    // No turn yet: the judgement is answered, not recorded (a permission fact belongs to a turn).
    const early = await h.runtime.evaluatePermission({ sessionId, toolName: 'read', input: { filePath: 'README.md' } });
    expect(early).toMatchObject({ decision: 'allow', recorded: { eventId: null } });

    await h.runtime.submitTurn({ sessionId, input: 'write notes' });
    const [asked] = await pendingOf(h, sessionId);
    const turnId = asked?.turnId as string;

    const read = await h.runtime.evaluatePermission({ sessionId, toolName: 'read', input: { filePath: 'README.md' } });
    expect(read).toMatchObject({ sessionId, threadId, decision: 'allow', recorded: { turnId } });
    const ask = await h.runtime.evaluatePermission({
      sessionId,
      toolName: 'write',
      input: { filePath: 'notes.txt', content: 'x' },
      requestedBy: 'user:ada',
    });
    expect(ask.decision).toBe('ask');
    expect(ask.evaluation).toMatchObject({ mode: 'default', paths: ['notes.txt'], toolName: 'write' });
    expect(ask.evaluation.decisions).toEqual(expect.arrayContaining(['approve', 'deny']));
    const deny = await h.runtime.evaluatePermission({
      sessionId,
      toolName: 'write',
      input: { filePath: 'secrets/key.txt', content: 'x' },
    });
    expect(deny).toMatchObject({ decision: 'deny', evaluation: { source: 'rule' } });

    const events = await allEvents(h, sessionId);
    const recorded = ofType(events, 'permission.evaluated').filter((e) => payload(e).evaluatedFor === 'client');
    expect(recorded.map((e) => payload(e).decision)).toEqual(['allow', 'ask', 'deny']);
    expect(recorded.every((e) => e.threadId === threadId && e.turnId === turnId)).toBe(true);
    expect(payload(recorded[1]).requestedBy).toBe('user:ada');
    expect(recorded[1]?.eventId).toBe(ask.recorded.eventId);
    assertEventsConform(events);
    // A review counts what the policy decided about the work, not what a client asked about.
    const review = await h.runtime.exportReview({ sessionId });
    expect(Object.keys(review.policyDecisions).some((k) => k.startsWith('deny'))).toBe(false);

    // An evaluation changes nothing: the call still waits for its answer; a session grant then allows it.
    await h.runtime.respondAction({ sessionId, actionId: asked?.actionId as string, decision: 'approve_for_session' });
    await h.runtime.settled(sessionId);
    const granted = await h.runtime.evaluatePermission({
      sessionId,
      toolName: 'write',
      input: { filePath: 'notes.txt', content: 'y' },
    });
    // The grant a person gave (source human), named in the evaluation.
    expect(granted).toMatchObject({
      decision: 'allow',
      evaluation: { source: 'human', grant: { tool: 'write', paths: ['notes.txt'] } },
    });
    expect(readFileSync(join(h.workspace, 'notes.txt'), 'utf8')).toBe('one');
  });

  it('refuses unknown tools, bad input, unknown ids — with structured errors, recording nothing', async () => {
    const h = await harness({ steps: [answer('hi')] });
    open.push(h);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'hi' });
    await h.runtime.settled(sessionId);
    const before = (await allEvents(h, sessionId)).length;
    expect(await errorCode(h.runtime.evaluatePermission({ sessionId, toolName: 'launch_rockets' }))).toBe(
      'unknown_tool',
    );
    expect(
      await errorCode(h.runtime.evaluatePermission({ sessionId, toolName: 'write', input: { filePath: 1 } })),
    ).toBe('invalid_tool_input');
    expect(await errorCode(h.runtime.evaluatePermission({ sessionId: 'ses_nope', toolName: 'read' }))).toBe(
      'session_not_found',
    );
    expect(await errorCode(h.runtime.evaluatePermission({ sessionId, threadId: 'thr_nope', toolName: 'read' }))).toBe(
      'thread_not_found',
    );
    expect(await errorCode(h.runtime.evaluatePermission({ sessionId, turnId: 'turn_nope', toolName: 'read' }))).toBe(
      'turn_not_found',
    );
    expect(await errorCode(h.runtime.evaluatePermission({ sessionId, toolName: 'read', extra: 1 } as never))).toBe(
      'invalid_input',
    );
    expect((await allEvents(h, sessionId)).length).toBe(before);
  });
});

describe('resolve_permission', () => {
  it('allows a pending tool approval for the session: permission.resolved, the call runs, the grant holds', async () => {
    const h = await harness({
      steps: [act([write('w1', 'a.txt', 'A')]), answer('first'), act([write('w2', 'a.txt', 'B')]), answer('second')],
    });
    open.push(h);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'one' });
    const [asked] = await pendingOf(h, sessionId);
    const resolved = await h.runtime.resolvePermission({
      sessionId,
      actionId: asked?.actionId as string,
      decision: 'allow',
      scope: 'session',
      reason: 'fine',
      resolvedBy: 'user:ada',
    });
    expect(resolved).toMatchObject({ decision: 'allow', scope: 'session', toolName: 'write' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(payload(ofType(events, 'permission.resolved')[0])).toMatchObject({
      decision: 'allow',
      grantScope: 'session',
      source: 'human',
      grant: { tool: 'write', paths: ['a.txt'] },
    });
    expect(payload(ofType(events, 'action.resolved')[0])).toMatchObject({ resolvedBy: 'user:ada' });
    expect(readFileSync(join(h.workspace, 'a.txt'), 'utf8')).toBe('A');
    // The second write of the same file is covered by the grant: nothing is asked.
    await h.runtime.submitTurn({ sessionId, input: 'two' });
    expect(await pendingOf(h, sessionId)).toEqual([]);
    expect(readFileSync(join(h.workspace, 'a.txt'), 'utf8')).toBe('B');
    // Answered: a second answer finds nothing pending.
    expect(
      await errorCode(
        h.runtime.resolvePermission({ sessionId, actionId: asked?.actionId as string, decision: 'deny' }),
      ),
    ).toBe('action_not_found');
  });

  it('denies once; refuses questions, a session-wide deny and unknown ids', async () => {
    const h = await harness({
      steps: [
        act([write('w1', 'a.txt', 'A')]),
        answer('denied'),
        dsl([{ id: 'ask', executor: { type: 'human', target: 'ask_user' }, input: { question: 'Colour?' } }]),
        answer('ok'),
      ],
    });
    open.push(h);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'one' });
    const [asked] = await pendingOf(h, sessionId);
    const actionId = asked?.actionId as string;
    expect(
      await errorCode(h.runtime.resolvePermission({ sessionId, actionId, decision: 'deny', scope: 'session' })),
    ).toBe('invalid_decision');
    expect(await errorCode(h.runtime.resolvePermission({ sessionId, actionId, decision: 'maybe' as never }))).toBe(
      'invalid_input',
    );
    await h.runtime.resolvePermission({ sessionId, actionId, decision: 'deny', reason: 'no' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(payload(ofType(events, 'permission.resolved')[0])).toMatchObject({ decision: 'deny', grantScope: 'once' });
    expect(ofType(events, 'tool.started')).toHaveLength(0);

    await h.runtime.submitTurn({ sessionId, input: 'two' });
    const [question] = await pendingOf(h, sessionId);
    expect(question?.actionType).toBe('user_input');
    expect(
      await errorCode(
        h.runtime.resolvePermission({ sessionId, actionId: question?.actionId as string, decision: 'allow' }),
      ),
    ).toBe('not_a_permission_request');
    expect(await errorCode(h.runtime.resolvePermission({ sessionId, actionId: 'act_nope', decision: 'allow' }))).toBe(
      'action_not_found',
    );
  });
});
