import type { RuntimeEvent } from '@oar/protocol';
import type { ReadModels } from './project.js';
import { applyEvent, emptyReadModels } from './project.js';
import { endedActionStatus } from './run.js';
import { isTerminalTaskStatus } from './task.js';
import { isTerminalActionStatus, isTerminalTurnStatus } from './thread-state.js';

/**
 * Facts that cannot both be true: a second ending of a turn, of a task attempt, or of one tool call (except a lost
 * call's reconciliation, which says how it really ended). With one
 * writer per thread (leases and fencing) the engine never produces them; the check is the last line of defence,
 * and replay uses it to call a log that holds one contradictory instead of "equal".
 */

const TASK_ENDINGS = new Set(['task.completed', 'task.failed', 'task.cancelled', 'task.timed_out', 'task.lost']);

/** Whether `contradiction` looks at what the models already record for this event (it is an ending). */
export function isEnding(event: RuntimeEvent): boolean {
  return (
    event.type === 'turn.completed' ||
    event.type === 'turn.failed' ||
    TASK_ENDINGS.has(event.type) ||
    endedActionStatus(event) !== undefined
  );
}

/** Why `event` contradicts what `models` already record, or undefined when it does not. */
export function contradiction(models: ReadModels, event: RuntimeEvent): string | undefined {
  if ((event.type === 'turn.completed' || event.type === 'turn.failed') && event.threadId) {
    const turn = models.threads.get(event.threadId)?.turns.find((t) => t.turnId === event.turnId);
    if (turn && isTerminalTurnStatus(turn.status)) return `turn "${event.turnId}" already ended (${turn.status})`;
  }
  if (TASK_ENDINGS.has(event.type) && event.taskId) {
    const task = models.tasks.get(event.taskId);
    if (task && isTerminalTaskStatus(task.status)) return `task "${event.taskId}" already ended (${task.status})`;
  }
  const ending = endedActionStatus(event);
  if (ending && event.runId) {
    const actionId = (event.payload as { graphActionId?: unknown }).graphActionId;
    const action = typeof actionId === 'string' ? models.runs.get(event.runId)?.actions[actionId] : undefined;
    // A tool call ends once; any ending may restate the same status (a denial is both resolved and recorded).
    const executed = event.type === 'tool.result' || event.type === 'tool.failed';
    // A lost action ends once more when it is reconciled (it took effect, or not): recorded as such.
    // Only the status change reconciliation records (run.status), never a second tool result or failure.
    const reconciled =
      event.type === 'run.status' &&
      action?.status === 'lost' &&
      (event.payload as { reconciled?: unknown }).reconciled !== undefined;
    if (action && isTerminalActionStatus(action.status) && !reconciled && (executed || action.status !== ending)) {
      return `action "${actionId}" of run "${event.runId}" already ended (${action.status})`;
    }
  }
  return undefined;
}

/** Every contradiction in a log, in order (`oar replay` reports them). */
export function findContradictions(events: Iterable<RuntimeEvent>): { sequence: number; reason: string }[] {
  const models = emptyReadModels();
  const found: { sequence: number; reason: string }[] = [];
  for (const event of events) {
    const reason = contradiction(models, event);
    if (reason) found.push({ sequence: event.sequence, reason });
    applyEvent(models, event);
  }
  return found;
}
