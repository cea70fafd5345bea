import type { RuntimeEvent } from '@oar/protocol';
import {
  EventsPageArgsSchema,
  HistoryPageArgsSchema,
  HistorySearchArgsSchema,
  type Message,
  type RequestStream,
  STATE_SCOPES,
  StateListArgsSchema,
} from '@oar/runner-sdk';
import type { EventDraft } from '../log/draft.js';
import type { ThreadState } from '../read-models/thread-state.js';
import { isArtifactExpired } from '../store/artifacts.js';
import type { AuditTarget } from './run-session.js';
import { apiError, type RunSession } from './run-session.js';

/**
 * The context APIs of a run: the transcript projection (history.page), artifacts of the session
 * (artifacts.metadata / read_range) and host-owned state (state.get / set / delete).
 */

/** The thread's transcript as messages: each finished turn's input and answer, then the current turn's input. */
export function transcriptOf(thread: Pick<ThreadState, 'turns'>, currentTurnId: string): Message[] {
  const messages: Message[] = [];
  for (const turn of thread.turns) {
    if (turn.turnId === currentTurnId) break;
    if (turn.status === 'queued' || turn.status === 'accepted') continue;
    messages.push({ role: 'user', content: turn.input });
    if (turn.answer !== undefined) messages.push({ role: 'assistant', content: turn.answer });
  }
  return messages;
}

/** Opaque history cursors: bound to the thread, so a cursor of another conversation is refused. */
function cursorOf(threadId: string, index: number): string {
  return Buffer.from(`h1:${threadId}:${index}`).toString('base64url');
}

function indexOf(threadId: string, cursor: string): number {
  const decoded = Buffer.from(cursor, 'base64url').toString('utf8').split(':');
  const index = Number(decoded[2]);
  if (decoded[0] !== 'h1' || decoded[1] !== threadId || !Number.isInteger(index) || index < 0) {
    throw apiError('invalid_argument', 'the cursor is not a history cursor of this conversation');
  }
  return index;
}

export async function historyPage(session: RunSession, payload: Record<string, unknown>, audit: AuditTarget) {
  const parsed = HistoryPageArgsSchema.safeParse(payload);
  if (!parsed.success) throw apiError('invalid_argument', 'history.page arguments do not match');
  const args = parsed.data;
  const threadId = session.ids.threadId;
  audit.resource = args.conversation_id ?? threadId;
  audit.scope = 'conversation';
  if (!session.access.history.includes('page')) throw apiError('unauthorized', 'history.page is not granted');
  // Only the run's own conversation: another conversation's history needs a grant this host does not give yet.
  if (args.conversation_id && args.conversation_id !== threadId) {
    throw apiError('unauthorized', 'history of another conversation is not granted to this run', {
      conversation_id: args.conversation_id,
    });
  }
  const all = transcriptOf(session.thread, session.ids.turnId).map((m, i) => ({ ...m, cursor: cursorOf(threadId, i) }));
  let start: number;
  let end: number;
  if (args.after_cursor || args.direction === 'forward') {
    start = args.after_cursor ? indexOf(threadId, args.after_cursor) + 1 : 0;
    end = Math.min(all.length, start + args.limit);
  } else {
    end = args.before_cursor ? Math.min(all.length, indexOf(threadId, args.before_cursor)) : all.length;
    start = Math.max(0, end - args.limit);
  }
  const items = all.slice(start, end);
  const forward = Boolean(args.after_cursor) || args.direction === 'forward';
  const hasMore = forward ? end < all.length : start > 0;
  const next = hasMore ? (forward ? items.at(-1)?.cursor : items[0]?.cursor) : undefined;
  return { items, next_cursor: next ?? null, has_more: hasMore };
}

/** The query terms of a history search: lower-cased runs of letters and digits, at most 32 distinct ones. */
function searchTerms(query: string): string[] {
  return [...new Set(query.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [])].slice(0, 32);
}

function occurrences(text: string, term: string): number {
  let count = 0;
  for (let at = text.indexOf(term); at !== -1 && count < 100; at = text.indexOf(term, at + term.length)) count++;
  return count;
}

/**
 * history.search: the transcript projection of the run's own conversation (the same messages, redacted, and the same
 * opaque cursors as history.page), ranked by a case-insensitive term match: each query term found counts, a term
 * found again counts less (1 + log2 of its occurrences), and a newer message wins a tie. Messages matching no term
 * are left out; at most `top_k` (≤ 50). Another conversation is `unauthorized`, as for history.page.
 */
export async function historySearch(session: RunSession, payload: Record<string, unknown>, audit: AuditTarget) {
  const parsed = HistorySearchArgsSchema.safeParse(payload);
  const threadId = session.ids.threadId;
  const wanted = parsed.success ? parsed.data.filters?.conversation_id : undefined;
  audit.resource = wanted ?? threadId;
  audit.scope = 'conversation';
  if (!parsed.success) {
    throw apiError(
      'invalid_argument',
      'history.search takes {query (1-1000 chars), filters?: {roles?}, top_k (1-50)?}',
    );
  }
  if (!session.access.history.includes('search')) throw apiError('unauthorized', 'history.search is not granted');
  if (wanted && wanted !== threadId) {
    throw apiError('unauthorized', 'history of another conversation is not granted to this run', {
      conversation_id: wanted,
    });
  }
  const terms = searchTerms(parsed.data.query);
  if (terms.length === 0) throw apiError('invalid_argument', 'the query has no word to search for');
  const roles = parsed.data.filters?.roles;
  const { redactor } = session.engine;
  const scored = transcriptOf(session.thread, session.ids.turnId)
    .map((m, index) => {
      const content = redactor.redactText(m.content);
      const text = content.toLowerCase();
      let score = 0;
      for (const term of terms) {
        const n = occurrences(text, term);
        if (n > 0) score += 1 + Math.log2(n);
      }
      return { role: m.role, content, cursor: cursorOf(threadId, index), score: score / terms.length, index };
    })
    .filter((m) => m.score > 0 && (!roles || roles.includes(m.role)));
  scored.sort((a, b) => b.score - a.score || b.index - a.index);
  return {
    items: scored
      .slice(0, parsed.data.top_k)
      .map(({ role, content, cursor, score }) => ({ role, content, cursor, score: Math.round(score * 1000) / 1000 })),
  };
}

/** The most bytes one read_range returns. */
export const MAX_READ_RANGE_BYTES = 1024 * 1024;
/** The bytes of one artifacts.open_stream chunk (base64 on the wire: well under the transport's line limit). */
export const ARTIFACT_STREAM_CHUNK_BYTES = 64 * 1024;

/**
 * An artifact of the run's session, text or binary, with its bytes; `not_found` for any other id. One the retention
 * policy expired is `not_found` too (the Agent API has no other code for it) with `details.reason: artifact_expired`
 * and its tombstone (name, size, sha256, expiredAt), so a runner can tell "gone" from "never was".
 */
async function sessionArtifact(session: RunSession, id: string) {
  // The store looks the artifact up in this session only: another session's id is simply not found.
  const found = await session.engine.artifacts.read(session.sessionId, id).catch((error: unknown) => {
    if (!isArtifactExpired(error)) throw error;
    throw apiError('not_found', error.message, { reason: 'artifact_expired', ...error.error.details });
  });
  if (!found) throw apiError('not_found', `no artifact ${id} in this session`);
  return {
    bytes: Buffer.from(found.bytes.buffer, found.bytes.byteOffset, found.bytes.byteLength),
    name: found.name ?? null,
    mime: found.mime,
    sha256: found.sha256,
    createdAt: found.createdAt ?? null,
  };
}

/**
 * artifacts.metadata / read_range / open_stream over the artifacts of the run's session, text and binary alike:
 * metadata is what the store keeps (name, MIME type, size, sha256, created_at); reads are bytes as base64.
 * open_stream sends the whole artifact as `{type: "chunk", offset, data}` chunks of at most 64 KiB on the request's
 * stream, then answers `{type: "end", size, sha256}`; it stops when the runner cancels the request or the run ends.
 */
export async function artifactRead(
  session: RunSession,
  payload: Record<string, unknown>,
  audit: AuditTarget,
  op: 'metadata' | 'read' | 'stream',
  stream?: RequestStream,
) {
  const id = typeof payload.artifact_id === 'string' ? payload.artifact_id.slice(0, 128) : undefined;
  if (!id) throw apiError('invalid_argument', 'artifact_id is required');
  audit.resource = id;
  audit.scope = 'session';
  // Streaming an artifact is reading it: the `read` grant covers read_range and open_stream.
  const grant = op === 'metadata' ? 'metadata' : 'read';
  if (!session.access.artifacts.includes(grant)) throw apiError('unauthorized', `artifacts.${grant} is not granted`);
  const artifact = await sessionArtifact(session, id);
  const { bytes } = artifact;
  if (op === 'metadata') {
    return {
      artifact_id: id,
      name: artifact.name,
      mime_type: artifact.mime,
      size: bytes.length,
      sha256: artifact.sha256,
      created_at: artifact.createdAt,
    };
  }
  if (op === 'stream') {
    if (!stream) throw apiError('invalid_argument', 'artifacts.open_stream is a streamed request');
    for (let offset = 0; offset < bytes.length; offset += ARTIFACT_STREAM_CHUNK_BYTES) {
      if (stream.signal.aborted || session.signal.aborted || !session.active) {
        throw apiError('runtime_error', 'the stream was cancelled');
      }
      const slice = bytes.subarray(offset, offset + ARTIFACT_STREAM_CHUNK_BYTES);
      // Each chunk waits for the wire (backpressure): a slow reader slows the host, never fills its memory.
      await stream.send({ type: 'chunk', offset, data: slice.toString('base64') });
    }
    return { type: 'end', size: bytes.length, sha256: artifact.sha256 };
  }
  const offset = payload.offset === undefined ? 0 : payload.offset;
  const length = payload.length === undefined ? 65_536 : payload.length;
  if (!Number.isInteger(offset) || !Number.isInteger(length) || (offset as number) < 0 || (length as number) < 1) {
    throw apiError('invalid_argument', 'offset ≥ 0 and length ≥ 1 are integers');
  }
  if ((length as number) > MAX_READ_RANGE_BYTES) {
    throw apiError('payload_too_large', `read at most ${MAX_READ_RANGE_BYTES} bytes at once`, {
      limit: MAX_READ_RANGE_BYTES,
    });
  }
  const start = offset as number;
  const slice = bytes.subarray(start, start + (length as number));
  return {
    artifact_id: id,
    offset: start,
    data: slice.toString('base64'),
    encoding: 'base64',
    eof: start + slice.length >= bytes.length,
  };
}

/** The largest state value (its JSON). */
export const MAX_STATE_BYTES = 256 * 1024;
const STATE_KEY = /^[A-Za-z0-9_.:-]{1,100}$/;

/** The thread-state key of a runner state entry: scoped, and apart from every other state of the thread. */
export function stateKey(scope: string, key: string): string {
  return `runner:${scope}:${key}`;
}

/** The event that sets (or, with `null`, deletes) one runner state entry, after checking scope, key, JSON and size. */
export function stateChange(session: RunSession, scope: unknown, key: unknown, value: unknown): EventDraft {
  if (!session.access.state) throw apiError('unauthorized', 'host-owned state is not granted to this run');
  if (typeof scope !== 'string' || !(STATE_SCOPES as readonly string[]).includes(scope)) {
    throw apiError('invalid_argument', `scope is one of ${STATE_SCOPES.join(', ')}`);
  }
  if (typeof key !== 'string' || !STATE_KEY.test(key)) {
    throw apiError('invalid_argument', 'state keys are 1-100 letters, digits, "_", ".", ":" or "-"');
  }
  let json: string | undefined;
  try {
    json = JSON.stringify(value);
  } catch {
    json = undefined;
  }
  if (json === undefined) throw apiError('invalid_argument', 'a state value is a JSON value');
  if (Buffer.byteLength(json) > MAX_STATE_BYTES) {
    throw apiError('payload_too_large', `a state value is at most ${MAX_STATE_BYTES} bytes of JSON`, {
      limit: MAX_STATE_BYTES,
    });
  }
  const full = stateKey(scope, key);
  return {
    type: 'thread.updated',
    threadId: session.ids.threadId,
    turnId: session.ids.turnId,
    payload: { changed: [`state.${full}`], state: { key: full, value: JSON.parse(json) as unknown } },
  };
}

export async function stateCall(
  session: RunSession,
  payload: Record<string, unknown>,
  audit: AuditTarget,
  op: 'get' | 'set' | 'delete',
) {
  audit.resource = typeof payload.key === 'string' ? payload.key.slice(0, 100) : undefined;
  audit.scope = typeof payload.scope === 'string' ? payload.scope.slice(0, 32) : undefined;
  if (op === 'get') {
    stateChange(session, payload.scope, payload.key, null); // the same checks as a change
    const thread = await session.engine.loadThread(session.sessionId, session.ids.threadId);
    return { value: thread.state[stateKey(payload.scope as string, payload.key as string)] ?? null };
  }
  if (op === 'set' && payload.value === undefined) throw apiError('invalid_argument', 'state.set takes a value');
  await session.record([stateChange(session, payload.scope, payload.key, op === 'set' ? payload.value : null)]);
  return null;
}

/**
 * state.list: the keys of one scope of the run's state (sorted), those starting with `prefix`, at most `limit`
 * (≤ 100) with `has_more` — the same grant as state.get. Keys only: values are read one by one with state.get.
 */
export async function stateList(session: RunSession, payload: Record<string, unknown>, audit: AuditTarget) {
  audit.scope = typeof payload.scope === 'string' ? payload.scope.slice(0, 32) : undefined;
  audit.resource = typeof payload.prefix === 'string' ? payload.prefix.slice(0, 100) : '';
  if (!session.access.state) throw apiError('unauthorized', 'host-owned state is not granted to this run');
  const parsed = StateListArgsSchema.safeParse(payload);
  if (!parsed.success) {
    throw apiError(
      'invalid_argument',
      `state.list takes {scope (${STATE_SCOPES.join(', ')}), prefix?, limit (1-100)?}`,
    );
  }
  const { scope, prefix, limit } = parsed.data;
  const thread = await session.engine.loadThread(session.sessionId, session.ids.threadId);
  const keys = Object.keys(stateSnapshot(thread.state)[scope])
    .filter((key) => !prefix || key.startsWith(prefix))
    .sort();
  return { keys: keys.slice(0, limit), has_more: keys.length > limit };
}

/**
 * prompt.get: the agent's own instructions (its binding's `systemPrompt`, redacted) as system messages — what the
 * protocol loop would put first in its prompt; none configured → no messages. The runner runs as this agent, so no
 * grant beyond the run is needed; the call is audited like every other.
 */
export async function promptGet(session: RunSession, audit: AuditTarget) {
  audit.resource = session.agent.name;
  audit.scope = 'agent';
  const instructions = session.agent.systemPrompt?.trim();
  const content = instructions ? session.engine.redactor.redactText(instructions) : undefined;
  return { messages: content ? [{ role: 'system', content }] : [] };
}

/** The run's state snapshot (ctx.state): the runner state entries of the thread, by scope. */
export function stateSnapshot(
  state: Record<string, unknown>,
): Record<(typeof STATE_SCOPES)[number], Record<string, unknown>> {
  const snapshot = { conversation: {}, actor: {}, subject: {}, runner: {} } as Record<string, Record<string, unknown>>;
  for (const [key, value] of Object.entries(state)) {
    const [prefix, scope, ...rest] = key.split(':');
    if (prefix !== 'runner' || !scope || !(scope in snapshot) || rest.length === 0) continue;
    (snapshot[scope] as Record<string, unknown>)[rest.join(':')] = value;
  }
  return snapshot as Record<(typeof STATE_SCOPES)[number], Record<string, unknown>>;
}

/** Event payloads larger than this (JSON) are not inlined: the envelope says so, and events.get returns it whole. */
export const MAX_INLINE_EVENT_BYTES = 4 * 1024;

function envelope(event: RuntimeEvent, whole: boolean) {
  const json = JSON.stringify(event.payload ?? {});
  const inline = whole || Buffer.byteLength(json) <= MAX_INLINE_EVENT_BYTES;
  return {
    event_id: event.eventId,
    event_type: event.type,
    sequence: event.sequence,
    timestamp: event.timestamp,
    thread_id: event.threadId ?? null,
    turn_id: event.turnId ?? null,
    data: inline ? (event.payload ?? {}) : {},
    ...(inline ? {} : { payload_truncated: true, payload_bytes: Buffer.byteLength(json) }),
  };
}

function eventCursor(threadId: string, sequence: number): string {
  return Buffer.from(`e1:${threadId}:${sequence}`).toString('base64url');
}

function eventSequence(threadId: string, cursor: string): number {
  const [tag, thread, raw] = Buffer.from(cursor, 'base64url').toString('utf8').split(':');
  const sequence = Number(raw);
  if (tag !== 'e1' || thread !== threadId || !Number.isInteger(sequence) || sequence < 1) {
    throw apiError('invalid_argument', 'the cursor is not an event cursor of this conversation');
  }
  return sequence;
}

/**
 * events.page / events.get: the stable envelopes of the run's own conversation (its thread's events), newest page
 * first, big payloads left out of pages (`payload_truncated`); another conversation's event is `not_found`.
 */
export async function eventsCall(
  session: RunSession,
  payload: Record<string, unknown>,
  audit: AuditTarget,
  op: 'get' | 'page',
) {
  audit.scope = 'conversation';
  if (!session.access.events.includes(op)) throw apiError('unauthorized', `events.${op} is not granted`);
  const read = session.engine.readEvents?.bind(session.engine);
  if (!read) throw apiError('not_found', 'this host answers no event queries');
  const threadId = session.ids.threadId;
  if (op === 'get') {
    const id = typeof payload.event_id === 'string' ? payload.event_id.slice(0, 128) : undefined;
    if (!id) throw apiError('invalid_argument', 'events.get takes {event_id}');
    audit.resource = id;
    const event = (await read(session.sessionId, { threadId })).find((e) => e.eventId === id);
    if (!event) throw apiError('not_found', `no event ${id} in this conversation`);
    return envelope(event, true);
  }
  const parsed = EventsPageArgsSchema.safeParse(payload);
  if (!parsed.success) throw apiError('invalid_argument', 'events.page takes {before_cursor?, limit (1-200)?}');
  audit.resource = threadId;
  const before = parsed.data.before_cursor ? eventSequence(threadId, parsed.data.before_cursor) : undefined;
  const all = await read(session.sessionId, { threadId });
  const older = before === undefined ? all : all.filter((e) => e.sequence < before);
  const items = older.slice(-parsed.data.limit);
  const hasMore = older.length > items.length;
  const first = items[0];
  return {
    items: items.map((e) => envelope(e, false)),
    next_cursor: hasMore && first ? eventCursor(threadId, first.sequence) : null,
    has_more: hasMore,
  };
}
