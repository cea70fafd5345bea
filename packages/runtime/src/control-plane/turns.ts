import { oarError } from '@oar/protocol';
import type { ScheduleFact } from '../config/schedules.js';
import {
  bothGuards,
  queueChanged,
  retryOnThreadChange,
  ThreadChangedError,
  threadBusy,
  threadUnchanged,
} from '../facts/queue.js';
import { endFailedTurn, reportsTo } from '../facts/turn-end.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import { threadView } from '../read-models/project.js';
import { bindingOf } from '../read-models/session.js';
import type { ThreadView, TurnTask } from '../read-models/thread-state.js';
import { fenceOutUnheld } from '../store/leases.js';
import { prepareAttachments, type TurnAttachmentInput } from './attachments.js';
import type { CommandContext } from './command-context.js';

/** The commands about a thread's turns: submit one, reorder the queue of those waiting, interrupt the running one. */

export interface SubmitTurnInput {
  sessionId: string;
  /** Defaults to the session's main thread. */
  threadId?: string;
  /** Give one to make submission idempotent: a repeated id returns the first result. */
  turnId?: string;
  input: string;
  source?: string;
  /**
   * What to do when the thread is running another turn: `enqueue` (wait in the queue), `reject` (`thread_busy`,
   * naming the running turn) or `interrupt` (go first in the queue and interrupt the running turn). Default: the
   * binding's `queuePolicy` (`queue` = enqueue).
   */
  ifBusy?: 'enqueue' | 'reject' | 'interrupt';
  /** Files for the turn (control-plane/attachments.ts): stored as artifacts, recorded on the turn. */
  attachments?: TurnAttachmentInput[];
  /** The schedule firing that submits it (config/schedules.ts ScheduleFact), recorded on `turn.submitted`. */
  schedule?: ScheduleFact;
}

export interface SubmitTurnResult {
  sessionId: string;
  threadId: string;
  turnId: string;
  status: 'accepted' | 'queued';
  duplicate: boolean;
}

export interface InterruptResult {
  interrupted: boolean;
  turnId?: string;
  /**
   * `cancelled`: the cancellation is recorded; `requested`: the lease holder has not acted on it yet; `ended`: the
   * turn ended on its own (completed or failed) before the request was acted on.
   */
  status?: 'cancelled' | 'requested' | 'ended';
}

export interface InterruptTurnInput {
  sessionId: string;
  /** Defaults to the session's main thread. */
  threadId?: string;
  /** Only this turn: when another one runs (this one ended meanwhile), nothing is interrupted. */
  turnId?: string;
  reason?: string;
  waitMs?: number;
}

/** A turn waiting in a thread's queue. */
export interface QueuedTurnRef {
  sessionId: string;
  threadId: string;
  turnId: string;
}

/**
 * What a command adds to a turn it submits: the turn's task (`start_task`: the turn is that task's attempt), facts
 * written with it (the task's, a parent's `subagent.input`), and a guard of its own.
 */
export interface SubmitExtras {
  task?: TurnTask;
  facts?: (ids: { threadId: string; turnId: string }, status: 'accepted' | 'queued') => EventDraft[];
  guard?: AppendGuard;
  /**
   * Facts recorded before the turn, in the same append, from the thread as read: a closed thread reopened with its
   * turn (`resume_subagent` with input), so a crash never leaves it reopened without the input. May throw to refuse.
   */
  reopen?: (thread: ThreadView) => EventDraft[];
}

export function submitTurn(ctx: CommandContext, input: SubmitTurnInput): Promise<SubmitTurnResult> {
  return submitTurnWith(ctx, input);
}

/** Submit a turn, with what the command adds to it (`SubmitExtras`). */
export async function submitTurnWith(
  ctx: CommandContext,
  input: SubmitTurnInput,
  extras: SubmitExtras = {},
): Promise<SubmitTurnResult> {
  if (typeof input.input !== 'string' || input.input.trim() === '') {
    throw new OarRuntimeError('invalid_input', 'a turn needs non-empty input text');
  }
  const threadId = input.threadId ?? (await ctx.mainThreadId(input.sessionId));
  const session = await ctx.session(input.sessionId);
  const binding = bindingOf(session) ?? ctx.deps.bindings.template();
  const ifBusy = input.ifBusy ?? (binding.queuePolicy === 'reject' ? 'reject' : 'enqueue');
  const attached = input.attachments?.length
    ? prepareAttachments(
        input.sessionId,
        input.attachments,
        await ctx.redactorFor(input.sessionId),
        binding.limits.maxArtifactBytes,
      )
    : undefined;
  const submitted = await retryOnThreadChange<SubmitTurnResult>(async () => {
    const thread = await ctx.log.thread(input.sessionId, threadId);
    const reopened = extras.reopen?.(thread) ?? [];
    if (thread.status === 'closed' && !reopened.length) {
      throw new OarRuntimeError('thread_closed', `thread "${threadId}" is closed`);
    }
    if (input.turnId) {
      const existing = thread.turns.find((t) => t.turnId === input.turnId);
      if (existing) {
        return {
          sessionId: input.sessionId,
          threadId,
          turnId: existing.turnId,
          status: existing.status === 'queued' ? 'queued' : 'accepted',
          duplicate: true,
        };
      }
    }
    const turnId = input.turnId ?? newId('turn');
    const busy = threadBusy(thread);
    if (busy && ifBusy === 'reject') {
      throw new OarRuntimeError('thread_busy', `thread "${threadId}" is running turn ${thread.activeTurnId}`, {
        retryable: true,
        details: { activeTurnId: thread.activeTurnId },
      });
    }
    const status = busy ? 'queued' : 'accepted';
    const source = input.source ?? 'user';
    const attachments = attached ? { attachments: attached.recorded } : {};
    const drafts: EventDraft[] = [
      ...reopened,
      {
        type: 'turn.submitted',
        threadId,
        turnId,
        status,
        payload: {
          status,
          input: input.input,
          source,
          ...attachments,
          ...(extras.task ? { task: extras.task } : {}),
          ...(input.schedule ? { schedule: input.schedule } : {}),
        },
      },
      ...(attached?.facts({ threadId, turnId }) ?? []),
      ...subagentInput(thread, turnId, status, input.input),
      ...(extras.facts?.({ threadId, turnId }, status) ?? []),
    ];
    if (busy) {
      const entry = { turnId, input: input.input, enqueuedAt: new Date().toISOString(), source };
      // An interrupting turn goes first: it is the next to run once the running one is cancelled.
      const queue = ifBusy === 'interrupt' ? [entry, ...thread.queue] : [...thread.queue, entry];
      drafts.push(queueChanged(thread, queue, 'enqueued', turnId));
    }
    // Under the session lock the thread must still be as read: concurrent submits cannot drop each other's turn.
    await ctx.append(input.sessionId, drafts, {
      guard: bothGuards(threadUnchanged(thread), extras.guard) as AppendGuard,
      ...(attached ? { artifacts: attached.artifacts } : {}),
    });
    return { sessionId: input.sessionId, threadId, turnId, status, duplicate: false };
  });
  if (ifBusy === 'interrupt' && submitted.status === 'queued' && !submitted.duplicate) {
    // Recorded after the turn, so the turn is never lost to a failed interrupt; `waitMs: 0`: the caller does not
    // wait for the cancellation (it is a durable request the thread's worker acts on within a step).
    await interruptTurn(ctx, {
      sessionId: input.sessionId,
      threadId,
      reason: `interrupted by turn ${submitted.turnId}`,
      waitMs: 0,
    });
  }
  return submitted;
}

export async function removeQueuedTurn(ctx: CommandContext, input: QueuedTurnRef): Promise<void> {
  await reorderQueue(ctx, input, 'removed', (queue, entry, thread) => {
    // A task's attempt leaves with its task (cancel_task, pause_task): removed alone, the task would wait forever.
    const task = thread.turns.find((t) => t.turnId === entry.turnId)?.task;
    if (task) {
      throw new OarRuntimeError(
        'invalid_input',
        `turn ${entry.turnId} is an attempt of task ${task.taskId}: cancel or pause the task instead`,
        { details: { turnId: entry.turnId, taskId: task.taskId } },
      );
    }
    return queue.filter((q) => q !== entry);
  });
}

export async function promoteQueuedTurn(ctx: CommandContext, input: QueuedTurnRef): Promise<void> {
  await reorderQueue(ctx, input, 'promoted', (queue, entry) => [entry, ...queue.filter((q) => q !== entry)]);
}

async function reorderQueue(
  ctx: CommandContext,
  input: QueuedTurnRef,
  change: 'removed' | 'promoted',
  reorder: (queue: ThreadView['queue'], entry: ThreadView['queue'][number], thread: ThreadView) => ThreadView['queue'],
): Promise<void> {
  await retryOnThreadChange(async () => {
    const thread = await ctx.log.thread(input.sessionId, input.threadId);
    const entry = thread.queue.find((q) => q.turnId === input.turnId);
    if (!entry) throw notFound('queued_turn', input.turnId);
    await ctx.append(
      input.sessionId,
      [queueChanged(thread, reorder(thread.queue, entry, thread), change, input.turnId)],
      {
        guard: threadUnchanged(thread),
      },
    );
  });
}

/**
 * Interrupt the running turn: a durable request on the thread and on every running descendant, which the lease
 * holder acts on within one step (`cancel` tools stop through their signal, `block` tools finish first) and then
 * records the cancellation. A thread nobody is driving (waiting for a decision, or its worker gone) is cancelled
 * here and now. Waits up to `waitMs` (default 10 s) for the cancellation to be recorded.
 */
export async function interruptTurn(ctx: CommandContext, input: InterruptTurnInput): Promise<InterruptResult> {
  const threadId = input.threadId ?? (await ctx.mainThreadId(input.sessionId));
  const models = await ctx.log.allReadModels(input.sessionId);
  const root = threadView(models, threadId);
  if (!root) throw notFound('thread', threadId);
  const turnId = root.activeTurnId;
  if (!turnId || (input.turnId !== undefined && input.turnId !== turnId)) return { interrupted: false };
  const reason = input.reason ?? 'the turn was interrupted';
  // The thread and its running descendants, deepest last (children are cancelled first below).
  const targets: ThreadView[] = [];
  const visit = (thread: ThreadView) => {
    if (!thread.activeTurnId) return;
    targets.push(thread);
    for (const sub of thread.subagents) {
      const child = sub.status === 'running' ? threadView(models, sub.childThreadId) : undefined;
      // Only a child working for this turn — its delegation's first turn: a spawned sub-agent, or a delegated
      // one given more input later, works on its own and goes on.
      const forThisTurn =
        child?.parent?.turnId === thread.activeTurnId && child?.activeTurnId === child?.turns[0]?.turnId;
      if (child && forThisTurn) visit(child);
    }
  };
  visit(root);
  await ctx.append(
    input.sessionId,
    targets.map((thread) => ({
      type: 'thread.updated' as const,
      threadId: thread.threadId,
      payload: {
        changed: ['interrupt'],
        interrupt: { turnId: thread.activeTurnId, reason: thread === root ? reason : 'parent interrupted' },
      },
    })),
  );
  for (const thread of targets.reverse()) await cancelUnheld(ctx, input.sessionId, thread.threadId);
  let ended: string | undefined;
  await ctx.deps.notifier.waitFor(
    input.sessionId,
    async () => {
      const thread = await ctx.log.thread(input.sessionId, threadId);
      ended = thread.activeTurnId === turnId ? undefined : thread.turns.find((t) => t.turnId === turnId)?.status;
      return ended !== undefined;
    },
    input.waitMs ?? 10_000,
  );
  // The turn may also have ended on its own just before the request was acted on: say what really happened.
  if (ended === undefined) return { interrupted: true, turnId, status: 'requested' };
  return { interrupted: true, turnId, status: ended === 'cancelled' ? 'cancelled' : 'ended' };
}

/** Record the cancellation of a thread's interrupted turn when no worker holds the thread. */
async function cancelUnheld(ctx: CommandContext, sessionId: string, threadId: string): Promise<void> {
  const thread = await ctx.log.thread(sessionId, threadId);
  const turn = thread.turns.find((t) => t.turnId === thread.activeTurnId);
  if (!turn || thread.interrupt?.turnId !== turn.turnId) return;
  const dialect = ctx.log.store.sql;
  const unheld: AppendGuard = async (tx) => {
    if (await fenceOutUnheld(tx, dialect, sessionId, threadId)) throw new ThreadChangedError(threadId);
  };
  await endFailedTurn(ctx.writer(unheld), thread, turn, oarError('interrupted', thread.interrupt.reason), 'cancelled');
}

/**
 * A turn for a sub-agent's thread is input to that sub-agent: `subagent.input` on its parent (the sub-agent's entry
 * there is working again), whoever submits it — `send_subagent_input`, or a plain submit to the child thread.
 */
function subagentInput(thread: ThreadView, turnId: string, status: 'accepted' | 'queued', input: string): EventDraft[] {
  const parent = reportsTo(thread);
  if (!parent) return [];
  return [
    {
      type: 'subagent.input',
      threadId: parent.threadId,
      subagentId: parent.subagentId,
      payload: { childThreadId: thread.threadId, turnId, status, input: input.slice(0, 500) },
    },
  ];
}
