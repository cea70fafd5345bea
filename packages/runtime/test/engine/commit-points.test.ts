import type { RuntimeEvent } from '@oar/protocol';
import { TableNode } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { ToolRegistry, workspaceTools } from '../../src/index.js';
import { type Harness, harness } from './harness.js';
import { act, answer, sideEffectTool, slowReadTool, type Timeline } from './helpers.js';

/**
 * The worker's commit points (docs/engine.md, "The worker's working truth"): one commit per step for read-only
 * work, write-ahead commits around a non-idempotent side effect, and staged facts visible within 100 ms.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

/** Every commit of the session as the batch of events it wrote (one listener call per transaction). */
function commits(harness: Harness): RuntimeEvent[][] {
  const batches: RuntimeEvent[][] = [];
  harness.runtime.log.subscribe((events) => batches.push(events));
  return batches;
}

const reads = (n: number) =>
  Array.from({ length: n }, (_, i) =>
    act([{ id: `r${i}`, type: 'tool', name: 'read', args: { filePath: 'README.md' } }]),
  );

describe('commit points', () => {
  it('a step of read-only work is one commit: the previous step facts go with the next model request', async () => {
    // No linger commit in between, however slow the machine: the commit points alone decide.
    h = await harness({ steps: [...reads(5), answer('done')] }, { worker: { lingerMs: 60_000 } });
    const batches = commits(h);
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read five times' });
    await h.runtime.settled(sessionId);
    const requests = batches.filter((batch) => batch.some((e) => e.type === 'model.requested'));
    expect(requests).toHaveLength(6);
    // From the second request on, each commit carries the whole previous step: model output, graph, tool call.
    for (const batch of requests.slice(1)) {
      const kinds = batch.map((e) => e.type);
      for (const type of ['model.completed', 'run.status', 'tool.started', 'tool.result', 'task.completed']) {
        expect(kinds).toContain(type);
      }
      expect(kinds.at(-1)).toBe('model.requested');
    }
    // Submit, the turn's start, six step commits, the turn's end: nothing else was committed.
    expect(batches.length).toBeLessThanOrEqual(requests.length + 4);
    const events = await h.runtime.log.read(sessionId);
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a non-idempotent tool starts only once its start is in the store, and its end is committed right after', async () => {
    let startedInStore: boolean | undefined;
    let harnessRef: Harness | undefined;
    let session = '';
    const effect = sideEffectTool('effect', 'A side effect that must not run twice.', async () => {
      const events = (await harnessRef?.runtime.log.read(session)) ?? [];
      startedInStore = events.some((e) => e.type === 'tool.started');
      return 'done';
    });
    const tools = new ToolRegistry([...workspaceTools(), effect]);
    h = await harness(
      { steps: [act([{ id: 'e', type: 'tool', name: 'effect', args: { label: 'x' } }]), answer('ok')] },
      { tools, permissions: { mode: 'bypass' }, worker: { lingerMs: 60_000 } },
    );
    harnessRef = h;
    const batches = commits(h);
    session = (await h.runtime.createSession()).sessionId;
    await h.runtime.submitTurn({ sessionId: session, input: 'do it' });
    await h.runtime.settled(session);
    expect(startedInStore).toBe(true);
    const started = batches.findIndex((b) => b.some((e) => e.type === 'tool.started'));
    const ended = batches.findIndex((b) => b.some((e) => e.type === 'tool.result'));
    expect(batches[started]?.at(-1)?.type).toBe('tool.started');
    // The result is its own commit, not held until the next model request.
    expect(ended).toBe(started + 1);
    expect(batches[ended]?.some((e) => e.type === 'model.requested')).toBe(false);
  });

  it('durability by risk: read-only steps do not wait for the disk; a non-idempotent call, a question and the end do', async () => {
    const effect = sideEffectTool('effect', 'A side effect that must not run twice.', async () => 'done');
    const tools = new ToolRegistry([...workspaceTools(), effect]);
    h = await harness(
      {
        steps: [
          ...reads(3),
          act([{ id: 'e', type: 'tool', name: 'effect', args: { label: 'x' } }]),
          act([{ id: 'w', type: 'tool', name: 'write', args: { filePath: 'out.txt', content: 'hi' } }]),
          answer('ok'),
        ],
      },
      // `effect` runs unasked; `write` asks a person first (the question is a commit of its own).
      { tools, permissions: { rules: [{ decision: 'allow', tool: 'effect' }] }, worker: { lingerMs: 60_000 } },
    );
    const batches: { types: string[]; flushed: boolean; started?: RuntimeEvent }[] = [];
    h.runtime.log.subscribe((events, origin) =>
      batches.push({
        types: events.map((e) => e.type),
        flushed: origin.flushed,
        started: events.find((e) => e.type === 'tool.started'),
      }),
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'read, act, write' });
    await h.runtime.settled(sessionId);
    const asked = (await h.runtime.getThreadRead({ sessionId, threadId })).pendingRequests[0];
    expect(asked?.actionType).toBe('tool_approval');
    await h.runtime.respondAction({ sessionId, actionId: asked?.actionId as string, decision: 'approve' });
    await h.runtime.settled(sessionId);
    const flushedWith = (type: string) => batches.filter((b) => b.types.includes(type)).map((b) => b.flushed);
    // Read-only steps: every step boundary after the first three requests holds only read-only facts.
    const readSteps = batches.filter(
      (b) =>
        b.types.includes('model.requested') && b.started && (b.started.payload as { idempotent?: boolean }).idempotent,
    );
    expect(readSteps.length).toBeGreaterThanOrEqual(2);
    expect(readSteps.every((b) => !b.flushed)).toBe(true);
    // The write-ahead commits of the non-idempotent call, the person's question and answer, the turn's end, and
    // the commands (submit, respond) wait for the disk.
    const effectStart = batches.find(
      (b) => b.started && (b.started.payload as { toolName?: string }).toolName === 'effect',
    );
    expect(effectStart?.flushed).toBe(true);
    expect(flushedWith('action.required')).toEqual([true]);
    expect(flushedWith('action.resolved')).toEqual([true]);
    expect(flushedWith('turn.submitted')).toEqual([true]);
    expect(flushedWith('turn.completed')).toEqual([true]);
    expect(batches.some((b) => !b.flushed)).toBe(true);
    const events = await h.runtime.log.read(sessionId);
    expect(events.filter((e) => e.type === 'turn.completed')).toHaveLength(1);
    expect(events.map((e) => e.sequence)).toEqual(events.map((_, i) => i + 1));
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a step reads no read model back from the store: new runs and tasks are created, the rest is cached', async () => {
    h = await harness({ steps: [...reads(6), answer('done')] }, { worker: { lingerMs: 60_000 } });
    const { sessionId } = await h.runtime.createSession();
    // From the first model request to the turn's end (the steps), count the statements that select read models:
    // a Kysely plugin sees every statement the store runs.
    let counting = false;
    let loads = 0;
    h.runtime.log.subscribe((events) => {
      if (events.some((e) => e.type === 'model.requested')) counting = true;
      if (events.some((e) => e.type === 'turn.completed')) counting = false;
    });
    const db = h.store.db.withPlugin({
      transformQuery({ node }) {
        const froms = node.kind === 'SelectQueryNode' ? (node.from?.froms ?? []) : [];
        if (counting && froms.some((f) => TableNode.is(f) && f.table.identifier.name === 'oar_read_models')) loads++;
        return node;
      },
      transformResult: async ({ result }) => result,
    });
    Object.defineProperty(h.store, 'db', { value: db });
    await h.runtime.submitTurn({ sessionId, input: 'read six times' });
    await h.runtime.settled(sessionId);
    const events = await h.runtime.log.read(sessionId);
    expect(events.filter((e) => e.type === 'model.requested')).toHaveLength(7);
    expect(events.some((e) => e.type === 'turn.completed')).toBe(true);
    // Before: every step loaded its new run and task (absent) from the store.
    expect(loads).toBe(0);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('facts of a slow read-only step reach observers within the linger time, before the step ends', async () => {
    const timeline: Timeline = [];
    const tools = new ToolRegistry([...workspaceTools(), slowReadTool(timeline, 'slow_read', 1500)]);
    h = await harness(
      { steps: [act([{ id: 's', type: 'tool', name: 'slow_read', args: { label: 's' } }]), answer('ok')] },
      { tools },
    );
    const { sessionId } = await h.runtime.createSession();
    const seen: { type: string; at: number }[] = [];
    h.runtime.log.subscribe((events) => {
      for (const e of events) seen.push({ type: e.type, at: Date.now() });
    });
    await h.runtime.submitTurn({ sessionId, input: 'slow' });
    await h.runtime.settled(sessionId);
    const started = seen.find((e) => e.type === 'tool.started');
    const result = seen.find((e) => e.type === 'tool.result');
    expect(started && result).toBeTruthy();
    // Staged at the tool's start, committed by the linger timer while the tool still ran (1.5 s).
    expect((result?.at ?? 0) - (started?.at ?? 0)).toBeGreaterThan(1000);
    expect(timeline).toEqual(['start:s', 'end:s']);
  });
});
