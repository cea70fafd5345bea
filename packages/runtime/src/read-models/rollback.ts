import type { RuntimeEvent } from '@oar/protocol';
import type { ThreadState } from './thread-state.js';

/**
 * What a rollback does to a thread's read model (history.rollback.*): started, it holds the thread (no turn starts);
 * completed, the removed turns leave the thread — the transcript the model sees, the read models and the console
 * follow — and a compaction summary that covered a removed turn stops being the context boundary (it summarises
 * what no longer happened; the turns kept are shown whole until the next compaction).
 */
export function rollbackChange(state: ThreadState, event: RuntimeEvent): ThreadState {
  const payload = (event.payload ?? {}) as Record<string, unknown>;
  const removedTurns = Array.isArray(payload.removedTurns)
    ? payload.removedTurns.filter((t): t is string => typeof t === 'string')
    : [];
  if (event.type === 'history.rollback.started') {
    if (typeof payload.rollbackId !== 'string' || typeof payload.targetTurnId !== 'string') return state;
    const files = Array.isArray(payload.files)
      ? payload.files.flatMap((f: { path?: unknown; action?: unknown; beforeRef?: unknown }) =>
          typeof f?.path === 'string' && typeof f.action === 'string'
            ? [
                {
                  path: f.path,
                  action: f.action,
                  ...(typeof f.beforeRef === 'string' ? { beforeRef: f.beforeRef } : {}),
                },
              ]
            : [],
        )
      : [];
    return {
      ...state,
      rollback: {
        rollbackId: payload.rollbackId,
        targetTurnId: payload.targetTurnId,
        removedTurns,
        ...(files.length > 0 ? { files } : {}),
        startedAt: event.timestamp,
      },
    };
  }
  const removed = new Set(removedTurns);
  const { rollback: _done, compaction, ...rest } = state;
  const kept = compaction && !removed.has(compaction.throughTurnId) ? { compaction } : {};
  return { ...rest, ...kept, turns: state.turns.filter((turn) => !removed.has(turn.turnId)) };
}
