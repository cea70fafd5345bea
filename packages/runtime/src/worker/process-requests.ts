import { artifactCreated } from '../facts/action.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import type { EventLog } from '../log/event-log.js';
import { loadReadModels } from '../log/read-model-rows.js';
import type { SessionState } from '../read-models/session.js';
import type { ProcessRequest, ProcessState, ThreadState } from '../read-models/thread-state.js';
import { RedactionTally, redactionFact } from '../redaction/tally.js';
import type { BoundConfig } from '../scheduler/engine.js';
import { type PendingArtifact, prepareArtifact } from '../store/artifacts.js';
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

/** Requests being carried out now in this OS process (a second look while one runs leaves it alone). */
const acting = new Set<string>();

export async function actOnProcessRequests(deps: ProcessRequestDeps, sessionId: string): Promise<void> {
  if (!backgroundProcesses.runsFor(sessionId)) return;
  const models = await deps.log.allReadModels(sessionId);
  for (const thread of models.threads.values()) {
    for (const request of thread.processRequests ?? []) {
      const process = thread.processes?.find((p) => p.processId === request.processId);
      if (!process || acting.has(request.requestId) || !runsHere(sessionId, thread, request.processId)) continue;
      acting.add(request.requestId);
      try {
        await carryOut(deps, models.session, thread, process, request);
      } finally {
        acting.delete(request.requestId);
      }
    }
  }
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
  const text = request.input ?? '';
  if (!entry.group.write(text, request.closeStdin === true)) {
    await out.append([
      {
        type: 'runtime.warning',
        ...out.ids,
        payload: {
          code: 'process_input_closed',
          message: `process ${process.processId} has closed its input: the text was not written`,
          retryable: false,
          details: { processId: process.processId, requestId: request.requestId },
        },
      } as EventDraft,
    ]);
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
}

/**
 * At a runtime's close: the background processes it stopped are recorded as ended (`process.terminated`, reason
 * `runtime_closing`, with their output), so no session lists them as running until its thread is next claimed.
 */
export async function recordStopped(deps: ProcessRequestDeps, stopped: readonly BackgroundProcess[]): Promise<void> {
  for (const entry of stopped) {
    if (entry.recorded) continue;
    const models = await deps.log.allReadModels(entry.sessionId);
    const thread = models.threads.get(entry.threadId);
    const process = thread?.processes?.find((p) => p.processId === entry.processId);
    if (!thread || !process) continue;
    const out = await outsideWriter(deps, models.session, thread, process);
    await recordOnce(entry, await entry.group.ended, out, {});
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
    // The output is redacted before it is stored, as a call's is (worker/thread-engine.ts).
    artifact: async (content: { name: string; mime: string; text?: string; bytes?: Uint8Array }) => {
      const tally = new RedactionTally();
      const clean = {
        ...content,
        ...(content.text !== undefined ? { text: config.redactor.redactText(content.text, tally) } : {}),
        ...(content.bytes !== undefined ? { bytes: config.redactor.redactBytes(content.bytes, tally) } : {}),
      };
      const prepared = prepareArtifact(sessionId, clean, config.limits.maxArtifactBytes);
      pending.push(prepared);
      const fact = redactionFact(tally, { sink: 'artifact', artifactId: prepared.stored.artifactId });
      if (fact) redactions.push({ type: 'output.redacted', threadId: thread.threadId, payload: fact } as EventDraft);
      return prepared.stored;
    },
    facts: async (facts: { type: string; payload: Record<string, unknown> }[]) => {
      const created = pending.map((p) => artifactCreated(ids, p.stored));
      const ended = facts.map((fact) => ({ ...ids, type: fact.type, payload: fact.payload }) as EventDraft);
      await append([...created, ...redactions, ...ended]);
    },
  };
  return { ids, append, recorder };
}
