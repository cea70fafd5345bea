import type { RuntimeEvent } from '@oar/protocol';
import type { ProcessRequest, ThreadState } from './thread-state.js';

/**
 * The processes of a thread (docs/commands.md): those its commands started and whose end is not on record, and the
 * requests people and clients made of them (`write_process_stdin`, `terminate_process`) that the runtime running
 * the process has not answered yet. A request is answered by the fact that carries its `requestId` (`process.input`,
 * `process.terminated`, or a `runtime.warning` refusing it) — or by the process's end, whatever ended it.
 */

type Payload = Record<string, unknown>;
const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/** What a process fact (`process.started`, `.input`, `.completed`, `.failed`, `.terminated`) changes of a thread. */
export function processChange(state: ThreadState, event: RuntimeEvent, payload: Payload): ThreadState {
  const processId = str(payload.processId) ?? event.processId;
  switch (event.type) {
    case 'process.started':
      return {
        ...state,
        processes: [
          ...(state.processes ?? []),
          {
            processId: processId ?? event.eventId,
            command: str(payload.command) ?? '',
            ...(event.turnId ? { turnId: event.turnId } : {}),
            ...(event.runId ? { runId: event.runId } : {}),
            ...(event.toolCallId ? { toolCallId: event.toolCallId } : {}),
            background: payload.background === true,
            ...(str(payload.sandboxProfile) ? { sandboxProfile: str(payload.sandboxProfile) } : {}),
            startedAt: event.timestamp,
          },
        ],
      };
    case 'process.input':
      return answered(state, str(payload.requestId));
    case 'process.completed':
    case 'process.failed':
    case 'process.terminated': {
      if (processId === undefined) return state;
      const processes = state.processes?.filter((p) => p.processId !== processId);
      const requests = state.processRequests?.filter((r) => r.processId !== processId);
      if (processes === undefined && requests === undefined) return state;
      return {
        ...state,
        ...(processes ? { processes } : {}),
        ...(requests ? { processRequests: requests } : {}),
      };
    }
    default:
      return state;
  }
}

/** A request recorded on the thread (`thread.updated` with `processRequest`), pending until it is answered. */
export function processRequestOf(state: ThreadState, payload: Payload, at: string): Partial<ThreadState> {
  const request = payload.processRequest as Partial<ProcessRequest> | undefined;
  if (!request || typeof request.requestId !== 'string' || typeof request.processId !== 'string') return {};
  if (request.action !== 'write' && request.action !== 'terminate') return {};
  const recorded: ProcessRequest = {
    requestId: request.requestId,
    processId: request.processId,
    action: request.action,
    ...(typeof request.inputBytes === 'number' ? { inputBytes: request.inputBytes } : {}),
    ...(typeof request.inputDigest === 'string' ? { inputDigest: request.inputDigest } : {}),
    ...(request.closeStdin === true ? { closeStdin: true } : {}),
    ...(typeof request.reason === 'string' ? { reason: request.reason } : {}),
    ...(typeof request.requestedBy === 'string' ? { requestedBy: request.requestedBy } : {}),
    requestedAt: at,
  };
  return { processRequests: [...(state.processRequests ?? []), recorded] };
}

/** The thread without the request `requestId` answers (itself when there is none such). */
export function answered(state: ThreadState, requestId: string | undefined): ThreadState {
  if (requestId === undefined || !state.processRequests?.some((r) => r.requestId === requestId)) return state;
  return { ...state, processRequests: state.processRequests.filter((r) => r.requestId !== requestId) };
}
