import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  checkSequence,
  createEvent,
  EVENT_PAYLOAD_SCHEMAS,
  EVENT_PROFILE_RULES,
  EVENT_SCHEMAS,
  EVENT_TYPES,
  EventEnvelopeSchema,
  GenericPayloadSchema,
  InvalidEventError,
  isEventType,
  OAR_SCHEMA_VERSION,
  profileRequiredFields,
  type RuntimeEvent,
  type RuntimeEventOf,
  RuntimeEventSchema,
  TYPED_PAYLOAD_EVENT_TYPES,
  validateEventProfile,
} from '../src/events/index.js';

const scope = { runtimeId: 'rt_1', sessionId: 'sess_1', threadId: 'thr_1', turnId: 'turn_1' };
const fixed = { newId: () => 'evt_1', now: () => new Date('2026-05-11T10:00:00.000Z') };

describe('catalog', () => {
  it('knows the standard types and nothing else', () => {
    expect(isEventType('tool.catalog.resolved')).toBe(true);
    expect(isEventType('tool.catalog')).toBe(false);
    expect(isEventType(42)).toBe(false);
  });

  it('no type name is a prefix of another, so a full name used as a rule prefix matches only itself', () => {
    for (const type of EVENT_TYPES) {
      expect(EVENT_TYPES.filter((other) => other.startsWith(type))).toEqual([type]);
    }
  });

  it('types the payloads the engine emits first and leaves the rest generic', () => {
    for (const type of ['model.completed', 'tool.catalog.resolved', 'action.resolved', 'runtime.error'] as const) {
      expect(TYPED_PAYLOAD_EVENT_TYPES).toContain(type);
      expect(EVENT_PAYLOAD_SCHEMAS[type]).not.toBe(GenericPayloadSchema);
    }
    expect(EVENT_PAYLOAD_SCHEMAS['channel.connected']).toBe(GenericPayloadSchema);
  });

  it('tool.catalog.resolved needs stepId and toolCallId like every tool.* event (the Lime pattern has no exception)', () => {
    expect(profileRequiredFields('tool.catalog.resolved').sort()).toEqual([
      'stepId',
      'threadId',
      'toolCallId',
      'turnId',
    ]);
    expect(profileRequiredFields('task.attempt.failed').sort()).toEqual(['runId', 'taskId']);
    expect(profileRequiredFields('session.created')).toEqual([]);
    expect(EVENT_PROFILE_RULES.some((rule) => rule.origin === 'oar')).toBe(true);
  });
});

describe('envelope', () => {
  it('keeps vendor fields (loose) but still types the standard ones', () => {
    const event = { type: 'job.progress', eventId: 'e', timestamp: '2026-05-11T10:00:00Z', xVendor: { a: 1 } };
    expect(EventEnvelopeSchema.parse(event)).toEqual(event);
    expect(EventEnvelopeSchema.safeParse({ ...event, sequence: -1 }).success).toBe(false);
    expect(EventEnvelopeSchema.safeParse({ ...event, timestamp: '2026-05-11 10:00' }).success).toBe(false);
    expect(EventEnvelopeSchema.safeParse({ ...event, timestamp: '2026-05-11T12:00:00+02:00' }).success).toBe(true);
  });
});

describe('createEvent', () => {
  it('builds a typed event with OAR defaults and validates it', () => {
    const event = createEvent(
      'model.completed',
      {
        ...scope,
        sequence: 4,
        payload: {
          modelId: 'gpt-x',
          provider: 'openai',
          finishReason: 'stop',
          usage: { inputTokens: 10, outputTokens: 5, totalTokens: 15 },
        },
      },
      fixed,
    );
    expect(event).toMatchObject({
      type: 'model.completed',
      eventId: 'evt_1',
      timestamp: '2026-05-11T10:00:00.000Z',
      schemaVersion: OAR_SCHEMA_VERSION,
      sequence: 4,
    });
    expect(event.payload.usage.totalTokens).toBe(15);
    expect(validateEventProfile(event)).toEqual([]);
  });

  it('uses Web Crypto for ids when none is given', () => {
    const event = createEvent('session.created', { runtimeId: 'rt', sessionId: 's', sequence: 1, payload: {} });
    expect(event.eventId).toMatch(/^[0-9a-f-]{36}$/);
    expect(Number.isNaN(Date.parse(event.timestamp))).toBe(false);
  });

  it('throws InvalidEventError with structured issues instead of returning an invalid event', () => {
    const build = () =>
      createEvent(
        'tool.started',
        // @ts-expect-error stepId/toolCallId are required for tool.* by the profile rules
        { ...scope, sequence: 2, payload: { toolName: 'read_file' } },
        fixed,
      );
    expect(build).toThrow(InvalidEventError);
    try {
      build();
    } catch (error) {
      const paths = (error as InvalidEventError).issues.map((issue) => issue.path);
      expect(paths).toEqual(expect.arrayContaining(['/stepId', '/toolCallId']));
    }
  });

  it('rejects a wrongly typed payload field', () => {
    expect(() =>
      createEvent(
        'action.resolved',
        // @ts-expect-error decision is approve | deny | approve_for_session
        { ...scope, actionId: 'act_1', sequence: 3, payload: { decision: 'maybe' } },
        fixed,
      ),
    ).toThrow(/payload\/decision/);
  });
});

describe('static types follow the profile rules', () => {
  it('makes the per-prefix ids required and types payloads', () => {
    expectTypeOf<RuntimeEventOf<'tool.result'>['toolCallId']>().toEqualTypeOf<string>();
    expectTypeOf<RuntimeEventOf<'task.attempt.started'>['runId']>().toEqualTypeOf<string>();
    expectTypeOf<RuntimeEventOf<'session.created'>['threadId']>().toEqualTypeOf<string | undefined>();
    expectTypeOf<RuntimeEventOf<'permission.evaluated'>['payload']['decision']>().toEqualTypeOf<
      'allow' | 'ask' | 'deny'
    >();
    expectTypeOf<RuntimeEventOf<'runtime.error'>['payload']['retryable']>().toEqualTypeOf<boolean>();
  });

  it('narrows the union on type', () => {
    const parsed: RuntimeEvent = RuntimeEventSchema.parse(
      createEvent('subagent.failed', {
        ...scope,
        subagentId: 'sub_1',
        sequence: 9,
        payload: { error: { code: 'subagent.crashed', message: 'boom', retryable: false } },
      }),
    );
    if (parsed.type !== 'subagent.failed') throw new Error('wrong type');
    expectTypeOf(parsed.subagentId).toEqualTypeOf<string>();
    expect(parsed.payload.error.code).toBe('subagent.crashed');
  });

  it('the per-type schemas agree with the union', () => {
    for (const type of EVENT_TYPES) expect(EVENT_SCHEMAS[type]).toBeDefined();
  });
});

describe('checkSequence', () => {
  const at = (sequence: number | undefined, sessionId = 's1') => ({ sessionId, sequence });

  it('accepts a gap-free log from 1, each session on its own counter', () => {
    expect(checkSequence([at(1), at(1, 's2'), at(2), at(3), at(2, 's2')])).toEqual([]);
  });

  it('reports a gap, a duplicate, a late value and a missing sequence, pointing at the event', () => {
    const issues = checkSequence([at(1), at(2), at(5), at(5), at(3), at(undefined)]);
    expect(issues.map((issue) => [issue.code, issue.path])).toEqual([
      ['sequence_gap', '/2/sequence'],
      ['sequence_duplicate', '/3/sequence'],
      ['sequence_out_of_order', '/4/sequence'],
      ['sequence_missing', '/5/sequence'],
    ]);
    expect(issues[0]?.message).toContain('missing 3..4');
  });

  it('a log not starting at 1 has a gap by default, but is fine as a window', () => {
    const window = [at(41), at(42), at(43)];
    expect(checkSequence(window).map((issue) => issue.code)).toEqual(['sequence_gap']);
    expect(checkSequence(window, { start: 'first' })).toEqual([]);
    expect(checkSequence([at(41), at(43)], { start: 'first' }).map((issue) => issue.code)).toEqual(['sequence_gap']);
  });
});
