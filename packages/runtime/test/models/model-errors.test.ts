import { APICallError } from '@ai-sdk/provider';
import { describe, expect, it } from 'vitest';
import { classifyModelError, retryAfter, retryDelay } from '../../src/models/model-errors.js';

const apiError = (statusCode: number, extra: { headers?: Record<string, string>; body?: string } = {}) =>
  new APICallError({
    message: `status ${statusCode}`,
    url: 'https://provider.example/v1/chat/completions',
    requestBodyValues: {},
    statusCode,
    ...(extra.headers ? { responseHeaders: extra.headers } : {}),
    ...(extra.body ? { responseBody: extra.body } : {}),
  });
const plain = { timedOut: false, interrupted: false };

describe('classifyModelError', () => {
  it.each([
    [500, 'transient', 'model_transient', true],
    [502, 'transient', 'model_transient', true],
    [529, 'transient', 'model_transient', true],
    [408, 'transient', 'model_transient', true],
    [429, 'rate_limited', 'model_rate_limited', true],
    [401, 'auth', 'model_auth', false],
    [403, 'auth', 'model_auth', false],
    [400, 'invalid_request', 'model_invalid_request', false],
    [404, 'invalid_request', 'model_invalid_request', false],
  ] as const)('HTTP %i is %s (%s, retryable %s)', (status, failureClass, code, retryable) => {
    const failure = classifyModelError(apiError(status), plain);
    expect(failure).toMatchObject({ failureClass, retryable, statusCode: status });
    expect(failure.error).toMatchObject({ code, retryable, details: { failureClass, statusCode: status } });
  });

  it('reads a context overflow and a content filter from the provider’s body', () => {
    const overflow = apiError(400, { body: '{"error":{"code":"context_length_exceeded"}}' });
    expect(classifyModelError(overflow, plain).failureClass).toBe('context_overflow');
    const anthropic = apiError(400, { body: '{"error":{"message":"prompt is too long: 210000 tokens > 200000"}}' });
    expect(classifyModelError(anthropic, plain).failureClass).toBe('context_overflow');
    const filtered = apiError(400, { body: '{"error":{"code":"content_filter"}}' });
    expect(classifyModelError(filtered, plain).failureClass).toBe('content_filtered');
  });

  it('keeps the retry-after, the rate-limit headers and the request id of a 429 (header names in any case)', () => {
    const headers = {
      'Retry-After': '2',
      'X-RateLimit-Remaining-Tokens': '0',
      'anthropic-ratelimit-requests-reset': '2026-11-25T10:00:00Z',
      'X-Request-Id': 'req_1',
      'content-type': 'application/json',
    };
    const failure = classifyModelError(apiError(429, { headers }), plain);
    expect(failure).toMatchObject({
      retryAfterMs: 2000,
      providerRequestId: 'req_1',
      rateLimit: {
        'x-ratelimit-remaining-tokens': '0',
        'anthropic-ratelimit-requests-reset': '2026-11-25T10:00:00Z',
      },
    });
    expect(failure.rateLimit).not.toHaveProperty('content-type');
  });

  it('network errors are transient; the call’s timeout and an interrupt are told apart from them', () => {
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    expect(classifyModelError(reset, plain).failureClass).toBe('transient');
    const fetchFailed = new TypeError('fetch failed', {
      cause: Object.assign(new Error('x'), { code: 'ECONNREFUSED' }),
    });
    expect(classifyModelError(fetchFailed, plain).failureClass).toBe('transient');
    const abort = new DOMException('aborted', 'AbortError');
    expect(classifyModelError(abort, { timedOut: true, interrupted: false, timeoutMs: 100 })).toMatchObject({
      failureClass: 'timeout',
      retryable: true,
      error: { code: 'model_timeout', details: { timeoutMs: 100 } },
    });
    expect(classifyModelError(abort, { timedOut: true, interrupted: true })).toMatchObject({
      failureClass: 'cancelled',
      retryable: false,
      error: { code: 'interrupted' },
    });
    expect(classifyModelError(new Error('something odd'), plain)).toMatchObject({
      failureClass: 'unknown',
      retryable: false,
      error: { code: 'model_error' },
    });
  });
});

describe('retryAfter', () => {
  const now = Date.parse('2026-11-25T10:00:00Z');
  it.each([
    [{ 'retry-after': '1' }, 1000],
    [{ 'retry-after': '0.5' }, 500],
    [{ 'retry-after-ms': '250' }, 250],
    [{ 'retry-after-ms': '250', 'retry-after': '9' }, 250],
    [{ 'retry-after': 'Wed, 25 Nov 2026 10:00:03 GMT' }, 3000],
    [{ 'retry-after': 'Wed, 25 Nov 2026 09:59:00 GMT' }, undefined],
    [{ 'retry-after': '-1' }, undefined],
    [{ 'retry-after': 'soon' }, undefined],
    [{}, undefined],
  ])('%j → %s ms', (headers, expected) => {
    expect(retryAfter(headers as Record<string, string>, now)).toBe(expected);
  });
});

describe('retryDelay', () => {
  const policy = { attempts: 4, initialDelayMs: 100, maxDelayMs: 1_000 };
  const transient = classifyModelError(apiError(503), plain);

  it('backs off exponentially with full jitter, capped by the longest wait', () => {
    expect([1, 2, 3].map((attempt) => retryDelay(transient, attempt, policy, () => 1))).toEqual([100, 200, 400]);
    expect(retryDelay(transient, 2, policy, () => 0)).toBe(0);
    expect(retryDelay(transient, 3, { ...policy, maxDelayMs: 250 }, () => 1)).toBe(250);
  });

  it('stops after the attempts, for a class a retry cannot fix, and past the longest wait', () => {
    expect(retryDelay(transient, 4, policy)).toBeUndefined();
    expect(retryDelay(classifyModelError(apiError(401), plain), 1, policy)).toBeUndefined();
    const asked = classifyModelError(apiError(429, { headers: { 'retry-after': '5' } }), plain);
    expect(retryDelay(asked, 1, policy)).toBeUndefined();
    expect(retryDelay(asked, 1, { ...policy, maxDelayMs: 5_000 })).toBe(5_000);
  });
});
