import { describe, expect, it } from 'vitest';
import { timeOrderedId } from '../../src/log/event-ids.js';
import { EventLog } from '../../src/log/event-log.js';
import { describeStores } from '../support/stores.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/**
 * Event ids follow time (UUID v7), so the unique index on `event_id` grows at its end instead of at a random leaf
 * per event (a dozen dirtied pages per step, each written to the WAL at every commit). They must stay unique and
 * well-formed UUIDs.
 */
describe('time-ordered event ids', () => {
  it('are UUIDs of version 7, unique, whose first 48 bits are the time in ms', () => {
    const before = Date.now();
    const ids = Array.from({ length: 5_000 }, () => timeOrderedId());
    const after = Date.now();
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) {
      expect(id).toMatch(UUID_V7);
      const ms = Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16);
      expect(ms).toBeGreaterThanOrEqual(before);
      expect(ms).toBeLessThanOrEqual(after);
    }
  });

  it('sort by the time they were made: an id made a millisecond later sorts after', async () => {
    const first = timeOrderedId();
    const started = Date.now();
    while (Date.now() === started) await new Promise((resolve) => setTimeout(resolve, 1));
    const second = timeOrderedId();
    expect(second > first).toBe(true);
  });
});

describeStores('event ids in the log', (factory) => {
  it('the log gives appended events time-ordered ids, unless the draft names its own', async () => {
    const { store } = await factory.fresh();
    const log = new EventLog(store, 'rt_ids');
    const [created] = await log.createSession('ses_ids', 'ids', [{ type: 'session.created', payload: {} }]);
    expect(created?.eventId).toMatch(UUID_V7);
    const appended = await log.append('ses_ids', [
      { type: 'runtime.warning', payload: { code: 'a', message: 'a', retryable: false } },
      {
        type: 'runtime.warning',
        eventId: 'evt_given',
        payload: { code: 'b', message: 'b', retryable: false },
      } as never,
    ]);
    expect(appended[0]?.eventId).toMatch(UUID_V7);
    expect(appended[1]?.eventId).toBe('evt_given');
    const stored = await log.read('ses_ids');
    expect(stored.map((e) => e.eventId)).toEqual([created?.eventId, appended[0]?.eventId, 'evt_given']);
  });
});
