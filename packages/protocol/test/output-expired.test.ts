import { beforeAll, describe, expect, it } from 'vitest';
import {
  createEvent,
  EVENT_PAYLOAD_SCHEMAS,
  OAR_SCHEMA_VERSION,
  OutputExpiredPayloadSchema,
  TYPED_PAYLOAD_EVENT_TYPES,
  validateEventProfile,
} from '../src/events/index.js';
import { eventJsonSchema } from '../src/json-schema.js';
import { type PublishedValidators, publishedValidators } from './support/agentruntime.js';

/**
 * `output.expired` is a standard event type whose payload the standard leaves open. OAR types it: the artifacts
 * the retention policy expired (ids and tombstones, never content), how many, how many bytes, why and by which
 * policy. It is session-scoped: the profiles require no thread or turn of an `output.*` event.
 */

let oar: PublishedValidators;
let ours: (data: unknown) => boolean;

beforeAll(() => {
  oar = publishedValidators(OAR_SCHEMA_VERSION);
  ours = oar.ajv.compile(eventJsonSchema());
});

const payload = {
  artifactIds: ['art_1', 'art_2'],
  artifacts: [
    {
      artifactId: 'art_1',
      name: 'runs/run_1/read',
      size: 120,
      sha256: 'ab'.repeat(32),
      createdAt: '2026-04-01T10:00:00.000Z',
    },
    { artifactId: 'art_2', size: 5, sha256: 'cd'.repeat(32), createdAt: '2026-04-02T10:00:00.000Z' },
  ],
  count: 2,
  bytes: 125,
  reason: 'retention',
  expiredBefore: '2026-04-11T10:00:00.000Z',
  policy: { maxAgeDays: 30, keep: ['file-version:*'] },
};

describe('output.expired', () => {
  it('has a typed payload: ids, tombstones, counts — a list of at least one artifact', () => {
    expect(TYPED_PAYLOAD_EVENT_TYPES).toContain('output.expired');
    expect(EVENT_PAYLOAD_SCHEMAS['output.expired']).toBe(OutputExpiredPayloadSchema);
    expect(OutputExpiredPayloadSchema.safeParse(payload).success).toBe(true);
    const { artifactIds: _ids, ...withoutIds } = payload;
    expect(OutputExpiredPayloadSchema.safeParse(withoutIds).success).toBe(false);
    expect(OutputExpiredPayloadSchema.safeParse({ ...payload, artifactIds: [] }).success).toBe(false);
    expect(OutputExpiredPayloadSchema.safeParse({ ...payload, bytes: -1 }).success).toBe(false);
    expect(OutputExpiredPayloadSchema.safeParse({ ...payload, expiredBefore: 'last month' }).success).toBe(false);
  });

  it('a session-scoped example validates against the published core and Lime profile schemas and ours', () => {
    const event = createEvent(
      'output.expired',
      { runtimeId: 'rt_1', sessionId: 'sess_1', sequence: 40, payload },
      { newId: () => 'evt_expired', now: () => new Date('2026-05-11T10:00:00.000Z') },
    );
    for (const validate of [oar.coreEvent, oar.limeEventAs, ours]) {
      const ok = validate(event);
      if (!ok) expect.fail(JSON.stringify((validate as { errors?: unknown }).errors));
    }
    expect(validateEventProfile(event)).toEqual([]);
  });
});
