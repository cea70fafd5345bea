import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { actionHistory, actionIndex } from '../../src/read-models/run.js';
import type { RunState } from '../../src/read-models/thread-state.js';

/** A run as the index reads it: its declared ids in order, and each action's status. */
function run(actions: [id: string, status: string][]): RunState {
  return {
    order: actions.map(([id]) => id),
    actions: Object.fromEntries(actions.map(([id, status]) => [id, { status }])),
  } as unknown as RunState;
}

/** The sets the validator would build from the lists (the reference). */
function fromLists(runs: RunState[]) {
  const history = actionHistory(runs);
  const completed = new Set(history.completedActionIds);
  return { completed, used: new Set([...history.usedActionIds, ...completed]) };
}

const idArb = fc.constantFrom('a', 'b', 'c', 'd', 'read_1', 'read_2');
const runArb = fc
  .array(fc.tuple(idArb, fc.constantFrom('completed', 'failed', 'pending', 'running')), { maxLength: 3 })
  .map((actions) => run(actions.filter(([id], i) => actions.findIndex(([other]) => other === id) === i)));

describe('the incremental action index', () => {
  it('property: after any sequence of appended, replaced and removed runs it equals the sets built from scratch', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.record({ op: fc.constant('append' as const), run: runArb }),
            fc.record({ op: fc.constant('replace' as const), at: fc.nat(), run: runArb }),
            fc.record({ op: fc.constant('remove' as const), at: fc.nat() }),
          ),
          { minLength: 1, maxLength: 30 },
        ),
        fc.uuid(),
        (ops, threadId) => {
          let runs: RunState[] = [];
          for (const step of ops) {
            if (step.op === 'append') runs = [...runs, step.run];
            else if (runs.length > 0 && step.op === 'replace') {
              runs = runs.map((r, i) => (i === step.at % runs.length ? step.run : r));
            } else if (runs.length > 0) runs = runs.filter((_, i) => i !== step.at % runs.length);
            const index = actionIndex(threadId, runs);
            const expected = fromLists(runs);
            expect(new Set(index.used)).toEqual(expected.used);
            expect(new Set(index.completed)).toEqual(expected.completed);
          }
        },
      ),
      { seed: 20_261_129, numRuns: 200 },
    );
  });

  it('an id declared again by a later run stays used when the earlier run goes', () => {
    const first = run([['a', 'failed']]);
    const retry = run([['a', 'completed']]);
    expect([...actionIndex('thread_retry', [first, retry]).completed]).toEqual(['a']);
    const index = actionIndex('thread_retry', [retry]);
    expect(index.used.has('a')).toBe(true);
    expect(index.completed.has('a')).toBe(true);
    expect([...actionIndex('thread_retry', []).used]).toEqual([]);
  });

  it('threads are indexed apart', () => {
    actionIndex('thread_one', [run([['x', 'completed']])]);
    const other = actionIndex('thread_two', [run([['y', 'pending']])]);
    expect(other.used.has('x')).toBe(false);
    expect(other.completed.size).toBe(0);
  });
});
