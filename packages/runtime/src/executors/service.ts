import { type OarError, oarError } from '@oar/protocol';
import { IDEMPOTENT_METHODS, QUERY_METHODS, type ServiceConfig, serviceAttempts } from '../config/pipelines.js';
import { actionStatusEvent, errorOutput, toolIds } from '../facts/action.js';
import { isClosing, OarRuntimeError } from '../kernel/errors.js';
import { waitUnlessAborted } from '../kernel/signals.js';
import type { RunActionStatus } from '../read-models/thread-state.js';
import { openBracket } from '../scheduler/bracket.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import type { ReconcileVerdict } from '../tools/tool.js';
import { type Executor, prepareNamed } from './executor.js';
import type { Authorized } from './gate.js';
import { completeAction, failAction } from './outcome.js';
import { withTimeout } from './tool.js';

/**
 * The `service` executor: one call of an HTTP integration from the binding (docs/executors.md). Authorized like
 * any action (executor `service`), bracketed by `tool.started` … `tool.result`/`tool.failed`; each attempt has a
 * time limit; only idempotent methods are retried, after a retryable failure (network, timeout, 408, 429, 5xx),
 * each retry announced by a `tool.progress`. Credentials come from the environment variable the config names; the
 * binding lists that variable as secret, so its value is masked in every event and artifact. An interrupt aborts
 * the request in flight at once.
 */

/** The most characters of an error response body kept in the error's details. */
const ERROR_BODY_CHARS = 2_000;
/** Statuses worth another attempt: the server may answer differently in a moment. */
const RETRYABLE_STATUSES = new Set([408, 425, 429, 500, 502, 503, 504]);

export const serviceExecutor: Executor<ServiceConfig> = {
  prepare: async (ctx) => prepareNamed(ctx, 'service', ctx.config.binding.services),
  run: callService,
};

async function callService(ctx: ExecutorContext, service: ServiceConfig, gated: Authorized): Promise<RunActionStatus> {
  const { action } = ctx;
  const sessionId = ctx.thread.sessionId;

  const request = buildRequest(service, action.input, process.env);
  if ('error' in request) {
    await ctx.record([...gated.allowed, actionStatusEvent(ctx, 'failed', errorOutput(request.error))]);
    return 'failed';
  }
  const maxAttempts = serviceAttempts(service);
  // A POST that must not happen twice starts only once its start is durable (a crash then ends in `lost`).
  const bracket = await openBracket((drafts, options) => ctx.record(drafts, options), {
    sessionId,
    ids: toolIds(ctx),
    // Retried after a crash because the server deduplicates by key: under the key of the attempt it retries.
    ...(ctx.state.keyAttempt !== undefined ? { keyAttempt: ctx.state.keyAttempt } : {}),
    authorization: gated.allowed,
    payload: {
      toolName: service.name,
      executor: 'service',
      attempt: ctx.state.attempt + 1,
      idempotent: IDEMPOTENT_METHODS.has(service.method),
      ...(service.idempotentByKey ? { idempotentByKey: true } : {}),
      graphActionId: action.id,
      input: action.input,
      method: service.method,
      url: request.url,
      maxAttempts,
    },
  });
  const durable = { durable: bracket.durable };
  // Every attempt carries the same key: a server that honours it does the thing once however often it is asked.
  const call = { ...request, headers: { ...request.headers, 'idempotency-key': bracket.idempotencyKey } };
  const started = Date.now();
  let failure: OarError | undefined;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    if (attempt > 1) {
      const delayMs = service.retryDelayMs * 2 ** (attempt - 2);
      await ctx.record([
        {
          type: 'tool.progress',
          ...toolIds(ctx),
          payload: {
            message: `attempt ${attempt - 1} of ${maxAttempts} failed (${failure?.code}); retrying in ${delayMs} ms`,
            toolName: service.name,
            attempt,
            maxAttempts,
            error: failure,
          },
        },
      ]);
      if (!(await waitUnlessAborted(delayMs, ctx.signal))) break;
    }
    if (ctx.signal.aborted) break;
    const result = await attemptCall(service, call, ctx.signal, attempt, maxAttempts);
    if ('closing' in result) return 'running';
    if ('ok' in result) {
      return completeAction(ctx, service.name, result.ok, Date.now() - started, {
        ...durable,
        extra: { executor: 'service', status: result.status, attempts: attempt },
      });
    }
    failure = result.error;
    if (!failure.retryable || ctx.signal.aborted) break;
  }
  if (ctx.signal.aborted) {
    if (isClosing(ctx.signal)) return 'running';
    const error = oarError('interrupted', `service "${service.name}" was cancelled by an interrupt`);
    return failAction(ctx, service.name, error, Date.now() - started, { ...durable, status: 'cancelled' });
  }
  // Not aborted, so at least one attempt ran and left its failure.
  const error = failure ?? oarError('interrupted', `service "${service.name}" made no attempt`);
  return failAction(ctx, service.name, error, Date.now() - started, durable);
}

/**
 * Ask the server whether a call left in flight by a crash took effect (the service's `reconcile` GET, by the call's
 * idempotency key). 2xx: it did, and the reply is the evidence; 404 or 410: it did not; anything else throws (the
 * server cannot tell now, and a person decides).
 */
export async function reconcileService(
  service: ServiceConfig,
  input: Record<string, unknown>,
  idempotencyKey: string,
  signal: AbortSignal,
  env: Record<string, string | undefined> = process.env,
): Promise<ReconcileVerdict | undefined> {
  if (!service.reconcile) return undefined;
  const { url } = service.reconcile;
  // Only the placeholders go into the URL: the rest of the input was the call's body, not a lookup's query.
  const named = new Set([...url.matchAll(/\{([A-Za-z0-9_]+)\}/g)].map((m) => m[1] as string));
  const values = { ...input, idempotencyKey };
  const fill = Object.fromEntries(Object.entries(values).filter(([name]) => named.has(name)));
  const lookup = { ...service, url, method: 'GET' as const };
  const request = buildRequest(lookup, fill, env);
  if ('error' in request) throw new OarRuntimeError(request.error.code, request.error.message, request.error);
  const result = await attemptCall(
    lookup,
    { ...request, headers: { ...request.headers, 'idempotency-key': idempotencyKey } },
    signal,
    1,
    1,
  );
  if ('closing' in result) return undefined;
  if ('ok' in result) {
    return { happened: true, evidence: { status: result.status, url: request.url, reply: result.ok.structured } };
  }
  const status = (result.error.details as { status?: unknown } | undefined)?.status;
  if (status === 404 || status === 410) return { happened: false, evidence: { status, url: request.url } };
  throw new OarRuntimeError(result.error.code, result.error.message, result.error);
}

interface ServiceRequest {
  url: string;
  headers: Record<string, string>;
  body?: string;
}

/**
 * The HTTP request for an input: `{field}` placeholders in the URL are filled (URL-encoded) and taken out of the
 * input; the rest goes into the query string (GET, HEAD, OPTIONS, DELETE) or a JSON body (POST, PUT, PATCH).
 * Missing credentials are an error before anything is sent.
 */
export function buildRequest(
  service: ServiceConfig,
  input: Record<string, unknown>,
  env: Record<string, string | undefined>,
): ServiceRequest | { error: OarError } {
  const rest: Record<string, unknown> = { ...input };
  const missing: string[] = [];
  const filled = service.url.replaceAll(/\{([A-Za-z0-9_]+)\}/g, (_match, name: string) => {
    const value = rest[name];
    delete rest[name];
    if (value === undefined || value === null || typeof value === 'object') {
      missing.push(name);
      return '';
    }
    return encodeURIComponent(String(value));
  });
  if (missing.length > 0) {
    return {
      error: oarError('invalid_input', `service "${service.name}" needs ${missing.join(', ')} (scalar) for its URL`, {
        details: { service: service.name, missing },
      }),
    };
  }
  const url = new URL(filled);
  const headers: Record<string, string> = { accept: 'application/json, text/plain;q=0.9, */*;q=0.5' };
  for (const [name, value] of Object.entries(service.headers)) headers[name.toLowerCase()] = value;
  let body: string | undefined;
  if (QUERY_METHODS.has(service.method)) {
    for (const [name, value] of Object.entries(rest)) {
      if (value === undefined) continue;
      for (const item of Array.isArray(value) ? value : [value]) {
        url.searchParams.append(name, typeof item === 'object' && item !== null ? JSON.stringify(item) : String(item));
      }
    }
  } else {
    body = JSON.stringify(rest);
    headers['content-type'] = 'application/json';
  }
  if (service.auth) {
    const name = service.auth.type === 'bearer' ? service.auth.tokenEnv : service.auth.valueEnv;
    const value = env[name];
    if (value === undefined || value.trim() === '') {
      return {
        error: oarError(
          'service_auth_missing',
          `service "${service.name}" needs its credential in ${name}, which is not set`,
          {
            details: { service: service.name, env: name },
          },
        ),
      };
    }
    if (service.auth.type === 'bearer') headers.authorization = `Bearer ${value}`;
    else headers[service.auth.header.toLowerCase()] = value;
  }
  return { url: url.toString(), headers, ...(body !== undefined ? { body } : {}) };
}

type AttemptResult =
  | { ok: { text: string; structured: Record<string, unknown>; summary: string; mime: string }; status: number }
  | { error: OarError }
  | { closing: true };

/** One HTTP attempt under the service's time limit and the action's interrupt. Never throws. */
async function attemptCall(
  service: ServiceConfig,
  request: ServiceRequest,
  signal: AbortSignal,
  attempt: number,
  maxAttempts: number,
): Promise<AttemptResult> {
  const timer = withTimeout(signal, service.timeoutMs);
  const where = { service: service.name, method: service.method, url: request.url, attempt, maxAttempts };
  try {
    let response: Response;
    try {
      response = await fetch(request.url, {
        method: service.method,
        headers: request.headers,
        ...(request.body !== undefined ? { body: request.body } : {}),
        signal: timer.signal,
        // Not followed: a redirect could carry the credential elsewhere; configure the final URL instead.
        redirect: 'manual',
      });
    } catch (thrown) {
      return transportFailure(thrown, service, signal, timer.timedOut(), where);
    }
    let text: string;
    try {
      text = await readBounded(response, service.maxResponseBytes);
    } catch (thrown) {
      if (thrown instanceof TooLarge) {
        return {
          error: oarError(
            'service_response_too_large',
            `service "${service.name}" answered more than ${service.maxResponseBytes} bytes`,
            { details: { ...where, status: response.status, maxResponseBytes: service.maxResponseBytes } },
          ),
        };
      }
      return transportFailure(thrown, service, signal, timer.timedOut(), where);
    }
    const contentType = response.headers.get('content-type') ?? '';
    if (response.status < 200 || response.status >= 300) {
      return {
        error: oarError(
          'service_http_error',
          `service "${service.name}" answered HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ''}`,
          {
            retryable: RETRYABLE_STATUSES.has(response.status),
            details: {
              ...where,
              status: response.status,
              ...(response.headers.get('location') ? { location: response.headers.get('location') } : {}),
              body: text.slice(0, ERROR_BODY_CHARS),
              ...(text.length > ERROR_BODY_CHARS ? { bodyTruncated: true } : {}),
            },
          },
        ),
      };
    }
    const isJson = /\bjson\b|\+json/i.test(contentType);
    let json: unknown;
    if (isJson && text.trim() !== '') {
      try {
        json = JSON.parse(text);
      } catch (thrown) {
        return {
          error: oarError(
            'service_bad_json',
            `service "${service.name}" answered ${contentType} that is not valid JSON: ${(thrown as Error).message}`,
            { details: { ...where, status: response.status, body: text.slice(0, ERROR_BODY_CHARS) } },
          ),
        };
      }
    }
    return {
      status: response.status,
      ok: {
        text: json === undefined ? text : JSON.stringify(json, null, 2),
        mime: json === undefined ? contentType.split(';')[0] || 'text/plain' : 'application/json',
        structured: {
          service: service.name,
          status: response.status,
          contentType,
          attempts: attempt,
          ...(json !== undefined ? { body: json } : {}),
        },
        summary: `${service.method} ${service.name}: HTTP ${response.status}${text.length ? `, ${text.length} characters` : ''}`,
      },
    };
  } finally {
    timer.clear();
  }
}

/** A request that got no (complete) answer: interrupted, timed out, or a network failure. */
function transportFailure(
  thrown: unknown,
  service: ServiceConfig,
  signal: AbortSignal,
  timedOut: boolean,
  where: Record<string, unknown>,
): AttemptResult {
  if (signal.aborted && isClosing(signal)) return { closing: true };
  if (timedOut) {
    return {
      error: oarError('service_timeout', `service "${service.name}" did not answer within ${service.timeoutMs} ms`, {
        retryable: true,
        details: { ...where, timeoutMs: service.timeoutMs },
      }),
    };
  }
  if (signal.aborted) {
    return { error: oarError('interrupted', `service "${service.name}" was cancelled by an interrupt`) };
  }
  const cause = (thrown as { cause?: { code?: unknown; message?: unknown } }).cause;
  return {
    error: oarError(
      'service_network_error',
      `service "${service.name}" could not be reached: ${typeof cause?.message === 'string' ? cause.message : (thrown as Error).message}`,
      { retryable: true, details: { ...where, ...(typeof cause?.code === 'string' ? { cause: cause.code } : {}) } },
    ),
  };
}

class TooLarge extends Error {}

/** The response body as text, refusing (and cancelling) one larger than `maxBytes`. */
async function readBounded(response: Response, maxBytes: number): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw new TooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}
