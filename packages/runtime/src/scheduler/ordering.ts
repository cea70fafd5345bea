import { type Declaration, isBarrierAction } from '@oar/protocol';

/**
 * The order a graph's execution adds to its declared dependencies (docs/protocol.md "Execution strategy"). A declared
 * dependency is a data dependency: the action runs once it completed, and is skipped when it failed. The order added
 * here is ordering only: the action runs once its predecessors *ended*, whatever their outcome — whether the rest of
 * the graph goes on after a failure is the failure policy's call (`continue`, `ask_model`, `abort`), as everywhere.
 *
 * - `sequential`: each action after the one declared before it (one at a time, in declaration order).
 * - `wait` and `checkpoint` without declared dependencies are barriers: each runs after every action declared
 *   before it, and every action declared after it runs after it. With dependencies they join just those.
 * - `dag` and `parallel` add nothing.
 */
export interface GraphOrder {
  /** Per action, the actions it runs after (ordering only), beside its declared dependencies. */
  after: ReadonlyMap<string, readonly string[]>;
  /** How many of the graph's actions may run at once (the binding's bound, lowered by the graph's). */
  concurrency: number;
}

export function graphOrder(declaration: Pick<Declaration, 'actions' | 'execution'>, maxParallel: number): GraphOrder {
  const { actions, execution } = declaration;
  const after = new Map<string, string[]>(actions.map((a) => [a.id, []]));
  const add = (id: string, before: string) => {
    const list = after.get(id);
    if (list && !list.includes(before)) list.push(before);
  };
  actions.forEach((action, index) => {
    const previous = actions[index - 1];
    if (execution.strategy === 'sequential' && previous) add(action.id, previous.id);
    if (!isBarrierAction(action)) return;
    for (const earlier of actions.slice(0, index)) add(action.id, earlier.id);
    for (const later of actions.slice(index + 1)) add(later.id, action.id);
  });
  const bound = execution.strategy === 'sequential' ? 1 : (execution.maxConcurrency ?? maxParallel);
  return { after, concurrency: Math.max(1, Math.min(bound, maxParallel)) };
}
