import { createHash } from 'node:crypto';
import type { EventFields } from '@oar/protocol';
import { toolStarted, workspaceConfinement } from '../facts/tool-call.js';
import type { EventDraft } from '../log/draft.js';
import type { CallIds } from '../policy/authorize.js';

/**
 * The bracket of a side effect: the one place its start is recorded (`tool.started`), and where its durability is
 * decided. The write-ahead rule: work that must not run twice starts only once its start is durable, committed with
 * the call's authorization (a crash then ends it in an honest `lost`, worker/recovery.ts), and its end is committed
 * right after it; idempotent work is simply redone, so its facts ride the step's next commit. Every executor that
 * acts on the world (a tool, a pipeline and each of its steps, a service) and the runner host's tool proxy open one.
 */

/** The start's payload: what runs, which attempt, with what input, and whether running it twice is harmless. */
export type ToolStartedPayload = EventFields<'tool.started'>['payload'] & { idempotent: boolean };

/** Who records the bracket's facts: a driven thread's fenced append, or a runner run's `record`. */
export type BracketRecorder = (drafts: EventDraft[], options: { durable: boolean }) => Promise<void>;

export interface SideEffect {
  /** The session the call belongs to (its idempotency key is unique across sessions). */
  sessionId: string;
  /**
   * The attempt whose key this call carries, when not its own: a call idempotent by key, retried after a crash, asks
   * the world again under the key of the attempt that may or may not have taken effect.
   */
  keyAttempt?: number;
  /** The call's correlation ids (its step and tool call ids). */
  ids: CallIds & { stepId: string; toolCallId: string };
  payload: ToolStartedPayload;
  /** What is committed with the start, before it: the call's authorization (`permission.evaluated`). */
  authorization: readonly EventDraft[];
  /** A file-changing call's confinement: recorded with the start (`sandbox.applied`), before anything is written. */
  confinement?: { root: string; paths: readonly string[] };
}

export interface Bracket {
  /** Whether the start was, and the end must be, durable before anything else happens: not idempotent. */
  readonly durable: boolean;
  /**
   * The key the world may deduplicate this call by (an `Idempotency-Key` header, `OAR_IDEMPOTENCY_KEY`), recorded in
   * `tool.started`: the same for the same attempt of the same call, a new one for a new attempt.
   */
  readonly idempotencyKey: string;
  /** Record the end (`tool.result` / `tool.failed` and the facts that go with it) as durably as the start. */
  end(drafts: EventDraft[]): Promise<void>;
}

/** Record a side effect's start (with its authorization) before it runs; the returned bracket records its end. */
export async function openBracket(record: BracketRecorder, effect: SideEffect): Promise<Bracket> {
  const durable = !effect.payload.idempotent;
  const keyAttempt = effect.keyAttempt ?? effect.payload.attempt ?? 1;
  const key = idempotencyKey(effect.sessionId, effect.ids.toolCallId, keyAttempt);
  const payload = {
    ...effect.payload,
    idempotencyKey: key,
    ...(effect.keyAttempt !== undefined ? { keyAttempt: effect.keyAttempt } : {}),
  };
  const confinement = effect.confinement
    ? [workspaceConfinement(effect.ids, { toolName: effect.payload.toolName, ...effect.confinement })]
    : [];
  await record([...effect.authorization, toolStarted(effect.ids, payload), ...confinement], { durable });
  return { durable, idempotencyKey: key, end: (drafts) => record(drafts, { durable }) };
}

/**
 * A side effect's idempotency key: derived, not drawn, so the same attempt of the same call always has the same key
 * (whoever records it, whenever), and a new attempt a new one. `idem_` and 32 hex digits of a SHA-256 of the
 * session, the call and the attempt: nothing of its input.
 */
export function idempotencyKey(sessionId: string, toolCallId: string, attempt: number): string {
  const digest = createHash('sha256').update(`${sessionId}\u0000${toolCallId}\u0000${attempt}`).digest('hex');
  return `idem_${digest.slice(0, 32)}`;
}
