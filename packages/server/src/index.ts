/**
 * @oar/server — OAR's HTTP control plane: the JSON API over the runtime's commands and queries, resumable live
 * event streams (SSE), workspaces and API keys, the OpenAPI document. docs/http-api.md.
 */
export { API_VERSION, type AppOptions, createApp } from './app.js';
export { errorBody, statusOf } from './errors.js';
export { createLogger, type Logger } from './logger.js';
export { openApiDocument } from './openapi.js';
export type { RateLimitOptions } from './rate-limit.js';
export type { Route, RouteScope, RouteSpec } from './route.js';
export { type RunningServer, type ServeOptions, startServer } from './serve.js';
export type { StreamOptions } from './sse.js';
