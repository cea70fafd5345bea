import type { OarError } from '@oar/protocol';
import { OarRuntimeError, toOarError } from '@oar/runtime';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

/**
 * Errors over HTTP: every failure is `{error: {code, message, retryable, details}}` with the status its code
 * means. The codes are the runtime's one table (packages/runtime/src/kernel/error-codes.ts, docs/errors.md); the status
 * is derived here, by what the code says about the request, so a new runtime code gets a sensible status without
 * a second table to keep in step.
 */

export interface ErrorBody {
  error: OarError;
}

/** Codes whose request conflicts with the state it met (retrying as is may succeed once the state changes). */
const CONFLICTS = new Set([
  'session_exists',
  'workspace_exists',
  'decision_already_resolved',
  'thread_closed',
  'thread_busy',
  'thread_changed',
  'binding_conflict',
  'binding_changed',
  'task_not_active',
  'task_not_retryable',
  'task_exists',
  'task_not_linkable',
  'task_has_parent',
  'task_already_started',
  'task_not_startable',
  'task_paused',
  'task_not_paused',
  'task_cancelling',
  'task_not_ended',
  'task_not_running',
  'task_still_stopping',
  'task_changed',
  'subagent_not_closed',
  'subagent_exists',
  'nothing_to_compact',
  'limits_changed',
  'process_input_closed',
  'too_many_process_requests',
  'not_a_permission_request',
  'rollback_conflict',
  'job_running',
  'job_nothing_to_retry',
  'job_exists',
  'schedule_exists',
  'rollback_in_progress',
]);

/** Codes that say the request itself is malformed (its JSON or its shape), rather than meaningless. */
const MALFORMED = new Set(['invalid_json', 'invalid_input', 'input_too_deep', 'usage_error', 'invalid_option']);

/** Codes of a server that cannot serve now, whatever the request (retry later, elsewhere). */
const UNAVAILABLE = new Set([
  'runtime_closing',
  'store_unavailable',
  'store_full',
  'store_read_only',
  'store_migration_failed',
  'lease_lost',
  'server_closing',
]);

export function statusOf(code: string): ContentfulStatusCode {
  if (code === 'unauthorized') return 401;
  if (code === 'forbidden') return 403;
  if (code.endsWith('_not_found')) return 404;
  // It existed and is gone for good (the retention policy deleted its content): not "never was".
  if (code === 'artifact_expired') return 410;
  if (code === 'payload_too_large' || code === 'input_too_large') return 413;
  if (code === 'range_not_satisfiable') return 416;
  if (code === 'too_many_requests') return 429;
  if (CONFLICTS.has(code)) return 409;
  if (UNAVAILABLE.has(code)) return 503;
  if (MALFORMED.has(code)) return 400;
  if (code === 'internal_error' || code === 'contradictory_fact') return 500;
  // Every other code the runtime throws at a caller names a request that is well-formed but cannot be done as
  // asked (an unknown agent, an invalid decision, an invalid binding).
  return 422;
}

/** An error raised by the server itself (auth, routing, limits): the runtime's error type, so one path renders both. */
export function httpError(
  code: string,
  message: string,
  options: { retryable?: boolean; details?: Record<string, unknown> } = {},
): OarRuntimeError {
  return new OarRuntimeError(code, message, options);
}

export function errorBody(error: unknown): { status: ContentfulStatusCode; body: ErrorBody } {
  const oar = toOarError(error);
  // An unexpected failure's message may hold anything (a driver's text, a path): the caller gets the code, the
  // log keeps the rest.
  const body =
    oar.code === 'internal_error'
      ? { error: { ...oar, message: 'internal error (see the server log for this request id)', details: {} } }
      : { error: oar };
  return { status: statusOf(oar.code), body };
}
