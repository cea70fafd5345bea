import type { RuntimeEvent } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { rollbackChange } from '../../src/read-models/rollback.js';
import { nextTurn, type ThreadState } from '../../src/read-models/thread-state.js';

/** What history.rollback.* do to a thread's read model (read-models/rollback.ts). */
const turn = (turnId: string, status: 'completed' | 'accepted' = 'completed') =>
  ({ turnId, status, input: turnId, submittedAt: 't', modelSteps: 0, correctiveRetries: 0, runIds: [] }) as never;

function thread(extra: Partial<ThreadState> = {}): ThreadState {
  return {
    threadId: 'thr_1',
    sessionId: 'ses_1',
    agent: 'main',
    depth: 0,
    status: 'idle',
    createdAt: 't',
    updatedAt: 't',
    turns: [turn('turn_1'), turn('turn_2'), turn('turn_3')],
    queue: [],
    pending: [],
    modelCalls: 3,
    state: {},
    incidents: [],
    subagents: [],
    lastSequence: 10,
    ...extra,
  };
}

const event = (type: string, payload: Record<string, unknown>) =>
  ({
    type,
    threadId: 'thr_1',
    sessionId: 'ses_1',
    sequence: 11,
    timestamp: 'now',
    eventId: 'e',
    payload,
  }) as RuntimeEvent;

const boundary = (throughTurnId: string) => ({
  compactionId: 'cmp_1',
  trigger: 'threshold',
  throughTurnId,
  turnCount: 2,
  summaryRef: 'artifact://art_1',
  summaryPreview: '',
  summarySource: 'model',
  tokensBefore: 10,
  tokensAfter: 2,
  at: 't',
});

describe('the rollback reducer', () => {
  it('holds the thread while under way: no turn starts, not even an accepted one', () => {
    const held = rollbackChange(
      thread({ turns: [turn('turn_1'), turn('turn_2'), turn('turn_9', 'accepted')] }),
      event('history.rollback.started', { rollbackId: 'rbk_1', targetTurnId: 'turn_2', removedTurns: ['turn_2'] }),
    );
    expect(held.rollback).toMatchObject({ rollbackId: 'rbk_1', removedTurns: ['turn_2'], startedAt: 'now' });
    expect(nextTurn(held)).toBeUndefined();
    const done = rollbackChange(held, event('history.rollback.completed', { removedTurns: ['turn_2'] }));
    expect(done.rollback).toBeUndefined();
    expect(done.turns.map((t) => t.turnId)).toEqual(['turn_1', 'turn_9']);
    expect(nextTurn(done)).toMatchObject({ turnId: 'turn_9' });
  });

  it('drops a compaction boundary that covered a removed turn, keeps one that did not', () => {
    const cut = rollbackChange(
      thread({ compaction: boundary('turn_2') }),
      event('history.rollback.completed', { removedTurns: ['turn_2', 'turn_3'] }),
    );
    expect(cut.compaction).toBeUndefined();
    expect(cut.turns.map((t) => t.turnId)).toEqual(['turn_1']);
    const kept = rollbackChange(
      thread({ compaction: boundary('turn_1') }),
      event('history.rollback.completed', { removedTurns: ['turn_3'] }),
    );
    expect(kept.compaction?.throughTurnId).toBe('turn_1');
    expect(kept.turns.map((t) => t.turnId)).toEqual(['turn_1', 'turn_2']);
  });

  it('ignores a malformed start', () => {
    const state = thread();
    expect(rollbackChange(state, event('history.rollback.started', { removedTurns: ['turn_2'] }))).toBe(state);
  });
});
