import { afterEach, describe, expect, it } from 'vitest';
import { type Harness, harness } from '../engine/harness.js';
import { answer, waitForEvent } from '../engine/helpers.js';
import { assertSnapshotConforms } from '../support/schemas.js';

/**
 * `stale` (the standard's status for a snapshot that may not be the current execution state): a thread whose worker
 * went silent past its lease, and nobody has taken it over, is shown stale with whose lease ran out — not running.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

describe('a thread whose worker went silent', () => {
  it('is stale in the thread read model and the session snapshot, naming the holder and since when', async () => {
    h = await harness({ steps: [{ ...answer('slow'), delayMs: 3_000 }] }, { worker: { leaseTtlMs: 60_000 } });
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'take your time' });
    await waitForEvent(h, sessionId, 'model.requested');
    expect((await h.runtime.getThreadRead({ sessionId, threadId })).status).toBe('running');

    // The worker's renewals stop reaching the store: its lease runs out (here: it is made to have run out).
    const past = Date.now() - 5_000;
    await h.store.db
      .updateTable('oar_thread_leases')
      .set({ expires_at: past })
      .where('session_id', '=', sessionId)
      .execute();
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.status).toBe('stale');
    expect(read.stale).toMatchObject({ owner: expect.any(String), since: new Date(past).toISOString() });
    const { snapshot } = await h.runtime.getSession({ sessionId, limit: 0 });
    expect(snapshot.threads[0]).toMatchObject({ status: 'stale', stale: read.stale });
    assertSnapshotConforms(snapshot);
    await h.runtime.interruptTurn({ sessionId, threadId, waitMs: 0 });
  });
});
