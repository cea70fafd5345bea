import { APICallError } from '@ai-sdk/provider';
import { type OarError, oarError } from '@oar/protocol';
import { type FailedModel, type HintedFailure, isWrongApi, providerHint, withoutSdkAdvice } from './provider-errors.js';

/**
 * Why a model call failed, in classes that decide what happens next: retry (transient, timeout, rate_limited),
 * or fail with a message that says what to fix (auth, invalid_request, context_overflow, content_filtered).
 * `cancelled` is an interrupt: never retried, the interrupt records the turn's end.
 */
export const MODEL_FAILURE_CLASSES = [
  'transient',
  'timeout',
  'rate_limited',
  'context_overflow',
  'auth',
  'invalid_request',
  'content_filtered',
  'cancelled',
  'unknown',
] as const;
export type ModelFailureClass = (typeof MODEL_FAILURE_CLASSES)[number];

/** The error code of each class (docs/errors.md). */
const CODES: Record<ModelFailureClass, string> = {
  transient: 'model_transient',
  timeout: 'model_timeout',
  rate_limited: 'model_rate_limited',
  context_overflow: 'model_context_overflow',
  auth: 'model_auth',
  invalid_request: 'model_invalid_request',
  content_filtered: 'model_content_filtered',
  cancelled: 'interrupted',
  unknown: 'model_error',
};

const RETRYABLE: ReadonlySet<ModelFailureClass> = new Set(['transient', 'timeout', 'rate_limited']);

/** A failed attempt, classified. */
export interface ModelFailure {
  failureClass: ModelFailureClass;
  error: OarError;
  retryable: boolean;
  statusCode?: number;
  /** What the provider asked us to wait (`retry-after`, `retry-after-ms`), in milliseconds. */
  retryAfterMs?: number;
  /** The provider's rate-limit headers (`x-ratelimit-*`), as sent. */
  rateLimit?: Record<string, string>;
  /** The provider's id of the request (`x-request-id`, `request-id`), for its support. */
  providerRequestId?: string;
}

/** Network failures below HTTP: a retry may well succeed. */
const NETWORK_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_CLOSED',
]);

/** Provider wordings of "the prompt does not fit the context window" (OpenAI, Anthropic, compatible servers). */
const CONTEXT_OVERFLOW =
  /context[_ ]length[_ ]exceeded|maximum context length|context window|prompt is too long|too many tokens|reduce the length/i;

/**
 * Classify what a model call threw. `timedOut`: the call's own timeout fired; `interrupted`: the turn's signal was
 * aborted (both abort the request, so the thrown error alone cannot tell them apart).
 */
export function classifyModelError(
  thrown: unknown,
  how: { timedOut: boolean; interrupted: boolean; timeoutMs?: number; idleTimeoutMs?: number; model?: FailedModel },
): ModelFailure {
  const message = withoutSdkAdvice(thrown instanceof Error ? thrown.message : String(thrown));
  const hinted = (failure: HintedFailure, extra: Record<string, unknown> = {}) => ({
    ...extra,
    hint: providerHint(failure, how.model),
  });
  if (how.interrupted) return failure('cancelled', 'the model call was interrupted', {});
  // The stream went quiet (distinct from the call's own time limit): retried like any timeout.
  if (how.idleTimeoutMs !== undefined) {
    return failure('timeout', `the model stream produced nothing for ${how.idleTimeoutMs} ms (idle timeout)`, {
      details: { idleTimeoutMs: how.idleTimeoutMs, idle: true },
    });
  }
  if (how.timedOut) {
    return failure('timeout', `the model did not answer within ${how.timeoutMs ?? '?'} ms`, {
      details: { timeoutMs: how.timeoutMs },
    });
  }
  if (APICallError.isInstance(thrown)) {
    const statusCode = thrown.statusCode;
    const headers = lowerCase(thrown.responseHeaders ?? {});
    const providerRequestId = headers['x-request-id'] ?? headers['request-id'];
    const common = {
      statusCode,
      ...(providerRequestId ? { providerRequestId } : {}),
    };
    const url = thrown.url;
    if (isWrongApi(thrown.message)) {
      // A Chat Completions server behind "openai:" (OPENAI_BASE_URL or baseURL): not retryable, a config fix.
      return failure(
        'invalid_request',
        `the server at ${url} answered in the Chat Completions format, not in the Responses API format that "openai:" models use`,
        { ...common, details: hinted({ kind: 'wrong_api', url }, { url }) },
      );
    }
    const code = errnoOf(thrown);
    // No HTTP answer at all: a refused connection, an unknown host, a port fetch refuses ("Cannot connect to API").
    const network = code !== undefined && NETWORK_CODES.has(code);
    if (statusCode === undefined && (network || /^Cannot connect to API/.test(thrown.message))) {
      return failure('transient', `could not reach the model's server at ${url}: ${message}`, {
        details: hinted({ kind: 'unreachable', url }, { ...(network ? { code } : {}), url }),
      });
    }
    const body = thrown.responseBody ?? '';
    const cls = classOfStatus(statusCode, `${message} ${body}`, thrown.isRetryable);
    const retryAfterMs = retryAfter(headers);
    const rateLimit = rateLimitHeaders(headers);
    const hint =
      cls === 'auth'
        ? hinted({ kind: 'auth', statusCode })
        : cls === 'rate_limited'
          ? hinted({ kind: 'rate_limited' })
          : cls === 'invalid_request' && statusCode === 404
            ? hinted({ kind: 'not_found', url }, { url })
            : {};
    return failure(cls, describe(cls, message, statusCode), {
      ...common,
      ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
      ...(Object.keys(rateLimit).length > 0 ? { rateLimit } : {}),
      details: hint,
    });
  }
  const code = errnoOf(thrown);
  if (code !== undefined && NETWORK_CODES.has(code)) {
    return failure('transient', `network error talking to the model: ${code} (${message})`, {
      details: hinted({ kind: 'unreachable' }, { code }),
    });
  }
  // fetch reports a connection that failed before any response as a TypeError "fetch failed" with the cause.
  if (thrown instanceof TypeError && /fetch failed|terminated|socket/i.test(message)) {
    return failure('transient', `network error talking to the model: ${message}`, {});
  }
  const retryable = (thrown as { isRetryable?: unknown }).isRetryable === true;
  return failure(retryable ? 'transient' : 'unknown', message, {});
}

function classOfStatus(status: number | undefined, text: string, sdkRetryable: boolean): ModelFailureClass {
  if (status === undefined) return sdkRetryable ? 'transient' : 'unknown';
  if (status === 429) return 'rate_limited';
  if (status === 401 || status === 403) return 'auth';
  if (status === 408 || status === 409 || status >= 500) return 'transient';
  if (CONTEXT_OVERFLOW.test(text)) return 'context_overflow';
  if (/content[_ ]?(filter|policy)|safety system/i.test(text)) return 'content_filtered';
  if (status >= 400) return 'invalid_request';
  return sdkRetryable ? 'transient' : 'unknown';
}

/** The message of a class: what happened, and for the ones a retry cannot fix, what to do. */
function describe(cls: ModelFailureClass, message: string, status: number | undefined): string {
  const http = status !== undefined ? `HTTP ${status}: ` : '';
  switch (cls) {
    case 'auth':
      return `the provider refused the credentials (${http}${message})`;
    case 'context_overflow':
      return `the request does not fit the model's context window (${http}${message}); set the model's contextWindow (or lower limits.contextBudgetTokens) or use a model with a larger window`;
    case 'invalid_request':
      return status === 404
        ? `the provider has no such model or endpoint (${http}${message})`
        : `the provider rejected the request (${http}${message}); check the model id and its options`;
    case 'content_filtered':
      return `the provider's content filter refused the request (${http}${message})`;
    case 'rate_limited':
      return `the provider's rate limit was hit (${http}${message})`;
    default:
      return `${http}${message}`;
  }
}

function failure(
  failureClass: ModelFailureClass,
  message: string,
  extra: Omit<Partial<ModelFailure>, 'failureClass' | 'error' | 'retryable'> & { details?: Record<string, unknown> },
): ModelFailure {
  const { details, ...rest } = extra;
  const retryable = RETRYABLE.has(failureClass);
  // The hint is also the message's end: every surface that shows only the message (a failed turn's line, the
  // console) says what to fix; `details.hint` keeps it apart for programs.
  if (typeof details?.hint === 'string') message = `${message}; ${details.hint}`;
  return {
    failureClass,
    retryable,
    ...rest,
    error: oarError(CODES[failureClass], message, {
      retryable,
      details: {
        failureClass,
        ...(rest.statusCode !== undefined ? { statusCode: rest.statusCode } : {}),
        ...(rest.retryAfterMs !== undefined ? { retryAfterMs: rest.retryAfterMs } : {}),
        ...(rest.providerRequestId ? { providerRequestId: rest.providerRequestId } : {}),
        ...details,
      },
    }),
  };
}

function lowerCase(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) out[name.toLowerCase()] = value;
  return out;
}

/**
 * The wait a provider asks for: `retry-after-ms` (milliseconds), else `retry-after` (seconds, or an HTTP date).
 * Nonsense (negative, not a number, a date in the past) counts as no request.
 */
export function retryAfter(headers: Record<string, string>, now = Date.now()): number | undefined {
  const ms = headers['retry-after-ms'];
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.ceil(Number(ms));
  const value = headers['retry-after']?.trim();
  if (value === undefined || value === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000);
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return date > now ? date - now : undefined;
}

function rateLimitHeaders(headers: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (name.startsWith('x-ratelimit-') || name.startsWith('anthropic-ratelimit-')) out[name] = value;
  }
  return out;
}

function errnoOf(error: unknown): string | undefined {
  for (let current = error, depth = 0; current && depth < 4; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return undefined;
}

/** How the runtime retries a model call (limits, optionally overridden per configured model). */
export interface ModelRetryPolicy {
  /** Attempts in all, the first included. */
  attempts: number;
  /** The first backoff; each retry doubles it (full jitter: a random wait between 0 and the doubled value). */
  initialDelayMs: number;
  /** The longest wait before a retry; a provider asking for longer fails the call instead. */
  maxDelayMs: number;
}

/**
 * How long to wait before the next attempt, or undefined when there is none: the class is not retryable, the
 * attempts are used up, or the provider asks for a longer wait than the policy allows. `random` is injectable for
 * tests (full jitter: AWS's "exponential backoff and jitter").
 */
export function retryDelay(
  failure: ModelFailure,
  attempt: number,
  policy: ModelRetryPolicy,
  random: () => number = Math.random,
): number | undefined {
  if (!failure.retryable || attempt >= policy.attempts) return undefined;
  if (failure.retryAfterMs !== undefined) {
    return failure.retryAfterMs <= policy.maxDelayMs ? failure.retryAfterMs : undefined;
  }
  const ceiling = Math.min(policy.maxDelayMs, policy.initialDelayMs * 2 ** (attempt - 1));
  return Math.round(random() * ceiling);
}
