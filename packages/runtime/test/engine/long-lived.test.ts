import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import type { Runtime } from '../../src/index.js';
import { type EventDraft, EventLog, Notifier, type SessionChange, Store } from '../../src/index.js';
import { describeStores } from '../support/stores.js';
import { removeAfterFile } from '../support/temp-dirs.js';
import { type Harness, harness } from './harness.js';
import { act, answer, ofType, payload, sleep, waitFor } from './helpers.js';

/**
 * A runtime in a long-lived process: what it remembers per session and per binding stays bounded, it hears every
 * other writer whatever that writer's clock says, and waiting for a session has no side effects.
 */

/** Make an event log stamp its writes with a clock that is off by `skewMs` (another machine's clock). */
function skewClock(log: EventLog, skewMs: number): void {
  (log as unknown as { now: () => Date }).now = () => new Date(Date.now() + skewMs);
}

const configsOf = (runtime: Runtime) => (runtime as unknown as { configs: Map<string, unknown> }).configs;
const knownOf = (runtime: Runtime) => (runtime.notifier as unknown as { known: Map<string, number> }).known;

describe('many sessions in one runtime', () => {
  const open: Harness[] = [];
  afterEach(async () => {
    for (const h of open.splice(0)) {
      await h.runtime.close();
      await h.store.close();
    }
  });

  it('keeps per-session and per-binding state bounded; a forgotten session is rebuilt from the store', async () => {
    const h = await harness({ steps: [answer('one'), answer('two')] }, { caches: { sessions: 8, bindings: 4 } });
    open.push(h);
    const sessions: { sessionId: string; bindingHash: string }[] = [];
    for (let i = 0; i < 24; i++) {
      // Each session its own binding: one runnable configuration each.
      const created = await h.runtime.createSession({ binding: { limits: { maxSteps: 20 + i } } });
      sessions.push(created);
      await h.runtime.submitTurn({ sessionId: created.sessionId, input: `turn of session ${i}` });
      await h.runtime.settled(created.sessionId);
      expect(configsOf(h.runtime).size).toBeLessThanOrEqual(4);
      expect(knownOf(h.runtime).size).toBeLessThanOrEqual(8);
    }
    const [first] = sessions;
    if (!first) throw new Error('no session');
    expect(configsOf(h.runtime).has(first.bindingHash)).toBe(false);
    expect(knownOf(h.runtime).has(first.sessionId)).toBe(false);

    // The first session was forgotten by both: its next turn runs with its own binding, rebuilt from the log.
    await h.runtime.submitTurn({ sessionId: first.sessionId, input: 'second turn' });
    await h.runtime.settled(first.sessionId);
    const events = await h.runtime.log.read(first.sessionId);
    expect(ofType(events, 'turn.completed').map((e) => payload(e).answer)).toEqual(['one', 'two']);
    expect(ofType(events, 'turn.started').map((e) => payload(e).bindingHash)).toEqual([
      first.bindingHash,
      first.bindingHash,
    ]);
    expect((await h.runtime.getBinding(first.sessionId))?.binding.limits.maxSteps).toBe(20);
    expect((await h.runtime.replaySession(first.sessionId)).differences).toEqual([]);
    expect(configsOf(h.runtime).size).toBeLessThanOrEqual(4);
    expect(knownOf(h.runtime).size).toBeLessThanOrEqual(8);
  });
});

describeStores('the notifier and writers with other clocks', (factory) => {
  it('hears every change of a writer whose clock is behind or ahead, once', async () => {
    const db = await factory.fresh();
    // Poll only (no LISTEN on PostgreSQL): the store's own commit order must be enough.
    const notifier = new Notifier(new EventLog(db.store, 'rt_observer'), { pollMs: 50, listen: false });
    factory.defer(() => notifier.close());
    const heard: SessionChange[] = [];
    notifier.listen((change) => heard.push(change));
    await sleep(150);
    const writerStore = db.dialect === 'sqlite' ? db.store : await db.open();
    const behind = new EventLog(writerStore, 'rt_behind');
    skewClock(behind, -3_600_000);
    const ahead = new EventLog(writerStore, 'rt_ahead');
    skewClock(ahead, 3_600_000);
    const note = (key: string): EventDraft => ({
      type: 'session.updated',
      payload: { changed: [`state.${key}`], state: { key, value: 1 } },
    });
    const heardOf = (sessionId: string, sequence: number) =>
      heard.filter((c) => c.sessionId === sessionId && c.sequence === sequence);

    await behind.createSession('ses_behind', undefined, [note('a')]);
    await ahead.createSession('ses_ahead', undefined, [note('a')]);
    await waitFor(async () => heardOf('ses_behind', 1).length > 0 && heardOf('ses_ahead', 1).length > 0, 5000);
    await behind.append('ses_behind', [note('b')]);
    await ahead.append('ses_ahead', [note('b')]);
    await waitFor(async () => heardOf('ses_behind', 2).length > 0 && heardOf('ses_ahead', 2).length > 0, 5000);
    // Several more polls: nothing is reported twice.
    await sleep(300);
    for (const sessionId of ['ses_behind', 'ses_ahead']) {
      expect(heardOf(sessionId, 1)).toHaveLength(1);
      expect(heardOf(sessionId, 2)).toHaveLength(1);
    }
  });
});

describe('two runtimes on one SQLite file with clocks that disagree', () => {
  it("a command written by the control plane with a clock an hour behind is driven by the other's worker", async () => {
    const dir = removeAfterFile(mkdtempSync(join(tmpdir(), 'oar-skew-')));
    const store = await Store.open(join(dir, 'oar.db'));
    const script = { steps: [answer('driven')] };
    const worker = await harness(script, { store });
    const control = await harness(script, { store, worker: false });
    try {
      skewClock(control.runtime.log, -3_600_000);
      const { sessionId } = await control.runtime.createSession();
      await control.runtime.submitTurn({ sessionId, input: 'go' });
      // Not settled(): waiting must not be what drives the turn. Only the worker hearing of it does.
      const completed = await waitFor(
        async () => (await control.runtime.log.read(sessionId)).find((e) => e.type === 'turn.completed'),
        5000,
      );
      expect(payload(completed as RuntimeEvent).answer).toBe('driven');
    } finally {
      await worker.runtime.close();
      await control.runtime.close();
      await store.close();
    }
  });
});

describeStores('settled() only waits', (factory) => {
  const writeScript = {
    steps: [act([{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'out.txt', content: 'x' } }]), answer('ok')],
  };

  /** A session whose turn waits for an approval, left by a runtime that is gone. */
  async function waitingSession() {
    const db = await factory.fresh();
    const first = await harness(writeScript, { store: db.store });
    const { sessionId, threadId } = await first.runtime.createSession();
    await first.runtime.submitTurn({ sessionId, input: 'write it' });
    await first.runtime.settled(sessionId);
    const { snapshot } = await first.runtime.getSession({ sessionId, limit: 0 });
    const actionId = snapshot.threads[0]?.pendingRequests[0]?.actionId;
    expect(actionId).toBeDefined();
    await first.runtime.close();
    const second = db.dialect === 'sqlite' ? db.store : await db.open();
    const control = await harness(writeScript, { store: second, worker: false });
    factory.defer(() => control.runtime.close());
    return { db, second, control, sessionId, threadId, actionId: actionId as string };
  }

  async function leaseRows(store: Store, sessionId: string) {
    return store.db
      .selectFrom('oar_thread_leases')
      .select(['thread_id', 'owner', 'token', 'idle_sequence'])
      .where('session_id', '=', sessionId)
      .orderBy('thread_id')
      .execute();
  }

  it('settled() on a session with nothing to do claims no lease and appends nothing', async () => {
    const { second, control, sessionId, threadId } = await waitingSession();
    // State set on the waiting thread moves its sequence, but gives nobody anything to do.
    await control.runtime.setState({ sessionId, threadId, key: 'note', value: 'inert' });
    const leases = await leaseRows(second, sessionId);
    const events = await control.runtime.log.read(sessionId);
    const waiter = await harness(writeScript, { store: second, resumeOnStart: false });
    factory.defer(() => waiter.runtime.close());
    await Promise.race([
      waiter.runtime.settled(sessionId),
      sleep(5000).then(() => {
        throw new Error('settled() did not resolve');
      }),
    ]);
    expect(await leaseRows(second, sessionId)).toEqual(leases);
    expect(await control.runtime.log.read(sessionId)).toEqual(events);
  });

  it('settled() sees through work nobody drives, in a session its worker drives (the documented exception)', async () => {
    const { second, control, sessionId, actionId } = await waitingSession();
    // Approved by a control plane while no worker runs: work nobody has heard of.
    await control.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    const waiter = await harness(writeScript, { store: second, resumeOnStart: false });
    factory.defer(() => waiter.runtime.close());
    await waiter.runtime.settled(sessionId);
    const events = await control.runtime.log.read(sessionId);
    expect(ofType(events, 'turn.completed').map((e) => payload(e).answer)).toEqual(['ok']);
  });
});
