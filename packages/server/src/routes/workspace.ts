import { UnreconciledActionSchema } from '@oar/protocol';
import { z } from 'zod';
import { type Route, route, type ServerDeps } from '../route.js';
import { aborted, openStream, type StreamOptions } from '../sse.js';

/**
 * Workspace-wide views, for dashboards and the console: the decisions waiting across its sessions, and a live feed
 * of which sessions changed.
 *
 * The feed is a state feed, not a log: it opens with the workspace's sessions (`event: sessions`), then sends a
 * session's summary (`event: session.changed`) whenever one of its sessions records something. A reconnect gets
 * the whole list again, so nothing is missed without a cursor to keep; a session's own events are on its stream.
 */

/** How long changes are gathered before the feed reads them (a busy session changes at every step). */
const COALESCE_MS = 100;

function workspaceFeed(deps: ServerDeps, workspaceId: string | undefined, options: StreamOptions) {
  return (c: Parameters<typeof openStream>[0]) =>
    openStream(c, options, async (send, signal) => {
      const changed = new Set<string>();
      let timer: NodeJS.Timeout | undefined;
      let wake: (() => void) | undefined;
      const stop = deps.runtime.notifier.listen((change) => {
        changed.add(change.sessionId);
        timer ??= setTimeout(() => {
          timer = undefined;
          wake?.();
        }, COALESCE_MS);
      });
      try {
        await send('sessions', { sessions: await deps.runtime.listSessions({ workspaceId }) });
        while (!signal.aborted) {
          if (changed.size === 0) {
            await Promise.race([aborted(signal), new Promise<void>((resolve) => (wake = resolve))]);
            wake = undefined;
            continue;
          }
          const ids = [...changed];
          changed.clear();
          // Only the workspace's own sessions: the filter is in the query, so another workspace's id never leaks.
          for (const session of await deps.runtime.listSessions({ workspaceId, sessionIds: ids })) {
            await send('session.changed', session);
          }
        }
      } finally {
        stop();
        clearTimeout(timer);
      }
    });
}

export function workspaceRoutes(options: StreamOptions): Route[] {
  return [
    route(
      {
        method: 'get',
        path: '/v1/events',
        operationId: 'workspaceEvents',
        summary: "A live feed of the workspace's sessions (SSE): the list, then each session that changes",
        description:
          '`event: sessions` with `{sessions}` first, then `event: session.changed` with a session summary whenever a session of the workspace records an event (changes within 100 ms are sent once). A reconnect starts with the whole list again. Each session’s own events: `GET /v1/sessions/{sessionId}/events`.',
        tag: 'events',
        scope: 'viewer',
        query: z.object({ access_token: z.string().optional() }),
        produces: 'sse',
        queryKey: true,
      },
      async ({ c, deps, key }) => workspaceFeed(deps, key?.workspaceId, options)(c),
    ),
    route(
      {
        method: 'get',
        path: '/v1/decisions',
        operationId: 'listDecisions',
        summary:
          'The decisions waiting across the workspace’s sessions (approvals and questions), and the lost actions nobody has reconciled yet, oldest first',
        tag: 'decisions',
        scope: 'viewer',
        response: z.object({
          decisions: z.array(
            z.looseObject({
              sessionId: z.string(),
              threadId: z.string(),
              turnId: z.string(),
              actionId: z.string(),
              actionType: z.string(),
              prompt: z.string(),
              requestedAt: z.string(),
            }),
          ),
          /** Answered like a decision (`respondAction`): happened, not_happened or retry (docs/reliability.md). */
          unreconciled: z.array(UnreconciledActionSchema.extend({ sessionId: z.string(), threadId: z.string() })),
        }),
      },
      async ({ deps, key }) => ({
        decisions: await deps.runtime.pendingDecisions({ workspaceId: key?.workspaceId }),
        unreconciled: await deps.runtime.unreconciledActions({ workspaceId: key?.workspaceId }),
      }),
    ),
  ];
}
