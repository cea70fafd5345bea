import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AnyTool, callFacts, defineTool } from '../../src/index.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, ofType, payload, registryWith, type Timeline } from './helpers.js';

/**
 * Facts per call (issue: the Agent Tool Protocol, section 2 — "tool flags are static today; here they are per
 * method"): a tool whose calls differ states each call's facts (`factsOf`), and permissions, the scheduler's
 * locking and the write-ahead rule read that call's facts, not the tool's.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

/** One tool, two kinds of call: `op: "read"` reads (and may overlap), `op: "delete"` destroys and must not re-run. */
function calendarTool(timeline: Timeline): AnyTool {
  return defineTool<{ op: 'read' | 'delete'; id: string }>({
    name: 'calendar',
    description: 'Reads or deletes an event.',
    input: z.strictObject({ op: z.enum(['read', 'delete']), id: z.string() }),
    // The tool's own flags are the safe ones: what a call that cannot be judged gets.
    isReadOnly: false,
    isConcurrencySafe: false,
    isDestructive: true,
    isIdempotent: false,
    interruptBehavior: 'block',
    capabilities: ['calendar'],
    factsOf: (input) =>
      input.op === 'read'
        ? {
            isReadOnly: true,
            isConcurrencySafe: true,
            isDestructive: false,
            isIdempotent: true,
            interruptBehavior: 'cancel',
          }
        : {},
    async execute(input) {
      timeline.push(`start:${input.id}`);
      await new Promise((resolve) => setTimeout(resolve, 60));
      timeline.push(`end:${input.id}`);
      return { text: `${input.op} ${input.id}` };
    },
  });
}

const call = (id: string, op: 'read' | 'delete') => ({ id, type: 'tool', name: 'calendar', args: { op, id } });

describe('facts per call', () => {
  it('callFacts overrides the tool flags with factsOf, and keeps them when factsOf cannot judge', () => {
    const tool = calendarTool([]);
    expect(callFacts(tool, { op: 'read', id: 'x' })).toMatchObject({ isReadOnly: true, isIdempotent: true });
    expect(callFacts(tool, { op: 'delete', id: 'x' })).toMatchObject({ isReadOnly: false, isDestructive: true });
    const throwing = {
      ...tool,
      factsOf: () => {
        throw new Error('cannot judge');
      },
    };
    expect(callFacts(throwing, { op: 'read', id: 'x' })).toMatchObject({ isReadOnly: false, isIdempotent: false });
  });

  it('reads of the tool overlap and run without asking; its delete asks first and is written ahead', async () => {
    const timeline: Timeline = [];
    h = await harness(
      { steps: [act([call('r1', 'read'), call('r2', 'read')]), act([call('d1', 'delete')]), answer('done')] },
      { tools: registryWith(calendarTool(timeline)) },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read two, delete one' });
    await h.runtime.settled(sessionId);
    // The two reads overlapped (shared lock), with no question asked.
    expect(timeline.slice(0, 2).sort()).toEqual(['start:r1', 'start:r2']);
    let events = await allEvents(h, sessionId);
    const evaluated = ofType(events, 'permission.evaluated').map((e) => payload(e).decision);
    expect(evaluated.slice(0, 2)).toEqual(['allow', 'allow']);
    // The delete waits for approval in the default mode.
    const required = ofType(events, 'action.required');
    expect(required).toHaveLength(1);
    expect(timeline).not.toContain('start:d1');
    await h.runtime.respondAction({ sessionId, actionId: required[0]?.actionId as string, decision: 'approve' });
    await h.runtime.settled(sessionId);
    events = await allEvents(h, sessionId);
    const started = ofType(events, 'tool.started').map((e) => [payload(e).graphActionId, payload(e).idempotent]);
    expect(started).toEqual([
      ['r1', true],
      ['r2', true],
      ['d1', false],
    ]);
    expect(timeline).toContain('end:d1');
  });
});
