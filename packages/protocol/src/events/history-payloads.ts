import { z } from 'zod';

/**
 * Typed payloads of the History family that OAR emits (docs/events.md "History"): a window of older history served
 * from the log (`history.window.loaded`, live-only), the read models rebuilt from the log (`history.reconstructed`)
 * and a snapshot that had to be repaired (`snapshot.repaired`). Loose like every payload: a relayed event keeps
 * fields another producer adds.
 */

const Id = z.string().min(1);
const Count = z.number().int().min(0);

/** The read models a session keeps, by kind (one stored row each; `session` is keyed by the session id). */
export const READ_MODEL_KINDS = ['session', 'thread', 'run', 'task', 'tool_inventory', 'job'] as const;
export const ReadModelKindSchema = z.enum(READ_MODEL_KINDS);

/**
 * How one stored read model compared with a replay of the log: `differed` (both exist, not equal), `missing` (the
 * log produces it, the store lacks it) or `extra` (the store holds one the log does not produce).
 */
export const ReadModelChangeSchema = z.looseObject({
  kind: ReadModelKindSchema,
  key: Id,
  change: z.enum(['differed', 'missing', 'extra']),
});
export type ReadModelChange = z.infer<typeof ReadModelChangeSchema>;

/** How many read models of each kind (a kind with none is absent). */
export const ReadModelCountsSchema = z.looseObject({
  session: Count.optional(),
  thread: Count.optional(),
  run: Count.optional(),
  task: Count.optional(),
  tool_inventory: Count.optional(),
  job: Count.optional(),
});

/**
 * A page of older history served from the log (`get_session` with `before`): which events it holds, the cursor
 * for the next older page (null: it starts at the first event) and the session's last event when it was read.
 */
export const HistoryWindowLoadedPayloadSchema = z.looseObject({
  eventCount: Count,
  before: Count.optional(),
  limit: Count.optional(),
  fromSequence: Count.optional(),
  toSequence: Count.optional(),
  previousCursor: Count.nullable().optional(),
  lastSequence: Count.optional(),
});

/** A session's read models rebuilt from its log: why, how many events through which sequence, what was rebuilt. */
export const HistoryReconstructedPayloadSchema = z.looseObject({
  reason: z.string(),
  eventCount: Count,
  throughSequence: Count,
  readModels: ReadModelCountsSchema.optional(),
});

/**
 * A snapshot repaired. On the SSE stream (live-only): the cursor a client gave that cannot be resumed from and the
 * sequence the fresh snapshot reflects. Recorded by a read-model repair: the read models that differed from a
 * replay of the log through `throughSequence`, the threads among them, and how many of each change.
 */
export const SnapshotRepairedPayloadSchema = z.looseObject({
  reason: z.string(),
  requestedCursor: z.union([z.string(), Count]).optional(),
  resumedAfter: Count.optional(),
  throughSequence: Count.optional(),
  readModels: z.array(ReadModelChangeSchema).optional(),
  threadIds: z.array(Id).optional(),
  counts: z.looseObject({ differed: Count, missing: Count, extra: Count }).optional(),
});
