import { existsSync, mkdtempSync, readFileSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { expect, it } from 'vitest';
import { z } from 'zod';
import { type AnyTool, defineTool, ToolRegistry, workspaceTools } from '../../src/index.js';
import { sessionLeases } from '../../src/store/leases.js';
import type { Store } from '../../src/store/store.js';
import { describeStores, type StoreFactory, type TestDatabase } from '../support/stores.js';
import { removeAfterFile } from '../support/temp-dirs.js';
import { harness } from './harness.js';
import {
  act,
  answer,
  cancellableTool,
  ofType,
  payload,
  READ_ONLY_TEST_TOOL,
  recordingModel,
  registryWith,
  sideEffectTool,
  sleep,
  waitFor,
} from './helpers.js';

/**
 * Control plane and workers joined only by the event log: several runtimes on one store (in one process here;
 * the CLI tests do it with processes) — commands from one, work by another, one writer per thread, interrupts as
 * durable facts, bindings that travel with the session.
 */

/** A non-idempotent tool that counts its executions per label. */
function countingTool(calls: Map<string, number>, ms = 20): AnyTool {
  return sideEffectTool('count', 'Counts a side effect.', async (input) => {
    calls.set(input.label, (calls.get(input.label) ?? 0) + 1);
    await new Promise((resolve) => setTimeout(resolve, ms));
    return `counted ${input.label}`;
  });
}

const countScript = {
  steps: [
    act([
      { id: 'a', type: 'tool', name: 'count', args: { label: 'a' } },
      { id: 'b', type: 'tool', name: 'count', args: { label: 'b' }, depends: 'a' },
    ]),
    answer('counted'),
  ],
};

function gapFree(events: RuntimeEvent[]): boolean {
  return events.every((event, index) => event.sequence === index + 1);
}

/**
 * Two runtimes on one database. In one process SQLite is shared through one Store (one connection: better-sqlite3
 * is synchronous, so two connections of one thread would wait on each other's locks); PostgreSQL gets a pool each.
 */
async function secondStore(db: TestDatabase): Promise<Store> {
  return db.dialect === 'sqlite' ? db.store : db.open();
}

async function two(factory: StoreFactory, options: Parameters<typeof harness>[1] = {}, second = options) {
  const db = await factory.fresh();
  const a = await harness(countScript, { ...options, store: db.store });
  const b = await harness(countScript, { ...second, store: await secondStore(db) });
  factory.defer(async () => {
    await a.runtime.close();
    await b.runtime.close();
  });
  return { db, a, b };
}

describeStores('workers on one store', (factory) => {
  it('two runtimes with workers share the store: every turn is driven once, nothing runs twice', async () => {
    const calls = new Map<string, number>();
    const tools = registryWith(countingTool(calls));
    const { a, b } = await two(factory, { tools, permissions: { mode: 'bypass' } });
    const sessions: string[] = [];
    for (let i = 0; i < 6; i++) {
      const via = i % 2 === 0 ? a.runtime : b.runtime;
      const { sessionId } = await via.createSession();
      sessions.push(sessionId);
    }
    await Promise.all(
      sessions.map((sessionId, i) => (i % 2 === 0 ? a : b).runtime.submitTurn({ sessionId, input: 'go' })),
    );
    for (const sessionId of sessions) {
      await a.runtime.settled(sessionId);
      await b.runtime.settled(sessionId);
    }
    // Each session ran a and b once: 6 executions of each label in total, never more.
    expect(calls.get('a')).toBe(6);
    expect(calls.get('b')).toBe(6);
    for (const sessionId of sessions) {
      const events = await a.runtime.log.read(sessionId);
      expect(gapFree(events)).toBe(true);
      expect(ofType(events, 'turn.completed')).toHaveLength(1);
      expect(ofType(events, 'tool.result')).toHaveLength(2);
      expect(await a.runtime.replaySession(sessionId)).toMatchObject({ equal: true, contradictions: [] });
      // Idle again: no lease is held once the session settled.
      const leases = await sessionLeases(a.store.db, sessionId);
      expect([...leases.values()].every((lease) => lease.holder === undefined)).toBe(true);
    }
  });

  it('a control plane without a worker submits; a worker elsewhere hears of it and drives the turn', async () => {
    const calls = new Map<string, number>();
    const tools = registryWith(countingTool(calls));
    const { a, b } = await two(
      factory,
      { tools, permissions: { mode: 'bypass' }, worker: false },
      { tools, permissions: { mode: 'bypass' } },
    );
    expect(a.runtime.worker).toBeUndefined();
    const { sessionId } = await a.runtime.createSession();
    const seen: RuntimeEvent[] = [];
    const controller = new AbortController();
    const following = (async () => {
      for await (const event of a.runtime.subscribe(sessionId, { signal: controller.signal })) {
        seen.push(event);
        if (event.type === 'turn.completed') controller.abort();
      }
    })();
    await a.runtime.submitTurn({ sessionId, input: 'go' });
    await following;
    expect(calls.get('a')).toBe(1);
    expect(seen.map((e) => e.sequence)).toEqual(seen.map((_, i) => i + 1));
    expect(ofType(seen, 'turn.completed')).toHaveLength(1);
    // The worker wrote everything after the submit, the control plane nothing but its command.
    const leases = await sessionLeases(b.store.db, sessionId);
    expect(leases.size).toBe(1);
  });

  it('an interrupt is a durable request: the worker that holds the thread stops its work and records it', async () => {
    const timeline: string[] = [];
    const script = {
      steps: [act([{ id: 's', type: 'tool', name: 'slow_cancel', args: { label: 's' } }]), answer('after')],
    };
    const db = await factory.fresh();
    const tools = registryWith(cancellableTool(timeline, 30_000));
    const control = await harness(script, { store: db.store, tools, worker: false });
    const worker = await harness(script, { store: await secondStore(db), tools });
    factory.defer(async () => {
      await control.runtime.close();
      await worker.runtime.close();
    });
    const { sessionId, threadId } = await control.runtime.createSession();
    const { turnId } = await control.runtime.submitTurn({ sessionId, input: 'go' });
    await waitFor(async () => timeline.includes('start:s'), 10_000);
    const result = await control.runtime.interruptTurn({ sessionId, reason: 'stop it' });
    expect(result).toEqual({ interrupted: true, turnId, status: 'cancelled' });
    const events = await control.runtime.log.read(sessionId);
    const requested = events.find((e) => e.type === 'thread.updated' && payload(e).interrupt !== undefined);
    const failed = ofType(events, 'turn.failed')[0];
    expect(requested).toBeDefined();
    expect(failed?.status).toBe('cancelled');
    expect((failed?.sequence ?? 0) > (requested?.sequence ?? 0)).toBe(true);
    expect(timeline).toEqual(['start:s']);
    const read = await control.runtime.getThreadRead({ sessionId, threadId });
    expect(read.status).toBe('idle');
  });

  it('an interrupt of a thread nobody drives (waiting for a decision) is recorded by the command itself', async () => {
    const script = {
      steps: [act([{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'x.txt', content: 'x' } }])],
    };
    const db = await factory.fresh();
    const h = await harness(script, { store: db.store });
    factory.defer(() => h.runtime.close());
    const { sessionId } = await h.runtime.createSession();
    const { turnId } = await h.runtime.submitTurn({ sessionId, input: 'write it' });
    await h.runtime.settled(sessionId);
    const { snapshot } = await h.runtime.getSession({ sessionId, limit: 0 });
    expect(snapshot.threads[0]?.pendingRequests).toHaveLength(1);
    // No worker anywhere: only the command can record the cancellation, and it does so at once.
    await h.runtime.close();
    const control = await harness(script, { store: await secondStore(db), worker: false });
    factory.defer(() => control.runtime.close());
    const result = await control.runtime.interruptTurn({ sessionId, waitMs: 0 });
    expect(result).toEqual({ interrupted: true, turnId, status: 'cancelled' });
    const after = await control.runtime.getSession({ sessionId, limit: 0 });
    expect(after.snapshot.threads[0]?.pendingRequests).toEqual([]);
    expect(after.snapshot.threads[0]?.status).toBe('idle');
    expect(ofType(await control.runtime.log.read(sessionId), 'turn.failed')[0]?.status).toBe('cancelled');
    expect(existsSync(join(h.workspace, 'x.txt'))).toBe(false);
  });

  it('close() releases the leases at once: another runtime continues without waiting for an expiry', async () => {
    const calls = new Map<string, number>();
    const slow = defineTool<{ label: string }>({
      name: 'slow_idem',
      description: 'Slow and idempotent.',
      input: z.strictObject({ label: z.string() }),
      ...READ_ONLY_TEST_TOOL,
      async execute(input, context) {
        calls.set(input.label, (calls.get(input.label) ?? 0) + 1);
        // The first call hangs until the closing runtime aborts it (helpers' sleep honours the signal).
        if (calls.get(input.label) === 1) await sleep(30_000, context.signal);
        return { text: 'done' };
      },
    });
    const script = {
      steps: [act([{ id: 'x', type: 'tool', name: 'slow_idem', args: { label: 'x' } }]), answer('resumed')],
    };
    const db = await factory.fresh();
    const tools = new ToolRegistry([...workspaceTools(), slow]);
    // A long lease: if close() did not release it, the second runtime could not continue within the test.
    const first = await harness(script, { store: db.store, tools, worker: { leaseTtlMs: 600_000 } });
    const { sessionId } = await first.runtime.createSession();
    await first.runtime.submitTurn({ sessionId, input: 'go' });
    await waitFor(async () => calls.get('x') === 1, 10_000);
    await first.runtime.close();
    const leases = await sessionLeases(db.store.db, sessionId);
    expect([...leases.values()].every((lease) => lease.holder === undefined)).toBe(true);
    const second = await harness(script, { store: await secondStore(db), tools });
    factory.defer(() => second.runtime.close());
    await second.runtime.settled(sessionId);
    const events = await second.runtime.log.read(sessionId);
    expect(ofType(events, 'turn.completed')[0]?.payload).toMatchObject({ answer: 'resumed' });
    expect(calls.get('x')).toBe(2);
  });

  it('a worker with a concurrency bound shares it: between two turns of one thread, a waiting thread goes first', async () => {
    // Every turn is one model step that answers after a moment; a thread's first one lasts long enough for every
    // other submit to land while it runs, however loaded the machine.
    const slowAnswer = (message: string, delayMs = 150) => ({ delayMs, protocol: { kind: 'answer', message } });
    const script = { steps: [slowAnswer('one', 2000), slowAnswer('two'), slowAnswer('three')] };
    const db = await factory.fresh();
    const h = await harness(script, { store: db.store, worker: { concurrency: 1 } });
    factory.defer(() => h.runtime.close());
    const busy = await h.runtime.createSession();
    const other = await h.runtime.createSession();
    // The busy session gets three turns (two queued behind the first), the other one turn, submitted last.
    const first = await h.runtime.submitTurn({ sessionId: busy.sessionId, input: 'first' });
    await waitFor(async () => h.runtime.worker?.isDriving(first.threadId) === true, 10_000);
    await h.runtime.submitTurn({ sessionId: busy.sessionId, input: 'second' });
    await h.runtime.submitTurn({ sessionId: busy.sessionId, input: 'third' });
    const lone = await h.runtime.submitTurn({ sessionId: other.sessionId, input: 'lone' });
    await h.runtime.settled(busy.sessionId);
    await h.runtime.settled(other.sessionId);
    // When each turn started, across both sessions: the lone turn started right after the first, not after all three.
    const started = [...(await h.runtime.log.read(busy.sessionId)), ...(await h.runtime.log.read(other.sessionId))]
      .filter((e) => e.type === 'turn.started')
      .sort((x, y) => Date.parse(x.timestamp) - Date.parse(y.timestamp))
      .map((e) => (e.sessionId === other.sessionId ? 'lone' : e.turnId === first.turnId ? 'first' : 'later'));
    const dump = [...(await h.runtime.log.read(busy.sessionId)), ...(await h.runtime.log.read(other.sessionId))]
      .filter((e) => e.type.startsWith('turn.'))
      .map((e) => `${e.timestamp} ${e.sessionId === other.sessionId ? 'O' : 'B'} ${e.type} ${e.turnId}`)
      .sort()
      .join('\n');
    expect(started, dump).toEqual(['first', 'lone', 'later', 'later']);
    const lastOf = async (sessionId: string) => ofType(await h.runtime.log.read(sessionId), 'turn.completed');
    expect(await lastOf(busy.sessionId)).toHaveLength(3);
    expect((await lastOf(other.sessionId))[0]?.turnId).toBe(lone.turnId);
  });
});

describeStores('session bindings', (factory) => {
  it('a session keeps its workspace and tools when another runtime with other defaults continues it', async () => {
    const script = {
      steps: [
        act([{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'bound.txt', content: 'bound' } }]),
        answer('written'),
      ],
    };
    const db = await factory.fresh();
    const first = await harness(script, { store: db.store });
    const { sessionId } = await first.runtime.createSession();
    await first.runtime.submitTurn({ sessionId, input: 'write' });
    await first.runtime.settled(sessionId);
    await first.runtime.close();
    const elsewhere = removeAfterFile(mkdtempSync(join(tmpdir(), 'oar-elsewhere-')));
    const second = await harness(script, { store: await secondStore(db), workspaceRoot: elsewhere });
    factory.defer(() => second.runtime.close());
    const bound = await second.runtime.getBinding(sessionId);
    expect(bound?.binding.workspaceRoot).toBe(realpathSync(first.workspace));
    const { snapshot } = await second.runtime.getSession({ sessionId, limit: 0 });
    const actionId = snapshot.threads[0]?.pendingRequests[0]?.actionId ?? '';
    await second.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    await second.runtime.settled(sessionId);
    expect(readFileSync(join(first.workspace, 'bound.txt'), 'utf8')).toBe('bound');
    expect(existsSync(join(elsewhere, 'bound.txt'))).toBe(false);
  });

  it('a binding update is recorded and applies from the next turn; the running turn keeps its binding', async () => {
    const script = { steps: [answer('one'), answer('two')] };
    const db = await factory.fresh();
    const h = await harness(script, { store: db.store });
    factory.defer(() => h.runtime.close());
    const { sessionId } = await h.runtime.createSession();
    const before = await h.runtime.getBinding(sessionId);
    await h.runtime.submitTurn({ sessionId, input: 'first' });
    await h.runtime.settled(sessionId);
    const updated = await h.runtime.updateBinding({ sessionId, update: { limits: { maxSteps: 3 } } });
    expect(updated.changed).toEqual(['limits']);
    expect(updated.bindingHash).not.toBe(before?.bindingHash);
    expect((await h.runtime.updateBinding({ sessionId, update: { limits: { maxSteps: 3 } } })).changed).toEqual([]);
    await h.runtime.submitTurn({ sessionId, input: 'second' });
    await h.runtime.settled(sessionId);
    const events = await h.runtime.log.read(sessionId);
    const started = ofType(events, 'turn.started').map((e) => payload(e).bindingHash);
    expect(started).toEqual([before?.bindingHash, updated.bindingHash]);
    expect(ofType(events, 'session.updated').map((e) => payload(e).changed)).toEqual([['binding.limits']]);
    expect((await h.runtime.getBinding(sessionId))?.binding.limits.maxSteps).toBe(3);
  });

  it('a delegated child turn runs with the binding of the turn that delegated it, not a later one', async () => {
    const recorder = recordingModel({
      steps: [
        act([
          { id: 'w', type: 'tool', name: 'write', args: { filePath: 'first.txt', content: 'x' } },
          { id: 'ask', type: 'agent', name: 'helper', args: { prompt: 'help' }, depends: 'w' },
        ]),
        answer('parent done'),
      ],
      agents: { helper: { steps: [answer('helped')] } },
    });
    const helper = { name: 'helper', description: 'Helps', capabilities: ['help'], carrier: 'tool' as const };
    const db = await factory.fresh();
    const h = await harness({ steps: [] }, { store: db.store, agents: [helper], model: recorder.model });
    factory.defer(() => h.runtime.close());
    const { sessionId } = await h.runtime.createSession();
    const bound = (await h.runtime.getBinding(sessionId))?.bindingHash;
    await h.runtime.submitTurn({ sessionId, input: 'write, then ask the helper' });
    await h.runtime.settled(sessionId);
    // The parent waits for the write's approval: the binding changes now, before the delegation happens.
    const updated = await h.runtime.updateBinding({ sessionId, update: { limits: { maxSteps: 9 } } });
    const { snapshot } = await h.runtime.getSession({ sessionId, limit: 0 });
    const actionId = snapshot.threads[0]?.pendingRequests[0]?.actionId ?? '';
    await h.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    await h.runtime.settled(sessionId);
    const events = await h.runtime.log.read(sessionId);
    const started = ofType(events, 'turn.started').map((e) => [e.threadId, payload(e).bindingHash]);
    expect(started).toHaveLength(2);
    // Both the parent's turn and the child's delegated turn ran with the binding current when the parent started.
    expect(started.map(([, hash]) => hash)).toEqual([bound, bound]);
    expect(updated.bindingHash).not.toBe(bound);
    expect(ofType(events, 'turn.completed')).toHaveLength(2);
  });

  it('a session bound to a tool this process does not have fails its turn with binding_unavailable', async () => {
    const script = { steps: [answer('never')] };
    const db = await factory.fresh();
    const calls = new Map<string, number>();
    const first = await harness(script, { store: db.store, tools: registryWith(countingTool(calls)), worker: false });
    const { sessionId } = await first.runtime.createSession();
    await first.runtime.close();
    const second = await harness(script, { store: await secondStore(db) });
    factory.defer(() => second.runtime.close());
    await second.runtime.submitTurn({ sessionId, input: 'go' });
    await second.runtime.settled(sessionId);
    const failed = ofType(await second.runtime.log.read(sessionId), 'turn.failed')[0];
    expect(payload(failed).error).toMatchObject({ code: 'binding_unavailable', details: { tool: 'count' } });
  });
});
