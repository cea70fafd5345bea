import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import type { ModelScript, RunnerBinding } from '../../src/index.js';
import { type Harness, harness } from '../engine/harness.js';
import { allEvents, ofType, payload, waitFor } from '../engine/helpers.js';
import { audits, inProcess } from './probe.js';

/**
 * Runs of a LangBot runner plugin (the stdlib fixture, fixtures/langbot/main.py, a real child process) through the
 * host on a real SQLite file: the run context goes out as LangBot's `run_agent`, its results come back mapped to
 * OAR's, chunked frames travel both ways, hostile frames are refused without harm, a non-frame stdout line is the
 * runner's log, an interrupt closes the connection and kills the process group, and LangBot's five QA behaviours
 * end as LangBot intends (its qa-runner-behaviors.json and behavior matrix).
 */

const FIXTURE = join(import.meta.dirname, 'fixtures/langbot');
const RUNNER_ID = 'plugin:oar-test/lb-fixture/default';
const SCRIPT: ModelScript = { steps: [{ text: 'model says hi' }] };

const opened: Harness[] = [];
afterEach(async () => {
  for (const h of opened.splice(0)) {
    await h.runtime.close();
    await h.store.close();
  }
});

const binding: RunnerBinding = { id: RUNNER_ID, package: FIXTURE, config: {} };

async function turn(input: string, runner: RunnerBinding = binding) {
  const h = await harness(SCRIPT, { mainAgent: { name: 'main', runner } });
  opened.push(h);
  const { sessionId } = await h.runtime.createSession({});
  await h.runtime.submitTurn({ sessionId, input });
  await h.runtime.settled(sessionId);
  return { h, sessionId, events: await allEvents(h, sessionId) };
}

const turnEnd = (events: RuntimeEvent[]) => events.find((e) => e.type === 'turn.completed' || e.type === 'turn.failed');
const answerOf = (events: RuntimeEvent[]) => payload(turnEnd(events)).answer as string | undefined;
const errorOf = (events: RuntimeEvent[]) =>
  (payload(turnEnd(events)).error ?? {}) as {
    code?: string;
    message?: string;
    retryable?: boolean;
    details?: Record<string, unknown>;
  };
const runnerLog = (events: RuntimeEvent[]) => {
  const ended = events.find((e) => payload(e).phase === 'runner_ended');
  return ((payload(ended).runner as { stderr?: string } | undefined)?.stderr ?? '') as string;
};

describe('a run of a LangBot runner plugin', () => {
  it('answers with the streamed text (pieces or the text so far; content as a list, null or a string) and the binding config', async () => {
    const streamed = await turn('stream');
    expect(turnEnd(streamed.events)?.type).toBe('turn.completed');
    expect(answerOf(streamed.events)).toBe('Hello, world');
    // The whole text so far in each chunk (n8n-agent's way): the answer is the text, once.
    const cumulative = await turn('cumulative');
    expect(answerOf(cumulative.events)).toBe('Hello, n8n');
    const echo = await turn('plain', { ...binding, config: { greeting: 'hi there' } });
    expect(answerOf(echo.events)).toBe('echo: plain (hi there)');
    // The run is a task attempt of the turn, on record from start to end.
    expect(ofType(echo.events, 'task.attempt.completed')).toHaveLength(1);
  });

  it.each<[string, { answer?: string; code?: string; message?: string }]>([
    ['ok', { answer: 'QA_RUNNER_OK' }],
    ['stream_ok', { answer: 'QA_RUNNER_STREAM_OK' }],
    ['empty_output', { answer: '' }],
    ['malformed_result', { code: 'runner_protocol_error' }],
    ['controlled_failure', { code: 'qa.failure', message: 'QA runner controlled failure' }],
  ])("ends LangBot's QA behaviour %s as LangBot intends", async (behaviour, expected) => {
    const { events } = await turn(`qa:${behaviour}`);
    if (expected.answer !== undefined) {
      expect(turnEnd(events)?.type, JSON.stringify(errorOf(events))).toBe('turn.completed');
      expect(answerOf(events)).toBe(expected.answer);
      return;
    }
    expect(turnEnd(events)?.type).toBe('turn.failed');
    expect(errorOf(events).code).toBe(expected.code);
    if (expected.message) {
      expect(errorOf(events).message).toBe(expected.message);
      expect(errorOf(events).retryable).toBe(false);
    } else {
      expect(errorOf(events).details?.reason).toBe('invalid_data');
    }
  });

  it("keeps the runner's state.updated, as LangBot's host does for every runner", async () => {
    const { events } = await turn('state');
    expect(answerOf(events)).toBe('stated');
    expect(ofType(events, 'runtime.warning')).toEqual([]);
    const state = ofType(events, 'thread.updated')
      .map((e) => payload(e).state as { key?: string; value?: unknown } | undefined)
      .find((s) => s?.key?.startsWith('runner:'));
    expect(state).toEqual({ key: 'runner:conversation:external.session_id', value: 'lb-1' });
  });

  it('carries messages over 16 KiB in chunks both ways', async () => {
    const big = await turn('big');
    expect(answerOf(big.events)).toBe(`${'x'.repeat(40_000)}END`);
    const input = `size:${'y'.repeat(40_000)}`;
    const sized = await turn(input);
    expect(answerOf(sized.events)).toBe(`received ${input.length}`);
  });

  it('answers a proxy action through the governed API of the run', async () => {
    const { events } = await turn('proxy');
    expect(answerOf(events), JSON.stringify(errorOf(events))).toBe('model: model says hi');
    expect(audits(events)).toEqual([expect.objectContaining({ action: 'models.invoke', result: 'allowed' })]);
    expect(ofType(events, 'model.completed')).toHaveLength(1);
  });

  it("answers LangBot's SDK calls through the real plugin: count_tokens, state_list, get_prompt, run_get, flagged as the SDK checks", async () => {
    const h = await harness(SCRIPT, {
      mainAgent: { name: 'main', runner: binding, systemPrompt: 'You are the fixture agent.' },
    });
    opened.push(h);
    const { sessionId } = await h.runtime.createSession({});
    await h.runtime.submitTurn({ sessionId, input: 'apis' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(turnEnd(events)?.type, JSON.stringify(errorOf(events))).toBe('turn.completed');
    const seen = JSON.parse(answerOf(events) ?? '{}') as Record<string, unknown>;
    expect(seen).toEqual({
      // OAR's estimate of "hello world" (the SDK insists on an integer).
      tokens: expect.any(Number),
      keys: ['lb.a', 'lb.b'],
      prompt: [{ role: 'system', content: 'You are the fixture agent.' }],
      run_status: 'running',
      // The manifest declares steering, and the listing kept it: the SDK may call steering_pull.
      steering_flag: true,
      // A LangBot action that is no proxy action of a run: refused with a code the SDK reads.
      get_bots: expect.stringMatching(/^not_supported: action get_bots is not served/),
    });
    expect(seen.tokens).toBeGreaterThan(0);
    expect(audits(events).map((a) => a.action)).toEqual(
      expect.arrayContaining(['tokens.count', 'state.list', 'prompt.get']),
    );
  });

  it('lets the plugin claim input queued meanwhile with steering_pull (its manifest declares steering)', async () => {
    const h = await harness(SCRIPT, { mainAgent: { name: 'main', runner: binding } });
    opened.push(h);
    const { sessionId } = await h.runtime.createSession({});
    await h.runtime.submitTurn({ sessionId, input: 'steer' });
    // The run has started (its process is on record) before the follow-up is queued.
    await waitFor(async () => {
      const events = await allEvents(h, sessionId);
      return (
        events.some(
          (e) => typeof (payload(e).state as { value?: { pid?: number } } | undefined)?.value?.pid === 'number',
        ) || undefined
      );
    }, 10_000);
    const queued = await h.runtime.submitTurn({ sessionId, input: 'also mention pears' });
    expect(queued.status).toBe('queued');
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(answerOf(events), JSON.stringify(errorOf(events))).toBe('steered: also mention pears');
    expect(ofType(events, 'turn.completed')).toHaveLength(1);
    expect(audits(events)).toEqual(
      expect.arrayContaining([expect.objectContaining({ action: 'steering.pull', result: 'allowed' })]),
    );
  });

  it('keeps a bounded tail of a stdout flood of non-frame lines, and goes on', async () => {
    const { events } = await turn('flood');
    expect(answerOf(events)).toBe('flooded');
    const log = runnerLog(events);
    expect(log).toContain('[stdout] log line 199999');
    expect(log.length).toBeLessThanOrEqual(4_096);
  }, 20_000);

  it('records a stdout line that is not a frame as the runner log, redacted, and goes on', async () => {
    const { events } = await turn('log');
    expect(answerOf(events)).toBe('logged');
    expect(runnerLog(events)).toContain('[stdout] this line is not a frame');
    // A credential the plugin printed is redacted in the record, as its stderr is.
    expect(runnerLog(events)).toContain('[REDACTED');
    expect(JSON.stringify(events)).not.toContain('sk-proj-Zx9yWv8uTs7rQp6oNm5lKj4iHg3fEd2cBa1');
  });
});

describe('hostile frames of a LangBot plugin are refused without harm to the host', () => {
  it('drops a response to a request never made, and the run goes on', async () => {
    const { events } = await turn('hostile:seq');
    expect(answerOf(events)).toBe('survived');
    expect(runnerLog(events)).toContain('dropped a response to no pending request (seq_id 987654)');
  });

  it("refuses a proxy call naming another run's run_id", async () => {
    const { events } = await turn('hostile:run');
    expect(answerOf(events)).toMatch(/^refused: unauthorized: the run_id is not a run of this connection/);
    // Refused before the host's API: nothing was read or audited for the other run.
    expect(audits(events)).toEqual([]);
  });

  it('fails the run on an oversized chunk sequence and kills the plugin', async () => {
    const { events } = await turn('hostile:oversize');
    expect(turnEnd(events)?.type).toBe('turn.failed');
    expect(errorOf(events).code).toBe('runner_protocol_error');
    expect(errorOf(events).details?.reason).toBe('frame_too_large');
    expect(errorOf(events).message).toMatch(/17825792 bytes; the limit is 16777216/);
    expect(runnerLog(events)).toContain('broke LangBot');
  });
});

describe('cancelling a LangBot run', () => {
  it('closes the connection on interrupt: the attempt is cancelled and the process group is gone', async () => {
    const h = await harness(SCRIPT, { mainAgent: { name: 'main', runner: binding } });
    opened.push(h);
    const { sessionId } = await h.runtime.createSession({});
    await h.runtime.submitTurn({ sessionId, input: 'hang' });
    // The run's process group, as the host recorded it before running.
    const pid = await waitFor(async () => {
      const events = await allEvents(h, sessionId);
      const state = events
        .map((e) => (payload(e).state as { value?: { pid?: number } } | undefined)?.value?.pid)
        .find((p) => typeof p === 'number');
      return state;
    }, 10_000);
    expect(alive(pid)).toBe(true);
    const interrupted = await h.runtime.interruptTurn({ sessionId, reason: 'test' });
    expect(interrupted.interrupted).toBe(true);
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    expect(errorOf(events).code).toBe('interrupted');
    expect(ofType(events, 'task.cancelled')).toHaveLength(1);
    await waitFor(async () => !alive(pid), 10_000);
  });
});

describe("a run that only streamed its text, on OAR's own wire too", () => {
  it('answers with the streamed text; a completed message still wins', async () => {
    const streamed = await turn(
      'go',
      inProcess(
        async (_ctx, { emit }) => {
          await emit('message.delta', { chunk: { role: 'assistant', content: 'part one, ' } });
          await emit('message.delta', { chunk: { role: 'assistant', content: 'part two' } });
          await emit('run.completed', { finish_reason: 'stop' });
        },
        { capabilities: { streaming: true } },
      ),
    );
    expect(answerOf(streamed.events)).toBe('part one, part two');
    const completed = await turn(
      'go',
      inProcess(
        async (_ctx, { emit }) => {
          await emit('message.delta', { chunk: { role: 'assistant', content: 'draft' } });
          await emit('message.completed', { message: { role: 'assistant', content: 'final' } });
          await emit('run.completed', {});
        },
        { capabilities: { streaming: true } },
      ),
    );
    expect(answerOf(completed.events)).toBe('final');
  });
});

describe('a LangBot run past its deadline', () => {
  it('is failed runner_timeout, and a plugin that ignores the closed connection is killed with its group', async () => {
    const { events } = await turn('stubborn', { ...binding, policy: { timeoutMs: 1_500 } });
    expect(errorOf(events).code).toBe('runner_timeout');
    const helper = Number(/helper pid (\d+)/.exec(runnerLog(events))?.[1]);
    expect(helper).toBeGreaterThan(0);
    await waitFor(async () => !alive(helper), 10_000);
  }, 20_000);
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
