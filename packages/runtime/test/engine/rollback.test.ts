import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ArtifactRetentionSchema } from '../../src/config/retention.js';
import { expireArtifacts } from '../../src/control-plane/retention.js';
import type { AgentConfig, RollbackResult } from '../../src/index.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, errorCode, ofType, payload, recordingModel } from './helpers.js';

/**
 * rollback_thread (docs/engine.md "Rolling back a thread"): every write and edit keeps the file's content before it
 * as an artifact version; a thread returns to the boundary before one of its turns — the transcript the model sees,
 * the read models and the files OAR wrote follow — and a file changed outside OAR since is refused, changing nothing.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const sha = (text: string) => createHash('sha256').update(text).digest('hex');

const write = (id: string, filePath: string, content: string) => ({
  id,
  type: 'tool',
  name: 'write',
  args: { filePath, content },
});
const edit = (id: string, filePath: string, oldString: string, newString: string) => ({
  id,
  type: 'tool',
  name: 'edit',
  args: { filePath, oldString, newString },
});

/** Three turns: the first writes notes.txt, the second edits it and creates new.txt, the third edits it again. */
async function threeTurns() {
  const steps = [
    act([write('w1', 'notes.txt', 'v1\n')]),
    answer('one done'),
    act([edit('e2', 'notes.txt', 'v1', 'v2'), write('w2', 'new.txt', 'created\n')]),
    answer('two done'),
    act([edit('e3', 'notes.txt', 'v2', 'v3')]),
    answer('three done'),
    // After a rollback, an id of a removed action is free again: the removed work is gone for the model too.
    act([write('e2', 'notes.txt', 'again\n')]),
    answer('four done'),
  ];
  const recording = recordingModel({ steps });
  h = await harness(
    { steps },
    { files: { 'notes.txt': 'v0\n' }, model: recording.model, permissions: { mode: 'accept-edits' } },
  );
  const rt = h.runtime;
  const { sessionId, threadId } = await rt.createSession();
  const turns: string[] = [];
  for (const input of ['first turn', 'MARKER second turn', 'third turn']) {
    const { turnId } = await rt.submitTurn({ sessionId, input });
    turns.push(turnId);
    await rt.settled(sessionId);
  }
  return { rt, sessionId, threadId, turns, prompts: recording.prompts, workspace: h.workspace };
}

/** A rollback cut short by a crash after its start was recorded: only `history.rollback.started` is in the log. */
async function startedOnly(
  rt: Harness['runtime'],
  at: { sessionId: string; threadId: string; rollbackId: string; plan: RollbackResult; kept: string },
) {
  const { plan } = at;
  await rt.log.append(at.sessionId, [
    {
      type: 'history.rollback.started',
      threadId: at.threadId,
      payload: {
        rollbackId: at.rollbackId,
        targetTurnId: plan.targetTurnId,
        keptThroughTurnId: at.kept,
        removedTurns: plan.removedTurns,
        files: plan.files.map(({ path, action, beforeRef }) => ({ path, action, ...(beforeRef ? { beforeRef } : {}) })),
      },
    },
  ]);
}

describe('file versions', () => {
  it('keeps the content before every write and edit as an artifact version, with the digests', async () => {
    const { rt, sessionId, turns, workspace } = await threeTurns();
    expect(readFileSync(join(workspace, 'notes.txt'), 'utf8')).toBe('v3\n');
    const checkpoints = await rt.getArtifactCheckpoints({ sessionId });
    expect(checkpoints.versionCount).toBe(4);
    const notes = checkpoints.files.find((f) => f.path === 'notes.txt');
    expect(notes?.versions.map((v) => [v.version, v.tool, v.turnId, v.created])).toEqual([
      [1, 'write', turns[0], false],
      [2, 'edit', turns[1], false],
      [3, 'edit', turns[2], false],
    ]);
    expect(notes?.versions.map((v) => v.before?.sha256)).toEqual([sha('v0\n'), sha('v1\n'), sha('v2\n')]);
    expect(notes?.latest).toEqual({ sha256: sha('v3\n'), size: 3 });
    // The before-image is an artifact of the session: the exact bytes the file held.
    const first = notes?.versions[0]?.before;
    expect(first).toMatchObject({ restorable: true, size: 3 });
    const stored = await rt.getArtifact({ sessionId, artifactId: first?.artifactId as string });
    expect(Buffer.from(stored.bytes).toString('utf8')).toBe('v0\n');
    expect(stored.name).toBe('file-version:notes.txt');
    // A created file has no before-image.
    const created = checkpoints.files.find((f) => f.path === 'new.txt');
    expect(created?.versions).toMatchObject([{ version: 1, created: true, after: { sha256: sha('created\n') } }]);
    expect(created?.versions[0]?.before).toBeUndefined();
    // The same summary for one thread.
    const thread = await rt.getArtifactCheckpoints({
      sessionId,
      threadId: (await rt.getSession({ sessionId })).snapshot.threads[0]?.threadId as string,
    });
    expect(thread.versionCount).toBe(4);
  });
});

describe('rollback_thread', () => {
  it('returns the thread to a turn boundary: files restored, turns removed, the model no longer sees them', async () => {
    const { rt, sessionId, threadId, turns, prompts, workspace } = await threeTurns();
    const before = await allEvents(h as Harness, sessionId);

    // A dry run plans without recording or writing anything.
    const plan = await rt.rollbackThread({ sessionId, turnId: turns[1] as string, dryRun: true });
    expect(plan).toMatchObject({
      status: 'planned',
      threadId,
      targetTurnId: turns[1],
      keptThroughTurnId: turns[0],
      removedTurns: [turns[1], turns[2]],
      conflicts: [],
      affected: { commands: 0, fileCalls: 3, subagentThreads: [] },
    });
    expect(plan.files).toEqual([
      expect.objectContaining({ path: 'notes.txt', action: 'restore', fromVersion: 2, throughVersion: 3 }),
      expect.objectContaining({ path: 'new.txt', action: 'delete', fromVersion: 1, throughVersion: 1 }),
    ]);
    expect(await allEvents(h as Harness, sessionId)).toHaveLength(before.length);
    expect(readFileSync(join(workspace, 'notes.txt'), 'utf8')).toBe('v3\n');

    const done = await rt.rollbackThread({ sessionId, turnId: turns[1] as string, requestedBy: 'user:ada' });
    expect(done).toMatchObject({ status: 'completed', removedTurns: [turns[1], turns[2]] });
    expect(done.rollbackId).toMatch(/^rbk_/);
    expect(readFileSync(join(workspace, 'notes.txt'), 'utf8')).toBe('v1\n');
    expect(existsSync(join(workspace, 'new.txt'))).toBe(false);

    // The thread as the loop sees it: the removed turns' runs are gone with them.
    const view = await rt.log.thread(sessionId, threadId);
    expect([...view.runs.values()].map((r) => r.turnId)).toEqual([turns[0]]);
    const events = await allEvents(h as Harness, sessionId);
    assertEventsConform(events);
    const [started] = ofType(events, 'history.rollback.started');
    const [completed] = ofType(events, 'history.rollback.completed');
    expect(payload(started)).toMatchObject({ rollbackId: done.rollbackId, requestedBy: 'user:ada' });
    expect(payload(completed)).toMatchObject({
      rollbackId: done.rollbackId,
      removedTurns: [turns[1], turns[2]],
      readModelRepair: { turnsRemoved: 2 },
    });

    const snapshot = (await rt.getSession({ sessionId })).snapshot;
    assertSnapshotConforms(snapshot);
    const thread = snapshot.threads[0];
    expect(thread?.turns.map((t) => t.turnId)).toEqual([turns[0]]);
    // The removed turns' actions left the read model with them.
    expect((thread?.actions ?? []).map((a) => a.actionId)).toEqual(['w1']);

    // The next turn's transcript has the first turn and not the removed ones.
    const seen = prompts.length;
    await rt.submitTurn({ sessionId, input: 'fourth turn' });
    await rt.settled(sessionId);
    const next = prompts.slice(seen).map((p) => p.text);
    expect(next.length).toBeGreaterThan(0);
    expect(next[0]).toContain('first turn');
    expect(next[0]).not.toContain('MARKER');
    expect(next[0]).not.toContain('third turn');
    expect(next.join('\n')).not.toContain('already used');
    expect(readFileSync(join(workspace, 'notes.txt'), 'utf8')).toBe('again\n');
    const fourth = (await rt.getSession({ sessionId })).snapshot.threads[0];
    expect(fourth?.turns.at(-1)).toMatchObject({ status: 'completed' });
    expect((fourth?.actions ?? []).map((a) => a.actionId)).toEqual(['w1', 'e2']);
    // The checkpoint summary: the undone versions marked, the file's latest what the rollback wrote back, then
    // the fourth turn's write.
    const versions = await rt.getArtifactCheckpoints({ sessionId });
    const notes = versions.files.find((f) => f.path === 'notes.txt');
    expect(notes?.versions.map((v) => [v.version, v.rolledBack === done.rollbackId])).toEqual([
      [1, false],
      [2, true],
      [3, true],
      [4, false],
    ]);
    expect(notes?.latest).toEqual({ sha256: sha('again\n'), size: 6 });
    expect(versions.files.find((f) => f.path === 'new.txt')?.latest).toBeNull();
    // A replay of the log builds the same read models (the rollback is a fact like any other).
    expect((await rt.replaySession(sessionId)).differences).toEqual([]);
  });

  it('refuses a file changed outside OAR since, changing nothing; files: keep rolls back the history only', async () => {
    const { rt, sessionId, turns, workspace } = await threeTurns();
    writeFileSync(join(workspace, 'notes.txt'), 'changed by hand\n');
    const before = (await allEvents(h as Harness, sessionId)).length;
    const refused = await rt.rollbackThread({ sessionId, turnId: turns[1] as string }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ error: { code: 'rollback_conflict', retryable: false } });
    const details = (refused as { error: { details: { conflicts: { path: string; reason: string }[] } } }).error
      .details;
    expect(details.conflicts).toEqual([
      expect.objectContaining({ path: 'notes.txt', reason: 'changed_outside', expectedSha256: sha('v3\n') }),
    ]);
    // Nothing changed: not the other file, not the log.
    expect(existsSync(join(workspace, 'new.txt'))).toBe(true);
    expect(readFileSync(join(workspace, 'notes.txt'), 'utf8')).toBe('changed by hand\n');
    expect(await allEvents(h as Harness, sessionId)).toHaveLength(before);

    const kept = await rt.rollbackThread({ sessionId, turnId: turns[2] as string, files: 'keep' });
    expect(kept.files).toEqual([expect.objectContaining({ path: 'notes.txt', action: 'keep' })]);
    expect(readFileSync(join(workspace, 'notes.txt'), 'utf8')).toBe('changed by hand\n');
    const thread = (await rt.getSession({ sessionId })).snapshot.threads[0];
    expect(thread?.turns.map((t) => t.turnId)).toEqual([turns[0], turns[1]]);
  });

  it('refuses a file changed outside OAR between two of its versions: writing the first back would undo that too', async () => {
    h = await harness(
      {
        steps: [
          act([write('w1', 'notes.txt', 'v1\n')]),
          answer('one'),
          act([edit('e2', 'notes.txt', 'HUMAN', 'HUMAN WORK KEPT')]),
          answer('two'),
        ],
      },
      { files: { 'notes.txt': 'v0\n' }, permissions: { mode: 'accept-edits' } },
    );
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    const first = await rt.submitTurn({ sessionId, input: 'one' });
    await rt.settled(sessionId);
    // A person adds to the file between the two turns; the second turn's edit builds on it.
    writeFileSync(join(h.workspace, 'notes.txt'), 'v1\nHUMAN\n');
    await rt.submitTurn({ sessionId, input: 'two' });
    await rt.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'notes.txt'), 'utf8')).toBe('v1\nHUMAN WORK KEPT\n');
    const refused = await rt.rollbackThread({ sessionId, turnId: first.turnId }).catch((e: unknown) => e);
    expect(refused).toMatchObject({
      error: {
        code: 'rollback_conflict',
        details: { conflicts: [{ path: 'notes.txt', reason: 'changed_between', expectedSha256: sha('v1\n') }] },
      },
    });
    expect(readFileSync(join(h.workspace, 'notes.txt'), 'utf8')).toBe('v1\nHUMAN WORK KEPT\n');
  });

  it('refuses unknown turns and busy threads; a rollback cut short is finished by running it again', async () => {
    const { rt, sessionId, threadId, turns, workspace } = await threeTurns();
    expect(await errorCode(rt.rollbackThread({ sessionId, turnId: 'turn_nope' }))).toBe('turn_not_found');
    expect(await errorCode(rt.rollbackThread({ sessionId, turnId: turns[1] as string, files: 'x' as 'keep' }))).toBe(
      'invalid_input',
    );

    // A crash after the start was recorded and one file written back: the thread is held, nothing starts.
    const plan = await rt.rollbackThread({ sessionId, turnId: turns[1] as string, dryRun: true });
    await startedOnly(rt, { sessionId, threadId, rollbackId: 'rbk_cut', plan, kept: turns[0] as string });
    writeFileSync(join(workspace, 'notes.txt'), 'v1\n');
    const held = await rt.submitTurn({ sessionId, input: 'while held' });
    expect(held.status).toBe('accepted');
    const read = await rt.getThreadRead({ sessionId, threadId });
    expect(read.history).toMatchObject({ rollbackInProgress: { rollbackId: 'rbk_cut' } });
    expect(read.activeTurnId).toBeUndefined();
    // Another target while it is under way is refused; the same one finishes it.
    expect(await errorCode(rt.rollbackThread({ sessionId, turnId: turns[2] as string }))).toBe('rollback_in_progress');
    const finished = await rt.rollbackThread({ sessionId, turnId: turns[1] as string });
    expect(finished.rollbackId).toBe('rbk_cut');
    expect(finished.files.map((f) => [f.path, f.action])).toEqual([
      ['notes.txt', 'unchanged'],
      ['new.txt', 'delete'],
    ]);
    expect(existsSync(join(workspace, 'new.txt'))).toBe(false);
    // The record says what the rollback did to each file, including what it did before it was cut short.
    const [completed] = ofType(await allEvents(h as Harness, sessionId), 'history.rollback.completed');
    expect(payload(completed).files).toEqual([
      expect.objectContaining({ path: 'notes.txt', action: 'restore', doneBeforeResume: true }),
      expect.objectContaining({ path: 'new.txt', action: 'delete' }),
    ]);
    // The turn accepted meanwhile runs now, after the kept history.
    await rt.settled(sessionId);
    const thread = (await rt.getSession({ sessionId })).snapshot.threads[0];
    expect(thread?.turns.map((t) => [t.turnId, t.status])).toEqual([
      [turns[0], 'completed'],
      [held.turnId, 'completed'],
    ]);
  });

  it('writes again a file a rollback cut short left half-written; anything else there is still a conflict', async () => {
    const { rt, sessionId, threadId, turns, workspace } = await threeTurns();
    const target = turns[1] as string;
    // Torn while not resuming: only a rollback that set out to write the file back may take its beginning for its own.
    writeFileSync(join(workspace, 'notes.txt'), 'v');
    const refused = await rt.rollbackThread({ sessionId, turnId: target, dryRun: true });
    expect(refused.conflicts).toEqual([expect.objectContaining({ path: 'notes.txt', reason: 'changed_outside' })]);
    writeFileSync(join(workspace, 'notes.txt'), 'v3\n');
    const plan = await rt.rollbackThread({ sessionId, turnId: target, dryRun: true });
    await startedOnly(rt, { sessionId, threadId, rollbackId: 'rbk_torn', plan, kept: turns[0] as string });
    // The crash came in the middle of writing notes.txt back: truncated, then part of its before-image ("v1\n").
    writeFileSync(join(workspace, 'notes.txt'), 'something else');
    expect((await rt.rollbackThread({ sessionId, turnId: target, dryRun: true })).conflicts).toEqual([
      expect.objectContaining({ path: 'notes.txt', reason: 'changed_outside' }),
    ]);
    for (const torn of ['', 'v']) {
      writeFileSync(join(workspace, 'notes.txt'), torn);
      const planned = await rt.rollbackThread({ sessionId, turnId: target, dryRun: true });
      expect(planned.conflicts).toEqual([]);
      expect(planned.files).toContainEqual(
        expect.objectContaining({ path: 'notes.txt', action: 'restore', expectedSha256: sha(torn) }),
      );
    }
    const finished = await rt.rollbackThread({ sessionId, turnId: target });
    expect(finished).toMatchObject({ status: 'completed', rollbackId: 'rbk_torn' });
    expect(readFileSync(join(workspace, 'notes.txt'), 'utf8')).toBe('v1\n');
    expect(existsSync(join(workspace, 'new.txt'))).toBe(false);
  });

  it('restores what a sub-agent delegated from a removed turn wrote; its thread is listed, not removed', async () => {
    const writer: AgentConfig = { name: 'writer', description: 'Writes', capabilities: ['write'], carrier: 'tool' };
    const recording = recordingModel({
      steps: [
        answer('nothing yet'),
        act([{ id: 'delegate', type: 'agent', name: 'writer', args: { prompt: 'write the file' } }]),
        answer('delegated'),
      ],
      agents: { writer: { steps: [act([edit('e', 'notes.txt', 'v0', 'by the writer')]), answer('written')] } },
    });
    h = await harness(
      { steps: [] },
      {
        agents: [writer],
        model: recording.model,
        files: { 'notes.txt': 'v0\n' },
        permissions: { mode: 'accept-edits' },
      },
    );
    const rt = h.runtime;
    const { sessionId, threadId } = await rt.createSession();
    await rt.submitTurn({ sessionId, input: 'one' });
    await rt.settled(sessionId);
    const second = await rt.submitTurn({ sessionId, input: 'delegate the writing' });
    await rt.settled(sessionId);
    expect(readFileSync(join(h.workspace, 'notes.txt'), 'utf8')).toBe('by the writer\n');
    const versions = await rt.getArtifactCheckpoints({ sessionId });
    const childThread = versions.files[0]?.versions[0]?.threadId;
    expect(childThread).toBeDefined();
    expect(childThread).not.toBe(threadId);

    const done = await rt.rollbackThread({ sessionId, turnId: second.turnId });
    expect(done.files).toEqual([expect.objectContaining({ path: 'notes.txt', action: 'restore' })]);
    expect(done.affected.subagentThreads).toEqual([childThread]);
    expect(readFileSync(join(h.workspace, 'notes.txt'), 'utf8')).toBe('v0\n');
    const snapshot = (await rt.getSession({ sessionId })).snapshot;
    expect(snapshot.threads.find((t) => t.threadId === threadId)?.turns).toHaveLength(1);
    expect(snapshot.threads.some((t) => t.threadId === childThread)).toBe(true);
  });

  it('refuses a file whose content before was stored redacted, rather than write the markers into it', async () => {
    const token = `ghp_${'a1B2c3D4e5'.repeat(4).slice(0, 36)}`;
    h = await harness(
      { steps: [act([write('w', 'config.txt', 'no secret here\n')]), answer('done')] },
      { files: { 'config.txt': `token=${token}\n` }, permissions: { mode: 'accept-edits' } },
    );
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    const { turnId } = await rt.submitTurn({ sessionId, input: 'replace the config' });
    await rt.settled(sessionId);
    const [file] = (await rt.getArtifactCheckpoints({ sessionId })).files;
    expect(file?.versions[0]?.before).toMatchObject({
      restorable: false,
      reason: 'redacted',
      sha256: sha(`token=${token}\n`),
    });
    const stored = await rt.getArtifact({ sessionId, artifactId: file?.versions[0]?.before?.artifactId as string });
    expect(Buffer.from(stored.bytes).toString('utf8')).not.toContain(token);
    const refused = await rt.rollbackThread({ sessionId, turnId }).catch((e: unknown) => e);
    expect(refused).toMatchObject({
      error: { code: 'rollback_conflict', details: { conflicts: [{ path: 'config.txt', reason: 'not_restorable' }] } },
    });
    expect(readFileSync(join(h.workspace, 'config.txt'), 'utf8')).toBe('no secret here\n');
  });

  it('refuses a file whose before-image expired under a retention policy that does not keep versions', async () => {
    const { rt, sessionId, turns, workspace } = await threeTurns();
    // keep: [] — the default keeps `file-version:*`; this policy lets them expire with everything else.
    const policy = ArtifactRetentionSchema.parse({ maxAgeDays: 0.0001, keep: [] });
    const report = await expireArtifacts(rt.log, policy, { now: new Date(Date.now() + 60_000) });
    expect(report.expired.some((a) => a.name === 'file-version:notes.txt')).toBe(true);
    const refused = await rt.rollbackThread({ sessionId, turnId: turns[1] as string }).catch((e: unknown) => e);
    expect(refused).toMatchObject({
      error: {
        code: 'rollback_conflict',
        details: { conflicts: [{ path: 'notes.txt', reason: 'before_image_missing' }] },
      },
    });
    expect(readFileSync(join(workspace, 'notes.txt'), 'utf8')).toBe('v3\n');
    // A review still exports: the expired before-images are only not used.
    expect((await rt.exportReview({ sessionId })).changes.length).toBeGreaterThan(0);
  });

  it('keeps only the digest of content over the artifact limit, and refuses to roll that file back', async () => {
    h = await harness(
      { steps: [act([write('w', 'big.txt', 'small now\n')]), answer('done')] },
      {
        files: { 'big.txt': 'x'.repeat(5000) },
        permissions: { mode: 'accept-edits' },
        limits: { maxArtifactBytes: 4096 },
      },
    );
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    const { turnId } = await rt.submitTurn({ sessionId, input: 'shrink it' });
    await rt.settled(sessionId);
    const [file] = (await rt.getArtifactCheckpoints({ sessionId })).files;
    expect(file?.versions[0]?.before).toEqual({
      sha256: sha('x'.repeat(5000)),
      size: 5000,
      restorable: false,
      reason: 'too_large',
    });
    const refused = await rt.rollbackThread({ sessionId, turnId }).catch((e: unknown) => e);
    expect(refused).toMatchObject({
      error: { code: 'rollback_conflict', details: { conflicts: [{ path: 'big.txt', reason: 'not_restorable' }] } },
    });
    expect(readFileSync(join(h.workspace, 'big.txt'), 'utf8')).toBe('small now\n');
  });

  it('refuses a thread waiting for a person', async () => {
    h = await harness({
      steps: [answer('one'), act([{ id: 'q', type: 'human', name: 'ask_user', args: { question: 'Which?' } }])],
    });
    const rt = h.runtime;
    const { sessionId } = await rt.createSession();
    const first = await rt.submitTurn({ sessionId, input: 'one' });
    await rt.settled(sessionId);
    await rt.submitTurn({ sessionId, input: 'two' });
    await rt.settled(sessionId);
    const busy = await rt.rollbackThread({ sessionId, turnId: first.turnId }).catch((e: unknown) => e);
    expect(busy).toMatchObject({ error: { code: 'thread_busy', retryable: true } });
  });
});
