import { readFileSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentConfig } from '../../src/index.js';
import { tempDir } from '../support/temp-dirs.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, payload, registryWith, sideEffectTool } from './helpers.js';

/**
 * What an `approve_for_session` grants (docs/permissions.md, "Session grants"): the exact tool and exactly the
 * paths the human was shown when asked — in every thread of that session, in no other session, for no other tool.
 */

const open: Harness[] = [];
afterEach(async () => {
  for (const h of open.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
});

const write = (id: string, filePath: string, content: string, depends?: string) => ({
  id,
  type: 'tool',
  name: 'write',
  args: { filePath, content },
  ...(depends ? { depends } : {}),
});

async function pending(h: Harness, sessionId: string, threadId?: string) {
  await h.runtime.settled(sessionId);
  const { snapshot } = await h.runtime.getSession({ sessionId, limit: 0 });
  return snapshot.threads
    .filter((t) => threadId === undefined || t.threadId === threadId)
    .flatMap((t) => t.pendingRequests.map((p) => ({ ...p, threadId: t.threadId })));
}

/** "write out.txt" from the approval prompt "Allow write on out.txt? …". */
const toolOf = (prompt: string | undefined) =>
  /^Allow (\S+) on ([^?]+)\?/
    .exec(prompt ?? '')
    ?.slice(1)
    .join(' ');

describe('approve_for_session grants', () => {
  it('grants the paths the human was shown, not the paths a symlink made since reaches', async () => {
    const h = await harness(
      {
        steps: [
          act([write('w1', 'link.txt', 'one')]),
          answer('first'),
          act([write('w2', 'secret.txt', 'two')]),
          answer('second'),
        ],
      },
      { files: { 'secret.txt': 'original' } },
    );
    open.push(h);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write link.txt' });
    const [asked] = await pending(h, sessionId);
    expect(asked?.prompt).toContain('link.txt');
    expect(asked?.prompt).not.toContain('secret.txt');
    // Between the question and the answer, link.txt becomes a link to another file.
    symlinkSync('secret.txt', join(h.workspace, 'link.txt'));
    await h.runtime.respondAction({ sessionId, actionId: asked?.actionId as string, decision: 'approve_for_session' });
    const resolved = ofType(await allEvents(h, sessionId), 'permission.resolved')[0];
    expect(payload(resolved)).toMatchObject({ grantScope: 'session', grant: { tool: 'write', paths: ['link.txt'] } });
    await h.runtime.settled(sessionId);
    // The link reaches secret.txt now, which the question did not show: the approved write asks again (denied here).
    const [reasked] = await pending(h, sessionId);
    expect(reasked?.prompt).toContain('secret.txt');
    await h.runtime.respondAction({ sessionId, actionId: reasked?.actionId as string, decision: 'deny' });
    await h.runtime.settled(sessionId);

    // A write to secret.txt was never approved for the session: it asks.
    await h.runtime.submitTurn({ sessionId, input: 'write secret.txt' });
    const [again] = await pending(h, sessionId);
    expect(again?.actionType).toBe('tool_approval');
    expect(again?.prompt).toMatch(/^Allow write on secret\.txt\b/);
    expect(readFileSync(join(h.workspace, 'secret.txt'), 'utf8')).not.toBe('two');
  });

  it('covers the same tool and path in another thread of the session; not another tool, path or session', async () => {
    const writer: AgentConfig = { name: 'writer', description: 'Writes', capabilities: ['write'], carrier: 'tool' };
    const h = await harness(
      {
        steps: [
          act([write('w', 'out.txt', 'main')]),
          answer('main wrote'),
          act([{ id: 'delegate', type: 'agent', name: 'writer', args: { prompt: 'write more' } }]),
          answer('delegated'),
        ],
        agents: {
          writer: {
            steps: [
              act([
                write('cw', 'out.txt', 'child'),
                {
                  id: 'ce',
                  type: 'tool',
                  name: 'edit',
                  args: { filePath: 'out.txt', oldString: 'child', newString: 'edited' },
                  depends: 'cw',
                },
                write('co', 'other.txt', 'other', 'cw'),
              ]),
              answer('child done'),
            ],
          },
        },
      },
      { agents: [writer] },
    );
    open.push(h);
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write out.txt' });
    const [asked] = await pending(h, sessionId);
    await h.runtime.respondAction({ sessionId, actionId: asked?.actionId as string, decision: 'approve_for_session' });
    await h.runtime.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'out.txt'), 'utf8')).toBe('main');

    // The sub-agent's thread is in the same session: its write of out.txt is covered, without asking.
    await h.runtime.submitTurn({ sessionId, input: 'delegate' });
    const childPending = await pending(h, sessionId);
    expect(readFileSync(join(h.workspace, 'out.txt'), 'utf8')).toBe('child');
    const events = await allEvents(h, sessionId);
    const childThreadId = payload(ofType(events, 'subagent.spawned')[0]).childThreadId as string;
    const byGrant = ofType(events, 'permission.evaluated').filter((e) => payload(e).grant !== undefined);
    expect(byGrant.map((e) => [e.threadId, payload(e).graphActionId])).toEqual([[childThreadId, 'cw']]);
    expect(payload(byGrant[0])).toMatchObject({ decision: 'allow', grant: { tool: 'write', paths: ['out.txt'] } });
    // Another tool on the same path, and the same tool on another path, ask.
    expect(childPending.map((p) => [p.threadId, toolOf(p.prompt)]).sort()).toEqual([
      [childThreadId, 'edit out.txt'],
      [childThreadId, 'write other.txt'],
    ]);
    expect(childPending.every((p) => p.threadId !== threadId)).toBe(true);

    // Another session (same runtime, same binding) has no grant: the same write asks.
    const other = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId: other.sessionId, input: 'write out.txt' });
    const [otherAsked] = await pending(h, other.sessionId);
    expect(toolOf(otherAsked?.prompt)).toBe('write out.txt');
    expect(ofType(await allEvents(h, other.sessionId), 'permission.evaluated')[0]?.payload).toMatchObject({
      decision: 'ask',
    });
  });

  it('a control plane without the session tools can approve for the session (the grant is what was asked)', async () => {
    const calls: string[] = [];
    const count = sideEffectTool('count', 'Counts.', async (input) => {
      calls.push(input.label);
      return `counted ${input.label}`;
    });
    const script = { steps: [act([{ id: 'c', type: 'tool', name: 'count', args: { label: 'x' } }]), answer('done')] };
    const first = await harness(script, { tools: registryWith(count) });
    const { sessionId } = await first.runtime.createSession();
    await first.runtime.submitTurn({ sessionId, input: 'count' });
    const [asked] = await pending(first, sessionId);
    await first.runtime.close();
    // A control plane with the built-in tools only: it cannot load `count`, and does not need to.
    const control = await harness(script, { store: first.store, worker: false });
    open.push(control);
    await control.runtime.respondAction({
      sessionId,
      actionId: asked?.actionId as string,
      decision: 'approve_for_session',
    });
    const resolved = ofType(await control.runtime.log.read(sessionId), 'permission.resolved')[0];
    expect(payload(resolved)).toMatchObject({ grantScope: 'session', grant: { tool: 'count' } });
    expect(payload(resolved).grant).toEqual({ tool: 'count', workspaceRoot: first.workspace });
    const worker = await harness(script, { store: first.store, tools: registryWith(count) });
    await worker.runtime.settled(sessionId);
    await worker.runtime.close();
    expect(calls).toEqual(['x']);
  });
});

describe('session grants are scoped to the workspace they were given for', () => {
  it('a grant given in one workspace does not cover the same call after the binding moves to another', async () => {
    const h = await harness({
      steps: [
        act([write('w1', 'out.txt', 'first')]),
        answer('first'),
        act([write('w2', 'out.txt', 'second')]),
        answer('second'),
        act([write('w3', 'out.txt', 'third')]),
        answer('third'),
      ],
    });
    open.push(h);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write out.txt' });
    const [asked] = await pending(h, sessionId);
    await h.runtime.respondAction({ sessionId, actionId: asked?.actionId as string, decision: 'approve_for_session' });
    await h.runtime.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'out.txt'), 'utf8')).toBe('first');

    // The session moves to another workspace: the same write there was never approved, so it asks.
    const other = realpathSync(tempDir('oar-ws-other-'));
    writeFileSync(join(other, 'out.txt'), 'untouched');
    await h.runtime.updateBinding({ sessionId, update: { workspaceRoot: other } });
    await h.runtime.submitTurn({ sessionId, input: 'write out.txt again' });
    const [again] = await pending(h, sessionId);
    expect(toolOf(again?.prompt)).toBe('write out.txt');
    expect(readFileSync(join(other, 'out.txt'), 'utf8')).toBe('untouched');
    await h.runtime.respondAction({ sessionId, actionId: again?.actionId as string, decision: 'deny' });
    await h.runtime.settled(sessionId);

    // Back in the first workspace, the grant given there applies again.
    await h.runtime.updateBinding({ sessionId, update: { workspaceRoot: h.workspace } });
    await h.runtime.submitTurn({ sessionId, input: 'write out.txt in the first workspace' });
    expect(await pending(h, sessionId)).toEqual([]);
    expect(readFileSync(join(h.workspace, 'out.txt'), 'utf8')).toBe('third');
    // The grant names the workspace it was given for.
    const resolved = ofType(await allEvents(h, sessionId), 'permission.resolved')[0];
    expect(payload(resolved).grant).toMatchObject({ tool: 'write', paths: ['out.txt'], workspaceRoot: h.workspace });
  });
});
