import fc from 'fast-check';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  BenchmarkSchema,
  createEvent,
  EVENT_PROFILE_RULES,
  EVENT_TYPES,
  OAR_SCHEMA_VERSION,
  RewardSchema,
  RuntimeEventExportSchema,
  RuntimeEventSchema,
  TrajectorySchema,
  validateEventProfile,
} from '../src/events/index.js';
import { eventJsonSchema, snapshotJsonSchema } from '../src/json-schema.js';
import { SessionSnapshotSchema } from '../src/snapshot.js';
import {
  arbitraryFromSchema,
  fixture,
  fixtureFiles,
  LIME_SCHEMA_VERSION,
  type PublishedValidators,
  publishedSchema,
  publishedValidators,
} from './support/agentruntime.js';

type Json = Record<string, unknown>;

const EVENT_FIXTURES = [
  'evidence-export-event.json',
  'routing-single-candidate-event.json',
  'submit-turn-event.json',
  'task-retry-attempt-failed-event.json',
  'tool-approval-action-required-event.json',
];
const SNAPSHOT_FIXTURES = ['thread-read-snapshot.json'];
/** Neither an event nor a snapshot (no upstream schema covers it): its parts are checked against our part schemas. */
const PACK_FIXTURES = ['benchmark-trial-pack.json'];

/** Validators for the published schemas with the Lime `schemaVersion` const swapped for OAR's. */
let oar: PublishedValidators;
/** The same, with the Lime const left as published (for the Lime fixtures themselves). */
let lime: PublishedValidators;

/** Our own exported JSON Schemas, compiled with the same Ajv. */
let ours: { event: (data: unknown) => boolean; snapshot: (data: unknown) => boolean };

beforeAll(() => {
  oar = publishedValidators(OAR_SCHEMA_VERSION);
  lime = publishedValidators(LIME_SCHEMA_VERSION);
  ours = { event: oar.ajv.compile(eventJsonSchema()), snapshot: oar.ajv.compile(snapshotJsonSchema()) };
});

function ajvErrors(validate: unknown): string {
  return JSON.stringify((validate as { errors?: unknown }).errors ?? null);
}

/** Expects `validate(data)` to be true, showing Ajv's errors (not just `false`) when it is not. */
function expectAccepted(validate: (data: unknown) => boolean, data: unknown): void {
  const ok = validate(data);
  if (!ok) expect.fail(`rejected: ${ajvErrors(validate)}\n${JSON.stringify(data)}`);
}

type ObjectSchema = Json & { properties: Record<string, Json & { const?: string }>; required?: string[] };
const eventRoot = eventJsonSchema() as Json & { allOf: [ObjectSchema, { oneOf: ObjectSchema[] }] };
/**
 * Arbitrary OAR events of one type, generated from our exported schema (i.e. from our zod types). The export is
 * `allOf: [envelope, oneOf per type]`; a branch only ever narrows envelope properties (type const, typed payload,
 * required ids), so merging the branch over the envelope gives the schema of that type's events.
 */
function eventArbitrary(type: string): fc.Arbitrary<Json> {
  const [envelope, { oneOf }] = eventRoot.allOf;
  const branch = oneOf.find((candidate) => candidate.properties.type?.const === type);
  if (!branch) throw new Error(`no schema branch for ${type}`);
  const merged = {
    ...envelope,
    properties: { ...envelope.properties, ...branch.properties },
    required: [...new Set([...(envelope.required ?? []), ...(branch.required ?? [])])],
  };
  return arbitraryFromSchema(merged, eventRoot) as fc.Arbitrary<Json>;
}
const anySnapshot = (() => {
  const root = snapshotJsonSchema();
  return arbitraryFromSchema(root, root) as fc.Arbitrary<Json>;
})();

function sampleEvent(type: string, seed = 7): Json {
  const [event] = fc.sample(eventArbitrary(type), { seed, numRuns: 1 });
  if (!event) throw new Error('no sample');
  return event;
}

function without(event: Json, field: string): Json {
  const copy = { ...event };
  delete copy[field];
  return copy;
}

describe('published fixtures', () => {
  it('every fixture file is classified, so a new upstream fixture cannot go untested', () => {
    expect(fixtureFiles()).toEqual([...EVENT_FIXTURES, ...SNAPSHOT_FIXTURES, ...PACK_FIXTURES].sort());
  });

  it('our event type catalog is exactly the enum of the core and the Lime profile schemas', () => {
    const core = publishedSchema('agentruntime-event.schema.json') as { properties: { type: { enum: string[] } } };
    const limeSchema = publishedSchema('agentruntime-lime-profile-event.schema.json') as {
      allOf: [unknown, { properties: { type: { enum: string[] } } }];
    };
    expect(EVENT_TYPES).toHaveLength(120);
    expect([...EVENT_TYPES]).toEqual(core.properties.type.enum);
    expect([...EVENT_TYPES]).toEqual(limeSchema.allOf[1].properties.type.enum);
  });

  it.each(EVENT_FIXTURES)('%s parses losslessly and passes our profile rules', (name) => {
    const event = fixture(name);
    expectAccepted(lime.limeEvent, event);
    expect(RuntimeEventSchema.parse(event)).toEqual(event);
    expect(validateEventProfile(event, { schemaVersion: LIME_SCHEMA_VERSION })).toEqual([]);
    // Under OAR's own profile the only fault of a Lime event is its version.
    expect(validateEventProfile(event).map((issue) => issue.code)).toEqual(['schema_version_mismatch']);
  });

  it.each(SNAPSHOT_FIXTURES)('%s parses losslessly with the session snapshot schema', (name) => {
    const snapshot = fixture(name);
    expectAccepted(lime.limeSnapshot, snapshot);
    expect(SessionSnapshotSchema.parse(snapshot)).toEqual(snapshot);
  });

  it('the benchmark trial pack: its parts match our part schemas and it maps to a Lime profile event', () => {
    const pack = fixture('benchmark-trial-pack.json') as Json & {
      benchmark: Json;
      trajectory: Json;
      reward: Json;
      refs: Json;
      runtimeCorrelation: Record<string, string>;
    };
    expect(BenchmarkSchema.parse(pack.benchmark)).toEqual(pack.benchmark);
    expect(TrajectorySchema.parse(pack.trajectory)).toEqual(pack.trajectory);
    expect(RewardSchema.parse(pack.reward)).toEqual(pack.reward);

    const { runtimeId, sessionId, threadId, turnId, taskId, runId, traceId } = pack.runtimeCorrelation;
    const event = createEvent(
      'benchmark.trial.completed',
      {
        schemaVersion: LIME_SCHEMA_VERSION,
        runtimeId: String(runtimeId),
        sessionId: String(sessionId),
        threadId,
        turnId,
        taskId: String(taskId),
        runId: String(runId),
        traceId,
        sequence: 90,
        benchmark: pack.benchmark,
        trajectory: pack.trajectory,
        reward: pack.reward,
        refs: pack.refs,
        payload: { metrics: pack.metrics, decisionInputs: pack.decisionInputs },
      },
      { newId: () => 'evt_benchmark_trial_completed', now: () => new Date('2026-05-11T11:00:00Z') },
    );
    expectAccepted(lime.limeEvent, event);
    expect(validateEventProfile(event, { schemaVersion: LIME_SCHEMA_VERSION })).toEqual([]);
    // Without the trial's task/run correlation the Lime rule (and ours) rejects it.
    expect(lime.limeEvent(without(event, 'runId'))).toBe(false);
    expect(validateEventProfile(without(event, 'runId'), { schemaVersion: LIME_SCHEMA_VERSION })).not.toEqual([]);
  });
});

describe('OAR events against the published schemas (property)', () => {
  // Per type rather than one random stream over all 120: a rule or payload of a rarely drawn type must not be able
  // to slip through a run.
  it('every generated OAR event parses with our zod schema, passes our profile, the core and the Lime profile', () => {
    for (const type of EVENT_TYPES) {
      fc.assert(
        fc.property(eventArbitrary(type), (event) => {
          expect(RuntimeEventSchema.safeParse(event).error).toBeUndefined();
          expect(RuntimeEventExportSchema.safeParse(event).error).toBeUndefined();
          expect(validateEventProfile(event)).toEqual([]);
          expectAccepted(oar.coreEvent, event);
          expectAccepted(oar.limeEventAs, event);
          expectAccepted(ours.event, event);
        }),
        { numRuns: 8 },
      );
    }
  });

  it('our profile is at least as strict as Lime: removing a field Lime needs makes ours reject too', () => {
    for (const type of EVENT_TYPES) {
      fc.assert(
        fc.property(eventArbitrary(type), (event) => {
          for (const field of Object.keys(event)) {
            const broken = without(event, field);
            if (!oar.limeEventAs(broken)) {
              expect(validateEventProfile(broken).map((issue) => issue.path)).toContain(`/${field}`);
            }
          }
        }),
        { numRuns: 3 },
      );
    }
  });
});

describe('profile rules reject events that break them', () => {
  const cases = EVENT_PROFILE_RULES.flatMap((rule) =>
    rule.prefixes.flatMap((prefix) => {
      const type = EVENT_TYPES.find((candidate) => candidate.startsWith(prefix));
      if (!type) throw new Error(`rule ${rule.id}: no event type starts with ${prefix}`);
      return rule.required.map((field) => ({ rule: rule.id, origin: rule.origin, type, field }));
    }),
  );

  it.each(cases)('$rule: $type without $field', ({ origin, type, field }) => {
    const valid = sampleEvent(type);
    expect(validateEventProfile(valid)).toEqual([]);
    const broken = without(valid, field);
    const issues = validateEventProfile(broken);
    expect(issues).toContainEqual(expect.objectContaining({ code: 'missing_field', path: `/${field}` }));
    expect(RuntimeEventSchema.safeParse(broken).success).toBe(false);
    expect(RuntimeEventExportSchema.safeParse(broken).success).toBe(false);
    expect(ours.event(broken)).toBe(false);
    // Lime-origin rules are Lime's own: the published profile rejects too. OAR-only rules go beyond Lime.
    expect(oar.limeEventAs(broken)).toBe(origin === 'oar');
  });

  const base = sampleEvent('turn.submitted', 11);
  const baseCases: Array<{ name: string; event: Json; code: string; path: string; limeRejects: boolean }> = [
    {
      name: 'schemaVersion of another profile',
      event: { ...base, schemaVersion: LIME_SCHEMA_VERSION },
      code: 'schema_version_mismatch',
      path: '/schemaVersion',
      limeRejects: true,
    },
    {
      name: 'no schemaVersion',
      event: without(base, 'schemaVersion'),
      code: 'schema_version_mismatch',
      path: '/schemaVersion',
      limeRejects: true,
    },
    {
      name: 'no runtimeId',
      event: without(base, 'runtimeId'),
      code: 'missing_field',
      path: '/runtimeId',
      limeRejects: true,
    },
    {
      name: 'empty runtimeId',
      event: { ...base, runtimeId: '' },
      code: 'missing_field',
      path: '/runtimeId',
      limeRejects: true,
    },
    {
      name: 'no sessionId',
      event: without(base, 'sessionId'),
      code: 'missing_field',
      path: '/sessionId',
      limeRejects: true,
    },
    {
      name: 'no sequence',
      event: without(base, 'sequence'),
      code: 'missing_field',
      path: '/sequence',
      limeRejects: true,
    },
    {
      name: 'fractional sequence',
      event: { ...base, sequence: 1.5 },
      code: 'invalid_sequence',
      path: '/sequence',
      limeRejects: true,
    },
    {
      name: 'negative sequence',
      event: { ...base, sequence: -1 },
      code: 'invalid_sequence',
      path: '/sequence',
      limeRejects: true,
    },
    {
      name: 'string sequence',
      event: { ...base, sequence: '3' },
      code: 'invalid_sequence',
      path: '/sequence',
      limeRejects: true,
    },
    {
      name: 'no payload',
      event: without(base, 'payload'),
      code: 'missing_field',
      path: '/payload',
      limeRejects: true,
    },
    {
      name: 'array payload',
      event: { ...base, payload: [] },
      code: 'payload_not_object',
      path: '/payload',
      limeRejects: true,
    },
    {
      name: 'string payload',
      event: { ...base, payload: 'accepted' },
      code: 'payload_not_object',
      path: '/payload',
      limeRejects: true,
    },
    {
      name: 'unknown type',
      event: { ...base, type: 'vendor.custom' },
      code: 'unknown_event_type',
      path: '/type',
      limeRejects: true,
    },
    {
      name: 'bad timestamp',
      event: { ...base, timestamp: 'yesterday' },
      code: 'invalid_schema',
      path: '/timestamp',
      limeRejects: true,
    },
    // Typed payloads are OAR's own tightening: Lime accepts any object payload.
    {
      name: 'payload status outside its enum',
      event: { ...base, payload: { status: 'maybe' } },
      code: 'invalid_schema',
      path: '/payload/status',
      limeRejects: false,
    },
  ];

  it.each(baseCases)('$name', ({ event, code, path, limeRejects }) => {
    expect(validateEventProfile(event)).toContainEqual(expect.objectContaining({ code, path }));
    expect(ours.event(event)).toBe(false);
    expect(oar.limeEventAs(event)).toBe(!limeRejects);
  });

  it('a non-object is not an event', () => {
    expect(validateEventProfile([base]).map((issue) => issue.code)).toEqual(['not_an_event']);
    expect(validateEventProfile(null).map((issue) => issue.code)).toEqual(['not_an_event']);
  });
});

describe('OAR snapshots against the published schemas', () => {
  it('every generated OAR snapshot parses with our zod schema and passes the core and the Lime profile', () => {
    fc.assert(
      fc.property(anySnapshot, (snapshot) => {
        expect(SessionSnapshotSchema.safeParse(snapshot).error).toBeUndefined();
        expectAccepted(oar.coreSnapshot, snapshot);
        expectAccepted(oar.limeSnapshotAs, snapshot);
        expectAccepted(ours.snapshot, snapshot);
      }),
      { numRuns: 150 },
    );
  });

  it('rejects what the Lime profile rejects: no thread, or a thread without its read-model lists', () => {
    const [snapshot] = fc.sample(anySnapshot, { seed: 3, numRuns: 1 }) as [Json & { threads: Json[] }];
    expect(SessionSnapshotSchema.safeParse(snapshot).success).toBe(true);

    const noThreads = { ...snapshot, threads: [] };
    expect(SessionSnapshotSchema.safeParse(noThreads).success).toBe(false);
    expect(oar.limeSnapshotAs(noThreads)).toBe(false);

    for (const field of ['turns', 'pendingRequests', 'queuedTurns', 'incidents', 'evidenceSummary']) {
      const broken = { ...snapshot, threads: [without(snapshot.threads[0] as Json, field)] };
      expect(SessionSnapshotSchema.safeParse(broken).success, field).toBe(false);
      expect(oar.limeSnapshotAs(broken), field).toBe(false);
    }
    for (const field of ['runtimeId', 'updatedAt', 'tasks', 'taskSummary', 'routingLimitSummary', 'telemetrySummary']) {
      const broken = without(snapshot, field);
      expect(SessionSnapshotSchema.safeParse(broken).success, field).toBe(false);
      expect(oar.limeSnapshotAs(broken), field).toBe(false);
    }
  });
});
