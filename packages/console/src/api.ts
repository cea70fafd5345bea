/**
 * The console's only way to the runtime: the HTTP API of `oar serve` (docs/http-api.md). The API key lives in
 * sessionStorage (gone when the tab closes); every JSON call sends it as a bearer token, and event streams pass it
 * as `?access_token=` because an EventSource cannot send headers.
 */

const KEY_STORAGE = 'oar.console.apiKey';

export function getKey(): string | undefined {
  return sessionStorage.getItem(KEY_STORAGE) ?? undefined;
}

export function setKey(key: string | undefined): void {
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
}

/** A structured API error `{error: {code, message, retryable, details}}`, or a network failure (status 0). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly retryable = false,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

let onUnauthorized: (() => void) | undefined;
export function whenUnauthorized(fn: () => void): void {
  onUnauthorized = fn;
}

export async function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const key = getKey();
  let response: Response;
  try {
    response = await fetch(path, {
      method,
      headers: {
        ...(key ? { authorization: `Bearer ${key}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch (error) {
    throw new ApiError(0, 'network_error', `the server cannot be reached (${(error as Error).message})`, true);
  }
  if (!response.ok) {
    let parsed: { error?: { code?: string; message?: string; retryable?: boolean; details?: unknown } } = {};
    try {
      parsed = await response.json();
    } catch {
      // not JSON: keep the status
    }
    const e = parsed.error ?? {};
    if (response.status === 401) onUnauthorized?.();
    throw new ApiError(
      response.status,
      e.code ?? `http_${response.status}`,
      e.message ?? response.statusText,
      e.retryable ?? response.status >= 500,
      e.details,
    );
  }
  return response;
}

export async function json<T>(method: string, path: string, body?: unknown): Promise<T> {
  return (await (await call(method, path, body)).json()) as T;
}

export const get = <T>(path: string) => json<T>('GET', path);
export const post = <T>(path: string, body?: unknown) => json<T>('POST', path, body ?? {});

export function enc(id: string): string {
  return encodeURIComponent(id);
}

/** A lost action's answers (docs/reliability.md "Reconciling a lost action"). */
export type ReconcileDecision = 'happened' | 'not_happened' | 'retry';

/**
 * Answer a decision (`respondAction`): an approval's approve / deny / approve_for_session, or a lost action's
 * happened / not_happened / retry — one route for both, so the log records every answer the same way. A retry
 * answers with the turn that runs the action again.
 */
export function respondAction(
  sessionId: string,
  actionId: string,
  body: { decision: string; reason?: string; payload?: Record<string, unknown> },
) {
  return post<{ threadId: string; decision: string; turnId?: string; runId?: string }>(
    `/v1/sessions/${enc(sessionId)}/actions/${enc(actionId)}/decision`,
    body,
  );
}

export function qs(params: Record<string, string | number | undefined>): string {
  const entries = Object.entries(params).filter(([, v]) => v !== undefined && v !== '') as [string, string][];
  return entries.length ? `?${new URLSearchParams(entries.map(([k, v]) => [k, String(v)])).toString()}` : '';
}

export type {
  LostAction,
  OarEvent,
  PendingDecision,
  PendingRequest,
  SessionSummary,
  Snapshot,
  ThreadRM,
  TurnRM,
  UnreconciledAction,
} from './types.js';

import type { OarEvent } from './types.js';

export interface EventPage {
  events: OarEvent[];
  nextCursor: number;
  lastSequence: number;
}

/** Every durable event after `after`, a page (≤ 1000) at a time. */
export async function allEvents(sessionId: string, after = 0, upTo?: number): Promise<EventPage> {
  const events: OarEvent[] = [];
  let cursor = after;
  let last = after;
  for (;;) {
    const page = await get<EventPage>(`/v1/sessions/${enc(sessionId)}/events${qs({ after: cursor, limit: 1000 })}`);
    events.push(...page.events);
    last = page.lastSequence;
    if (page.nextCursor <= cursor || page.nextCursor >= page.lastSequence || (upTo && page.nextCursor >= upTo)) {
      cursor = page.nextCursor;
      break;
    }
    cursor = page.nextCursor;
  }
  return { events, nextCursor: cursor, lastSequence: last };
}

/** Artifact id from `artifact://art_…` or a bare id. */
export function artifactIdOf(ref: string): string {
  return ref.startsWith('artifact://') ? ref.slice('artifact://'.length) : ref;
}
