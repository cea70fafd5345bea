import { PeerError, wireError } from '@oar/runner-sdk';
import { z } from 'zod';

/** What every LangBot action mapping shares: the host API and run it is given, and how it refuses. */

/** OAR's governed API of one run: an `AGENT_API` call (`models.invoke`, `state.get`, …) with its stream chunks. */
export interface LangbotHostApi {
  call(action: string, payload: Record<string, unknown>, onChunk?: (chunk: unknown) => void): Promise<unknown>;
}

/** What the host knows of the run the actions belong to (frozen when the run started). */
export interface LangbotRunInfo {
  runId: string;
  /**
   * The run's model resource ids (its frozen access: `default` and the binding's configured models). A runner names a
   * model by `llm_model_uuid`: `langbotModelUuid(id)` of one of these (what the run context lists as its models), or
   * the id itself. Absent: only ids given as they are resolve.
   */
  models?: readonly string[];
  /** `plugin:author/name/runner`: named in steering items and the run's record. */
  runnerId?: string;
  /** The run's conversation (OAR's thread id): `event_page` of another conversation is refused. */
  conversationId?: string;
  /** The run's turn: `run_events_page` pages the facts of this turn. */
  turnId?: string;
  workspaceId?: string;
  /** Milliseconds since the epoch. */
  startedAt?: number;
  /** Milliseconds since the epoch. */
  deadlineAt?: number;
}

export type Data = Record<string, unknown>;
export type OnData = (data: Data) => Promise<void> | void;
export interface Call {
  data: Data;
  host: LangbotHostApi;
  run: LangbotRunInfo;
  onData: OnData | undefined;
}

/** The refusal code for what OAR does not do (LangBot's SDK takes any code string). */
export const NOT_SUPPORTED = 'not_supported';

export function fail(code: string, message: string, details: Data = {}): PeerError {
  return new PeerError(wireError(code, message, details));
}

/** Parse the runner's untrusted data: a mismatch is `invalid_argument` naming the first fields at fault. */
export function parse<S extends z.ZodType>(schema: S, data: Data, action: string): z.infer<S> {
  const parsed = schema.safeParse(data);
  if (parsed.success) return parsed.data;
  throw fail('invalid_argument', `${action}: the data does not match`, {
    action,
    issues: parsed.error.issues.slice(0, 5).map((i) => ({ path: i.path.join('.'), message: i.message })),
  });
}

export const clamp = (n: number, low: number, high: number) => Math.min(high, Math.max(low, Math.trunc(n)));
export const Int = z.number().int();
export const Text = z.string();
export const OptionalText = Text.nullable().optional();
