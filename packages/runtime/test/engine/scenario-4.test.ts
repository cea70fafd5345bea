import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../../src/index.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import {
  act,
  actionRows,
  allEvents,
  answer,
  errorCode,
  ofType,
  payload,
  recordingModel,
  sleep,
  types,
} from './helpers.js';

/**
 * Acceptance scenario 4 of the Agent Runtime standard, approval gate: "Given a tool needs approval, the runtime
 * emits `action.required` with a stable action id. Execution does not continue until `respond_action` resolves the
 * request." A write in the default mode needs approval: the turn stops at the gate — no tool run, no further model
 * call, nothing written — through waiting and through a restart of the runtime on the same SQLite file; the action
 * id is the same everywhere (the event, the read model's pending request, the answer, the resolution) and across
 * the restart; only `respondAction` lets the write run, and an answer cannot be given twice.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

describe('acceptance scenario 4: approval gate', () => {
  it('action.required with a stable id; nothing runs until respond_action resolves it, across a restart', async () => {
    const recorder = recordingModel({
      steps: [
        act([{ id: 'w1', type: 'tool', name: 'write', args: { filePath: 'gate.txt', content: 'approved\n' } }]),
        answer('Written.'),
      ],
    });
    h = await harness({ steps: [] }, { model: recorder.model });
    const { sessionId, threadId } = await h.runtime.createSession();
    const { turnId } = await h.runtime.submitTurn({ sessionId, input: 'write gate.txt' });
    await h.runtime.settled(sessionId);

    // The gate: one action.required, its id the read model's pending request.
    const gated = await allEvents(h, sessionId);
    const required = ofType(gated, 'action.required');
    expect(required).toHaveLength(1);
    const actionId = required[0]?.actionId as string;
    expect(actionId).toEqual(expect.any(String));
    expect(required[0]).toMatchObject({ threadId, turnId });
    expect(payload(required[0])).toMatchObject({ actionType: 'tool_approval', toolName: 'write', graphActionId: 'w1' });
    // The policy asked first, then the question was put.
    const evaluated = ofType(gated, 'permission.evaluated')[0];
    expect(payload(evaluated)).toMatchObject({ decision: 'ask', toolName: 'write' });
    expect(evaluated?.sequence).toBeLessThan(required[0]?.sequence ?? 0);
    let read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.status).toBe('blocked');
    expect(read.turns.find((t) => t.turnId === turnId)?.status).toBe('waiting_permission');
    expect(read.pendingRequests).toMatchObject([{ actionId, actionType: 'tool_approval', turnId }]);
    const { snapshot } = await h.runtime.getSession({ sessionId });
    assertSnapshotConforms(snapshot);
    expect(snapshot.threads[0]?.pendingRequests.map((p) => p.actionId)).toEqual([actionId]);

    // Execution does not continue: no tool run, no second model call, nothing written — not even after a while.
    const stopped = () => {
      expect(types(gated)).not.toContain('tool.started');
      expect(existsSync(join((h as Harness).workspace, 'gate.txt'))).toBe(false);
      expect(recorder.prompts).toHaveLength(1);
    };
    stopped();
    await sleep(300);
    await h.runtime.settled(sessionId);
    expect(await allEvents(h, sessionId)).toHaveLength(gated.length);
    stopped();
    // An answer to another id resolves nothing, and says what is pending.
    expect(await errorCode(h.runtime.respondAction({ sessionId, actionId: 'act_other', decision: 'approve' }))).toBe(
      'action_not_found',
    );
    expect(await allEvents(h, sessionId)).toHaveLength(gated.length);

    // A restart: the runtime and its store closed, a new runtime on the same file. Still the same gate.
    const { dir, workspace } = h;
    await h.runtime.close();
    await h.store.close();
    h = await harness(
      { steps: [] },
      { model: recorder.model, store: await Store.open(join(dir, 'oar.db')), workspaceRoot: workspace },
    );
    await h.runtime.settled(sessionId);
    read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.status).toBe('blocked');
    expect(read.pendingRequests.map((p) => p.actionId)).toEqual([actionId]);
    expect(types(await allEvents(h, sessionId))).not.toContain('tool.started');
    expect(existsSync(join(workspace, 'gate.txt'))).toBe(false);
    expect(recorder.prompts).toHaveLength(1);

    // respond_action resolves it: then, and only then, the write runs and the turn goes on.
    const resolved = await h.runtime.respondAction({ sessionId, actionId, decision: 'approve', reason: 'looks fine' });
    expect(resolved).toMatchObject({ threadId, decision: 'approve' });
    await h.runtime.settled(sessionId);
    expect(readFileSync(join(workspace, 'gate.txt'), 'utf8')).toBe('approved\n');
    read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.pendingRequests).toEqual([]);
    expect(read.lastOutcome).toMatchObject({ turnId, status: 'completed', answer: 'Written.' });
    expect(actionRows(read).find((a) => a.actionId === 'w1')?.status).toBe('completed');
    expect(recorder.prompts).toHaveLength(2);

    const events = await allEvents(h, sessionId);
    const resolution = ofType(events, 'action.resolved');
    expect(resolution).toHaveLength(1);
    expect(resolution[0]).toMatchObject({ actionId, threadId, turnId });
    expect(payload(resolution[0])).toMatchObject({ decision: 'approve', reason: 'looks fine' });
    const index = (type: string) => events.findIndex((e) => e.type === type);
    expect(index('action.required')).toBeLessThan(index('action.resolved'));
    expect(index('action.resolved')).toBeLessThan(index('tool.started'));
    expect(index('tool.started')).toBeLessThan(index('tool.result'));
    // The call the question was about is the call that ran.
    expect(ofType(events, 'tool.started')[0]?.toolCallId).toBe(required[0]?.toolCallId);

    // Answered once: a second answer is refused with what resolved it, and changes nothing.
    expect(await errorCode(h.runtime.respondAction({ sessionId, actionId, decision: 'deny' }))).toBe(
      'decision_already_resolved',
    );
    expect(await allEvents(h, sessionId)).toHaveLength(events.length);

    assertEventsConform(events);
    assertSnapshotConforms((await h.runtime.getSession({ sessionId })).snapshot);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });
});
