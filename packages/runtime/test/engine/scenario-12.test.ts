import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { HooksSchema } from '../../src/config/hooks.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, payload, recordingModel } from './helpers.js';

/**
 * Acceptance scenario 12 of the Agent Runtime standard (issue 13 §3): a hook's rewrite is visible. A
 * before_tool_call hook (a real process speaking the hook protocol) rewrites a write's input; the runtime validates
 * and permission-checks the rewritten call, runs it, and the record shows the hook's run (`hook.started` /
 * `hook.completed` with the decision, the input before and after, and the changes as JSON pointers), the call as
 * asked and as run (`tool.started` `input` / `effectiveInput` / `rewrittenBy`) — in the log, in the evidence export
 * and in a replay, all conforming to the standard's event schema.
 */
const HOOK = join(import.meta.dirname, '../fixtures/hooks/hook.mjs');

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

describe("acceptance scenario 12: a hook's rewrite is visible", () => {
  it('records the rewrite with its diff, runs the rewritten input, and exports it', async () => {
    const recorder = recordingModel({
      steps: [
        act([{ id: 'w1', type: 'tool', name: 'write', args: { filePath: 'greeting.txt', content: 'hello world\n' } }]),
        answer('Written.'),
      ],
    });
    h = await harness(
      { steps: [] },
      {
        model: recorder.model,
        permissions: { mode: 'accept-edits' },
        hooks: HooksSchema.parse([
          { name: 'house-style', point: 'before_tool_call', command: [process.execPath, HOOK, 'uppercase'] },
        ]),
      },
    );
    const { sessionId } = await h.runtime.createSession();
    const { turnId } = await h.runtime.submitTurn({ sessionId, input: 'greet' });
    await h.runtime.settled(sessionId);

    expect(readFileSync(join(h.workspace, 'greeting.txt'), 'utf8')).toBe('HELLO WORLD\n');
    const events = await allEvents(h, sessionId);
    const started = ofType(events, 'hook.started')[0];
    const completed = ofType(events, 'hook.completed')[0];
    const toolStarted = ofType(events, 'tool.started')[0];
    // One call, joined by its ids: the hook's run and the tool's run carry the same turn and tool call.
    expect(started).toMatchObject({
      turnId,
      toolCallId: toolStarted?.toolCallId,
      hookRun: { hookName: 'house-style' },
    });
    expect(completed).toMatchObject({
      turnId,
      toolCallId: toolStarted?.toolCallId,
      hookRun: { hookName: 'house-style', point: 'before_tool_call' },
    });
    expect(payload(completed)).toMatchObject({
      decision: 'rewrite',
      reason: 'house style',
      rewrite: {
        target: 'input',
        before: { filePath: 'greeting.txt', content: 'hello world\n' },
        after: { filePath: 'greeting.txt', content: 'HELLO WORLD\n' },
        changes: [{ path: '/content', op: 'replace', before: 'hello world\n', after: 'HELLO WORLD\n' }],
      },
    });
    expect(payload(toolStarted)).toMatchObject({
      input: { content: 'hello world\n' },
      effectiveInput: { content: 'HELLO WORLD\n' },
      rewrittenBy: ['house-style'],
    });
    // The rewritten call was judged by the permission policy after the hook, before it ran.
    const order = events.map((e) => e.type);
    expect(order.indexOf('hook.started')).toBeLessThan(order.indexOf('hook.completed'));
    expect(order.indexOf('hook.completed')).toBeLessThan(order.indexOf('permission.evaluated'));
    expect(order.indexOf('permission.evaluated')).toBeLessThan(order.indexOf('tool.started'));
    assertEventsConform(events);

    // In the read model: the turn's hook runs, with the fields the rewrite changed (`oar inspect` shows them).
    const { snapshot } = await h.runtime.getSession({ sessionId });
    assertSnapshotConforms(snapshot);
    const turn = snapshot.threads[0]?.turns.find((t) => t.turnId === turnId);
    expect(turn?.hookRuns).toEqual([
      expect.objectContaining({
        hookName: 'house-style',
        point: 'before_tool_call',
        status: 'completed',
        decision: 'rewrite',
        toolName: 'write',
        toolCallId: toolStarted?.toolCallId,
        changed: ['/content'],
      }),
    ]);

    // Visible beyond the log: the evidence export carries the same facts, and a replay reproduces the session.
    const evidence = (await h.runtime.exportEvidence(sessionId)) as unknown as {
      timeline: { type: string; summary: string }[];
      hooks: Record<string, unknown>[];
    };
    expect(evidence.timeline.find((e) => e.type === 'hook.completed')?.summary).toBe(
      'hook house-style before_tool_call write: rewrite',
    );
    expect(evidence.hooks).toMatchObject([
      {
        type: 'hook.completed',
        turnId,
        hookName: 'house-style',
        decision: 'rewrite',
        rewrite: { changes: [{ path: '/content' }] },
      },
    ]);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });
});
