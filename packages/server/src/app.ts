import { randomUUID } from 'node:crypto';
import { type Runtime, Workspaces } from '@oar/runtime';
import { type Context, Hono } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import type { z } from 'zod';
import { authenticate, ownSession } from './auth.js';
import { mountConsole } from './console-files.js';
import { errorBody, httpError } from './errors.js';
import { Inflight } from './inflight.js';
import type { Logger } from './logger.js';
import { openApiDocument } from './openapi.js';
import { RateLimiter, type RateLimitOptions } from './rate-limit.js';
import { type Route, route, type ServerDeps } from './route.js';
import { adminRoutes } from './routes/admin.js';
import { aguiRoutes } from './routes/agui.js';
import { artifactRoutes } from './routes/artifacts.js';
import { eventRoutes } from './routes/events.js';
import { historyRoutes } from './routes/history.js';
import { jobRoutes } from './routes/jobs.js';
import { permissionRoutes } from './routes/permissions.js';
import { processRoutes } from './routes/processes.js';
import { scheduleRoutes } from './routes/schedules.js';
import { sessionRoutes } from './routes/sessions.js';
import { subagentRoutes } from './routes/subagents.js';
import { taskRoutes } from './routes/tasks.js';
import { workspaceRoutes } from './routes/workspace.js';
import type { StreamOptions } from './sse.js';

/**
 * The HTTP API as a Hono app: a small core (request id, request log, body limit, errors) and the routes declared
 * in routes/*.ts, each validated with its zod schemas and authorized by its scope. `app.fetch` serves it over
 * any transport; serve.ts puts it on a socket.
 */

export const API_VERSION = '0.1.0';

export interface AppOptions {
  runtime: Runtime;
  logger: Logger;
  /** Largest request body accepted, in bytes (default 1 MiB); a larger one is refused before it is parsed. */
  maxBodyBytes?: number;
  rateLimit?: RateLimitOptions;
  streams?: StreamOptions;
  /** Counts requests and streams in flight (a graceful shutdown waits for them). */
  inflight?: Inflight;
  /**
   * The web console's built files (`@oar/console`'s dist/), served at `/` with index.html for client routes;
   * never shadows `/v1/*`. Without it the server is the API only.
   */
  consoleDir?: string;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** What a request carries through the middleware: its id, and the id of the key that made it. */
declare module 'hono' {
  interface ContextVariableMap {
    requestId: string;
    keyId: string | undefined;
  }
}

/** `c.req.param()` with OpenAPI `{name}` placeholders turned into Hono's `:name`. */
const honoPath = (path: string) => path.replace(/\{([A-Za-z0-9_]+)\}/g, ':$1');

function parse<T extends z.ZodType>(schema: T | undefined, value: unknown, where: string): z.infer<T> | undefined {
  if (!schema) return undefined;
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  throw httpError('invalid_input', `the request ${where} is invalid: ${parsed.error.issues[0]?.message ?? ''}`, {
    details: {
      where,
      issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
    },
  });
}

async function jsonBody(c: Context): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw httpError('invalid_json', `the request body is not JSON: ${(error as Error).message}`);
  }
}

export function createApp(options: AppOptions): { app: Hono; routes: Route[] } {
  const deps: ServerDeps = { runtime: options.runtime, workspaces: new Workspaces(options.runtime.store) };
  const { logger } = options;
  const limiter = new RateLimiter(options.rateLimit);
  const maxBodyBytes = options.maxBodyBytes ?? 1024 * 1024;
  const inflight = options.inflight ?? new Inflight();
  const app = new Hono();

  const routes: Route[] = [
    ...sessionRoutes,
    ...taskRoutes,
    ...subagentRoutes,
    ...permissionRoutes,
    ...historyRoutes,
    ...jobRoutes,
    ...scheduleRoutes,
    ...processRoutes,
    ...artifactRoutes,
    ...eventRoutes({ ...options.streams, inflight }),
    ...workspaceRoutes({ ...options.streams, inflight }),
    ...aguiRoutes({ ...options.streams, inflight }),
    ...adminRoutes,
  ];
  const meta: Route[] = [
    route(
      {
        method: 'get',
        path: '/v1/health',
        operationId: 'health',
        summary: 'Liveness: the server answers and its store is reachable',
        tag: 'meta',
        scope: 'public',
      },
      async () => {
        await deps.workspaces.list(); // one small read: the store answers
        return { ok: true, version: API_VERSION, worker: deps.runtime.worker !== undefined };
      },
    ),
    route(
      {
        method: 'get',
        path: '/v1/openapi.json',
        operationId: 'openapi',
        summary: 'This document',
        tag: 'meta',
        scope: 'public',
      },
      async () => document,
    ),
  ];
  const all = [...meta, ...routes];
  const document = openApiDocument(all, { version: API_VERSION });

  // Request id and request log: every response carries `x-request-id`, every log line of the request names it.
  app.use('*', async (c, next) => {
    const incoming = c.req.header('x-request-id');
    const requestId = incoming && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    c.set('requestId', requestId);
    c.header('x-request-id', requestId);
    const started = performance.now();
    inflight.enter();
    try {
      await next();
    } finally {
      inflight.exit();
    }
    logger.info(
      {
        requestId,
        method: c.req.method,
        // The path only: a query string may carry a stream's access_token.
        path: c.req.path,
        status: c.res.status,
        ms: Math.round((performance.now() - started) * 10) / 10,
        keyId: c.get('keyId'),
      },
      'request',
    );
  });

  app.onError((error, c) => {
    const { status, body } = errorBody(error);
    const requestId = c.get('requestId');
    if (status >= 500) logger.error({ requestId, err: error }, 'request failed');
    const retryAfter = body.error.details?.retryAfterSeconds;
    if (typeof retryAfter === 'number') c.header('retry-after', String(retryAfter));
    return c.json(body, status);
  });

  app.notFound((c) => {
    const { status, body } = errorBody(
      httpError('route_not_found', `no route ${c.req.method} ${c.req.path}; GET /v1/openapi.json lists them`, {
        details: { method: c.req.method, path: c.req.path },
      }),
    );
    return c.json(body, status);
  });

  // Bodies over the limit are refused while they arrive (Content-Length or counted), before any parsing.
  app.use(
    '/v1/*',
    bodyLimit({
      maxSize: maxBodyBytes,
      onError: (c) => {
        const { status, body } = errorBody(
          httpError('payload_too_large', `the request body is over the ${maxBodyBytes}-byte limit`, {
            details: { limit: maxBodyBytes },
          }),
        );
        return c.json(body, status);
      },
    }),
  );

  for (const r of all) {
    const { spec } = r;
    app.on(spec.method.toUpperCase(), honoPath(spec.path), async (c) => {
      const key =
        spec.scope === 'public'
          ? undefined
          : await authenticate(c, deps, spec.scope, { allowQueryKey: spec.queryKey === true });
      if (key) c.set('keyId', key.keyId);
      if (key && spec.method !== 'get') limiter.take(key.keyId);
      const params = parse(spec.params, c.req.param(), 'path');
      // Every route under a session is scoped to the key's workspace: another workspace's session is 404.
      const sessionId = (params as { sessionId?: unknown } | undefined)?.sessionId;
      if (typeof sessionId === 'string') await ownSession(deps, key, sessionId);
      const query = parse(spec.query, c.req.query(), 'query');
      const body = spec.body ? parse(spec.body, await jsonBody(c), 'body') : undefined;
      const result = await r.handle({ c, deps, key, params, query, body });
      if (result instanceof Response) return result;
      return c.json(result as object, spec.status ?? 200);
    });
  }
  if (options.consoleDir) mountConsole(app, options.consoleDir);
  return { app, routes: all };
}
