import { existsSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, payload } from './helpers.js';

/**
 * An approval answers the question it was asked; it never outweighs a deny that holds when the action runs
 * (docs/permissions.md, "Approvals are checked again when the action runs"). Seen: an action approved once skipped
 * the whole permission check at run time, so a write redirected to `.env` after the question, or denied by a rule a
 * binding update added while it waited, still ran.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const write = (filePath: string, content: string) =>
  act([{ id: 'w', type: 'tool', name: 'write', args: { filePath, content } }]);

async function askedWrite(h: Harness, sessionId: string) {
  await h.runtime.submitTurn({ sessionId, input: 'write' });
  await h.runtime.settled(sessionId);
  const { snapshot } = await h.runtime.getSession({ sessionId, limit: 0 });
  const asked = snapshot.threads.flatMap((t) => t.pendingRequests)[0];
  expect(asked?.actionType).toBe('tool_approval');
  return asked?.actionId as string;
}

describe('an approved action is checked again when it runs', () => {
  it('a default credential-file deny wins: the approved path became a link to .env', async () => {
    h = await harness(
      { steps: [write('notes.txt', 'PWNED=1'), answer('done')] },
      { files: { 'notes.txt': 'notes\n', '.env': 'API_TOKEN=keep-me-7f3a9c2e\n' } },
    );
    const { sessionId } = await h.runtime.createSession();
    const actionId = await askedWrite(h, sessionId);
    // Between the question and the answer, notes.txt becomes a link to the credential file.
    rmSync(join(h.workspace, 'notes.txt'));
    symlinkSync('.env', join(h.workspace, 'notes.txt'));
    await h.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    await h.runtime.settled(sessionId);

    expect(readFileSync(join(h.workspace, '.env'), 'utf8')).toBe('API_TOKEN=keep-me-7f3a9c2e\n');
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'tool.started')).toHaveLength(0);
    const evaluated = ofType(events, 'permission.evaluated').map(payload);
    expect(evaluated.at(-1)).toMatchObject({ decision: 'deny', source: 'default' });
    expect(String(evaluated.at(-1)?.reason)).toContain('.env');
    const ended = ofType(events, 'run.status')
      .map(payload)
      .filter((p) => p.phase === 'action' && p.graphActionId === 'w')
      .at(-1);
    expect(ended).toMatchObject({ status: 'denied' });
  });

  it('an approval covers the paths it showed: a link retargeted to another (undenied) file is asked again', async () => {
    h = await harness(
      { steps: [write('notes.txt', 'approved text'), answer('done')] },
      { files: { 'target-a.txt': 'a\n', 'target-b.txt': 'b\n' } },
    );
    symlinkSync('target-a.txt', join(h.workspace, 'notes.txt'));
    const { sessionId } = await h.runtime.createSession();
    const first = await askedWrite(h, sessionId);
    // The question showed notes.txt and the file it reached then; now the link reaches another file.
    const { snapshot } = await h.runtime.getSession({ sessionId, limit: 0 });
    expect(JSON.stringify(snapshot.threads[0]?.pendingRequests)).toContain('target-a.txt');
    rmSync(join(h.workspace, 'notes.txt'));
    symlinkSync('target-b.txt', join(h.workspace, 'notes.txt'));
    await h.runtime.respondAction({ sessionId, actionId: first, decision: 'approve' });
    await h.runtime.settled(sessionId);

    // Nothing was written: the approval did not cover target-b.txt, so the call asks again, saying why.
    expect(readFileSync(join(h.workspace, 'target-b.txt'), 'utf8')).toBe('b\n');
    expect(readFileSync(join(h.workspace, 'target-a.txt'), 'utf8')).toBe('a\n');
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'tool.started')).toHaveLength(0);
    const questions = ofType(events, 'action.required');
    expect(questions).toHaveLength(2);
    expect(String(payload(questions[1] as (typeof questions)[0]).prompt)).toContain('target-b.txt');
    const again = ofType(events, 'permission.evaluated').map(payload).at(-1);
    expect(again).toMatchObject({ decision: 'ask' });
    expect(String(again?.reason)).toContain('now also touches target-b.txt');

    // Approving the new question (which showed target-b.txt) runs the write.
    const second = questions[1]?.actionId as string;
    await h.runtime.respondAction({ sessionId, actionId: second, decision: 'approve' });
    await h.runtime.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'target-b.txt'), 'utf8')).toBe('approved text');
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a deny rule added by a binding update while the approval waited wins', async () => {
    h = await harness({ steps: [write('out.txt', 'approved'), answer('done')] });
    const { sessionId } = await h.runtime.createSession();
    const actionId = await askedWrite(h, sessionId);
    await h.runtime.updateBinding({
      sessionId,
      update: { permissions: { mode: 'default', rules: [{ decision: 'deny', tool: 'write', paths: ['out.txt'] }] } },
    });
    await h.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    await h.runtime.settled(sessionId);

    expect(existsSync(join(h.workspace, 'out.txt'))).toBe(false);
    const events = await allEvents(h, sessionId);
    expect(ofType(events, 'tool.started')).toHaveLength(0);
    expect(ofType(events, 'permission.evaluated').map(payload).at(-1)).toMatchObject({
      decision: 'deny',
      source: 'rule',
    });
  });

  it('an approval still answers the ask it was given for (mode ask, ask rule): the action runs', async () => {
    h = await harness({ steps: [write('out.txt', 'approved'), answer('done')] });
    const { sessionId } = await h.runtime.createSession({
      binding: { permissions: { mode: 'default', rules: [{ decision: 'ask', tool: 'write' }] } },
    });
    const actionId = await askedWrite(h, sessionId);
    await h.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    await h.runtime.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'out.txt'), 'utf8')).toBe('approved');
    const evaluated = ofType(await allEvents(h, sessionId), 'permission.evaluated').map(payload);
    expect(evaluated.at(-1)).toMatchObject({ decision: 'allow', source: 'human' });
  });
});
