import type { RuntimeEvent } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { applyEvent, emptyReadModels, replay } from '../../src/read-models/project.js';
import { ticksSessionClock } from '../../src/read-models/session.js';

/**
 * replay() sets a model's clock (updatedAt, lastSequence) once for a run of events that change nothing else; the
 * incremental path (applyEvent) copies the model for each. Both must end equal, whichever event comes last.
 */
let sequence = 0;
function event(type: string, fields: Partial<RuntimeEvent> = {}, payload: Record<string, unknown> = {}): RuntimeEvent {
  sequence += 1;
  return {
    type,
    eventId: `evt_${sequence}`,
    sessionId: 'ses_clock',
    sequence,
    timestamp: new Date(Date.UTC(2026, 10, 29, 10, 0, sequence)).toISOString(),
    runtimeId: 'rt_clock',
    schemaVersion: '1.0',
    payload,
    ...fields,
  } as RuntimeEvent;
}

function incremental(events: RuntimeEvent[]) {
  const models = emptyReadModels();
  for (const e of events) applyEvent(models, e);
  return models;
}

describe('replay and the clock of models an event only ticks', () => {
  const thread = { threadId: 'thr_a' };
  const turn = { ...thread, turnId: 'turn_a' };
  const opening = () => {
    sequence = 0;
    return [
      event('session.created', {}, { title: 'clock' }),
      event('thread.started', thread, { agent: 'main' }),
      event('turn.submitted', { ...turn, status: 'accepted' } as Partial<RuntimeEvent>, { input: 'hi' }),
      event('turn.started', turn),
    ];
  };

  it('equals the incremental models when the last events only tick the clocks', () => {
    const events = [
      ...opening(),
      event('model.completed', turn, { usage: { inputTokens: 3, outputTokens: 4 } }),
      event('tool.progress', { ...turn, stepId: 's', toolCallId: 'c' }, { message: 'working' }),
      event('tool.progress', { ...turn, stepId: 's', toolCallId: 'c' }, { message: 'still working' }),
    ];
    expect(ticksSessionClock(events.at(-1) as RuntimeEvent)).toBe(true);
    const rebuilt = replay(events);
    expect(rebuilt).toEqual(incremental(events));
    expect(rebuilt.session?.lastSequence).toBe(events.length);
    expect(rebuilt.threads.get('thr_a')?.lastSequence).toBe(events.length);
    expect(rebuilt.session?.usage.inputTokens).toBe(3);
  });

  it('equals the incremental models when a change follows the ticks, and for a thread an event never touches', () => {
    const events = [
      ...opening(),
      event('tool.progress', { ...turn, stepId: 's', toolCallId: 'c' }, { message: 'working' }),
      event('thread.started', { threadId: 'thr_b' }, { agent: 'main' }),
      event('cost.recorded', turn, { amount: 0.25 }),
      event('turn.completed', { ...turn, status: 'completed' } as Partial<RuntimeEvent>, { answer: 'done' }),
    ];
    const rebuilt = replay(events);
    expect(rebuilt).toEqual(incremental(events));
    expect(rebuilt.threads.get('thr_a')?.updatedAt).toBe(events.at(-1)?.timestamp);
    expect(rebuilt.threads.get('thr_b')?.lastSequence).toBe(6);
    expect(rebuilt.session?.cost?.amount).toBe(0.25);
  });

  it('an event type that names an Object method changes nothing but the clock, on both paths', () => {
    const events = [...opening(), event('toString', turn), event('constructor', turn)];
    const rebuilt = replay(events);
    expect(rebuilt).toEqual(incremental(events));
    expect(rebuilt.session).toMatchObject({ sessionId: 'ses_clock', lastSequence: events.length });
  });

  it('leaves nothing when the session never started, like the incremental path', () => {
    sequence = 0;
    const events = [event('tool.progress', { threadId: 'thr_x', turnId: 't', stepId: 's', toolCallId: 'c' })];
    expect(replay(events)).toEqual(incremental(events));
  });
});
