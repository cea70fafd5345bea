import { type ProtocolIssue, pointer } from '../errors.js';
import { schemaIssues } from '../schema-issues.js';
import { isEventType } from './catalog.js';
import { OAR_SCHEMA_VERSION } from './envelope.js';
import { profileRulesFor } from './rules.js';
import { RuntimeEventSchema } from './runtime-event.js';

/** Stable issue codes of the event checks; keys equal values so callers can switch on either. */
export const EVENT_ISSUE_CODES = {
  not_an_event: 'not_an_event',
  schema_version_mismatch: 'schema_version_mismatch',
  missing_field: 'missing_field',
  invalid_sequence: 'invalid_sequence',
  payload_not_object: 'payload_not_object',
  unknown_event_type: 'unknown_event_type',
  /** Any other schema fault (a typed payload field, a timestamp…), as reported by `schemaIssues`. */
  invalid_schema: 'invalid_schema',
  sequence_missing: 'sequence_missing',
  sequence_duplicate: 'sequence_duplicate',
  sequence_gap: 'sequence_gap',
  sequence_out_of_order: 'sequence_out_of_order',
} as const;
export type EventIssueCode = (typeof EVENT_ISSUE_CODES)[keyof typeof EVENT_ISSUE_CODES];

export interface EventProfileOptions {
  /**
   * The `schemaVersion` to require. Defaults to `OAR_SCHEMA_VERSION`; pass another profile's value (e.g.
   * `lime-profile-0.4.0`) to check a foreign event against the same rules.
   */
  schemaVersion?: string;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isPresent(value: unknown): boolean {
  return value !== undefined && value !== null && value !== '';
}

/**
 * Checks one event against OAR's event profile and reports every fault (empty = valid):
 * - `schemaVersion` is the profile's, `runtimeId` and `sessionId` are present, `sequence` is an integer >= 0,
 *   `payload` is a JSON object (not an array or a scalar);
 * - the scope ids each `EVENT_PROFILE_RULES` rule demands for the type's prefix are present;
 * - the whole event, payload included, matches its typed schema.
 * The named checks run first so a producer gets one precise issue per fault, not a generic schema message.
 */
export function validateEventProfile(event: unknown, options: EventProfileOptions = {}): ProtocolIssue[] {
  if (!isPlainObject(event)) {
    return [
      {
        code: EVENT_ISSUE_CODES.not_an_event,
        path: '',
        message: 'an event must be a JSON object',
        hint: 'send an object',
      },
    ];
  }
  const issues: ProtocolIssue[] = [];
  const add = (code: EventIssueCode, field: string, message: string, hint: string) =>
    issues.push({ code, path: pointer([field]), message, hint });

  const schemaVersion = options.schemaVersion ?? OAR_SCHEMA_VERSION;
  if (event.schemaVersion !== schemaVersion) {
    add(
      EVENT_ISSUE_CODES.schema_version_mismatch,
      'schemaVersion',
      `schemaVersion must be "${schemaVersion}", got ${JSON.stringify(event.schemaVersion)}`,
      `set schemaVersion to "${schemaVersion}"`,
    );
  }
  for (const field of ['runtimeId', 'sessionId'] as const) {
    if (!isPresent(event[field])) {
      add(EVENT_ISSUE_CODES.missing_field, field, `${field} is required on every event`, `add a non-empty ${field}`);
    }
  }
  if (event.sequence === undefined) {
    add(
      EVENT_ISSUE_CODES.missing_field,
      'sequence',
      'sequence is required on every event',
      'add the per-session sequence',
    );
  } else if (!Number.isInteger(event.sequence) || (event.sequence as number) < 0) {
    add(
      EVENT_ISSUE_CODES.invalid_sequence,
      'sequence',
      'sequence must be an integer >= 0',
      'use the store-assigned sequence',
    );
  }
  if (event.payload === undefined) {
    add(
      EVENT_ISSUE_CODES.missing_field,
      'payload',
      'payload is required on every event',
      'add a payload object ({} if empty)',
    );
  } else if (!isPlainObject(event.payload)) {
    add(
      EVENT_ISSUE_CODES.payload_not_object,
      'payload',
      'payload must be a JSON object',
      'wrap the value in an object',
    );
  }

  if (!isEventType(event.type)) {
    add(
      EVENT_ISSUE_CODES.unknown_event_type,
      'type',
      `unknown event type ${JSON.stringify(event.type)}`,
      'use a standard type',
    );
  } else {
    for (const rule of profileRulesFor(event.type)) {
      for (const field of rule.required) {
        if (!isPresent(event[field])) {
          add(
            EVENT_ISSUE_CODES.missing_field,
            field,
            `${event.type} events must carry ${field} (profile rule ${rule.id})`,
            `add ${field} to the envelope`,
          );
        }
      }
    }
  }

  const parsed = RuntimeEventSchema.safeParse(event);
  if (!parsed.success) {
    // Skip what the named checks already reported (same field or below it).
    const reported = issues.map((issue) => issue.path);
    for (const issue of schemaIssues(parsed.error)) {
      if (!reported.some((path) => issue.path === path || issue.path.startsWith(`${path}/`))) issues.push(issue);
    }
  }
  return issues;
}

export interface SequenceCheckOptions {
  /**
   * Where each session's sequence must start. `1` (default) checks a complete log: OAR's store numbers every
   * session's events 1, 2, 3… with no gaps. `'first'` checks a window (an SSE resume, a history page): the first
   * value seen for a session is taken as the start.
   */
  start?: number | 'first';
}

/**
 * Checks that each session's `sequence` is gap-free and duplicate-free, in the order the events are given.
 * Sessions are independent: each has its own sequence. Issue paths point at the offending event (`/3/sequence`).
 * Codes: `sequence_missing` (no integer sequence), `sequence_duplicate`, `sequence_gap` (values skipped),
 * `sequence_out_of_order` (a value lower than expected that was not seen before).
 */
export function checkSequence(
  events: ReadonlyArray<{ readonly sessionId?: string | undefined; readonly sequence?: number | undefined }>,
  options: SequenceCheckOptions = {},
): ProtocolIssue[] {
  const issues: ProtocolIssue[] = [];
  const sessions = new Map<string, { next: number | undefined; seen: Set<number> }>();
  events.forEach((event, index) => {
    const path = pointer([index, 'sequence']);
    const session = event.sessionId ?? '';
    const sequence = event.sequence;
    if (sequence === undefined || !Number.isInteger(sequence) || sequence < 0) {
      issues.push({
        code: EVENT_ISSUE_CODES.sequence_missing,
        path,
        message: `event ${index} has no valid sequence`,
        hint: 'every event carries an integer sequence >= 0',
      });
      return;
    }
    let state = sessions.get(session);
    if (!state) {
      state = { next: options.start === 'first' ? undefined : (options.start ?? 1), seen: new Set() };
      sessions.set(session, state);
    }
    const expected = state.next ?? sequence;
    if (state.seen.has(sequence)) {
      issues.push({
        code: EVENT_ISSUE_CODES.sequence_duplicate,
        path,
        message: `session ${JSON.stringify(session)}: sequence ${sequence} appears twice`,
        hint: 'each sequence value is used once per session',
      });
      return;
    }
    state.seen.add(sequence);
    if (sequence > expected) {
      const missing = sequence - expected === 1 ? `${expected}` : `${expected}..${sequence - 1}`;
      issues.push({
        code: EVENT_ISSUE_CODES.sequence_gap,
        path,
        message: `session ${JSON.stringify(session)}: expected sequence ${expected}, got ${sequence} (missing ${missing})`,
        hint: 'events were lost or not yet delivered; resume from the last contiguous sequence',
      });
    } else if (sequence < expected) {
      issues.push({
        code: EVENT_ISSUE_CODES.sequence_out_of_order,
        path,
        message: `session ${JSON.stringify(session)}: sequence ${sequence} arrived after ${expected - 1}`,
        hint: 'deliver events in sequence order',
      });
      return;
    }
    state.next = sequence + 1;
  });
  return issues;
}
