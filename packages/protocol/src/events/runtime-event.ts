import { z } from 'zod';
import type { ProtocolIssue } from '../errors.js';
import { schemaIssues } from '../schema-issues.js';
import { EVENT_TYPES, type EventType } from './catalog.js';
import {
  ENVELOPE_FIELD_SCHEMAS,
  type EnvelopeField,
  type EventEnvelope,
  EventEnvelopeSchema,
  OAR_SCHEMA_VERSION,
} from './envelope.js';
import { EVENT_PAYLOAD_SCHEMAS, type EventPayload } from './payloads.js';
import { PROFILE_BASE_FIELDS, type ProfileRequiredField, profileRequiredFields } from './rules.js';

type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** Fields every OAR event carries, typed as required. `payload` is handled per type. */
type BaseField = Exclude<(typeof PROFILE_BASE_FIELDS)[number], 'payload'>;

/**
 * The OAR profile event of type `T`: the envelope, with `schemaVersion`/`runtimeId`/`sessionId`/`sequence` and the
 * ids the profile rules demand for `T` made required, and `payload` typed for `T`. Derived from the zod schemas
 * and `EVENT_PROFILE_RULES`, never written by hand.
 */
export type RuntimeEventOf<T extends EventType> = Simplify<
  Omit<EventEnvelope, 'type' | 'payload' | BaseField | ProfileRequiredField<T>> &
    Required<Pick<EventEnvelope, BaseField | ProfileRequiredField<T>>> & { type: T; payload: EventPayload<T> }
>;

/** Any OAR profile event, discriminated on `type`. */
export type RuntimeEvent = { [T in EventType]: RuntimeEventOf<T> }[EventType];

/** The envelope with the fields every OAR event carries made required (`payload` still any object). */
const ProfileEnvelopeSchema = EventEnvelopeSchema.extend(
  Object.fromEntries(PROFILE_BASE_FIELDS.map((field) => [field, ENVELOPE_FIELD_SCHEMAS[field]])),
);

/** What distinguishes type `T`: its literal, its typed payload and the ids its profile rules require. */
function eventSpecificsFor(type: EventType) {
  const required: Partial<Record<EnvelopeField, z.ZodType>> = {};
  for (const field of profileRequiredFields(type)) required[field] = ENVELOPE_FIELD_SCHEMAS[field];
  return { ...required, type: z.literal(type), payload: EVENT_PAYLOAD_SCHEMAS[type] };
}

function eventSchemaFor(type: EventType) {
  return ProfileEnvelopeSchema.extend(eventSpecificsFor(type));
}

/** The OAR profile schema of each event type (required ids and typed payload included). */
export const EVENT_SCHEMAS = Object.fromEntries(EVENT_TYPES.map((type) => [type, eventSchemaFor(type)])) as unknown as {
  [T in EventType]: z.ZodType<RuntimeEventOf<T>>;
};

/**
 * Every OAR profile event. It accepts any profile's `schemaVersion` string (so the Lime fixtures parse);
 * `validateEventProfile` adds the `oar-0.1.0` check. Unknown fields are kept (see `EventEnvelopeSchema`).
 */
export const RuntimeEventSchema = z.discriminatedUnion(
  'type',
  EVENT_TYPES.map((type) => EVENT_SCHEMAS[type]) as unknown as [
    ReturnType<typeof eventSchemaFor>,
    ...ReturnType<typeof eventSchemaFor>[],
  ],
) as unknown as z.ZodType<RuntimeEvent>;

/**
 * The same constraints as `RuntimeEventSchema`, factored for JSON Schema export as `allOf: [envelope, oneOf per
 * type]`: the ~65 envelope fields appear once instead of in each of the 120 branches, which keeps the exported
 * schema small and quick for validators to compile. Built from the same parts, so the two cannot drift; parse
 * with `RuntimeEventSchema` (one pass, clearer errors).
 */
export const RuntimeEventExportSchema = z.intersection(
  // The description also stops zod from folding the intersection back into 120 full branches.
  ProfileEnvelopeSchema.describe('The OAR event envelope: fields every event may carry, and those it must.'),
  z.discriminatedUnion(
    'type',
    EVENT_TYPES.map((type) => z.looseObject(eventSpecificsFor(type))) as unknown as [
      z.ZodObject<ReturnType<typeof eventSpecificsFor>>,
      ...z.ZodObject<ReturnType<typeof eventSpecificsFor>>[],
    ],
  ),
);

/** Thrown by `createEvent` when the fields do not make a valid event; `issues` say which field and why. */
export class InvalidEventError extends Error {
  override readonly name = 'InvalidEventError';
  constructor(
    readonly type: string,
    readonly issues: ProtocolIssue[],
  ) {
    super(`invalid ${type} event: ${issues.map((issue) => `${issue.path || '/'} ${issue.message}`).join('; ')}`);
  }
}

/** What the caller supplies to `createEvent`: everything but `type`; `eventId`, `timestamp`, `schemaVersion` may be omitted. */
export type EventFields<T extends EventType> = Simplify<
  Omit<RuntimeEventOf<T>, 'type' | 'eventId' | 'timestamp' | 'schemaVersion'> &
    Partial<Pick<EventEnvelope, 'eventId' | 'timestamp' | 'schemaVersion'>>
>;

export interface CreateEventOptions {
  /** Id source for `eventId` when the fields carry none. Defaults to `globalThis.crypto.randomUUID` when present. */
  newId?: () => string;
  /** Clock for `timestamp` when the fields carry none. Defaults to the current time. */
  now?: () => Date;
  /**
   * Check the event against the profile (default true). A writer whose drafts are typed from these very schemas
   * may skip the check on its hot path (it was 6% of a runtime step) when its tests run with the check on.
   */
  validate?: boolean;
}

/**
 * Builds a typed, validated OAR event. The store assigns `sequence`, so the caller passes it; `schemaVersion`
 * defaults to `OAR_SCHEMA_VERSION`. Throws `InvalidEventError` rather than returning an event the profile rejects:
 * an invalid event must never reach the log.
 */
export function createEvent<T extends EventType>(
  type: T,
  fields: EventFields<T>,
  options: CreateEventOptions = {},
): RuntimeEventOf<T> {
  const given = fields as Partial<Record<'eventId' | 'timestamp' | 'schemaVersion', string>>;
  const candidate = {
    ...fields,
    type,
    eventId: given.eventId ?? (options.newId ?? defaultEventId)(),
    timestamp: given.timestamp ?? (options.now?.() ?? new Date()).toISOString(),
    schemaVersion: given.schemaVersion ?? OAR_SCHEMA_VERSION,
  };
  if (options.validate === false) return candidate as unknown as RuntimeEventOf<T>;
  const result = EVENT_SCHEMAS[type].safeParse(candidate);
  if (!result.success) throw new InvalidEventError(type, schemaIssues(result.error));
  return result.data;
}

function defaultEventId(): string {
  // The protocol package stays free of Node APIs: use Web Crypto when the platform has it (Node >= 19, browsers).
  const crypto = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  if (typeof crypto?.randomUUID !== 'function') {
    throw new Error(
      'createEvent: no eventId given and globalThis.crypto.randomUUID is unavailable; pass options.newId',
    );
  }
  return crypto.randomUUID();
}
