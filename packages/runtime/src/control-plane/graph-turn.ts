import type { Declaration } from '@oar/protocol';
import { threadBusy } from '../facts/queue.js';
import { OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { EventDraft } from '../log/draft.js';
import type { ReadModels } from '../read-models/project.js';
import type { ThreadView } from '../read-models/thread-state.js';

/**
 * A turn that runs a graph the control plane declared, not the model: a task's retry, a lost action run again. It
 * is submitted and started at once, its run is declared in the same commit, and the worker that drives the thread
 * runs the graph and then asks the model — so the model sees the new results as it would its own graph's. Only on
 * an idle thread: a turn running or waiting owns the thread's next step.
 */
export interface GraphTurn {
  turnId: string;
  runId: string;
  /** `turn.submitted` and `turn.started`. */
  started: EventDraft[];
  /** The run's `run.status declared`, with extra facts (`retryOf`…). */
  declared(facts: { title: string; declaration: Declaration } & Record<string, unknown>): EventDraft;
}

export function graphTurn(
  models: ReadModels,
  thread: ThreadView,
  turn: { input: string; source: string; taskId: string },
): GraphTurn {
  if (threadBusy(thread)) {
    throw new OarRuntimeError('thread_busy', 'the thread has a turn running or waiting', { retryable: true });
  }
  const turnId = newId('turn');
  const runId = newId('run');
  const { threadId } = thread;
  return {
    turnId,
    runId,
    started: [
      {
        type: 'turn.submitted',
        threadId,
        turnId,
        status: 'accepted',
        payload: { status: 'accepted', input: turn.input, source: turn.source },
      },
      {
        type: 'turn.started',
        threadId,
        turnId,
        status: 'running',
        payload: models.session?.bindingHash ? { bindingHash: models.session.bindingHash } : {},
      },
    ],
    declared: (facts) => ({
      type: 'run.status',
      threadId,
      turnId,
      taskId: turn.taskId,
      runId,
      status: 'running',
      payload: { phase: 'declared', ...facts },
    }),
  };
}
