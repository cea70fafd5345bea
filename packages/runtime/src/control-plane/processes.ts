import { createHash } from 'node:crypto';
import type { RuntimeEvent } from '@oar/protocol';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { loadReadModels } from '../log/read-model-rows.js';
import { threadViews } from '../read-models/project.js';
import type { ProcessRequest, ProcessState, ThreadView } from '../read-models/thread-state.js';
import { dropProcessInput, putProcessInput } from '../store/process-input.js';
import type { CommandContext } from './command-context.js';

/**
 * The standard's `write_process_stdin` and `terminate_process` for people and clients (docs/commands.md "Feeding
 * and stopping a process by hand"). A process lives in the memory of the runtime process that started it, which
 * may not be this one: the command records a request on the process's thread, and that runtime's worker acts on
 * it and answers with the fact carrying the request's id (`process.input`, `process.terminated`, or a
 * `runtime.warning` refusing it). The command waits for that answer up to `waitMs`.
 */

export interface ProcessRequestInput {
  sessionId: string;
  processId: string;
  reason?: string;
  /** Who asks (`api_key:key_1`, `user`): recorded with the request. */
  requestedBy?: string;
  /** How long to wait for the runtime running the process to act (default 10 s; 0: do not wait). */
  waitMs?: number;
}

export interface WriteProcessStdinInput extends ProcessRequestInput {
  /** The text for its standard input. */
  input?: string;
  /** Close its standard input afterwards (end of input). */
  closeStdin?: boolean;
}

export interface ProcessRequestResult {
  sessionId: string;
  threadId: string;
  processId: string;
  requestId: string;
  /**
   * `written`: the input reached the process; `terminated`: it was stopped on this request; `ended`: it ended
   * otherwise before the request was acted on; `refused`: the runtime running it refused (its input is closed);
   * `requested`: nobody acted within `waitMs` — the request stays on record until the process's runtime acts or
   * the process is recorded as ended or lost.
   */
  status: 'written' | 'terminated' | 'ended' | 'refused' | 'requested';
  /** The fact that answered the request (absent while `requested`). */
  eventId?: string;
  bytes?: number;
  exitCode?: number | null;
  signal?: string | null;
  error?: { code: string; message: string };
}

/** At most this much text per request: it waits in the store (never in the log) until the process takes it. */
export const MAX_STDIN_REQUEST_CHARS = 100_000;
const DEFAULT_WAIT_MS = 10_000;
/** Requests of one process waiting for its runtime at most. */
export const MAX_PENDING_REQUESTS = 16;

export function writeProcessStdin(
  ctx: CommandContext,
  input: WriteProcessStdinInput,
  signal?: AbortSignal,
): Promise<ProcessRequestResult> {
  if (input.input === undefined && input.closeStdin !== true) {
    throw new OarRuntimeError('invalid_input', 'write_process_stdin needs `input` (or `closeStdin: true`)');
  }
  if ((input.input?.length ?? 0) > MAX_STDIN_REQUEST_CHARS) {
    throw new OarRuntimeError('payload_too_large', `input is over ${MAX_STDIN_REQUEST_CHARS} characters`, {
      details: { max: MAX_STDIN_REQUEST_CHARS, length: input.input?.length },
    });
  }
  const text = input.input ?? '';
  return request(
    ctx,
    input,
    {
      action: 'write',
      inputBytes: Buffer.byteLength(text),
      inputDigest: `sha256:${createHash('sha256').update(text).digest('hex')}`,
      ...(input.closeStdin ? { closeStdin: true } : {}),
    },
    signal,
    text,
  );
}

export function terminateProcess(
  ctx: CommandContext,
  input: ProcessRequestInput,
  signal?: AbortSignal,
): Promise<ProcessRequestResult> {
  return request(ctx, input, { action: 'terminate' }, signal);
}

async function request(
  ctx: CommandContext,
  input: ProcessRequestInput,
  asked: Pick<ProcessRequest, 'action' | 'inputBytes' | 'inputDigest' | 'closeStdin'>,
  /** The caller went away: stop waiting (the request stays on record). */
  signal?: AbortSignal,
  /** For a write: the text, handed over outside the log (store/process-input.ts). */
  text?: string,
): Promise<ProcessRequestResult> {
  const { sessionId, processId } = input;
  const models = await ctx.log.allReadModels(sessionId);
  if (!models.session) throw notFound('session', sessionId);
  const found = liveProcess(threadViews(models), processId);
  if (!found) throw notRunning(processId);
  const { thread, process } = found;
  if (asked.action === 'write' && !process.background) {
    // A foreground command's input is what its call gave, closed when it started.
    throw new OarRuntimeError(
      'process_input_closed',
      `process ${processId} runs in the foreground: its input is closed`,
      {
        details: { processId },
      },
    );
  }
  const waiting = thread.processRequests?.filter((r) => r.processId === processId).length ?? 0;
  if (waiting >= MAX_PENDING_REQUESTS) {
    // Nobody takes them (its runtime is gone, or busy): more would only pile up on the thread.
    throw new OarRuntimeError(
      'too_many_process_requests',
      `process ${processId} already has ${waiting} requests nobody has acted on`,
      { retryable: true, details: { processId, pending: waiting, max: MAX_PENDING_REQUESTS } },
    );
  }
  const requestId = newId('preq');
  if (text) await putProcessInput(ctx.log.store.db, sessionId, requestId, text);
  const recording = ctx.append(
    sessionId,
    [
      {
        type: 'thread.updated',
        threadId: thread.threadId,
        processId,
        payload: {
          changed: ['processRequests'],
          processRequest: {
            requestId,
            processId,
            ...asked,
            ...(input.reason ? { reason: input.reason } : {}),
            requestedBy: input.requestedBy ?? 'user',
          },
        },
      },
    ],
    {
      // Only of a process still running: one whose end was recorded meanwhile is not found.
      guard: async (tx) => {
        const now = await loadReadModels(tx, sessionId, [{ kind: 'thread', key: thread.threadId }]);
        if (!now.threads.get(thread.threadId)?.processes?.some((p) => p.processId === processId)) {
          throw notRunning(processId);
        }
      },
    },
  );
  // Not recorded (the process ended meanwhile, the store failed): its text is not kept either.
  const [recorded] = await recording.catch(async (error: unknown) => {
    if (text) await dropProcessInput(ctx.log.store.db, sessionId, requestId).catch(() => undefined);
    throw error;
  });
  const base = { sessionId, threadId: thread.threadId, processId, requestId };
  const pending = async () =>
    (await ctx.log.thread(sessionId, thread.threadId)).processRequests?.some((r) => r.requestId === requestId) === true;
  await ctx.deps.notifier.waitFor(sessionId, async () => !(await pending()), input.waitMs ?? DEFAULT_WAIT_MS, signal);
  const answer = await answerOf(ctx, sessionId, thread.threadId, recorded?.sequence ?? 0, requestId, processId);
  return answer ? { ...base, ...answer } : { ...base, status: 'requested' };
}

/** The thread and the process record of a process whose end is not on record. */
function liveProcess(
  threads: ThreadView[],
  processId: string,
): { thread: ThreadView; process: ProcessState } | undefined {
  for (const thread of threads) {
    const process = thread.processes?.find((p) => p.processId === processId);
    if (process) return { thread, process };
  }
  return undefined;
}

function notRunning(processId: string): OarRuntimeError {
  return new OarRuntimeError(
    'process_not_found',
    `no running process "${processId}" in this session (unknown, or its end is already recorded)`,
    { details: { processId } },
  );
}

/** The fact that answered the request, read from the thread's events after it. */
async function answerOf(
  ctx: CommandContext,
  sessionId: string,
  threadId: string,
  after: number,
  requestId: string,
  processId: string,
): Promise<Omit<ProcessRequestResult, 'sessionId' | 'threadId' | 'processId' | 'requestId'> | undefined> {
  const events = await ctx.log.read(sessionId, { after, threadId });
  for (const event of events) {
    const payload = (event.payload ?? {}) as Record<string, unknown>;
    const details = (payload.details ?? {}) as Record<string, unknown>;
    if (event.type === 'runtime.warning' && details.requestId === requestId) {
      return {
        status: 'refused',
        eventId: event.eventId,
        error: { code: String(payload.code ?? 'refused'), message: String(payload.message ?? '') },
      };
    }
    if (event.type === 'process.input' && payload.requestId === requestId) {
      return { status: 'written', eventId: event.eventId, bytes: Number(payload.bytes ?? 0) };
    }
    if (isEnd(event) && (payload.processId ?? event.processId) === processId) {
      return {
        status: event.type === 'process.terminated' && payload.requestId === requestId ? 'terminated' : 'ended',
        eventId: event.eventId,
        ...('exitCode' in payload ? { exitCode: payload.exitCode as number | null } : {}),
        ...('signal' in payload ? { signal: payload.signal as string | null } : {}),
      };
    }
  }
  return undefined;
}

function isEnd(event: RuntimeEvent): boolean {
  return event.type === 'process.completed' || event.type === 'process.failed' || event.type === 'process.terminated';
}
