import {
  type Catalog,
  estimateTokens,
  normalizeCarrier,
  ProtocolOutputSchema,
  type RuntimeEvent,
  renderTranscript,
  TRANSCRIPT_CLOSING_INSTRUCTION,
  type TranscriptTurnInput,
} from '@oar/protocol';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type AgentProfile, assembleContext, systemPrompt, threadTranscript } from '../../src/loop/context/context.js';
import { reduceThread } from '../../src/read-models/thread.js';
import type { RunState, ThreadState, ThreadView, TurnState } from '../../src/read-models/thread-state.js';

/**
 * Context assembly remembers its work by read-model object (threadTranscript) and by turn object (renderTranscript).
 * These tests grow a thread the way the reducers do — every change replaces the changed RunState / TurnState and
 * the thread, nothing is mutated — and check that each step's context equals one built from scratch, that unchanged
 * runs yield the same turn objects, and that a changed run is never served from the memo.
 * A fixed seed (fast-check prints it, with the failing case's path); OAR_FUZZ_SEED / OAR_FUZZ_RUNS explore more.
 */
const SEED = Number(process.env.OAR_FUZZ_SEED ?? 20_151_115);
const runs = (n: number) => ({
  seed: SEED,
  numRuns: Math.max(1, Math.round(n * Number(process.env.OAR_FUZZ_RUNS ?? 1))),
});

const agent: AgentProfile = { name: 'main', carrier: 'tool' };
const catalog: Catalog = {
  tools: [{ name: 'read', description: 'Read a file.', inputSchema: { type: 'object' }, capabilities: [] }],
  agents: [],
};
const THREAD_ID = 'thr_1';

/** A running thread with no turns yet, as the thread reducer starts one. */
function emptyThread(): ThreadView {
  const started = {
    type: 'thread.started',
    threadId: THREAD_ID,
    sessionId: 'ses_1',
    sequence: 0,
    timestamp: '2026-01-01T00:00:00.000Z',
    payload: { agent: 'main', depth: 0 },
  } as unknown as RuntimeEvent;
  const thread = reduceThread(undefined, started) as ThreadState;
  return { ...thread, status: 'running', runs: new Map() };
}

function declaredRun(turnId: string, n: number, calls: number): RunState {
  const runId = `run_${n}`;
  const declaration = normalizeCarrier(
    ProtocolOutputSchema.parse({
      kind: 'act',
      message: `Reading batch ${n}.`,
      calls: Array.from({ length: calls }, (_, k) => ({
        id: `r${n}_${k}`,
        type: 'tool',
        name: 'read',
        args: { filePath: `notes/${n}-${k}.md` },
      })),
    }),
    { carrier: 'tool', form: 'carrier', recovered: false },
  );
  const actions: RunState['actions'] = {};
  for (const action of declaration.actions) {
    actions[action.id] = { id: action.id, status: 'pending', toolCallId: `${runId}.${action.id}`, attempt: 0 };
  }
  return {
    runId,
    threadId: THREAD_ID,
    taskId: `task_${n}`,
    turnId,
    declaration,
    status: 'running',
    actions,
    order: declaration.actions.map((a) => a.id),
  };
}

/** The reducer's way: a new RunState with one action's new state, everything else shared. */
function finishAction(run: RunState, actionId: string, content: string, failed: boolean): RunState {
  const action = run.actions[actionId];
  if (!action) return run;
  const status = failed ? 'failed' : 'completed';
  return {
    ...run,
    actions: {
      ...run.actions,
      [actionId]: {
        ...action,
        status,
        endedAt: '2026-01-01T00:00:01.000Z',
        result: {
          id: actionId,
          status,
          content,
          artifacts: [`artifact://${run.runId}/${actionId}`],
          ...(failed ? { error: { code: 'not_found', message: 'no such file', retryable: false } } : {}),
        },
      },
    },
  };
}

function withTurn(thread: ThreadView, turnId: string, change: (turn: TurnState) => TurnState): ThreadView {
  return { ...thread, turns: thread.turns.map((t) => (t.turnId === turnId ? change(t) : t)) };
}

/** How the thread changes between two model steps. */
type Op =
  | { op: 'turn'; input: string }
  | { op: 'queue'; input: string }
  | { op: 'declare'; calls: number }
  | { op: 'finish'; content: string; failed: boolean }
  | { op: 'answer'; text: string }
  | { op: 'same' };

const textArb = fc.string({
  unit: fc.constantFrom('a', 'word ', '\n', '`', '中', 'é', '😀', 'The file says hello. '.repeat(10)),
  maxLength: 40,
});
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('turn' as const), input: textArb }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('queue' as const), input: textArb }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('declare' as const), calls: fc.integer({ min: 1, max: 3 }) }), weight: 5 },
  {
    arbitrary: fc.record({ op: fc.constant('finish' as const), content: textArb, failed: fc.boolean() }),
    weight: 6,
  },
  { arbitrary: fc.record({ op: fc.constant('answer' as const), text: textArb }), weight: 1 },
  { arbitrary: fc.record({ op: fc.constant('same' as const) }), weight: 1 },
);

let counter = 0;
function apply(thread: ThreadView, step: Op): ThreadView {
  const active = thread.turns.find((t) => t.status === 'running');
  switch (step.op) {
    case 'turn':
    case 'queue': {
      counter += 1;
      const turn: TurnState = {
        turnId: `turn_${counter}`,
        status: step.op === 'turn' && !active ? 'running' : 'queued',
        input: step.input,
        submittedAt: '2026-01-01T00:00:00.000Z',
        ...(step.op === 'turn' && !active ? { startedAt: '2026-01-01T00:00:00.000Z' } : {}),
        modelSteps: 0,
        correctiveRetries: 0,
        runIds: [],
      };
      return { ...thread, turns: [...thread.turns, turn] };
    }
    case 'declare': {
      if (!active) return thread;
      counter += 1;
      const run = declaredRun(active.turnId, counter, step.calls);
      const next = withTurn(thread, active.turnId, (t) => ({
        ...t,
        modelSteps: t.modelSteps + 1,
        runIds: [...t.runIds, run.runId],
      }));
      return { ...next, runs: new Map(thread.runs).set(run.runId, run) };
    }
    case 'finish': {
      for (const run of thread.runs.values()) {
        const pending = run.order.find((id) => run.actions[id]?.status === 'pending');
        if (pending === undefined) continue;
        const finished = finishAction(run, pending, step.content, step.failed);
        return { ...thread, runs: new Map(thread.runs).set(run.runId, finished) };
      }
      return thread;
    }
    case 'answer': {
      if (!active) return thread;
      // The turn ends with its answer; the first queued turn (if any) starts.
      let started = false;
      const turns = thread.turns.map((t): TurnState => {
        if (t === active) return { ...t, status: 'completed', answer: step.text };
        if (!started && t.status === 'queued') {
          started = true;
          return { ...t, status: 'running', startedAt: '2026-01-01T00:00:02.000Z' };
        }
        return t;
      });
      return { ...thread, turns };
    }
    case 'same':
      return { ...thread };
  }
}

/** The context of `thread` built from scratch: fresh read-model objects, and the transcript memo bypassed. */
function fromScratch(thread: ThreadView, budgetTokens: number) {
  const fresh = structuredClone(thread);
  const system = systemPrompt(agent, catalog);
  const transcript = renderTranscript(
    { turns: threadTranscript(fresh) },
    {
      budgetTokens: Math.max(256, budgetTokens - estimateTokens(system)),
      closingInstruction: TRANSCRIPT_CLOSING_INSTRUCTION,
      memo: false,
    },
  );
  return { system, transcript, tokenEstimate: estimateTokens(system) + transcript.tokens };
}

/** The protocol turn objects of a transcript, by run id. */
function protocolTurns(turns: TranscriptTurnInput[]): Map<string, TranscriptTurnInput> {
  const out = new Map<string, TranscriptTurnInput>();
  for (const t of turns) if (t.kind === 'protocol') out.set(t.runId, t);
  return out;
}

describe('context assembly memo', () => {
  it('property: every step of a growing thread assembles the same context as from scratch', () => {
    fc.assert(
      fc.property(
        textArb,
        fc.array(fc.tuple(opArb, fc.integer({ min: 0, max: 6000 })), { minLength: 1, maxLength: 30 }),
        (input, steps) => {
          let thread = apply(emptyThread(), { op: 'turn', input });
          let previous = { thread, turns: threadTranscript(thread) };
          for (const [step, budgetTokens] of steps) {
            thread = apply(thread, step);
            const context = assembleContext(thread, agent, catalog, { budgetTokens });
            expect(context).toEqual(fromScratch(thread, budgetTokens));
            expect(context.transcript.tokens).toBe(estimateTokens(context.transcript.text));

            // An unchanged RunState yields the very same turn object; a replaced one a new object.
            const turns = threadTranscript(thread);
            const before = protocolTurns(previous.turns);
            for (const [runId, turn] of protocolTurns(turns)) {
              const old = before.get(runId);
              if (old === undefined) continue;
              if (thread.runs.get(runId) === previous.thread.runs.get(runId)) expect(turn).toBe(old);
              else expect(turn).not.toBe(old);
            }
            previous = { thread, turns };
          }
        },
      ),
      runs(100),
    );
  });

  it('a run that changes is rendered with its new state, not from the memo', () => {
    let thread = apply(emptyThread(), { op: 'turn', input: 'Read the notes.' });
    thread = apply(thread, { op: 'declare', calls: 1 });
    const runId = thread.turns[0]?.runIds[0] ?? '';
    const pending = assembleContext(thread, agent, catalog, { budgetTokens: 100_000 });
    expect(pending.transcript.text).toContain('Status: pending');

    const done = apply(thread, { op: 'finish', content: 'FRESH NOTE CONTENT', failed: false });
    expect(done.runs.get(runId)).not.toBe(thread.runs.get(runId));
    const after = assembleContext(done, agent, catalog, { budgetTokens: 100_000 });
    expect(after.transcript.text).toContain('FRESH NOTE CONTENT');
    expect(after.transcript.text).not.toContain('Status: pending');
    expect(after).toEqual(fromScratch(done, 100_000));
  });

  it('a finished turn and its unchanged runs keep their turn objects as the thread grows', () => {
    let thread = apply(emptyThread(), { op: 'turn', input: 'First.' });
    thread = apply(thread, { op: 'declare', calls: 2 });
    thread = apply(thread, { op: 'finish', content: 'one', failed: false });
    thread = apply(thread, { op: 'finish', content: 'two', failed: false });
    thread = apply(thread, { op: 'answer', text: 'Done.' });
    const first = threadTranscript(thread);
    thread = apply(thread, { op: 'turn', input: 'Second.' });
    thread = apply(thread, { op: 'declare', calls: 1 });
    const second = threadTranscript(thread);
    expect(second.slice(0, first.length)).toEqual(first);
    first.forEach((turn, i) => {
      expect(second[i]).toBe(turn);
    });
  });
});
