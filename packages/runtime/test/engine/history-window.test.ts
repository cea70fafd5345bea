import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { Runtime } from '../../src/index.js';
import { assertSnapshotConforms, eventProblems } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { allEvents, answer, errorCode } from './helpers.js';

/**
 * Acceptance scenario 10 of the Agent Runtime standard, old session recovery: "given an old session with many
 * messages, the runtime returns a shell and recent window first, then exposes older history through cursors and
 * details on demand" — get_session's window, recent first, paged backwards; after a restart, the same.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

describe('acceptance scenario 10: old session recovery', () => {
  it('returns the shell and the recent window first, then older pages through cursors, after a restart too', async () => {
    const turns = 12;
    h = await harness({ steps: Array.from({ length: turns }, (_, i) => answer(`Answer ${i + 1}.`)) });
    const { sessionId, threadId } = await h.runtime.createSession({ title: 'Long one' });
    for (let i = 0; i < turns; i++) {
      await h.runtime.submitTurn({ sessionId, input: `question ${i + 1}` });
      await h.runtime.settled(sessionId);
    }
    const all = await allEvents(h, sessionId);
    await h.runtime.close();
    // A later process opens the old session: nothing of it is in memory.
    const later = await Runtime.create({
      store: h.store,
      workspaceRoot: h.workspace,
      worker: false,
      model: () => {
        throw new Error('reading calls no model');
      },
    });
    try {
      const first = await later.getSession({ sessionId, limit: 10 });
      // The shell: title, every thread and turn with its status and outcome, the history's extent.
      expect(first.snapshot.title).toBe('Long one');
      expect(first.snapshot.threads.find((t) => t.threadId === threadId)?.turns).toHaveLength(turns);
      assertSnapshotConforms(first.snapshot);
      expect(first.sequence).toBe(all.length);
      // The recent window first: the last ten events, oldest of them first.
      expect(first.events.map((e) => e.sequence)).toEqual(all.slice(-10).map((e) => e.sequence));
      expect(first.previousCursor).toBe(all.length - 9);
      expect(first.snapshot.historySummary).toEqual({
        eventCount: all.length,
        firstSequence: 1,
        lastSequence: all.length,
      });
      expect(first.nextCursor).toBe(all.length);
      // Older history on demand: page back until the first event; nothing missed, nothing twice.
      const pages: RuntimeEvent[][] = [first.events];
      let before = first.previousCursor;
      while (before !== null) {
        const page = await later.getSession({ sessionId, before, limit: 10 });
        expect(page.events.length).toBeGreaterThan(0);
        expect(page.events.at(-1)?.sequence).toBe(before - 1);
        pages.unshift(page.events);
        before = page.previousCursor;
      }
      expect(pages.flat().map((e) => e.eventId)).toEqual(all.map((e) => e.eventId));
      // The recent window is the snapshot's own; an older page is history served from the log, said so.
      expect(first.window).toBeUndefined();
      expect(pages[0]?.[0]?.type).toBe('session.created');
      // Forward from a cursor, as a stream resumes; a window past the end is empty, not an error.
      const forward = await later.getSession({ sessionId, cursor: 3, limit: 2 });
      expect(forward.events.map((e) => e.sequence)).toEqual([4, 5]);
      expect(forward.nextCursor).toBe(5);
      expect(forward.window).toBeUndefined();
      expect((await later.getSession({ sessionId, before: 1 })).events).toEqual([]);
      expect(await errorCode(later.getSession({ sessionId, before: -1 }))).toBe('invalid_input');
    } finally {
      await later.close();
    }
  });

  it('says an older page was served from the log with a live-only history.window.loaded, and writes nothing', async () => {
    h = await harness({ steps: Array.from({ length: 3 }, (_, i) => answer(`Answer ${i + 1}.`)) });
    const { sessionId } = await h.runtime.createSession({ title: 'Paged' });
    for (let i = 0; i < 3; i++) {
      await h.runtime.submitTurn({ sessionId, input: `question ${i + 1}` });
      await h.runtime.settled(sessionId);
    }
    const all = await allEvents(h, sessionId);
    const last = all.length;
    const page = await h.runtime.getSession({ sessionId, before: last - 4, limit: 5 });
    const window = page.window as RuntimeEvent;
    // A whole event of the published core and Lime profile schemas and of OAR's profile (its payload typed).
    expect(eventProblems(window)).toEqual([]);
    expect(window).toMatchObject({ type: 'history.window.loaded', sessionId, sequence: last });
    expect(window.payload).toEqual({
      eventCount: 5,
      before: last - 4,
      limit: 5,
      fromSequence: last - 9,
      toSequence: last - 5,
      previousCursor: last - 9,
      lastSequence: last,
    });
    expect(page.events.map((e) => e.sequence)).toEqual([5, 4, 3, 2, 1].map((n) => last - 4 - n));
    // The first page says where the history starts; a page before the first event holds none.
    const oldest = (await h.runtime.getSession({ sessionId, before: 3, limit: 5 })).window;
    expect(oldest?.payload).toMatchObject({ eventCount: 2, fromSequence: 1, toSequence: 2, previousCursor: null });
    const empty = (await h.runtime.getSession({ sessionId, before: 1 })).window;
    expect(empty?.payload).toEqual({ eventCount: 0, before: 1, limit: 200, previousCursor: null, lastSequence: last });
    // A read: the log did not grow, and the answer's event is not in it.
    const after = await allEvents(h, sessionId);
    expect(after).toHaveLength(last);
    expect(after.some((e) => e.type === 'history.window.loaded')).toBe(false);
  });
});
