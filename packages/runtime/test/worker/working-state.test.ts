import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { EventDraft } from '../../src/log/draft.js';
import { replay, threadView, updatedView } from '../../src/read-models/project.js';
import type { ThreadView } from '../../src/read-models/thread-state.js';
import { withStaged } from '../../src/worker/working-state.js';
import { type Harness, harness } from '../engine/harness.js';
import { act, answer } from '../engine/helpers.js';

/**
 * The views a long thread is read through are brought forward change by change, not rebuilt: a worker extends its
 * last working view by the facts staged since, and the log carries its cached views across writes. Both must equal
 * the view built from scratch, run order included.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const reads = (n: number) =>
  Array.from({ length: n }, (_, i) =>
    act([{ id: `r${i}`, type: 'tool', name: 'read', args: { filePath: 'README.md' } }]),
  );

/** The events of a real three-step turn on SQLite. */
async function turnEvents(): Promise<{ events: RuntimeEvent[]; threadId: string }> {
  h = await harness({ steps: [...reads(3), answer('done')] });
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'read three times' });
  await h.runtime.settled(sessionId);
  return { events: await h.runtime.log.read(sessionId), threadId };
}

/** An event as the draft its writer staged (without what the log assigns). */
function draftOf(event: RuntimeEvent): EventDraft {
  const { sessionId: _s, sequence: _q, runtimeId: _r, eventId: _e, timestamp: _t, schemaVersion: _v, ...draft } = event;
  return draft as EventDraft;
}

const runOrder = (view: ThreadView | undefined) => [...(view?.runs.keys() ?? [])];

describe('working view', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(new Date('2026-11-25T10:00:00.000Z'));
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('extending a working view by the facts staged since equals applying them all to the committed view', async () => {
    const { events, threadId } = await turnEvents();
    // Commit at the turn's start; stage everything after it (three steps: runs declared, tools run, observed).
    const cut = events.findIndex((e) => e.type === 'turn.started') + 1;
    const committed = threadView(replay(events.slice(0, cut)), threadId) as ThreadView;
    const staged = events.slice(cut).map(draftOf);
    const envelope = { runtimeId: events[0]?.runtimeId ?? '' };
    const whole = withStaged(committed, staged, envelope);
    for (const split of [1, 5, Math.floor(staged.length / 2), staged.length - 1]) {
      const first = withStaged(committed, staged.slice(0, split), envelope);
      const extended = withStaged(first, staged.slice(split), envelope);
      expect(extended).toEqual(whole);
      expect(runOrder(extended)).toEqual(runOrder(whole));
    }
    // And the working view holds what the log will: the same thread as replaying the committed events.
    const replayed = threadView(replay(events), threadId) as ThreadView;
    expect(whole.runs).toEqual(replayed.runs);
    expect(whole.turns.map((t) => t.runIds)).toEqual(replayed.turns.map((t) => t.runIds));
    expect(whole.lastSequence).toBe(replayed.lastSequence);
  });
});

describe('updatedView', () => {
  it('adds a new run last only when it is the thread’s latest; otherwise it joins the runs anew, in turn order', async () => {
    const { events, threadId } = await turnEvents();
    const models = replay(events);
    const full = threadView(models, threadId) as ThreadView;
    const [first, second, third] = runOrder(full);
    expect(third).toBeDefined();
    const run = (id: string | undefined) => full.runs.get(id ?? '') as NonNullable<ReturnType<typeof full.runs.get>>;

    // The latest run arrives: appended.
    const withoutLatest: ThreadView = { ...full, runs: new Map([...full.runs].filter(([id]) => id !== third)) };
    expect(runOrder(updatedView(withoutLatest, full, [run(third)]))).toEqual([first, second, third]);

    // A run that is not the latest arrives (a view that missed it): joined anew, so it keeps its place.
    const withoutMiddle: ThreadView = { ...full, runs: new Map([...full.runs].filter(([id]) => id !== second)) };
    const rejoined = updatedView(withoutMiddle, full, [run(second)]);
    expect(runOrder(rejoined)).toEqual([first, second, third]);
    expect(rejoined).toEqual(full);

    // A changed run replaces the old one in place; nothing changed keeps the same runs object.
    const changed = { ...run(first), status: 'failed' as const };
    const replaced = updatedView(full, full, [changed]);
    expect(runOrder(replaced)).toEqual([first, second, third]);
    expect(replaced.runs.get(first ?? '')).toBe(changed);
    expect(full.runs.get(first ?? '')).not.toBe(changed);
    expect(updatedView(full, full, []).runs).toBe(full.runs);
  });
});
