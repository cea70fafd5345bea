import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, errorCode, ofType } from './helpers.js';

/**
 * fork_session (docs/engine.md "Forking a session"): a new session whose history is another's up to one of its
 * events — the same read models as the source had there, artifacts copied under new ids, the source untouched, and
 * what was in progress at the fork point going on in the fork alone.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

describe('fork_session', () => {
  it('copies the history up to an event: the same state there, artifacts renamed, timestamps kept', async () => {
    h = await harness({
      steps: [
        act([{ id: 'r', type: 'tool', name: 'read', args: { filePath: 'README.md' } }]),
        answer('First answer.'),
        answer('Second answer.'),
        answer('Answer in the fork.'),
      ],
    });
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession({ title: 'Source' });
    await rt.submitTurn({ sessionId, input: 'one' });
    await rt.settled(sessionId);
    const firstEnd = (await allEvents(h, sessionId)).find((e) => e.type === 'turn.completed');
    const at = firstEnd?.sequence as number;
    await rt.submitTurn({ sessionId, input: 'two' });
    await rt.settled(sessionId);
    const source = await allEvents(h, sessionId);

    const fork = await rt.forkSession({ sessionId, at, forkId: 'ses_fork1' });
    expect(fork).toMatchObject({
      sessionId: 'ses_fork1',
      forkedFrom: { sessionId, sequence: at, eventId: firstEnd?.eventId },
      events: at,
      threadIds: [threadId],
    });
    expect(fork.artifacts).toBeGreaterThan(0);
    const copied = await allEvents(h, fork.sessionId);
    expect(copied).toHaveLength(at + 1);
    expect(copied.slice(0, at).map((e) => [e.type, e.timestamp, e.threadId])).toEqual(
      source.slice(0, at).map((e) => [e.type, e.timestamp, e.threadId]),
    );
    expect(new Set(copied.map((e) => e.eventId)).size).toBe(copied.length);
    expect(copied.some((e) => source.some((s) => s.eventId === e.eventId))).toBe(false);
    expect(copied.at(-1)).toMatchObject({ type: 'session.updated', payload: { forkedFrom: fork.forkedFrom } });

    // Its artifacts are its own: same bytes, new ids, and no reference to the source's left.
    const sourceArtifacts = ofType(source.slice(0, at), 'artifact.changed').map((e) => e.artifactId as string);
    const forkArtifacts = ofType(copied, 'artifact.changed').map((e) => e.artifactId as string);
    expect(forkArtifacts).toHaveLength(sourceArtifacts.length);
    const text = JSON.stringify(copied);
    for (const id of sourceArtifacts) expect(text).not.toContain(id);
    const mine = await rt.getArtifact({ sessionId: fork.sessionId, artifactId: forkArtifacts[0] as string });
    const theirs = await rt.getArtifact({ sessionId, artifactId: sourceArtifacts[0] as string });
    expect(Buffer.from(mine.bytes).equals(Buffer.from(theirs.bytes))).toBe(true);
    expect(
      await errorCode(rt.getArtifact({ sessionId: fork.sessionId, artifactId: sourceArtifacts[0] as string })),
    ).toBe('artifact_not_found');

    // The fork's state is the source's at that event; a replay of the fork rebuilds the same read models.
    const then = (await rt.snapshotAt({ sessionId, at })).snapshot;
    const now = (await rt.getSession({ sessionId: fork.sessionId })).snapshot;
    expect(now.threads.map((t) => t.turns.map((turn) => [turn.turnId, turn.status]))).toEqual(
      then.threads.map((t) => t.turns.map((turn) => [turn.turnId, turn.status])),
    );
    expect(now.title).toBe(`Source (fork at ${at})`);
    expect((await rt.replaySession(fork.sessionId)).differences).toEqual([]);

    // It goes on by itself; the source is untouched.
    await rt.submitTurn({ sessionId: fork.sessionId, input: 'three' });
    await rt.settled(fork.sessionId);
    const forkRead = await rt.getThreadRead({ sessionId: fork.sessionId, threadId });
    expect(forkRead.turns?.map((t) => t.status)).toEqual(['completed', 'completed']);
    expect((await allEvents(h, sessionId)).length).toBe(source.length);
  });

  it('what waited at the fork point waits in the fork alone: answered there, the source still waits', async () => {
    h = await harness({
      steps: [
        act([{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'out.txt', content: 'forked' } }]),
        answer('written'),
      ],
    });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.submitTurn({ sessionId, input: 'write it' });
    await rt.settled(sessionId);
    const [pending] = (await rt.getSession({ sessionId })).snapshot.threads[0]?.pendingRequests ?? [];
    expect(pending?.actionType).toBe('tool_approval');

    const fork = await rt.forkSession({ sessionId });
    const [forkPending] =
      (await rt.getSession({ sessionId: fork.sessionId })).snapshot.threads[0]?.pendingRequests ?? [];
    expect(forkPending?.actionId).toBe(pending?.actionId);
    await rt.respondAction({
      sessionId: fork.sessionId,
      actionId: forkPending?.actionId as string,
      decision: 'approve',
    });
    await rt.settled(fork.sessionId);
    expect(readFileSync(join(h.workspace, 'out.txt'), 'utf8')).toBe('forked');
    const forkThread = (await rt.getSession({ sessionId: fork.sessionId })).snapshot.threads[0];
    expect(forkThread?.turns.at(-1)?.status).toBe('completed');
    // The source's question is still open.
    expect((await rt.getSession({ sessionId })).snapshot.threads[0]?.pendingRequests).toHaveLength(1);
  });

  it('refuses an event the session does not have, an unknown session and a taken id', async () => {
    h = await harness({ steps: [answer('hi')] });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    await rt.submitTurn({ sessionId, input: 'hi' });
    await rt.settled(sessionId);
    const last = (await allEvents(h, sessionId)).length;
    expect(await errorCode(rt.forkSession({ sessionId, at: last + 1 }))).toBe('invalid_input');
    expect(await errorCode(rt.forkSession({ sessionId, at: 0 }))).toBe('invalid_input');
    expect(await errorCode(rt.forkSession({ sessionId: 'ses_nope' }))).toBe('session_not_found');
    expect(await errorCode(rt.forkSession({ sessionId, forkId: sessionId }))).toBe('session_exists');
    expect(await errorCode(rt.forkSession({ sessionId, forkId: 'a:b' }))).toBe('invalid_input');
    expect((await rt.listSessions()).map((s) => s.sessionId)).toEqual([sessionId]);
  });
});
