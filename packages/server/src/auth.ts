import { type ApiKeyRecord, notFound } from '@oar/runtime';
import type { Context } from 'hono';
import { httpError } from './errors.js';
import type { RouteScope, ServerDeps } from './route.js';

/**
 * Who is calling: a bearer API key (`Authorization: Bearer oar_…`), looked up by its hash (store/workspaces.ts).
 * No key or an unknown, revoked or expired one is 401; a key below the route's scope is 403. Every route is scoped
 * to the key's workspace: an id of another workspace's session is 404, exactly as if it did not exist.
 */

const RANK: Record<Exclude<RouteScope, 'public'>, number> = { viewer: 1, operator: 2, admin: 3 };

/**
 * The key of a request. `access_token` in the query is accepted on streams only: a browser's `EventSource` cannot
 * send headers. The server's request log never prints query strings.
 */
function presentedKey(c: Context, allowQuery: boolean): string | undefined {
  const header = c.req.header('authorization');
  if (header !== undefined) return /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header)?.[1] ?? '';
  return allowQuery ? c.req.query('access_token') : undefined;
}

export async function authenticate(
  c: Context,
  deps: ServerDeps,
  scope: Exclude<RouteScope, 'public'>,
  options: { allowQueryKey?: boolean } = {},
): Promise<ApiKeyRecord> {
  const presented = presentedKey(c, options.allowQueryKey === true);
  if (presented === undefined) {
    throw httpError('unauthorized', 'an API key is required: send "Authorization: Bearer <key>"');
  }
  const key = await deps.workspaces.authenticate(presented);
  if (!key) throw httpError('unauthorized', 'the API key is unknown, revoked or expired');
  if (RANK[key.scope] < RANK[scope]) {
    throw httpError('forbidden', `this route needs a key of scope "${scope}"; this key is "${key.scope}"`, {
      details: { required: scope, scope: key.scope },
    });
  }
  return key;
}

/** The session, if the key's workspace owns it; otherwise `session_not_found` (never revealing that it exists). */
export async function ownSession(deps: ServerDeps, key: ApiKeyRecord | undefined, sessionId: string): Promise<void> {
  const workspaceId = await deps.workspaces.ofSession(sessionId);
  if (workspaceId === undefined || (key && workspaceId !== key.workspaceId)) throw notFound('session', sessionId);
}

/** Admin keys of the default workspace manage every workspace; other admins only their own. */
export function managesWorkspace(key: ApiKeyRecord | undefined, workspaceId: string): boolean {
  return (
    key !== undefined && key.scope === 'admin' && (key.workspaceId === 'default' || key.workspaceId === workspaceId)
  );
}
