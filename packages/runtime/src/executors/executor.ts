import { type FullOutput, oarError } from '@oar/protocol';
import type { PermissionRequest } from '../config/permission-request.js';
import { errorOutput } from '../facts/action.js';
import type { HookVerdict } from '../policy/hooks/hooks.js';
import type { RunActionStatus } from '../read-models/thread-state.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import type { Authorized } from './gate.js';

/**
 * What an executor says of an action before anything runs: what to authorize and what it prepared for the run; that
 * it runs without a judgement (a question a person already answered); that it is refused before anyone is asked (the
 * failure the driver records: no such tool, an input its schema rejects); or that there is nothing to do now (a
 * delegation already running, a refusal the executor recorded itself).
 */
export type Preparation<P> =
  | { authorize: PermissionRequest; hooks?: HookVerdict; prepared: P }
  | { unjudged: P }
  | { refused: FullOutput }
  | { settled: RunActionStatus };

/**
 * An executor (docs/architecture.md "The executor port"): one per executor type, over the action's `ExecutorContext`
 * and nothing else. `prepare` looks the action up and says what to authorize; the driver (executors/registry.ts)
 * authorizes it through the one gate; `run` carries it out, committing the authorization with its first fact.
 */
export interface Executor<P> {
  prepare(ctx: ExecutorContext): Promise<Preparation<P>>;
  run(ctx: ExecutorContext, prepared: P, authorized: Authorized): Promise<RunActionStatus>;
}

/**
 * The preparation of an action whose executor is a named entry of the binding (a pipeline, a service): judged as an
 * action of that executor, refused when the binding names none.
 */
export function prepareNamed<P extends { readonly name: string }>(
  ctx: ExecutorContext,
  kind: 'pipeline' | 'service',
  entries: readonly P[] | undefined,
): Preparation<P> {
  const { action } = ctx;
  const entry = entries?.find((e) => e.name === action.executor.target);
  if (!entry) {
    return {
      refused: errorOutput(oarError('executor_unavailable', `no ${kind} "${action.executor.target}" is configured`)),
    };
  }
  return { authorize: { executor: action.executor, paths: [], input: action.input }, prepared: entry };
}
