import { existsSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HooksSchema } from '../../src/config/hooks.js';
import { sandboxUnavailable } from '../exec/support.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { tempDir } from '../support/temp-dirs.js';
import { type Harness, harness } from './harness.js';
import { type ActionRow, act, actionRows, allEvents, answer, ofType, payload } from './helpers.js';

/**
 * Acceptance scenario 11 of the Agent Runtime standard, permission and sandbox fact: "Given a shell or file tool
 * requests a write, the runtime records `permission.evaluated` and `sandbox.applied` first. If denied or out of
 * bounds, the thread read model explains whether a rule, mode, hook, host policy, or sandbox violation caused it."
 *
 * Allowed writes — `edit` and `write` (file tools, confined to the workspace: `sandbox.applied` profile
 * `workspace`) and `exec` (a shell command under bubblewrap: profile `bwrap`) — each record `permission.evaluated`,
 * then `tool.started` with `sandbox.applied`, before the write: in the log's order, and for the calls whose start is
 * committed before they run (the non-idempotent `edit`, `exec`) also in time — the file is unchanged when those
 * facts are committed. (An idempotent `write`'s start is staged with its step and committed after it ran:
 * re-running it is harmless, docs/reliability.md; the log's order is the same.)
 *
 * Denied or out-of-bounds writes: denied by a rule, by a hook, by the runtime's default rules (OAR's policy of its
 * own for credential files: what plays the host policy here — `host_policy` is only an AgentRunner's platform
 * decision) and by the read-only mode, each recorded as `permission.evaluated` deny and nothing started; a file tool
 * whose path resolves outside the workspace (a symlink) and a shell command writing outside it, both refused by the
 * sandbox (`sandbox.violation`). The thread read model says which: a denied action's error carries the `source`
 * (rule, hook, default, mode) with the rule and the mode; an out-of-bounds one fails `path_outside_workspace`; both
 * violations are incidents `sandbox_violation:<kind>` and counted in the evidence summary's audit notes.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

let skip: string | undefined;
beforeAll(async () => {
  skip = await sandboxUnavailable();
});

const HOOK = join(import.meta.dirname, '../fixtures/hooks/hook.mjs');
const README = '# Sample\n\nHello from the sample workspace.\n';
const tool = (id: string, name: string, args: Record<string, unknown>) => ({ id, type: 'tool', name, args });

/** The events of one graph action's call, by its graph action id. */
function callOf(events: RuntimeEvent[], graphActionId: string): RuntimeEvent[] {
  const id = events.find((e) => e.type === 'permission.evaluated' && payload(e).graphActionId === graphActionId);
  return events.filter((e) => e.toolCallId !== undefined && e.toolCallId === id?.toolCallId);
}

describe('acceptance scenario 11: permission and sandbox fact', () => {
  it('records permission.evaluated, then the start with sandbox.applied, before a file or shell tool writes', async (t) => {
    if (skip) t.skip();
    h = await harness(
      {
        steps: [
          act([
            tool('edit', 'edit', { filePath: 'README.md', oldString: 'Hello', newString: 'Howdy' }),
            tool('write', 'write', { filePath: 'new.txt', content: 'new\n' }),
            tool('shell', 'exec', { command: ['sh', '-c', 'echo hi > shell.txt'] }),
          ]),
          answer('Written three ways.'),
        ],
      },
      {
        exec: {},
        permissions: { mode: 'accept-edits', rules: [{ decision: 'allow', tool: 'exec', command: 'sh' }] },
      },
    );
    const { workspace } = h;
    // What the workspace holds when a call's sandbox.applied is committed (the store's listeners run on commit).
    const atCommit = new Map<string, { readme: string; files: string[] }>();
    const stop = h.runtime.log.subscribe((events) => {
      for (const e of events) {
        if (e.type !== 'sandbox.applied' || !e.toolCallId) continue;
        atCommit.set(e.toolCallId, {
          readme: readFileSync(join(workspace, 'README.md'), 'utf8'),
          files: readdirSync(workspace).sort(),
        });
      }
    });
    const { sessionId, threadId } = await h.runtime.createSession();
    const { turnId } = await h.runtime.submitTurn({ sessionId, input: 'write three ways' });
    await h.runtime.settled(sessionId);
    stop();

    expect(readFileSync(join(workspace, 'README.md'), 'utf8')).toContain('Howdy from the sample');
    expect(readFileSync(join(workspace, 'new.txt'), 'utf8')).toBe('new\n');
    expect(readFileSync(join(workspace, 'shell.txt'), 'utf8')).toBe('hi\n');
    const events = await allEvents(h, sessionId);
    for (const graphActionId of ['edit', 'write', 'shell']) {
      const call = callOf(events, graphActionId);
      const types = call.map((e) => e.type);
      // The order of the record: evaluated (allow), started with the sandbox, …, the result.
      expect(types.slice(0, 3), graphActionId).toEqual(['permission.evaluated', 'tool.started', 'sandbox.applied']);
      expect(types.at(-1)).toBe('tool.result');
      expect(payload(call[0])).toMatchObject({ decision: 'allow' });
      expect(call.every((e) => e.turnId === turnId && e.threadId === threadId)).toBe(true);
      // Whatever the call wrote (a file version, a process) comes after the sandbox.
      const applied = call[2]?.sequence ?? 0;
      const effects = events.filter(
        (e) =>
          e.runId === call[0]?.runId &&
          ((e.type === 'artifact.changed' && String(payload(e).name).includes(graphActionId)) ||
            (e.type.startsWith('process.') && e.toolCallId === call[0]?.toolCallId)),
      );
      for (const effect of effects) expect(effect.sequence, `${graphActionId} ${effect.type}`).toBeGreaterThan(applied);
    }
    // The sandboxes applied: the workspace confinement of the file tools, bubblewrap for the shell.
    const applied = (id: string) => payload(callOf(events, id)[2]);
    for (const id of ['edit', 'write']) {
      expect(applied(id)).toMatchObject({ profile: 'workspace', network: false, writable: [workspace] });
    }
    expect(applied('edit').paths).toEqual(['README.md']);
    expect(applied('write').paths).toEqual(['new.txt']);
    expect(applied('shell')).toMatchObject({ profile: 'bwrap', network: false });
    expect(applied('shell').writable).toContain(workspace);
    expect(ofType(events, 'process.started')[0]?.sequence).toBeGreaterThan(callOf(events, 'shell')[2]?.sequence ?? 0);
    // In time: the edit and the command had not written when their start and sandbox were committed.
    const before = (id: string) => atCommit.get(callOf(events, id)[0]?.toolCallId as string);
    expect(before('edit')).toBeDefined();
    expect(before('shell')).toBeDefined();
    expect(before('edit')?.readme).toBe(README);
    expect(before('shell')?.files).not.toContain('shell.txt');

    assertEventsConform(events);
    assertSnapshotConforms((await h.runtime.getSession({ sessionId })).snapshot);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a denied or out-of-bounds write: the thread read model says whether a rule, mode, hook, default policy or the sandbox caused it', async (t) => {
    if (skip) t.skip();
    const outside = tempDir('oar-outside-');
    const target = `/usr/oar-scenario-11-${process.pid}`;
    h = await harness(
      {
        steps: [
          act([
            tool('by_rule', 'write', { filePath: 'secrets/key.txt', content: 'k' }),
            tool('by_hook', 'edit', { filePath: 'README.md', oldString: 'Hello', newString: 'Bye' }),
            tool('by_default', 'write', { filePath: '.env', content: 'TOKEN=x\n' }),
            tool('escape', 'write', { filePath: 'escape/x.txt', content: 'x' }),
            tool('shell', 'exec', { command: ['sh', '-c', `echo x > ${target}`] }),
          ]),
          answer('Some were refused.'),
          act([tool('by_mode', 'write', { filePath: 'ok.txt', content: 'ok' })]),
          answer('Refused again.'),
        ],
      },
      {
        exec: {},
        permissions: {
          mode: 'accept-edits',
          rules: [
            { decision: 'deny', paths: ['secrets/**'], reason: 'no secrets' },
            { decision: 'allow', tool: 'exec', command: 'sh' },
          ],
        },
        hooks: HooksSchema.parse([
          {
            name: 'no-edits',
            point: 'before_tool_call',
            matcher: { tools: ['edit'] },
            command: [process.execPath, HOOK, 'deny'],
          },
        ]),
      },
    );
    symlinkSync(outside, join(h.workspace, 'escape'));
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'write everywhere' });
    await h.runtime.settled(sessionId);
    // The mode: the session's binding changed to read-only, the next write is refused by it.
    await h.runtime.updateBinding({ sessionId, update: { permissions: { mode: 'read-only', rules: [] } } });
    await h.runtime.submitTurn({ sessionId, input: 'write once more' });
    await h.runtime.settled(sessionId);

    // Nothing was written where it was refused.
    expect(existsSync(join(h.workspace, 'secrets'))).toBe(false);
    expect(readFileSync(join(h.workspace, 'README.md'), 'utf8')).toBe(README);
    expect(existsSync(join(h.workspace, '.env'))).toBe(false);
    expect(readdirSync(outside)).toEqual([]);
    expect(existsSync(target)).toBe(false);
    expect(existsSync(join(h.workspace, 'ok.txt'))).toBe(false);

    const events = await allEvents(h, sessionId);
    // A denial is recorded as evaluated (deny, with its source) and nothing starts.
    const denials = { by_rule: 'rule', by_hook: 'hook', by_default: 'default', by_mode: 'mode' } as const;
    for (const [id, source] of Object.entries(denials)) {
      // (The hook's run is recorded with the call's ids, before the evaluation it took part in.)
      const call = callOf(events, id).filter((e) => !e.type.startsWith('hook.'));
      expect(call.map((e) => e.type)).toEqual(['permission.evaluated']);
      expect(payload(call[0])).toMatchObject({ decision: 'deny', source });
    }
    expect(callOf(events, 'by_hook').map((e) => e.type)).toEqual([
      'hook.started',
      'hook.completed',
      'permission.evaluated',
    ]);
    // Out of bounds: allowed, started and confined — then refused by the sandbox, recorded as a violation.
    expect(callOf(events, 'escape').map((e) => e.type)).toEqual([
      'permission.evaluated',
      'tool.started',
      'sandbox.applied',
      'sandbox.violation',
      'tool.failed',
    ]);
    expect(payload(callOf(events, 'escape')[3])).toMatchObject({ kind: 'path_outside_workspace' });
    const shell = callOf(events, 'shell');
    expect(shell.slice(0, 3).map((e) => e.type)).toEqual(['permission.evaluated', 'tool.started', 'sandbox.applied']);
    expect(payload(shell.find((e) => e.type === 'sandbox.violation'))).toMatchObject({
      kind: 'write_blocked',
      evidence: expect.stringContaining('Read-only file system'),
    });

    // The thread read model explains each one.
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    const row = (id: string) =>
      actionRows(read).find((a) => a.actionId === id) as ActionRow & {
        error?: { details?: Record<string, unknown> };
      };
    expect(row('by_rule')).toMatchObject({
      status: 'denied',
      error: { code: 'permission_denied', details: { source: 'rule', mode: 'accept-edits' } },
    });
    expect(String(row('by_rule').error?.details?.rule)).toContain('secrets/**');
    expect(row('by_rule').error?.message).toContain('no secrets');
    expect(row('by_hook')).toMatchObject({
      status: 'denied',
      error: { code: 'permission_denied', details: { source: 'hook' } },
    });
    expect(row('by_hook').error?.message).toContain('no-edits');
    expect(row('by_default')).toMatchObject({
      status: 'denied',
      error: { code: 'permission_denied', details: { source: 'default' } },
    });
    expect(String(row('by_default').error?.details?.rule)).toContain('.env');
    expect(row('by_mode')).toMatchObject({
      status: 'denied',
      error: { code: 'permission_denied', details: { source: 'mode', mode: 'read-only' } },
    });
    expect(row('escape')).toMatchObject({ status: 'failed', error: { code: 'path_outside_workspace' } });
    // The command ran to its end (exit 2, its output says why); the violation is the thread's incident.
    expect(row('shell')).toMatchObject({ status: 'completed' });
    expect(row('shell').summary).toContain('Read-only file system');
    expect(read.incidents.map((i) => [i.code, i.turnId])).toEqual([
      ['sandbox_violation:path_outside_workspace', callOf(events, 'escape')[0]?.turnId],
      ['sandbox_violation:write_blocked', shell[0]?.turnId],
    ]);
    expect(read.evidenceSummary.auditNotes).toContain('sandbox violations: 2');
    const { snapshot } = await h.runtime.getSession({ sessionId });
    assertSnapshotConforms(snapshot);
    // The evidence export lists the refusals with them.
    const pack = await h.runtime.exportEvidence(sessionId);
    expect(pack.failures.filter((f) => f.type === 'sandbox.violation')).toHaveLength(2);
    expect(
      pack.failures
        .filter((f) => f.type === 'run.status')
        .map((f) => (f.error as { details?: { source?: string } }).details?.source),
    ).toEqual(['rule', 'hook', 'default', 'mode']);
    assertEventsConform(await allEvents(h, sessionId));
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });
});
