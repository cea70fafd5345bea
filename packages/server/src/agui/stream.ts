import { type AGUIEvent, EventType } from '@ag-ui/core';
import { type OarError, RECONCILE_ACTION_TYPE, RECONCILE_DECISIONS, type RuntimeEvent } from '@oar/protocol';
import {
  type ApiKeyRecord,
  DEFAULT_WORKSPACE,
  isLiveEvent,
  notFound,
  OarRuntimeError,
  resolutionOf,
  sessionIdIn,
  toOarError,
} from '@oar/runtime';
import type { Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import { ownSession } from '../auth.js';
import { httpError } from '../errors.js';
import type { ServerDeps } from '../route.js';
import type { StreamOptions } from '../sse.js';
import { SlowClient, writeWithin } from '../sse.js';
import { ifBusyOf, lastUserText, type RunAgentInputBody } from './input.js';
import { offeredDecisions, type ResumeDecision, resumeDecision } from './interrupts.js';
import { jsonPatch } from './json-patch.js';
import { AguiProjector, type KnownSubagent, runStartedEvent } from './projector.js';

/**
 * One AG-UI run over HTTP: `RunAgentInput` in, a Server-Sent Events stream of AG-UI 1.0 events out.
 *
 * A run either submits a turn (the last user message; the run id is the client turn id, so a retried POST finds
 * the same turn and streams it again from its start) or, with `resume` entries, answers the pending decisions
 * and follows the turn that waited for them. Either way the stream follows the session's events
 * (`runtime.subscribe` with live deltas) through `AguiProjector`, adds the thread read model as STATE_SNAPSHOT /
 * STATE_DELTA, and ends with RUN_FINISHED (success, cancelled or interrupt) or RUN_ERROR.
 *
 * A turn waiting for a decision is an interrupt once the session has settled — nothing runs and nothing is
 * claimable (`runtime.settled`), so a decision pending while other actions of the graph still run does not end
 * the run early. Closing the connection does not cancel the turn: it is durable; interrupt it with
 * `POST /v1/sessions/{id}/interrupt`, or reconnect with the same run id.
 */

export interface AguiStreamOptions extends StreamOptions {
  /** The least time between two STATE_DELTA events (default 200 ms): a burst of events makes one delta. */
  statePeriodMs?: number;
}

/** Where a run happens: the session (its id is the AG-UI thread id) and its main thread. */
export interface AguiTarget {
  sessionId: string;
  mainThreadId: string;
  /** The session's workspace (its pending decisions are looked up there). */
  workspaceId?: string;
}

/** Events a slow client may leave unread before the stream stops reading the log for it. */
const PUMP_LIMIT = 2_000;

/**
 * Before the stream starts (errors are JSON responses): the session — `POST /v1/agui` creates it in the key's
 * workspace when it does not exist, and another workspace's session is 404 — and a turn input when there is
 * nothing to resume.
 */
export async function prepareAguiRun(
  deps: ServerDeps,
  key: ApiKeyRecord | undefined,
  input: RunAgentInputBody,
  fixedSessionId?: string,
): Promise<AguiTarget> {
  const resuming = (input.resume?.length ?? 0) > 0;
  const text = lastUserText(input);
  if (!resuming && text === undefined) {
    throw httpError(
      'invalid_input',
      'the run has no user message to submit as the turn input (and nothing to resume)',
      {
        details: { where: 'body', issues: [{ path: 'messages', message: 'no non-empty user message' }] },
      },
    );
  }
  // The thread id names a session of the key's workspace (the same one on every run): another workspace's session
  // id becomes an id of this one, so it looks exactly like an unused id (store/workspaces.ts `sessionIdIn`).
  const sessionId = fixedSessionId ?? sessionIdIn(key?.workspaceId ?? DEFAULT_WORKSPACE, input.threadId);
  if (fixedSessionId === undefined) {
    const workspaceId = await deps.workspaces.ofSession(sessionId);
    if (workspaceId === undefined) {
      if (resuming) throw notFound('session', sessionId);
      try {
        await deps.runtime.createSession({
          sessionId,
          ...(text ? { title: text.slice(0, 80) } : {}),
          ...(key ? { workspaceId: key.workspaceId } : {}),
        });
      } catch (error) {
        // Created meanwhile by a concurrent run: whose it is decides below.
        if (toOarError(error).code !== 'session_exists') throw error;
      }
    }
    await ownSession(deps, key, sessionId);
  }
  const workspaceId = await deps.workspaces.ofSession(sessionId);
  return {
    sessionId,
    mainThreadId: await deps.runtime.commands.mainThreadId(sessionId),
    ...(workspaceId !== undefined ? { workspaceId } : {}),
  };
}

/**
 * The session's events, read ahead into a bounded buffer: started before a command so that the live deltas of
 * the call it causes are heard from the first one (`subscribe` listens as soon as it is first pulled).
 */
class EventPump {
  private readonly items: RuntimeEvent[] = [];
  private wake: (() => void) | undefined;
  private resume: (() => void) | undefined;
  done = false;
  error: unknown;

  constructor(
    source: (signal: AbortSignal) => AsyncGenerator<RuntimeEvent>,
    private readonly controller: AbortController,
  ) {
    void this.run(source(controller.signal));
  }

  /** Stop reading (the subscription ends). */
  close(): void {
    this.controller.abort();
  }

  private async run(source: AsyncGenerator<RuntimeEvent>): Promise<void> {
    try {
      for await (const event of source) {
        this.items.push(event);
        this.wake?.();
        if (this.items.length >= PUMP_LIMIT) await new Promise<void>((resolve) => (this.resume = resolve));
      }
    } catch (error) {
      this.error = error;
    } finally {
      this.done = true;
      this.wake?.();
    }
  }

  get empty(): boolean {
    return this.items.length === 0;
  }

  /** The next event, `timeout` after `ms` without one, or `done` when the subscription ended. */
  async next(ms: number): Promise<RuntimeEvent | 'timeout' | 'done'> {
    if (this.items.length === 0 && !this.done) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        timer = setTimeout(resolve, ms);
      });
      clearTimeout(timer);
      this.wake = undefined;
    }
    const event = this.items.shift();
    if (this.items.length < PUMP_LIMIT / 2 && this.resume) {
      const resume = this.resume;
      this.resume = undefined;
      resume();
    }
    if (event) return event;
    return this.done ? 'done' : 'timeout';
  }
}

/** The sequence just before a turn's `turn.submitted` (a retried run streams the turn from its start). */
async function turnStart(deps: ServerDeps, target: AguiTarget, turnId: string): Promise<number> {
  let after = 0;
  for (;;) {
    const page = await deps.runtime.queries.readEvents(target.sessionId, {
      after,
      limit: 1_000,
      threadId: target.mainThreadId,
    });
    const found = page.find((e) => e.type === 'turn.submitted' && e.turnId === turnId);
    if (found) return found.sequence - 1;
    const last = page.at(-1);
    if (!last) return after;
    after = last.sequence;
  }
}

/** The decision a resume entry answers was resolved already, or never existed: the runtime's own error. */
async function notPending(deps: ServerDeps, sessionId: string, actionId: string, pending: string[]) {
  const event = await resolutionOf(deps.runtime.store.db, sessionId, actionId);
  if (event) {
    const payload = event.payload as { decision?: string; resolvedBy?: string };
    return new OarRuntimeError(
      'decision_already_resolved',
      `interrupt "${actionId}" was already answered: ${payload.decision} by ${payload.resolvedBy ?? 'user'} at ${event.timestamp}`,
      { details: { interruptId: actionId, decision: payload.decision, resolvedAt: event.timestamp } },
    );
  }
  return new OarRuntimeError(
    'action_not_found',
    `no pending interrupt has id "${actionId}" (${pending.length > 0 ? `pending: ${pending.join(', ')}` : 'nothing is pending'})`,
    { details: { interruptId: actionId, pending } },
  );
}

/** The structured error a client may see: an unexpected failure's message stays in the server (as errors.ts does). */
function clientError(error: unknown): OarError {
  const oar = toOarError(error);
  return oar.code === 'internal_error'
    ? { ...oar, message: 'internal error (see the server log for this request id)', details: {} }
    : oar;
}

/** A RUN_ERROR before anything of a turn was projected. */
function runError(error: OarError): AGUIEvent {
  return { type: EventType.RUN_ERROR, message: error.message, code: error.code, rawEvent: { error } };
}

export function aguiStream(
  c: Context,
  deps: ServerDeps,
  key: ApiKeyRecord | undefined,
  input: RunAgentInputBody,
  target: AguiTarget,
  options: AguiStreamOptions,
): Response {
  const { runtime } = deps;
  const { sessionId, mainThreadId } = target;
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const slowClientMs = options.slowClientMs ?? 30_000;
  const statePeriodMs = options.statePeriodMs ?? 200;
  // SUBAGENT_* are AG-UI 1.0 events: a client that does not say it speaks 1.0 gets attribution only.
  const subagentEvents = input.protocolVersion !== undefined && Number.parseFloat(input.protocolVersion) >= 1;
  return streamSSE(c, async (stream) => {
    options.inflight?.enter();
    const stop = new AbortController();
    let clientGone = false;
    stream.onAbort(() => {
      clientGone = true;
      stop.abort();
    });
    const onClosing = () => stop.abort();
    options.closing?.addEventListener('abort', onClosing);
    const send = async (events: AGUIEvent[]) => {
      for (const event of events) {
        await writeWithin(slowClientMs, () => stream.writeSSE({ data: JSON.stringify(event) }));
      }
    };
    const heartbeat = setInterval(() => {
      void stream.write(': heartbeat\n\n').catch(() => stop.abort());
    }, heartbeatMs);
    let projector: AguiProjector | undefined;
    let ended = false;
    try {
      await send([runStartedEvent(input.threadId, input.runId)]);
      const subscribe = (after: number) => {
        const controller = new AbortController();
        stop.signal.addEventListener('abort', () => controller.abort(), { once: true });
        return new EventPump((signal) => runtime.subscribe(sessionId, { after, signal, deltas: true }), controller);
      };
      let pump: EventPump;
      let turnId: string;
      let adopted: KnownSubagent[] = [];
      let idle = false;
      if ((input.resume?.length ?? 0) > 0) {
        ({ pump, turnId, adopted, idle } = await resume(deps, key, input, target, subscribe));
      } else {
        ({ pump, turnId } = await submit(deps, input, target, subscribe));
      }
      projector = new AguiProjector({
        threadId: input.threadId,
        runId: input.runId,
        mainThreadId,
        turnId,
        subagentEvents,
      });
      await send(projector.adopt(adopted));

      // The state: the main thread's read model, then JSON Patch deltas at most every statePeriodMs.
      let state: unknown;
      let stateDirty = false;
      let stateAt = 0;
      const readState = async () =>
        JSON.parse(JSON.stringify(await runtime.getThreadRead({ sessionId, threadId: mainThreadId }))) as unknown;
      state = await readState();
      stateAt = Date.now();
      await send([{ type: EventType.STATE_SNAPSHOT, snapshot: state }]);
      if (idle) {
        // Only lost actions were answered (happened / not_happened): recorded, and no turn runs to follow.
        await send(projector.finish({ kind: 'success' }));
        ended = true;
        return;
      }
      const flushState = async () => {
        const next = await readState();
        const delta = jsonPatch(state, next);
        state = next;
        stateDirty = false;
        stateAt = Date.now();
        if (delta.length > 0) await send([{ type: EventType.STATE_DELTA, delta }]);
      };

      // A pending decision ends the run as an interrupt once the session has settled and the stream caught up.
      let cursor = 0;
      let settling = false;
      let settledAt: number | undefined;
      // A runner's questions this stream has seen (AskedWatch): a look reads only what is new.
      const asked = { known: new Set<string>(), cursor: 0 };
      const settle = () => {
        if (settling) return;
        settling = true;
        void (async () => {
          try {
            // A runner's question ends the run as an interrupt at once: the runner waits for the resume, alive.
            await runtime.settled(sessionId, { orAsked: asked });
          } catch {
            await new Promise((resolve) => setTimeout(resolve, 500));
          }
          settledAt = await runtime.queries.lastSequence(sessionId);
        })()
          .catch(() => undefined)
          .finally(() => {
            settling = false;
          });
      };

      for (;;) {
        if (stop.signal.aborted) break;
        if (projector.end) {
          await flushState();
          await send(projector.finish(projector.end));
          ended = true;
          break;
        }
        if (settledAt !== undefined && cursor >= settledAt) {
          settledAt = undefined;
          if (projector.pendingDecisions.length > 0) {
            // AG-UI: the state a resume needs goes out right before the RUN_FINISHED that carries the interrupts.
            const closing = projector.finishInterrupted();
            state = await readState();
            closing.splice(closing.length - 1, 0, { type: EventType.STATE_SNAPSHOT, snapshot: state });
            await send(closing);
            ended = true;
            break;
          }
        }
        if (projector.pendingDecisions.length > 0 && settledAt === undefined) settle();
        const item = await pump.next(stateDirty ? Math.max(0, stateAt + statePeriodMs - Date.now()) : 250);
        if (item === 'done') {
          if (pump.error) throw pump.error;
          break;
        }
        if (item === 'timeout') {
          if (stateDirty && Date.now() - stateAt >= statePeriodMs) await flushState();
          continue;
        }
        await send(projector.push(item));
        if (!isLiveEvent(item)) {
          cursor = item.sequence;
          if (item.threadId === mainThreadId) stateDirty = true;
        }
        if (stateDirty && pump.empty && Date.now() - stateAt >= statePeriodMs) await flushState();
      }
      if (!ended && !clientGone) {
        // The server (or its runtime) is closing: the turn goes on elsewhere or after a restart.
        await send(
          projector.fail(
            options.closing?.aborted
              ? {
                  code: 'server_closing',
                  message: 'the server is shutting down; the turn goes on: POST the same run again to follow it',
                  retryable: true,
                }
              : {
                  code: 'runtime_closing',
                  message: 'the runtime is shutting down; the turn goes on: POST the same run again to follow it',
                  retryable: true,
                },
          ),
        ).catch(() => undefined);
      }
    } catch (error) {
      if (!(error instanceof SlowClient) && !ended && !clientGone) {
        const failure = clientError(error);
        const events = projector && !projector.done ? projector.fail(failure) : [runError(failure)];
        await send(events).catch(() => undefined);
      }
    } finally {
      clearInterval(heartbeat);
      options.closing?.removeEventListener('abort', onClosing);
      stop.abort();
      options.inflight?.exit();
    }
  });
}

type Subscribe = (after: number) => EventPump;

/** A new run: submit the last user message as turn `runId` — or, when that turn exists, stream it again. */
async function submit(
  deps: ServerDeps,
  input: RunAgentInputBody,
  target: AguiTarget,
  subscribe: Subscribe,
): Promise<{ pump: EventPump; turnId: string }> {
  const { runtime } = deps;
  const turnId = input.runId;
  const read = await runtime.getThreadRead({ sessionId: target.sessionId, threadId: target.mainThreadId });
  if (!read.turns.some((t) => t.turnId === turnId)) {
    // AG-UI: a thread with unanswered interrupts takes a resume, not new input.
    const pending = (await runtime.pendingDecisions({ workspaceId: target.workspaceId })).filter(
      (d) => d.sessionId === target.sessionId,
    );
    if (pending.length > 0) {
      throw new OarRuntimeError(
        'interrupts_pending',
        `the thread waits for ${pending.length} decision(s): answer them with "resume" entries (${pending.map((p) => p.actionId).join(', ')})`,
        { details: { interruptIds: pending.map((p) => p.actionId) } },
      );
    }
    const after = await runtime.queries.lastSequence(target.sessionId);
    const pump = subscribe(after);
    const ifBusy = ifBusyOf(input);
    const submitted = await runtime.submitTurn({
      sessionId: target.sessionId,
      threadId: target.mainThreadId,
      input: lastUserText(input) as string,
      turnId,
      ...(ifBusy ? { ifBusy } : {}),
    });
    if (!submitted.duplicate) return { pump, turnId };
    // Submitted meanwhile by a concurrent retry: follow it from its start like any retry.
    pump.close();
  }
  return { pump: subscribe(await turnStart(deps, target, turnId)), turnId };
}

/** A resumed run: answer every pending decision as the entries say, then follow the turn that waited. */
async function resume(
  deps: ServerDeps,
  key: ApiKeyRecord | undefined,
  input: RunAgentInputBody,
  target: AguiTarget,
  subscribe: Subscribe,
): Promise<{ pump: EventPump; turnId: string; adopted: KnownSubagent[]; idle: boolean }> {
  const { runtime } = deps;
  const entries = input.resume ?? [];
  const pending = (await runtime.pendingDecisions({ workspaceId: target.workspaceId })).filter(
    (d) => d.sessionId === target.sessionId,
  );
  // A lost action may be answered in a resume too (happened, not_happened, retry); it holds nothing, so a resume
  // need not answer it. This session's only: its snapshot lists them.
  const { snapshot } = await runtime.getSession({ sessionId: target.sessionId, limit: 1 });
  const lost = snapshot.threads
    .flatMap((t) => t.unreconciledActions ?? [])
    .map((u) => ({ ...u, actionType: RECONCILE_ACTION_TYPE, decisions: [...RECONCILE_DECISIONS] }));
  const byId = new Map<string, { actionType: string; decisions?: string[]; turnId?: string }>([
    ...pending.map((p) => [p.actionId, p] as const),
    ...lost.map((u) => [u.actionId, u] as const),
  ]);
  // Every entry is checked before any is answered: a bad one changes nothing.
  const seen = new Set<string>();
  const decisions: ResumeDecision[] = [];
  for (const entry of entries) {
    if (seen.has(entry.interruptId)) {
      throw new OarRuntimeError('invalid_decision', `interrupt "${entry.interruptId}" is answered twice`, {
        details: { interruptId: entry.interruptId },
      });
    }
    seen.add(entry.interruptId);
    const decision = byId.get(entry.interruptId);
    if (!decision) {
      throw await notPending(
        deps,
        target.sessionId,
        entry.interruptId,
        pending.map((p) => p.actionId),
      );
    }
    const answer = resumeDecision(entry);
    const offered = offeredDecisions(decision);
    if (!offered.includes(answer.decision)) {
      throw new OarRuntimeError(
        'invalid_decision',
        `interrupt "${entry.interruptId}" offers ${offered.join(', ')}; "${answer.decision}" is not one of them`,
        { details: { interruptId: entry.interruptId, decision: answer.decision, offered } },
      );
    }
    decisions.push(answer);
  }
  // A retry starts a turn of its own: one per resume, and only when no turn runs or waits (checked here, so a resume
  // that could not be applied whole changes nothing).
  const retries = decisions.filter((d) => d.decision === 'retry').map((d) => d.actionId);
  const busy = (await runtime.getThreadRead({ sessionId: target.sessionId, threadId: target.mainThreadId }))
    .activeTurnId;
  if (retries.length > 1 || (retries.length === 1 && (busy !== undefined || pending.length > 0))) {
    throw new OarRuntimeError(
      'invalid_decision',
      'a resume retries at most one lost action, and only while no turn runs or waits; answer the rest first',
      { details: { interruptIds: retries } },
    );
  }
  const unanswered = pending.filter((p) => !seen.has(p.actionId)).map((p) => p.actionId);
  if (unanswered.length > 0) {
    throw new OarRuntimeError(
      'interrupts_pending',
      `a resume answers every open interrupt; unanswered: ${unanswered.join(', ')}`,
      { details: { interruptIds: unanswered } },
    );
  }
  const read = await runtime.getThreadRead({ sessionId: target.sessionId, threadId: target.mainThreadId });
  const first = byId.get(decisions[0]?.actionId ?? '');
  let turnId = read.activeTurnId ?? first?.turnId ?? input.runId;
  const subagents = await runtime.listSubagents({ sessionId: target.sessionId });
  const adopted: KnownSubagent[] = subagents.map((s) => ({
    subagentId: s.subagentId,
    childThreadId: s.childThreadId,
    agent: s.agent,
    parentThreadId: s.parentThreadId,
    status: s.status,
  }));
  const pump = subscribe(await runtime.queries.lastSequence(target.sessionId));
  for (const decision of decisions) {
    const answered = await runtime.respondAction({
      sessionId: target.sessionId,
      ...decision,
      ...(key ? { resolvedBy: `api_key:${key.keyId}` } : {}),
    });
    // A lost action run again (retry) runs in a turn of its own: that is the turn this run streams.
    if (answered.turnId && !read.activeTurnId) turnId = answered.turnId;
  }
  // Nothing was running and no answer started a turn: there is nothing to follow.
  const idle =
    read.activeTurnId === undefined &&
    !decisions.some((d) => byId.get(d.actionId)?.actionType !== RECONCILE_ACTION_TYPE || d.decision === 'retry');
  return { pump, turnId, adopted, idle };
}
