import { oarError } from '@oar/protocol';
import { agentByName } from '../config/agents.js';
import { retryOnThreadChange, ThreadChangedError, threadUnchanged, withdrawTurns } from '../facts/queue.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { AppendGuard, EventDraft } from '../log/draft.js';
import { loadReadModels } from '../log/read-model-rows.js';
import type { ReadModels } from '../read-models/project.js';
import { bindingOf } from '../read-models/session.js';
import { nextTurn, type ThreadState } from '../read-models/thread-state.js';
import type { CommandContext } from './command-context.js';
import { interruptTurn, type SubmitTurnResult, submitTurnWith } from './turns.js';

/**
 * The commands about sub-agents — child threads that report to a parent thread (docs/engine.md "Sub-agents"):
 * `spawn_subagent`, `send_subagent_input`, `wait_subagents`, `close_subagent`, `resume_subagent`. The model spawns
 * them by delegating (executors/agent.ts); these are a person's or client's hands on the same children. A
 * sub-agent's state is its entry in its parent's `subagents`, moved by facts on the parent thread (`subagent.*`).
 */

export interface SpawnSubagentInput {
  sessionId: string;
  /** The parent thread (default: the session's main thread). */
  threadId?: string;
  /** The agent that runs the child thread (one of the session's). */
  agent: string;
  /** Its first turn's input. */
  input: string;
  title?: string;
  /** Give one to make spawning idempotent: the same id on the same parent returns the sub-agent spawned first. */
  subagentId?: string;
}

export interface SubagentInput {
  sessionId: string;
  subagentId: string;
  input: string;
  /** What to do while the sub-agent is working (as `submit_turn`'s; default: the binding's queue policy). */
  ifBusy?: 'enqueue' | 'reject' | 'interrupt';
}

export interface WaitSubagentsInput {
  sessionId: string;
  /** The sub-agents to wait for (default: every one of `threadId`, else of the session, that is working). */
  subagentIds?: string[];
  threadId?: string;
  /** How long to wait at most (default 30 s, at most an hour). */
  timeoutMs?: number;
}

export interface CloseSubagentInput {
  sessionId: string;
  subagentId: string;
  reason?: string;
}

export interface ResumeSubagentInput {
  sessionId: string;
  subagentId: string;
  /** A turn to give it once reopened. */
  input?: string;
  reason?: string;
}

/** A sub-agent as its parent records it. */
export interface SubagentView {
  subagentId: string;
  agent: string;
  childThreadId: string;
  parentThreadId: string;
  /** `running` while a turn of it works; `completed` / `failed` as its last turn ended; `idle` reopened; `closed`. */
  status: string;
}

/** Start a sub-agent: a child thread of `agent` under the parent thread, with its first turn. */
export async function spawnSubagent(
  ctx: CommandContext,
  input: SpawnSubagentInput,
): Promise<{ subagentId: string; childThreadId: string; turnId: string; duplicate: boolean }> {
  if (input.input.trim() === '') throw new OarRuntimeError('invalid_input', 'a sub-agent needs non-empty input');
  const session = await ctx.session(input.sessionId);
  const binding = bindingOf(session) ?? ctx.deps.bindings.template();
  if (input.agent !== 'main' && !agentByName(binding, input.agent)) {
    throw new OarRuntimeError('unknown_agent', `agent "${input.agent}" is not configured`, {
      details: { agent: input.agent },
    });
  }
  const parent = await ctx.log.thread(input.sessionId, input.threadId ?? (await ctx.mainThreadId(input.sessionId)));
  if (parent.status === 'closed') throw new OarRuntimeError('thread_closed', `thread "${parent.threadId}" is closed`);
  if (input.subagentId) {
    // An id is the session's: the same spawn again is that sub-agent; another one under that id is refused.
    const known = subagentsOf(await ctx.log.allReadModels(input.sessionId)).find(
      (s) => s.subagentId === input.subagentId,
    );
    if (known) {
      const first = (await ctx.log.thread(input.sessionId, known.childThreadId)).turns[0];
      if (known.parentThreadId !== parent.threadId || known.agent !== input.agent || first?.input !== input.input) {
        throw new OarRuntimeError('subagent_exists', `sub-agent "${input.subagentId}" exists with another spawn`, {
          details: { subagentId: input.subagentId, parentThreadId: known.parentThreadId, agent: known.agent },
        });
      }
      return {
        subagentId: known.subagentId,
        childThreadId: known.childThreadId,
        turnId: first.turnId,
        duplicate: true,
      };
    }
  }
  if (parent.depth + 1 > binding.limits.maxSubagentDepth) {
    throw new OarRuntimeError(
      'subagent_depth_exceeded',
      `a sub-agent of thread "${parent.threadId}" would be at depth ${parent.depth + 1}; the limit is ${binding.limits.maxSubagentDepth}`,
      { details: { depth: parent.depth + 1, maxSubagentDepth: binding.limits.maxSubagentDepth } },
    );
  }
  const subagentId = input.subagentId ?? newId('sub');
  const childThreadId = newId('thr');
  const turnId = newId('turn');
  const title = input.title ?? input.input.slice(0, 120);
  const drafts: EventDraft[] = [
    {
      type: 'thread.started',
      threadId: childThreadId,
      payload: {
        agent: input.agent,
        title,
        parentThreadId: parent.threadId,
        depth: parent.depth + 1,
        spawnedBy: { threadId: parent.threadId, subagentId },
      },
    },
    {
      type: 'subagent.spawned',
      threadId: parent.threadId,
      subagentId,
      payload: {
        agentName: input.agent,
        childThreadId,
        objective: title,
        isolation: 'child_thread',
        spawnedBy: session.actor ?? 'control_plane',
      },
    },
    {
      type: 'turn.submitted',
      threadId: childThreadId,
      turnId,
      status: 'accepted',
      payload: { status: 'accepted', input: input.input, source: 'parent' },
    },
  ];
  // Under the session lock the id is still free on the parent (two spawns of one id cannot both land).
  await ctx.append(input.sessionId, drafts, { guard: subagentAbsent(input.sessionId, parent.threadId, subagentId) });
  return { subagentId, childThreadId, turnId, duplicate: false };
}

/** Give a sub-agent more to do: a turn of its child thread, recorded on the parent as `subagent.input` (turns.ts). */
export async function sendSubagentInput(ctx: CommandContext, input: SubagentInput): Promise<SubmitTurnResult> {
  const { sub } = await findSubagent(ctx, input.sessionId, input.subagentId);
  if (sub.status === 'closed') {
    throw new OarRuntimeError('thread_closed', `sub-agent "${sub.subagentId}" is closed: resume_subagent reopens it`, {
      details: { subagentId: sub.subagentId },
    });
  }
  // The submit records `subagent.input` on the parent itself (a turn for a child thread is input to its sub-agent).
  return submitTurnWith(ctx, {
    sessionId: input.sessionId,
    threadId: sub.childThreadId,
    input: input.input,
    source: 'parent',
    ...ifBusy(input),
  });
}

/**
 * Wait until none of the sub-agents is working (each ended its turn, failed or was closed), or `timeoutMs` passed.
 * Answers what each is then, and whether the wait ran out.
 */
export async function waitSubagents(
  ctx: CommandContext,
  input: WaitSubagentsInput,
  /** The caller went away (an HTTP client that disconnected): the wait ends as if it ran out. */
  signal?: AbortSignal,
): Promise<{ subagents: SubagentView[]; timedOut: boolean }> {
  const look = async () => {
    const models = await ctx.log.allReadModels(input.sessionId);
    if (!models.session) throw notFound('session', input.sessionId);
    const all = subagentsOf(models, input.threadId);
    const chosen = input.subagentIds
      ? input.subagentIds.map((id) => all.find((s) => s.subagentId === id) ?? Promise.reject(notFound('subagent', id)))
      : all;
    const subagents = await Promise.all(chosen);
    // Working: a turn of its thread runs or is about to (queued input counts), and it is not closed.
    const working = (s: SubagentView) => {
      const child = models.threads.get(s.childThreadId);
      return (
        child !== undefined &&
        child.status !== 'closed' &&
        (child.activeTurnId !== undefined || nextTurn(child) !== undefined)
      );
    };
    return { subagents, working };
  };
  const first = await look();
  // Without ids: those working now (a wait for every sub-agent ever spawned would be over before it began).
  const ids = new Set(input.subagentIds ?? first.subagents.filter(first.working).map((s) => s.subagentId));
  let latest = first.subagents.filter((s) => ids.has(s.subagentId));
  const done = await ctx.deps.notifier.waitFor(
    input.sessionId,
    async () => {
      const now = await look();
      latest = now.subagents.filter((s) => ids.has(s.subagentId));
      return !latest.some(now.working);
    },
    input.timeoutMs ?? 30_000,
    signal,
  );
  return { subagents: latest, timedOut: !done };
}

/** Close a sub-agent: its running turn is interrupted and its child thread takes no more turns (until resumed). */
export async function closeSubagent(ctx: CommandContext, input: CloseSubagentInput): Promise<void> {
  const { parent, sub } = await findSubagent(ctx, input.sessionId, input.subagentId);
  if (sub.status === 'closed') return;
  // Closed first, its turns not yet started withdrawn with it: nothing of it starts after; then the running one stops.
  await retryOnThreadChange(async () => {
    const child = await ctx.log.thread(input.sessionId, sub.childThreadId);
    const current = await ctx.log.thread(input.sessionId, parent.threadId);
    const withdrawn = withdrawTurns(
      child,
      child.turns.filter((t) => t.turnId !== child.activeTurnId),
      oarError('interrupted', input.reason ?? 'sub-agent closed'),
    );
    await ctx.append(
      input.sessionId,
      [
        {
          type: 'subagent.closed',
          threadId: current.threadId,
          turnId: current.activeTurnId ?? current.turns.at(-1)?.turnId ?? 'none',
          subagentId: sub.subagentId,
          payload: { reason: input.reason ?? 'closed' },
        },
        ...withdrawn,
        { type: 'thread.updated', threadId: sub.childThreadId, payload: { closed: true, status: 'completed' } },
      ],
      { guard: threadUnchanged(child) },
    );
  });
  await interruptTurn(ctx, {
    sessionId: input.sessionId,
    threadId: sub.childThreadId,
    reason: input.reason ?? 'sub-agent closed',
  });
}

/** Reopen a closed sub-agent (its child thread takes turns again), optionally with a turn to work on. */
export async function resumeSubagent(
  ctx: CommandContext,
  input: ResumeSubagentInput,
): Promise<{ subagentId: string; childThreadId: string; turnId?: string }> {
  const { parent, sub } = await findSubagent(ctx, input.sessionId, input.subagentId);
  if (sub.status !== 'closed') {
    throw new OarRuntimeError(
      'subagent_not_closed',
      `sub-agent "${sub.subagentId}" is ${sub.status}, not closed: send_subagent_input gives it more to do`,
      { details: { subagentId: sub.subagentId, status: sub.status } },
    );
  }
  if (input.input !== undefined && input.input.trim() === '') {
    throw new OarRuntimeError('invalid_input', 'a turn for the sub-agent needs non-empty input');
  }
  const reopen = (child: ThreadState): EventDraft[] => {
    // Reopened once: a second resume at the same time finds it open and is refused.
    if (child.status !== 'closed') throw reopenedMeanwhile(child);
    return [
      { type: 'thread.updated', threadId: sub.childThreadId, payload: { reopened: true, status: 'idle' } },
      {
        type: 'subagent.status',
        threadId: parent.threadId,
        subagentId: sub.subagentId,
        payload: { status: 'idle', detail: input.reason ?? 'resumed', childThreadId: sub.childThreadId },
      },
    ];
  };
  const ids = { subagentId: sub.subagentId, childThreadId: sub.childThreadId };
  if (input.input === undefined) {
    const child = await ctx.log.thread(input.sessionId, sub.childThreadId);
    await ctx.append(input.sessionId, reopen(child), { guard: stillClosed(child) });
    return ids;
  }
  // With its turn in the same append (and the parent's `subagent.input`): reopened and given work, or neither.
  const turn = await submitTurnWith(
    ctx,
    { sessionId: input.sessionId, threadId: sub.childThreadId, input: input.input, source: 'parent' },
    { reopen },
  );
  return { ...ids, turnId: turn.turnId };
}

/** Every sub-agent of the session (of one parent thread with `threadId`), as its parent records it. */
export function subagentsOf(models: ReadModels, threadId?: string): SubagentView[] {
  return [...models.threads.values()]
    .filter((t) => !threadId || t.threadId === threadId)
    .flatMap((t) => t.subagents.map((s) => ({ ...s, parentThreadId: t.threadId })));
}

async function findSubagent(
  ctx: CommandContext,
  sessionId: string,
  subagentId: string,
): Promise<{ parent: ThreadState; sub: ThreadState['subagents'][number] }> {
  const models = await ctx.log.allReadModels(sessionId);
  if (!models.session) throw notFound('session', sessionId);
  for (const parent of models.threads.values()) {
    const sub = parent.subagents.find((s) => s.subagentId === subagentId);
    if (sub) return { parent, sub };
  }
  throw notFound('subagent', subagentId);
}

function ifBusy(input: SubagentInput): { ifBusy?: SubagentInput['ifBusy'] } {
  return input.ifBusy ? { ifBusy: input.ifBusy } : {};
}

/** A guard: no sub-agent of the parent thread has this id yet. */
function subagentAbsent(sessionId: string, parentThreadId: string, subagentId: string): AppendGuard {
  return async (tx) => {
    const models = await loadReadModels(tx, sessionId, [{ kind: 'thread', key: parentThreadId }]);
    if (models.threads.get(parentThreadId)?.subagents.some((s) => s.subagentId === subagentId)) {
      throw new ThreadChangedError(parentThreadId);
    }
  };
}

/** A guard: the child thread is still closed (one reopening wins). */
function stillClosed(child: ThreadState): AppendGuard {
  return async (tx) => {
    const models = await loadReadModels(tx, child.sessionId, [{ kind: 'thread', key: child.threadId }]);
    if (models.threads.get(child.threadId)?.status !== 'closed') throw reopenedMeanwhile(child);
  };
}

const reopenedMeanwhile = (child: ThreadState) =>
  new OarRuntimeError('subagent_not_closed', `sub-agent thread "${child.threadId}" was reopened meanwhile`, {
    details: { childThreadId: child.threadId },
  });
