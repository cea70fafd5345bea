import { agentByName } from '../config/agents.js';
import type { BindingUpdate, SessionBinding } from '../config/binding.js';
import type { ScheduleFact } from '../config/schedules.js';
import { OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { loadReadModels } from '../log/read-model-rows.js';
import { hooksChanged } from '../policy/hooks/changes.js';
import { bindingOf } from '../read-models/session.js';
import { DEFAULT_WORKSPACE, sessionIdIn, Workspaces } from '../store/workspaces.js';
import type { CommandContext } from './command-context.js';

/** The commands about a session itself: create it, change its binding, close a sub-agent, set its state. */

const SESSION_ID = /^[A-Za-z0-9_.:-]{1,128}$/;

export interface CreateSessionInput {
  title?: string;
  sessionId?: string;
  agent?: string;
  binding?: BindingUpdate;
  workspaceId?: string;
  /** Who creates it (`api_key:<id>`); the local user when absent. Business tools act for it (credential `sub`). */
  actor?: string;
  /** The schedule firing that creates it (config/schedules.ts ScheduleFact), recorded on `session.created`. */
  schedule?: ScheduleFact;
}

export interface UpdateBindingInput {
  sessionId: string;
  update: BindingUpdate;
}

export interface SetStateInput {
  sessionId: string;
  /** The thread whose state it is; the session's when absent. */
  threadId?: string;
  key: string;
  value: unknown;
}

export async function createSession(
  ctx: CommandContext,
  input: CreateSessionInput = {},
): Promise<{ sessionId: string; threadId: string; bindingHash: string; workspaceId: string }> {
  const workspaceId = input.workspaceId ?? DEFAULT_WORKSPACE;
  if (workspaceId !== DEFAULT_WORKSPACE) await new Workspaces(ctx.log.store).require(workspaceId);
  const { binding, hash } = ctx.deps.bindings.apply(ctx.deps.bindings.template(), input.binding);
  const sessionId = await newSessionId(ctx, workspaceId, input.sessionId);
  const threadId = newId('thr');
  const agent = input.agent ?? binding.mainAgent.name;
  if (!agentByName(binding, agent)) {
    throw new OarRuntimeError('unknown_agent', `agent "${agent}" is not configured`, { details: { agent } });
  }
  // Recorded with the new binding's own redactor, as every later command about the session is: a `.env` value of
  // its workspace or a secret variable it names, pasted into the title, never reaches the record.
  const redactor = await ctx.redactorOf(hash, binding);
  await ctx.log.createSession(
    sessionId,
    input.title,
    [
      {
        type: 'session.created',
        payload: {
          ...(input.title ? { title: input.title } : {}),
          ...(workspaceId !== DEFAULT_WORKSPACE ? { workspaceId } : {}),
          ...(input.actor ? { actor: input.actor } : {}),
          ...(input.schedule ? { schedule: input.schedule } : {}),
          binding,
          bindingHash: hash,
        },
      },
      {
        type: 'thread.started',
        threadId,
        payload: { agent, depth: 0, ...(input.title ? { title: input.title } : {}) },
      },
    ],
    { redactor, workspaceId },
  );
  return { sessionId, threadId, bindingHash: hash, workspaceId };
}

/**
 * The id of a session about to be created in `workspaceId` (a new session, a fork): the one chosen, checked and
 * prefixed with a named workspace, or a new one. A taken id is `session_exists`.
 */
export async function newSessionId(ctx: CommandContext, workspaceId: string, chosen: string | undefined) {
  const sessionId = sessionIdIn(workspaceId, chosen);
  if (!SESSION_ID.test(sessionId)) {
    throw new OarRuntimeError('invalid_input', 'session ids are 1-128 letters, digits, "_", ".", ":" or "-"');
  }
  const existing = await ctx.log.store.db
    .selectFrom('oar_sessions')
    .select('id')
    .where('id', '=', sessionId)
    .executeTakeFirst();
  if (existing) throw new OarRuntimeError('session_exists', `session "${sessionId}" already exists`);
  return sessionId;
}

/** Change a session's binding: recorded, and effective from the next turn (a running turn keeps its own). */
export async function updateBinding(
  ctx: CommandContext,
  input: UpdateBindingInput,
): Promise<{ bindingHash: string; changed: string[] }> {
  const session = await ctx.session(input.sessionId);
  const current = bindingOf(session) ?? ctx.deps.bindings.template();
  const { binding: next, hash } = ctx.deps.bindings.apply(current, input.update);
  const changed = Object.keys(next).filter(
    (key) => JSON.stringify(next[key as keyof SessionBinding]) !== JSON.stringify(current[key as keyof SessionBinding]),
  );
  if (hash === session.bindingHash) return { bindingHash: hash, changed: [] };
  // Nothing is recorded that could not run: the session would be stuck on it from its next turn.
  await ctx.deps.bindings.verify(next, hash);
  await ctx.append(
    input.sessionId,
    [
      {
        type: 'session.updated',
        payload: { changed: changed.map((key) => `binding.${key}`), binding: next, bindingHash: hash },
      },
      // Hooks are policy: adding or removing one is also a `policy.changed` fact (docs/hooks.md).
      ...hooksChanged(current.hooks, next.hooks, hash),
    ],
    {
      // Two updates computed from the same binding must not silently drop one another's change.
      guard: async (tx) => {
        const now = (await loadReadModels(tx, input.sessionId, [])).session?.bindingHash;
        if (now !== session.bindingHash) {
          throw new OarRuntimeError('binding_changed', 'the binding changed while the update was prepared; retry', {
            retryable: true,
          });
        }
      },
    },
  );
  return { bindingHash: hash, changed };
}

/**
 * Set (or, with `value: null`, delete) a key of session- or thread-scoped state. State changes are events
 * (`session.updated` / `thread.updated` with `payload.state`), so they replay and export like everything else.
 */
export async function setState(ctx: CommandContext, input: SetStateInput): Promise<void> {
  if (typeof input.key !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(input.key)) {
    throw new OarRuntimeError('invalid_state_key', 'state keys are 1-128 letters, digits, "_", ".", ":" or "-"');
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(input.value);
  } catch {
    json = undefined;
  }
  if (json === undefined || json.length > 256 * 1024) {
    throw new OarRuntimeError('invalid_state_value', 'state values are JSON values of at most 256 KiB');
  }
  const state = { key: input.key, value: JSON.parse(json) as unknown };
  const changed = [`state.${input.key}`];
  if (input.threadId) {
    await ctx.log.thread(input.sessionId, input.threadId);
    await ctx.append(input.sessionId, [
      { type: 'thread.updated', threadId: input.threadId, payload: { changed, state } },
    ]);
  } else {
    await ctx.session(input.sessionId);
    await ctx.append(input.sessionId, [{ type: 'session.updated', payload: { changed, state } }]);
  }
}
