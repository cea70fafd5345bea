import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { createEvent, EVENT_TYPES, OAR_SCHEMA_VERSION } from '../src/events/index.js';
import { eventJsonSchema, JSON_SCHEMAS, snapshotJsonSchema } from '../src/json-schema.js';
import type { SessionSnapshot } from '../src/snapshot.js';

const addFormats = ((ajvFormats as unknown as { default?: unknown }).default ?? ajvFormats) as (ajv: Ajv2020) => void;

/** Strict Ajv: our own exports must not need the leniency the published schemas need. */
function compile(schema: object) {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  addFormats(ajv);
  return ajv.compile(schema);
}

const event = createEvent(
  'tool.result',
  {
    runtimeId: 'rt_1',
    sessionId: 'sess_1',
    threadId: 'thr_1',
    turnId: 'turn_1',
    stepId: 'step_3',
    toolCallId: 'call_1',
    sequence: 12,
    payload: { toolName: 'read_file', summary: '120 lines', outputRef: 'artifact://a1' },
  },
  { newId: () => 'evt_12', now: () => new Date('2026-05-11T10:00:00Z') },
);

const snapshot: SessionSnapshot = {
  schemaVersion: OAR_SCHEMA_VERSION,
  runtimeId: 'rt_1',
  sessionId: 'sess_1',
  updatedAt: '2026-05-11T10:05:00Z',
  threads: [
    {
      threadId: 'thr_1',
      status: 'running',
      activeTurnId: 'turn_1',
      turns: [{ turnId: 'turn_1', status: 'waiting_permission' }],
      pendingRequests: [{ actionId: 'act_1', actionType: 'tool_permission', turnId: 'turn_1' }],
      queuedTurns: [{ queuedTurnId: 'q_1', position: 0 }],
      incidents: [],
      evidenceSummary: {},
    },
  ],
  tasks: [],
  taskSummary: { active: 0 },
  routingLimitSummary: { candidateCount: 1, singleCandidate: true },
  telemetrySummary: { joinStatus: 'unknown' },
  evidenceRefs: [],
};

describe('JSON Schema exports', () => {
  it('lists every export by name', () => {
    expect(Object.keys(JSON_SCHEMAS).sort()).toEqual(['carrier', 'dsl', 'event', 'snapshot', 'ui']);
    for (const build of Object.values(JSON_SCHEMAS)) {
      expect(build()).toMatchObject({ $schema: 'https://json-schema.org/draft/2020-12/schema' });
    }
  });

  it('the event schema compiles, accepts a valid event and rejects broken ones', () => {
    const schema = eventJsonSchema() as { allOf: [unknown, { oneOf: unknown[] }] };
    expect(schema.allOf[1].oneOf).toHaveLength(EVENT_TYPES.length);
    const validate = compile(schema);
    expect(validate(event), JSON.stringify(validate.errors)).toBe(true);
    expect(validate({ ...event, toolCallId: undefined })).toBe(false);
    expect(validate({ ...event, schemaVersion: 'lime-profile-0.4.0' })).toBe(false);
    expect(validate({ ...event, type: 'vendor.custom' })).toBe(false);
    expect(validate({ ...event, payload: { summary: 'no tool name' } })).toBe(false);
    expect(validate({ ...event, timestamp: 'now' })).toBe(false);
  });

  it('the snapshot schema compiles, accepts a valid snapshot and rejects broken ones', () => {
    const validate = compile(snapshotJsonSchema());
    expect(validate(snapshot), JSON.stringify(validate.errors)).toBe(true);
    expect(validate({ ...snapshot, threads: [] })).toBe(false);
    expect(validate({ ...snapshot, schemaVersion: 'other' })).toBe(false);
    expect(validate({ ...snapshot, tasks: [{ taskId: 't', status: 'done' }] })).toBe(false);
  });

  it('pins the OAR schemaVersion in the exports', () => {
    expect(JSON.stringify(eventJsonSchema())).toContain(`"const":"${OAR_SCHEMA_VERSION}"`);
    expect(JSON.stringify(snapshotJsonSchema())).toContain(`"const":"${OAR_SCHEMA_VERSION}"`);
  });
});
