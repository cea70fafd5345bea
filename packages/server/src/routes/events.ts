import { createEvent, type RuntimeEvent } from '@oar/protocol';
import { isLiveEvent } from '@oar/runtime';
import type { Context } from 'hono';
import { z } from 'zod';
import { Cursor, Id, type Route, route, type ServerDeps } from '../route.js';
import { openStream, type StreamOptions } from '../sse.js';

/**
 * The session's events: a page of the log as JSON, or a live Server-Sent Events stream that resumes.
 *
 * The stream's `id:` is the event's sequence, so a client's `Last-Event-ID` (or `?after=SEQ`) resumes exactly after
 * the last durable event it got: no gap, no duplicate. Live-only events (`model.delta`, `process.output`) carry no `id:` — they are
 * never replayed, so a resuming client gets durable events only. A client without a cursor first gets the current
 * snapshot (`event: snapshot`, whose `id:` is the sequence it reflects), then what follows it. A cursor the server
 * cannot resume from — past the session's last event, so from another session or another store — gets a
 * `snapshot.repaired` event and a fresh snapshot instead of a silent gap. After a fact that rebuilds the read models
 * (a rollback), the stream sends `snapshot.updated` and the snapshot as of that fact, and goes on.
 *
 * Memory per subscriber is bounded: events are read from the log a page at a time as the client takes them (a slow
 * client only makes the reads slower), and at most `LIVE_BUFFER` deltas wait. A client that takes nothing for
 * `slowClientMs` is cut off; it reconnects with its cursor.
 */

/** The cursor a request resumes after: `Last-Event-ID`, else `?after`; undefined for a fresh client. */
function requestedCursor(c: Context, after: number | undefined): { cursor?: number; malformed?: string } {
  const header = c.req.header('last-event-id');
  if (header !== undefined && header !== '') {
    return /^\d{1,15}$/.test(header) ? { cursor: Number(header) } : { malformed: header };
  }
  return after === undefined ? {} : { cursor: after };
}

function sessionStream(
  c: Context,
  deps: ServerDeps,
  sessionId: string,
  after: number | undefined,
  options: StreamOptions,
) {
  return openStream(c, options, async (send, signal, setCursor) => {
    const requested = requestedCursor(c, after);
    const last = await deps.runtime.queries.lastSequence(sessionId);
    let cursor = requested.cursor;
    if (cursor === undefined || cursor > last) {
      const { snapshot, sequence } = await deps.runtime.getSession({ sessionId, limit: 0 });
      if (requested.cursor !== undefined || requested.malformed !== undefined) {
        // A whole envelope (live only: never stored), in the position of the snapshot it announces.
        const repaired = createEvent('snapshot.repaired', {
          sessionId,
          runtimeId: deps.runtime.runtimeId,
          sequence,
          payload: {
            reason:
              requested.malformed !== undefined
                ? 'the cursor is not an event sequence'
                : `the cursor ${requested.cursor} is past the session's last event ${last}: it is not from this session`,
            requestedCursor: requested.malformed ?? requested.cursor,
            resumedAfter: sequence,
          },
        });
        await send('snapshot.repaired', repaired);
      }
      await send('snapshot', snapshot, sequence);
      cursor = sequence;
    }
    setCursor(cursor);
    for await (const event of deps.runtime.subscribe(sessionId, {
      after: cursor,
      signal,
      deltas: true,
    }) as AsyncGenerator<RuntimeEvent>) {
      // Live-only (a model's `model.delta`, a command's `process.output`): no id, never replayed.
      const live = isLiveEvent(event);
      await send(event.type, event, live ? undefined : event.sequence);
      if (live) continue;
      setCursor(event.sequence);
      if (REBUILDS.has(event.type)) await sendRebuilt(deps, sessionId, event, send);
    }
  });
}

/**
 * Facts after which a client's read models are rebuilt rather than folded forward: a rollback removes turns, which a
 * client that applies events one by one would not know to do.
 */
const REBUILDS = new Set(['history.rollback.completed']);

/**
 * After a rebuilding fact: `snapshot.updated` (a whole envelope, live only) and the snapshot as of that very fact —
 * not a later one, so a client that folds events keeps every event after it, none twice.
 */
async function sendRebuilt(
  deps: ServerDeps,
  sessionId: string,
  cause: RuntimeEvent,
  send: (event: string, data: unknown, id?: number) => Promise<void>,
): Promise<void> {
  const { snapshot, sequence } = await deps.runtime.snapshotAt({ sessionId, at: cause.sequence });
  const updated = createEvent('snapshot.updated', {
    sessionId,
    runtimeId: deps.runtime.runtimeId,
    sequence,
    ...(cause.threadId ? { threadId: cause.threadId } : {}),
    payload: {
      readModel: 'session_snapshot',
      version: sequence,
      ...(cause.threadId ? { changed: [cause.threadId] } : {}),
      reason: cause.type,
      causeEventId: cause.eventId,
      causeSequence: cause.sequence,
    },
  });
  await send('snapshot.updated', updated);
  await send('snapshot', snapshot, sequence);
}

const EventsQuery = z.object({
  after: Cursor.optional().describe('resume after this sequence (a stream prefers Last-Event-ID)'),
  limit: z.coerce.number().int().min(1).max(1000).default(200),
  type: z
    .string()
    .max(200)
    .optional()
    .describe('JSON page only: comma-separated event types (a trailing * matches a prefix)'),
  threadId: Id.optional(),
  turnId: Id.optional(),
  access_token: z.string().optional().describe('the API key, for a browser EventSource that cannot send headers'),
});

function matcher(types: string | undefined): (type: string) => boolean {
  if (!types) return () => true;
  const wanted = types
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  return (type) => wanted.some((w) => (w.endsWith('*') ? type.startsWith(w.slice(0, -1)) : type === w));
}

export function eventRoutes(options: StreamOptions): Route[] {
  return [
    route(
      {
        method: 'get',
        path: '/v1/sessions/{sessionId}/events',
        operationId: 'sessionEvents',
        summary: "The session's events: a live SSE stream (Accept: text/event-stream) or a JSON page",
        description:
          'With `Accept: text/event-stream`: every durable event after the cursor (`Last-Event-ID` or `after`), then live, with live-only `model.delta` events in their position; a client without a cursor gets `event: snapshot` first. Heartbeat comments every 15 s. Otherwise: a JSON page of at most `limit` events after `after`, filtered by `type`, `threadId` and `turnId`, with `nextCursor`.',
        tag: 'events',
        scope: 'viewer',
        params: z.object({ sessionId: Id }),
        query: EventsQuery,
        produces: 'sse',
        queryKey: true,
        response: z.object({
          events: z.array(z.looseObject({ type: z.string(), sequence: z.number() })),
          nextCursor: z.number(),
          lastSequence: z.number(),
        }),
      },
      async ({ c, deps, params, query }) => {
        if (c.req.header('accept')?.includes('text/event-stream')) {
          return sessionStream(c, deps, params.sessionId, query.after, options);
        }
        const matches = matcher(query.type);
        // Filters apply within the page read, so a page may hold fewer than `limit`; `nextCursor` always moves on.
        const read = await deps.runtime.queries.readEvents(params.sessionId, {
          after: query.after ?? 0,
          limit: query.limit,
          ...(query.threadId ? { threadId: query.threadId } : {}),
        });
        const events = read.filter((e) => matches(e.type) && (!query.turnId || e.turnId === query.turnId));
        return {
          events,
          nextCursor: read.at(-1)?.sequence ?? query.after ?? 0,
          lastSequence: await deps.runtime.queries.lastSequence(params.sessionId),
        };
      },
    ),
  ];
}
