import { artifactCreated } from '../facts/action.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import type { EventLog } from '../log/event-log.js';
import { loadReadModels } from '../log/read-model-rows.js';
import type { SessionState } from '../read-models/session.js';
import type { ProcessRequest, ProcessState, ThreadState } from '../read-models/thread-state.js';
import { storedThreads } from '../read-models/work.js';
import type { BoundConfig } from '../scheduler/engine.js';
import { type PendingArtifact, prepareRedactedArtifact } from '../store/artifacts.js';
import { dropProcessInput, dropProcessInputs, processInput } from '../store/process-input.js';
import type { Db } from '../store/store.js';
import type { ProcessEnd } from '../tools/exec/process-group.js';
import { recordEnd } from '../tools/exec/process-tool.js';
import { type BackgroundProcess, backgroundProcesses, foregroundProcesses } from '../tools/exec/processes.js';

/**
 * The other half of `write_process_stdin` and `terminate_process` (control-plane/processes.ts): the requests on
 * a session's threads for processes this OS process runs are carried out here, and each is answered by the fact
 * carrying its id. A process lives where it was started, so only this process can act on it; a request for a
 * process that runs elsewhere is left for the runtime that runs it (or answered by the process's end, or its loss
 * on the thread's next claim). Not under the thread's lease: a process outlives its turn, and a request must
 * reach it while the thread is idle, or busy with a step.
 */

export interface ProcessRequestDeps {
  log: EventLog;
  configFor(session: SessionState | undefined, hash: string | undefined): Promise<BoundConfig>;
}

/**
 * Sessions whose requests are being carried out now in this OS process, and whether another look asked meanwhile:
 * one pass at a time per session, each reading the requests afresh — so a request is acted on once, and a process's
 * requests in the order they were made (a second write never overtakes the first).
 */
const passes = new Map<string, { again: boolean; done: Promise<void> }>();

/** Carry out the session's pending requests for processes this OS process runs (at most one pass at a time). */
export function actOnProcessRequests(deps: ProcessRequestDeps, sessionId: string): Promise<void> {
  if (!backgroundProcesses.runsFor(sessionId)) return Promise.resolve();
  const running = passes.get(sessionId);
  if (running) {
    running.again = true;
    return running.done;
  }
  const pass = { again: false, done: Promise.resolve() };
  pass.done = (async () => {
    try {
      do {
        pass.again = false;
        await onePass(deps, sessionId);
      } while (pass.again);
    } finally {
      passes.delete(sessionId);
    }
  })();
  passes.set(sessionId, pass);
  return pass.done;
}

async function onePass(deps: ProcessRequestDeps, sessionId: string): Promise<void> {
  const threads = await threadsWithRequests(deps.log.store.db, sessionId);
  const pending = threads.flatMap((t) => (t.processRequests ?? []).map((r) => r.requestId));
  if (pending.length === 0) return;
  // Texts of requests no longer pending (answered by a process's end; one whose command died before recording it)
  // are not kept: looked for only in a pass with work, never on every change of the session.
  await dropProcessInputs(deps.log.store.db, sessionId, pending);
  const { session } = await deps.log.readModels(sessionId, []);
  // A request that could not be carried out (the store failed) is tried again by the next look; the later requests
  // of its process wait for it, the other processes' go on.
  const stuck = new Set<string>();
  for (const thread of threads) {
    for (const request of thread.processRequests ?? []) {
      const process = thread.processes?.find((p) => p.processId === request.processId);
      if (!process || stuck.has(request.processId) || !runsHere(sessionId, thread, request.processId)) continue;
      await carryOut(deps, session, thread, process, request).catch(() => stuck.add(request.processId));
    }
  }
}

/** The session's threads with process requests pending (the rows without one are not even parsed). */
async function threadsWithRequests(db: Db, sessionId: string): Promise<ThreadState[]> {
  const threads = await storedThreads(db, sessionId, (body) => body.includes('"processRequests":[{'));
  return threads.filter((thread) => (thread.processRequests?.length ?? 0) > 0);
}

function runsHere(sessionId: string, thread: ThreadState, processId: string): boolean {
  const entry = backgroundProcesses.get(processId) ?? foregroundProcesses.get(processId);
  return entry?.sessionId === sessionId && entry.threadId === thread.threadId;
}

async function carryOut(
  deps: ProcessRequestDeps,
  session: SessionState | undefined,
  thread: ThreadState,
  process: ProcessState,
  request: ProcessRequest,
): Promise<void> {
  const answer = { requestId: request.requestId, ...(request.requestedBy ? { requestedBy: request.requestedBy } : {}) };
  // Answered at most once: the request is still pending when the answer commits.
  const out = await outsideWriter(deps, session, thread, process, async (tx) => {
    const now = await loadReadModels(tx, thread.sessionId, [{ kind: 'thread', key: thread.threadId }]);
    const open = now.threads.get(thread.threadId)?.processRequests?.some((r) => r.requestId === request.requestId);
    if (!open) throw new Error(`process request ${request.requestId} was answered meanwhile`);
  });
  const foreground = foregroundProcesses.get(process.processId);
  if (request.action === 'terminate' && foreground) {
    // Its tool call records how it ended (process.terminated, reason terminated), which answers the request.
    foreground.answers ??= answer;
    await foreground.group.stop('terminated');
    return;
  }
  const entry = backgroundProcesses.get(process.processId);
  // A foreground command takes no input (the command refuses such a request; one recorded anyway waits for its end).
  if (!entry) return;
  // A process that exited by itself (its end not yet read) answers any request with its end.
  if (request.action === 'terminate' || !entry.group.running) {
    const ended = await entry.group.stop('terminated');
    await recordOnce(entry, ended, out, answer);
    return;
  }
  const db = deps.log.store.db;
  // The text waits in the store, never in the log (store/process-input.ts); gone, the request cannot be done.
  const text = request.inputBytes ? await processInput(db, thread.sessionId, request.requestId) : '';
  const refuse = (code: string, message: string) =>
    out.append([
      {
        type: 'runtime.warning',
        ...out.ids,
        payload: {
          code,
          message,
          retryable: false,
          details: { processId: process.processId, requestId: request.requestId },
        },
      } as EventDraft,
    ]);
  if (text === undefined) {
    await refuse('process_input_unavailable', `the text for process ${process.processId} is no longer in the store`);
    return;
  }
  if (!entry.group.write(text, request.closeStdin === true)) {
    await refuse('process_input_closed', `process ${process.processId} has closed its input: the text was not written`);
    await dropProcessInput(db, thread.sessionId, request.requestId);
    return;
  }
  await out.append([
    {
      type: 'process.input',
      ...out.ids,
      payload: {
        processId: process.processId,
        bytes: Buffer.byteLength(text),
        closed: request.closeStdin === true,
        ...answer,
      },
    } as EventDraft,
  ]);
  await dropProcessInput(db, thread.sessionId, request.requestId);
}

/**
 * At a runtime's close: the background processes it stopped (or that exited unobserved) are recorded as ended
 * (`process.terminated` with reason `runtime_closing`, or their own end, with their output), so no session lists
 * them as running until its thread is next claimed.
 */
export async function recordStopped(deps: ProcessRequestDeps, stopped: readonly BackgroundProcess[]): Promise<void> {
  for (const entry of stopped) {
    if (entry.recorded) continue;
    const models = await deps.log.allReadModels(entry.sessionId);
    const thread = models.threads.get(entry.threadId);
    const process = thread?.processes?.find((p) => p.processId === entry.processId);
    if (!thread || !process) continue;
    // Only while it is still listed: another runtime may have recorded it lost meanwhile (its leases are released).
    const out = await outsideWriter(deps, models.session, thread, process, async (tx) => {
      const now = await loadReadModels(tx, entry.sessionId, [{ kind: 'thread', key: entry.threadId }]);
      if (!now.threads.get(entry.threadId)?.processes?.some((p) => p.processId === entry.processId)) {
        throw new Error(`process ${entry.processId} is no longer listed`);
      }
    });
    await recordOnce(entry, await entry.group.ended, out, {}).catch(() => undefined);
  }
}

/** Record a background process's end (tools/exec/process-tool.ts `recordEnd`) through a writer outside any call. */
async function recordOnce(
  entry: BackgroundProcess,
  ended: ProcessEnd,
  out: OutsideWriter,
  facts: Record<string, unknown>,
): Promise<void> {
  if (entry.recorded) return;
  await recordEnd(entry, ended, out.recorder, facts).catch((error: unknown) => {
    // Not on record: the next look (or the thread's next claim) records it.
    entry.recorded = false;
    throw error;
  });
}

interface OutsideWriter {
  /** The ids the process's facts carry: its thread, and the call that started it. */
  ids: Record<string, string>;
  append(drafts: EventDraft[]): Promise<unknown>;
  recorder: Parameters<typeof recordEnd>[2];
}

/**
 * Facts about a process written by whoever runs it, outside any tool call and any lease (a process outlives its
 * turn): with the call's ids, the session binding's redactor, its output stored as an artifact like a call's.
 */
async function outsideWriter(
  deps: ProcessRequestDeps,
  session: SessionState | undefined,
  thread: ThreadState,
  process: ProcessState,
  guard?: AppendGuard,
): Promise<OutsideWriter> {
  const sessionId = thread.sessionId;
  const ids = {
    threadId: thread.threadId,
    ...(process.turnId ? { turnId: process.turnId } : {}),
    ...(process.runId ? { runId: process.runId } : {}),
    ...(process.toolCallId ? { toolCallId: process.toolCallId } : {}),
    processId: process.processId,
  };
  const config = await deps.configFor(session, undefined);
  const pending: PendingArtifact[] = [];
  const redactions: EventDraft[] = [];
  const append = (drafts: EventDraft[]) =>
    deps.log.append(sessionId, drafts, { redactor: config.redactor, artifacts: pending, ...(guard ? { guard } : {}) });
  const recorder = {
    // The output is redacted before it is stored, as a call's is.
    artifact: async (content: { name: string; mime: string; text?: string; bytes?: Uint8Array }) => {
      const prepared = prepareRedactedArtifact(sessionId, content, config.redactor, config.limits.maxArtifactBytes);
      pending.push(prepared.pending);
      if (prepared.redaction) {
        redactions.push({
          type: 'output.redacted',
          threadId: thread.threadId,
          payload: prepared.redaction,
        } as EventDraft);
      }
      return prepared.pending.stored;
    },
    facts: async (facts: { type: string; payload: Record<string, unknown> }[]) => {
      const created = pending.map((p) => artifactCreated(ids, p.stored));
      const ended = facts.map((fact) => ({ ...ids, type: fact.type, payload: fact.payload }) as EventDraft);
      await append([...created, ...redactions, ...ended]);
    },
  };
  return { ids, append, recorder };
}
