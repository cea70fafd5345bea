import type { ApiKeyRecord, Runtime, Workspaces } from '@oar/runtime';
import type { Context } from 'hono';
import { z } from 'zod';

/**
 * One route of the API, declared once: its method and path, who may call it, the zod schemas its parameters,
 * query and body are validated with, and its response. The app registers handlers from these declarations and
 * the OpenAPI document is generated from the very same schemas (openapi.ts), so the two cannot drift.
 */

/** Who may call a route: anyone, or a key of at least this scope (admin ⊃ operator ⊃ viewer). */
export type RouteScope = 'public' | 'viewer' | 'operator' | 'admin';

export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

export interface RouteSpec<
  P extends z.ZodType = z.ZodType,
  Q extends z.ZodType = z.ZodType,
  B extends z.ZodType = z.ZodType,
> {
  method: HttpMethod;
  /** OpenAPI style: `/v1/sessions/{sessionId}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  scope: RouteScope;
  params?: P;
  query?: Q;
  body?: B;
  /** The JSON response (default status 200); absent for a stream or bytes. */
  response?: z.ZodType;
  status?: 200 | 201 | 202;
  /** What the route answers with when it is not JSON. */
  produces?: 'sse' | 'bytes';
  /** The key may come as `?access_token=` (a browser's EventSource cannot send headers). */
  queryKey?: boolean;
  /** Extra documented statuses besides the ones every route may answer (400, 401, 403, 404, 413, 429, 500, 503). */
  conflicts?: boolean;
}

/** What a handler gets: the validated input, the caller's key, and what the server holds. */
export interface RouteInput<P, Q, B> {
  c: Context;
  params: P;
  query: Q;
  body: B;
  /** The caller's key (undefined on a public route). */
  key: ApiKeyRecord | undefined;
  deps: ServerDeps;
}

export interface ServerDeps {
  runtime: Runtime;
  workspaces: Workspaces;
}

export interface Route {
  spec: RouteSpec;
  handle(input: RouteInput<unknown, unknown, unknown>): Promise<unknown>;
}

type Infer<T> = T extends z.ZodType ? z.infer<T> : undefined;

/** A route with a handler typed from its schemas. */
export function route<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType>(
  spec: RouteSpec<P, Q, B>,
  handle: (input: RouteInput<Infer<P>, Infer<Q>, Infer<B>>) => Promise<unknown>,
): Route {
  return { spec: spec as unknown as RouteSpec, handle: handle as Route['handle'] };
}

// ---- shared parameter schemas ------------------------------------------------------------------------------------

export const Id = z.string().min(1).max(256);
export const SessionParams = z.object({ sessionId: Id });
export const NoQuery = z.object({});
/** An event sequence used as a cursor. */
export const Cursor = z.coerce.number().int().min(0);

/** A session as lists show it (`GET /v1/sessions`, the workspace feed). */
export const SessionSummary = z.object({
  sessionId: z.string(),
  workspaceId: z.string(),
  title: z.string().nullable(),
  createdAt: z.string(),
  updatedAt: z.string(),
  events: z.number().describe('the sequence of its last event'),
});

/** `{ok: true}` and what a command reports: commands answer with what they did. */
export const Accepted = z.looseObject({});
