import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AnyTool, defineTool } from '../../src/index.js';
import { type Harness, harness } from './harness.js';
import {
  act,
  actionRows,
  allEvents,
  answer,
  ofType,
  payload,
  READ_ONLY_TEST_TOOL,
  registryWith,
  waitFor,
} from './helpers.js';

/**
 * expand_ref's `range.pattern` is a model-supplied RE2 pattern run over a stored output (up to
 * limits.maxArtifactBytes). RE2 is linear, but in pattern size × text length: `a{0,1000}` twelve times over one
 * 20,000-character line is seconds to minutes of one synchronous call. Run on the main thread, it froze the event
 * loop — every session of the process, the tool timeout's timer, SIGINT, `oar interrupt` — as grep once did. It
 * runs in the match worker now, bounded by limits.toolTimeoutMs and stopped by an interrupt.
 */

let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const PATHOLOGICAL = `${'a{0,1000}'.repeat(12)}[0-9]`;

/** A read-only tool whose output holds one long line (the text the pattern is run over). */
function longLineTool(): AnyTool {
  return defineTool<Record<string, never>>({
    name: 'long_line',
    description: 'Prints a long line.',
    input: z.strictObject({}),
    ...READ_ONLY_TEST_TOOL,
    async execute() {
      const lines = Array.from({ length: 300 }, (_, i) => `line ${i + 1}: lorem ipsum`);
      lines.push('a'.repeat(20_000), 'call f(x here');
      return { text: lines.join('\n') };
    },
  });
}

function expandRef(ref: string, range: Record<string, unknown>): { text: string } {
  const block = {
    type: 'agent.protocol',
    version: '1',
    intent: 'expand_ref',
    payload: { type: 'expand_ref', refs: [{ ref, range }] },
  };
  return { text: `\`\`\`json agent-protocol\n${JSON.stringify(block)}\n\`\`\`\n` };
}

/** The longest time the event loop did not get a turn while `work` ran. */
async function longestStall<T>(work: Promise<T>): Promise<{ result: T; stallMs: number; elapsedMs: number }> {
  const started = Date.now();
  let last = started;
  let stallMs = 0;
  const ticker = setInterval(() => {
    const now = Date.now();
    stallMs = Math.max(stallMs, now - last);
    last = now;
  }, 20);
  try {
    const result = await work;
    return { result, stallMs: Math.max(stallMs, Date.now() - last), elapsedMs: Date.now() - started };
  } finally {
    clearInterval(ticker);
  }
}

async function expandStatusEvent(sessionId: string) {
  const events = await allEvents(h as Harness, sessionId);
  return ofType(events, 'run.status').find(
    (e) => String(payload(e).graphActionId).startsWith('expand_') && payload(e).status !== 'pending',
  );
}

describe('expand_ref with a model-supplied pattern', () => {
  it('finds the lines around matches (a regular expression, or the text itself when it is not one)', async () => {
    h = await harness(
      {
        steps: [
          act([{ id: 'gen', type: 'tool', name: 'long_line', args: {} }]),
          expandRef('action:gen.output', { pattern: 'line 20[0-2]:', context_lines: 0 }),
          expandRef('action:gen.output', { pattern: 'f(x', context_lines: 0 }),
          answer('done'),
        ],
      },
      { tools: registryWith(longLineTool()), permissions: { mode: 'bypass' } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const contents = ofType(events, 'run.status')
      .filter((e) => String(payload(e).graphActionId).startsWith('expand_') && payload(e).status === 'completed')
      .map((e) => (payload(e).observation as { content: string }).content);
    expect(contents).toHaveLength(2);
    expect(contents[0]).toBe('200: line 200: lorem ipsum\n201: line 201: lorem ipsum\n202: line 202: lorem ipsum');
    // "f(x" is not a valid regular expression: the model meant the text itself.
    expect(contents[1]).toBe('302: call f(x here');
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'done' });
  });

  it('a pathological pattern times out (tool_timeout, retryable) without stalling the event loop', async () => {
    h = await harness(
      {
        steps: [
          act([{ id: 'gen', type: 'tool', name: 'long_line', args: {} }]),
          expandRef('action:gen.output', { pattern: PATHOLOGICAL }),
          answer('gave up on the pattern'),
        ],
      },
      {
        tools: registryWith(longLineTool()),
        permissions: { mode: 'bypass' },
        limits: { toolTimeoutMs: 1_000 },
      },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    const { stallMs, elapsedMs } = await longestStall(h.runtime.settled(sessionId));
    // On the main thread this match took ~15 s of one synchronous call on this machine.
    expect(stallMs).toBeLessThan(1_000);
    expect(elapsedMs).toBeLessThan(10_000);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    const expand = actionRows(read).find((a) => a.actionId.startsWith('expand_'));
    expect(expand).toMatchObject({ status: 'failed', error: { code: 'tool_timeout', retryable: true } });
    expect(expand?.error?.message).toContain('1000 ms');
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'gave up on the pattern' });
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('an interrupt stops the match at once: the action is cancelled, the turn with it', async () => {
    h = await harness(
      {
        steps: [
          act([{ id: 'gen', type: 'tool', name: 'long_line', args: {} }]),
          expandRef('action:gen.output', { pattern: PATHOLOGICAL }),
          answer('not reached'),
        ],
      },
      { tools: registryWith(longLineTool()), permissions: { mode: 'bypass' }, limits: { toolTimeoutMs: 120_000 } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    // The long line's tool has a result: the expansion (the model's next step) is about to run or running.
    await waitFor(async () => ofType(await allEvents(h as Harness, sessionId), 'tool.result').length > 0, 10_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const { stallMs, elapsedMs } = await longestStall(
      (async () => {
        await h?.runtime.interruptTurn({ sessionId, reason: 'stop' });
        await h?.runtime.settled(sessionId);
      })(),
    );
    expect(stallMs).toBeLessThan(1_000);
    expect(elapsedMs).toBeLessThan(5_000);
    expect(payload(await expandStatusEvent(sessionId)).status).toBe('cancelled');
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'cancelled' });
  });
});
