import { existsSync, readFileSync, symlinkSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelScript, RunnerBinding, RuntimeOptions } from '../../src/index.js';
import { type Harness, harness } from '../engine/harness.js';
import { allEvents, errorCode, ofType, payload, waitForEvent } from '../engine/helpers.js';
import { audits, codeOf, inProcess, type Probe } from './probe.js';

/**
 * A runner run's durable decisions (docs/runners.md "Decisions"): a tools.call the policy asks about, a
 * platform.request_action and an action.requested result are each an `action.required` on the record, answered by
 * respond_action while the run waits for it, closed as a denial by the runtime when the run stops waiting.
 */

const opened: Harness[] = [];
afterEach(async () => {
  for (const h of opened.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
});

const SCRIPT: ModelScript = { steps: [{ text: 'unused' }] };
const RUNNER = 'plugin:test/probe/probe';

async function start(
  runner: RunnerBinding,
  options: Partial<RuntimeOptions> & { files?: Record<string, string> } = {},
) {
  const h = await harness(SCRIPT, { mainAgent: { name: 'main', runner }, ...options });
  opened.push(h);
  const { sessionId } = await h.runtime.createSession({});
  await h.runtime.submitTurn({ sessionId, input: 'go' });
  return { h, sessionId };
}

async function finish(h: Harness, sessionId: string): Promise<RuntimeEvent[]> {
  await h.runtime.settled(sessionId);
  return allEvents(h, sessionId);
}

const turnEnd = (events: RuntimeEvent[]) => events.find((e) => e.type === 'turn.completed' || e.type === 'turn.failed');
const asked = (h: Harness, sessionId: string, after = 0) =>
  waitForEvent(h, sessionId, 'action.required', (e) => e.sequence > after);

const askWrite = { permissions: { mode: 'default' as const, rules: [{ decision: 'ask' as const, tool: 'write' }] } };

function writer(results: unknown[], times = 1): Probe {
  return async (_ctx, { api, emit }) => {
    for (let i = 0; i < times; i++) {
      results.push(await codeOf(() => api.tools.call('write', { filePath: 'out.txt', content: `hi ${i}` })));
    }
    await emit('message.completed', { message: { role: 'assistant', content: `results: ${results.join(',')}` } });
  };
}

describe('a tools.call the permission policy asks about', () => {
  it('waits for the answer; approved, the call runs and the run goes on', async () => {
    const results: unknown[] = [];
    const { h, sessionId } = await start(inProcess(writer(results)), askWrite);
    const question = await asked(h, sessionId);
    expect(payload(question)).toMatchObject({
      actionType: 'tool_approval',
      toolName: 'write',
      decisions: ['approve', 'deny'],
      input: { filePath: 'out.txt', content: 'hi 0' },
      runner: { runnerId: RUNNER },
    });
    expect(question.runId).toMatch(/^run_/);
    // The question is pending while the run waits: the snapshot shows it, with the runner that asked.
    const { snapshot } = await h.runtime.getSession({ sessionId, limit: 0 });
    expect(snapshot.threads[0]?.pendingRequests).toEqual([
      expect.objectContaining({ actionId: question.actionId, runnerId: RUNNER, runId: question.runId }),
    ]);
    expect(existsSync(join(h.workspace, 'out.txt'))).toBe(false);

    await h.runtime.respondAction({ sessionId, actionId: question.actionId as string, decision: 'approve' });
    const events = await finish(h, sessionId);
    expect(results).toEqual(['ok']);
    expect(readFileSync(join(h.workspace, 'out.txt'), 'utf8')).toBe('hi 0');
    expect(turnEnd(events)?.type).toBe('turn.completed');
    const evaluated = ofType(events, 'permission.evaluated').map((e) => [payload(e).decision, payload(e).source]);
    expect(evaluated).toEqual([
      ['ask', 'rule'],
      ['allow', 'human'],
    ]);
    expect(ofType(events, 'permission.resolved').map((e) => payload(e).decision)).toEqual(['allow']);
    expect(ofType(events, 'tool.result')).toHaveLength(1);
    expect(audits(events).find((a) => a.action === 'tools.call')).toMatchObject({ result: 'allowed' });
    const { snapshot: after } = await h.runtime.getSession({ sessionId, limit: 0 });
    expect(after.threads[0]?.pendingRequests).toEqual([]);
  });

  it('denied, the call is refused as unauthorized (audited) and nothing runs', async () => {
    const results: unknown[] = [];
    const { h, sessionId } = await start(inProcess(writer(results)), askWrite);
    const question = await asked(h, sessionId);
    await h.runtime.respondAction({
      sessionId,
      actionId: question.actionId as string,
      decision: 'deny',
      reason: 'not today',
    });
    const events = await finish(h, sessionId);
    expect(results).toEqual(['unauthorized']);
    expect(existsSync(join(h.workspace, 'out.txt'))).toBe(false);
    expect(ofType(events, 'tool.started')).toHaveLength(0);
    expect(audits(events).find((a) => a.action === 'tools.call')).toMatchObject({
      result: 'refused',
      code: 'unauthorized',
    });
    // The runner handled the refusal: the turn ends with its answer.
    expect(payload(turnEnd(events)).answer).toBe('results: unauthorized');
  });

  it('approved for the session, the next call of the same request does not ask again', async () => {
    const results: unknown[] = [];
    // The default mode asks about writes and offers a session grant.
    const { h, sessionId } = await start(inProcess(writer(results, 2)));
    const question = await asked(h, sessionId);
    expect(payload(question).decisions).toEqual(['approve', 'deny', 'approve_for_session']);
    await h.runtime.respondAction({
      sessionId,
      actionId: question.actionId as string,
      decision: 'approve_for_session',
    });
    const events = await finish(h, sessionId);
    expect(results).toEqual(['ok', 'ok']);
    expect(ofType(events, 'action.required')).toHaveLength(1);
    expect(ofType(events, 'tool.result')).toHaveLength(2);
    expect(ofType(events, 'permission.resolved').map((e) => payload(e).grantScope)).toEqual(['session']);
  });

  it('a link retargeted while the call waited: the approval does not cover the new target, the call is refused', async () => {
    const results: unknown[] = [];
    const probe: Probe = async (_ctx, { api }) => {
      results.push(await codeOf(() => api.tools.call('read', { filePath: 'link.txt' })));
    };
    const { h, sessionId } = await start(inProcess(probe), {
      files: { 'a.txt': 'shown\n', 'b.txt': 'not shown\n' },
      permissions: { mode: 'default', rules: [{ decision: 'ask', tool: 'read' }] },
    });
    symlinkSync('a.txt', join(h.workspace, 'link.txt'));
    const question = await asked(h, sessionId);
    expect((payload(question).scope as { paths: string[] }).paths).toEqual(['link.txt', 'a.txt']);
    unlinkSync(join(h.workspace, 'link.txt'));
    symlinkSync('b.txt', join(h.workspace, 'link.txt'));
    await h.runtime.respondAction({ sessionId, actionId: question.actionId as string, decision: 'approve' });
    const events = await finish(h, sessionId);
    expect(results).toEqual(['unauthorized']);
    expect(ofType(events, 'tool.started')).toHaveLength(0);
  });

  it('unanswered at the deadline: the call ends deadline_exceeded and the question is closed by the runtime', async () => {
    const results: unknown[] = [];
    const { h, sessionId } = await start(inProcess(writer(results), {}, { policy: { timeoutMs: 1_500 } }), askWrite);
    const question = await asked(h, sessionId);
    const events = await finish(h, sessionId);
    expect(results).toEqual(['deadline_exceeded']);
    // The run ends either way (its answer, or runner_timeout if the host's clock fires first).
    expect(turnEnd(events)).toBeDefined();
    const closed = ofType(events, 'action.resolved');
    expect(closed).toHaveLength(1);
    expect(closed[0]?.actionId).toBe(question.actionId);
    expect(payload(closed[0])).toMatchObject({ decision: 'deny', resolvedBy: 'runtime' });
    // The permission question is closed too, and the task is no longer waiting on it.
    expect(ofType(events, 'permission.resolved').map((e) => [e.actionId, payload(e).decision])).toEqual([
      [question.actionId, 'deny'],
    ]);
    expect(ofType(events, 'task.resumed')).toHaveLength(1);
    expect(payload(question).expiresAt).toEqual(expect.any(String));
    // Answering it now says it was already resolved, and by whom.
    expect(
      await errorCode(
        h.runtime.respondAction({ sessionId, actionId: question.actionId as string, decision: 'approve' }),
      ),
    ).toBe('decision_already_resolved');
  });

  it('at most 8 questions of a run wait at once: a ninth request is rate_limited', async () => {
    const results: string[] = [];
    const probe: Probe = async (_ctx, { api }) => {
      const calls = Array.from({ length: 9 }, (_, i) =>
        codeOf(() => api.tools.call('write', { filePath: `f${i}.txt`, content: 'x' })),
      );
      results.push(...(await Promise.all(calls)));
    };
    const { h, sessionId } = await start(inProcess(probe, {}, { policy: { timeoutMs: 2_000 } }), askWrite);
    const events = await finish(h, sessionId);
    expect(ofType(events, 'action.required')).toHaveLength(8);
    expect(results.filter((r) => r === 'rate_limited')).toHaveLength(1);
    expect(results.filter((r) => r === 'deadline_exceeded')).toHaveLength(8);
    // Every one of them is closed on the record.
    expect(ofType(events, 'action.resolved')).toHaveLength(8);
  });

  it('an interrupt while the call waits cancels the run and closes the question', async () => {
    const results: unknown[] = [];
    const { h, sessionId } = await start(inProcess(writer(results)), askWrite);
    const question = await asked(h, sessionId);
    await h.runtime.interruptTurn({ sessionId, reason: 'stop' });
    const events = await finish(h, sessionId);
    expect(payload(turnEnd(events)).error).toMatchObject({ code: 'interrupted' });
    const closed = ofType(events, 'action.resolved').find((e) => e.actionId === question.actionId);
    expect(payload(closed)).toMatchObject({ decision: 'deny', resolvedBy: 'runtime' });
    expect(existsSync(join(h.workspace, 'out.txt'))).toBe(false);
    const { snapshot } = await h.runtime.getSession({ sessionId, limit: 0 });
    expect(snapshot.threads[0]?.pendingRequests).toEqual([]);
  });
});

const platformManifest = {
  capabilities: { platform_api: true },
  permissions: { platform_api: ['message.edit'] },
};

describe('platform actions', () => {
  it('are refused unless the manifest AND the binding name the action (no question is asked)', async () => {
    const codes: Record<string, string> = {};
    const probe: Probe = async (_ctx, { api }) => {
      codes.edit = await codeOf(() => api.platform.request_action('message.edit', { message_id: 'm1' }));
      codes.other = await codeOf(() => api.platform.request_action('channel.delete', {}));
    };
    // The manifest asks; the binding does not name it.
    const { h, sessionId } = await start(inProcess(probe, platformManifest));
    const events = await finish(h, sessionId);
    expect(codes).toEqual({ edit: 'unauthorized', other: 'unauthorized' });
    expect(ofType(events, 'action.required')).toHaveLength(0);
    expect(audits(events).filter((a) => a.action === 'platform.request_action')).toEqual([
      expect.objectContaining({ result: 'refused', code: 'unauthorized', resource: 'message.edit', scope: 'platform' }),
      expect.objectContaining({ result: 'refused', code: 'unauthorized', resource: 'channel.delete' }),
    ]);
    // The binding names it, the manifest lacks the capability: still refused.
    const again = await start(
      inProcess(
        probe,
        { permissions: { platform_api: ['message.edit'] } },
        { policy: { platformActions: ['message.edit'] } },
      ),
    );
    await finish(again.h, again.sessionId);
    expect(codes.edit).toBe('unauthorized');
  });

  it('platform.request_action waits for a person: approved, it is recorded for the platform; denied, unauthorized', async () => {
    const codes: string[] = [];
    const probe: Probe = async (_ctx, { api }) => {
      codes.push(
        await codeOf(() => api.platform.request_action('message.edit', { message_id: 'm1' }, { text: 'new' })),
      );
      codes.push(await codeOf(() => api.platform.request_action('message.edit', { message_id: 'm2' }, { text: 'x' })));
    };
    const { h, sessionId } = await start(
      inProcess(probe, platformManifest, { policy: { platformActions: ['message.edit'] } }),
    );
    const first = await asked(h, sessionId);
    expect(payload(first)).toMatchObject({
      actionType: 'platform_action',
      decisions: ['approve', 'deny'],
      platformAction: { action: 'message.edit', target: { message_id: 'm1' } },
    });
    // A platform action is never approved for the whole session.
    expect(
      await errorCode(
        h.runtime.respondAction({ sessionId, actionId: first.actionId as string, decision: 'approve_for_session' }),
      ),
    ).toBe('invalid_decision');
    await h.runtime.respondAction({ sessionId, actionId: first.actionId as string, decision: 'approve' });
    const second = await asked(h, sessionId, first.sequence);
    await h.runtime.respondAction({ sessionId, actionId: second.actionId as string, decision: 'deny' });
    const events = await finish(h, sessionId);
    expect(codes).toEqual(['ok', 'unauthorized']);
    const approved = events.filter((e) => payload(e).phase === 'runner_platform_action');
    expect(approved).toHaveLength(1);
    expect(payload(approved[0]).runner).toMatchObject({
      status: 'approved',
      action: 'message.edit',
      target: { message_id: 'm1' },
      payload: { text: 'new' },
      actionId: first.actionId,
    });
  });

  it('an action.requested result is a decision the run end waits for', async () => {
    const probe: Probe = async (_ctx, { emit }) => {
      await emit('action.requested', { action: 'message.edit', target: { message_id: 'm9' }, payload: { text: 'y' } });
      await emit('message.completed', { message: { role: 'assistant', content: 'asked the platform' } });
    };
    const { h, sessionId } = await start(
      inProcess(probe, platformManifest, { policy: { platformActions: ['message.edit'] } }),
    );
    const question = await asked(h, sessionId);
    // The runner is done, the turn is not: it waits for the decision.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(turnEnd(await allEvents(h, sessionId))).toBeUndefined();
    await h.runtime.respondAction({ sessionId, actionId: question.actionId as string, decision: 'approve' });
    const events = await finish(h, sessionId);
    expect(payload(turnEnd(events))).toMatchObject({ answer: 'asked the platform' });
    const kinds = events.map((e) => (payload(e).phase === 'runner_platform_action' ? 'platform' : e.type));
    expect(kinds.indexOf('platform')).toBeGreaterThan(kinds.indexOf('action.resolved'));
    expect(kinds.indexOf('platform')).toBeLessThan(kinds.indexOf('turn.completed'));
  });

  it('an action.requested the run may not ask for is a recorded warning, never executed', async () => {
    const probe: Probe = async (_ctx, { emit }) => {
      await emit('action.requested', { action: 'message.edit', target: {}, payload: {} });
      await emit('message.completed', { message: { role: 'assistant', content: 'done' } });
    };
    const { h, sessionId } = await start(inProcess(probe, platformManifest));
    const events = await finish(h, sessionId);
    expect(turnEnd(events)?.type).toBe('turn.completed');
    expect(ofType(events, 'action.required')).toHaveLength(0);
    const warning = ofType(events, 'runtime.warning').find((e) => payload(e).code === 'runner_result_ignored');
    expect(payload(warning).details).toMatchObject({ reason: 'action_refused', action: 'message.edit' });
  });
});
