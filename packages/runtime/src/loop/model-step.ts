import type { ThreadView, TurnState } from '../read-models/thread-state.js';
import type { Engine } from '../scheduler/engine.js';
import { callStep } from './call-step.js';
import { prepareStep } from './prepare-step.js';
import { resolveStep } from './resolve-step.js';
import { WAITING } from './step.js';

/**
 * One model step, in three phases with typed hand-offs: prepare (loop/prepare-step.ts: budget, model, catalog,
 * context, and the facts recorded before the call) → call (loop/call-step.ts: the model call and its model.completed /
 * model.failed) → resolve (loop/resolve-step.ts: parse the output, then apply the declaration, loop/declaration.ts, or
 * retry correctively, fall back or fail). A phase that ends the step returns undefined and the next does not run.
 */
export async function modelStep(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  signal: AbortSignal,
): Promise<boolean> {
  const prepared = await prepareStep(engine, thread, turn);
  if (prepared === WAITING) return false;
  if (!prepared) return true;
  const output = await callStep(engine, thread, turn, prepared, signal);
  if (!output) return true;
  await resolveStep(engine, thread, turn, prepared, output);
  return true;
}
