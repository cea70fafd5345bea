import { agentByName } from '../config/agents.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { EventDraft } from '../log/draft.js';
import type { ReadModels } from '../read-models/project.js';
import { bindingOf } from '../read-models/session.js';
import type { ThreadState } from '../read-models/thread-state.js';
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
  /** What to do while the sub-agent is working (as `submit_turn`'s; default: enqueue). */
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
  /** `running` while a turn of it works; `completed` / `failed` as its last turn ended; `closed`. */
  status: string;
}

/** Statuses of a sub-agent that is working (a wait is not over while any waited-for one has one). */
const WORKING = new Set(['running', 'queued']);

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
  const known = input.subagentId ? parent.subagents.find((s) => s.subagentId === input.subagentId) : undefined;
  if (known) {
    const first = (await ctx.log.thread(input.sessionId, known.childThreadId)).turns[0];
    return {
      subagentId: known.subagentId,
      childThreadId: known.childThreadId,
      turnId: first?.turnId ?? '',
      duplicate: true,
    };
  }
  if (parent.depth + 1 > binding.limits.maxSubagentDepth) {
    throw new OarRuntimeError(
      'invalid_input',
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
  await ctx.append(input.sessionId, drafts);
  return { subagentId, childThreadId, turnId, duplicate: false };
}

/** Give a sub-agent more to do: a turn of its child thread, recorded on the parent as `subagent.input`. */
export async function sendSubagentInput(ctx: CommandContext, input: SubagentInput): Promise<SubmitTurnResult> {
  const { parent, sub } = await findSubagent(ctx, input.sessionId, input.subagentId);
  if (sub.status === 'closed') {
    throw new OarRuntimeError('thread_closed', `sub-agent "${sub.subagentId}" is closed: resume_subagent reopens it`, {
      details: { subagentId: sub.subagentId },
    });
  }
  return submitTurnWith(
    ctx,
    { sessionId: input.sessionId, threadId: sub.childThreadId, input: input.input, source: 'parent', ...ifBusy(input) },
    {
      facts: (ids, status) => [
        {
          type: 'subagent.input',
          threadId: parent.threadId,
          subagentId: sub.subagentId,
          payload: { childThreadId: sub.childThreadId, turnId: ids.turnId, status, input: input.input.slice(0, 500) },
        },
      ],
    },
  );
}

/**
 * Wait until none of the sub-agents is working (each ended its turn, failed or was closed), or `timeoutMs` passed.
 * Answers what each is then, and whether the wait ran out.
 */
export async function waitSubagents(
  ctx: CommandContext,
  input: WaitSubagentsInput,
): Promise<{ subagents: SubagentView[]; timedOut: boolean }> {
  const chosen = async (): Promise<SubagentView[]> => {
    const all = subagentsOf(await ctx.log.allReadModels(input.sessionId), input.threadId);
    if (!input.subagentIds) return all;
    return input.subagentIds.map((id) => {
      const found = all.find((s) => s.subagentId === id);
      if (!found) throw notFound('subagent', id);
      return found;
    });
  };
  const first = await chosen();
  // Without ids: those working now (a wait for every sub-agent ever spawned would be over before it began).
  const ids = new Set(input.subagentIds ?? first.filter((s) => WORKING.has(s.status)).map((s) => s.subagentId));
  let latest = first.filter((s) => ids.has(s.subagentId));
  const done = await ctx.deps.notifier.waitFor(
    input.sessionId,
    async () => {
      latest = (await chosen()).filter((s) => ids.has(s.subagentId));
      return latest.every((s) => !WORKING.has(s.status));
    },
    input.timeoutMs ?? 30_000,
  );
  return { subagents: latest, timedOut: !done };
}

/** Close a sub-agent: its running turn is interrupted and its child thread takes no more turns (until resumed). */
export async function closeSubagent(ctx: CommandContext, input: CloseSubagentInput): Promise<void> {
  const { parent, sub } = await findSubagent(ctx, input.sessionId, input.subagentId);
  if (sub.status === 'closed') return;
  await interruptTurn(ctx, {
    sessionId: input.sessionId,
    threadId: sub.childThreadId,
    reason: input.reason ?? 'sub-agent closed',
  });
  const current = await ctx.log.thread(input.sessionId, parent.threadId);
  await ctx.append(input.sessionId, [
    {
      type: 'subagent.closed',
      threadId: current.threadId,
      turnId: current.activeTurnId ?? current.turns.at(-1)?.turnId ?? 'none',
      subagentId: sub.subagentId,
      payload: { reason: input.reason ?? 'closed' },
    },
    { type: 'thread.updated', threadId: sub.childThreadId, payload: { closed: true, status: 'completed' } },
  ]);
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
  await ctx.append(input.sessionId, [
    { type: 'thread.updated', threadId: sub.childThreadId, payload: { reopened: true, status: 'idle' } },
    {
      type: 'subagent.status',
      threadId: parent.threadId,
      subagentId: sub.subagentId,
      payload: { status: 'idle', detail: input.reason ?? 'resumed', childThreadId: sub.childThreadId },
    },
  ]);
  if (input.input === undefined) return { subagentId: sub.subagentId, childThreadId: sub.childThreadId };
  const turn = await sendSubagentInput(ctx, {
    sessionId: input.sessionId,
    subagentId: sub.subagentId,
    input: input.input,
  });
  return { subagentId: sub.subagentId, childThreadId: sub.childThreadId, turnId: turn.turnId };
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
