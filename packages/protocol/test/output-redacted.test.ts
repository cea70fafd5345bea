import { beforeAll, describe, expect, it } from 'vitest';
import {
  createEvent,
  EVENT_PAYLOAD_SCHEMAS,
  OAR_SCHEMA_VERSION,
  OutputRedactedPayloadSchema,
  TYPED_PAYLOAD_EVENT_TYPES,
  validateEventProfile,
} from '../src/events/index.js';
import { eventJsonSchema } from '../src/json-schema.js';
import { type PublishedValidators, publishedSchema, publishedValidators } from './support/agentruntime.js';

/**
 * `output.redacted` is a standard event type (core and Lime profile enums); the standard leaves its payload open
 * (`payload` is any JSON in the core schema, any object in the Lime profile). OAR types it: counts per kind and
 * their total, never values.
 */

let oar: PublishedValidators;
let ours: (data: unknown) => boolean;

beforeAll(() => {
  oar = publishedValidators(OAR_SCHEMA_VERSION);
  ours = oar.ajv.compile(eventJsonSchema());
});

const example = () =>
  createEvent(
    'output.redacted',
    {
      runtimeId: 'rt_1',
      sessionId: 'sess_1',
      threadId: 'thr_1',
      turnId: 'turn_1',
      toolCallId: 'call_1',
      sequence: 12,
      payload: {
        count: 3,
        kinds: { dotenv: 2, openai_key: 1 },
        sink: 'event',
        source: 'tool_output',
        artifactId: 'art_1',
      },
    },
    { newId: () => 'evt_redacted', now: () => new Date('2026-05-11T10:00:00.000Z') },
  );

describe('output.redacted', () => {
  it('is a standard event type of the published core and Lime profile schemas', () => {
    const core = publishedSchema('agentruntime-event.schema.json') as { properties: { type: { enum: string[] } } };
    expect(core.properties.type.enum).toContain('output.redacted');
  });

  it('has a typed payload: counts and kinds, never values', () => {
    expect(TYPED_PAYLOAD_EVENT_TYPES).toContain('output.redacted');
    expect(EVENT_PAYLOAD_SCHEMAS['output.redacted']).toBe(OutputRedactedPayloadSchema);
    expect(OutputRedactedPayloadSchema.safeParse({ count: 1, kinds: { jwt: 1 } }).success).toBe(true);
    expect(OutputRedactedPayloadSchema.safeParse({ kinds: { jwt: 1 } }).success).toBe(false);
    expect(OutputRedactedPayloadSchema.safeParse({ count: 1, kinds: { jwt: 'one' } }).success).toBe(false);
    expect(OutputRedactedPayloadSchema.safeParse({ count: -1, kinds: {} }).success).toBe(false);
  });

  it('an example validates against the published core and Lime profile schemas, our profile and our export', () => {
    const event = example();
    for (const validate of [oar.coreEvent, oar.limeEventAs, ours]) {
      const ok = validate(event);
      if (!ok) expect.fail(JSON.stringify((validate as { errors?: unknown }).errors));
    }
    expect(validateEventProfile(event)).toEqual([]);
  });

  it('createEvent refuses a payload without its counts', () => {
    expect(() =>
      createEvent('output.redacted', {
        runtimeId: 'rt_1',
        sessionId: 'sess_1',
        sequence: 1,
        payload: { kinds: {} } as never,
      }),
    ).toThrow(/count/);
  });
});
