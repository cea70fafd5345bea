import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, errorCode, ofType, waitForEvent } from './helpers.js';

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
    });
    // The fork's thread has an id of its own: a worker must never take one for the other.
    const forkThread = fork.threads[threadId] as string;
    expect(forkThread).toMatch(/^thr_/);
    expect(forkThread).not.toBe(threadId);
    expect(fork.artifacts).toBeGreaterThan(0);
    const copied = await allEvents(h, fork.sessionId);
    expect(copied).toHaveLength(at + 1);
    expect(copied.slice(0, at).map((e) => [e.type, e.timestamp, e.turnId])).toEqual(
      source.slice(0, at).map((e) => [e.type, e.timestamp, e.turnId]),
    );
    expect(copied.slice(0, at).map((e) => e.threadId)).toEqual(
      source.slice(0, at).map((e) => (e.threadId ? fork.threads[e.threadId] : undefined)),
    );
    expect(JSON.stringify(copied)).not.toContain(threadId);
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
    const forkRead = await rt.getThreadRead({ sessionId: fork.sessionId, threadId: forkThread });
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

  it('a fork of a running session is never taken for it: interrupting the fork leaves the source running', async () => {
    h = await harness(
      {
        steps: [
          act([
            {
              id: 'bg',
              type: 'tool',
              name: 'exec',
              args: { command: ['node', '-e', 'setInterval(() => {}, 1000)'], background: true },
            },
          ]),
          { ...answer('Source done.'), delayMs: 1_500 },
        ],
      },
      {
        exec: { sandbox: { profile: 'none', unsandboxed: 'allow' } },
        permissions: { mode: 'accept-edits', rules: [{ decision: 'allow', tool: 'exec', command: 'node' }] },
      },
    );
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    await rt.submitTurn({ sessionId, input: 'start it, then think' });
    const started = await waitForEvent(h, sessionId, 'process.started');
    await waitForEvent(
      h,
      sessionId,
      'model.requested',
      (e) => (e.payload as { step?: number }).step !== 0 && e.sequence > started.sequence,
    );
    const fork = await rt.forkSession({ sessionId });
    const forkThread = fork.threads[threadId] as string;
    await rt.interruptTurn({ sessionId: fork.sessionId, threadId: forkThread, waitMs: 10_000 });
    await rt.settled(fork.sessionId);
    // In the fork: its copy of the process is its own id, and lost (this runtime never ran it); its turn cancelled.
    const forkEvents = await allEvents(h, fork.sessionId);
    const lost = ofType(forkEvents, 'process.failed');
    expect(lost).toHaveLength(1);
    expect(lost[0]?.processId).not.toBe(started.processId);
    expect(ofType(forkEvents, 'turn.failed')[0]?.status).toBe('cancelled');
    // The source went on untouched: its turn completed, its process still runs.
    await rt.settled(sessionId);
    const sourceEvents = await allEvents(h, sessionId);
    expect(ofType(sourceEvents, 'turn.completed')).toHaveLength(1);
    expect(ofType(sourceEvents, 'turn.failed')).toHaveLength(0);
    const env = await rt.getExecutionEnvironment({ sessionId });
    expect(env.activeProcesses.map((p) => p.processId)).toEqual([started.processId]);
    await rt.terminateProcess({ sessionId, processId: started.processId as string });
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
