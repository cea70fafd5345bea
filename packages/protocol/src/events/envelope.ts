import { z } from 'zod';
import { EventTypeSchema } from './catalog.js';

/**
 * The `schemaVersion` OAR puts on every event and snapshot it produces: our product profile of the Agent Runtime
 * standard. It plays the role `lime-profile-0.4.0` plays in the Lime profile (whose rules OAR's profile includes).
 */
export const OAR_SCHEMA_VERSION = 'oar-0.1.0';

/** Every id of the standard is a non-empty string; an empty id would silently join unrelated facts. */
export const IdSchema = z.string().min(1);

/**
 * RFC 3339 timestamp with `Z` or a numeric offset. Local times without an offset are refused: events from several
 * producers must order and join on the same clock.
 */
export const TimestampSchema = z.iso.datetime({ offset: true });

/** An open JSON object, for the fields the standard leaves free (`additionalProperties: true`). */
export const JsonObjectSchema = z.record(z.string(), z.unknown());
export type JsonObject = z.infer<typeof JsonObjectSchema>;

/**
 * Any profile's version string. The zod schemas accept every profile version so foreign events (e.g. the Lime
 * fixtures) still parse; `validateEventProfile` and the exported JSON Schema pin `OAR_SCHEMA_VERSION`.
 * Kept as one instance because `json-schema.ts` recognises it to write the `const`.
 */
export const SchemaVersionSchema = z.string().min(1);

/** Per-session stream position; the standard allows 0, OAR's store starts at 1 (see `checkSequence`). */
export const SequenceSchema = z.number().int().min(0);

/** Benchmark trial correlation, exactly the core schema's `benchmark` object. */
export const BenchmarkSchema = z.looseObject({
  datasetId: z.string().optional(),
  datasetVersion: z.string().optional(),
  datasetRef: z.string().optional(),
  taskId: z.string().optional(),
  trialId: z.string().optional(),
  configurationId: z.string().optional(),
  role: z.enum(['baseline', 'candidate', 'control']).optional(),
  harborJobRef: z.string().optional(),
  harborTrialRef: z.string().optional(),
  singleChangedVariable: z.string().optional(),
});
export type Benchmark = z.infer<typeof BenchmarkSchema>;

export const TrajectorySchema = z.looseObject({
  schema: z.string().optional(),
  ref: z.string().optional(),
  exportStatus: z.enum(['pending', 'exported', 'failed', 'redacted', 'not-supported']).optional(),
  requiredFieldStatus: JsonObjectSchema.optional(),
});
export type Trajectory = z.infer<typeof TrajectorySchema>;

export const RewardSchema = z.looseObject({
  value: z.number().optional(),
  ref: z.string().optional(),
  detailsRef: z.string().optional(),
  criteria: z.array(z.string()).optional(),
  failureCategory: z.string().optional(),
});
export type Reward = z.infer<typeof RewardSchema>;

export const ComparisonSchema = z.looseObject({
  meanRewardDelta: z.number().optional(),
  timeoutRateDelta: z.number().optional(),
  evidenceCompletenessRate: z.number().optional(),
  p0QcGateRegressionCount: z.number().int().min(0).optional(),
  decision: z.string().optional(),
});
export type Comparison = z.infer<typeof ComparisonSchema>;

/**
 * The optional envelope fields of the core schema, camelCase, each in its REQUIRED form. The envelope makes them
 * optional; the typed events (`runtime-event.ts`) make the ones a profile rule demands required again, reusing
 * these exact schemas so a field has one definition.
 */
export const ENVELOPE_FIELD_SCHEMAS = {
  schemaVersion: SchemaVersionSchema,
  runtimeId: IdSchema,
  sessionId: IdSchema,
  threadId: IdSchema,
  turnId: IdSchema,
  taskId: IdSchema,
  runId: IdSchema,
  attemptId: IdSchema,
  parentTaskId: IdSchema,
  rootTaskId: IdSchema,
  stepId: IdSchema,
  toolCallId: IdSchema,
  actionId: IdSchema,
  subagentId: IdSchema,
  artifactId: IdSchema,
  evidenceId: IdSchema,
  requestId: IdSchema,
  processId: IdSchema,
  channelId: IdSchema,
  jobId: IdSchema,
  jobItemId: IdSchema,
  outputRef: IdSchema,
  modelRequestId: IdSchema,
  queueId: IdSchema,
  traceId: IdSchema,
  spanId: IdSchema,
  sequence: SequenceSchema,
  status: z.string(),
  phase: z.string(),
  statusReason: z.string(),
  nativeStatus: z.string(),
  payload: JsonObjectSchema,
  refs: JsonObjectSchema,
  task: JsonObjectSchema,
  taskAttempt: JsonObjectSchema,
  taskRelationship: JsonObjectSchema,
  taskGraph: JsonObjectSchema,
  taskProgress: JsonObjectSchema,
  taskAcceptance: JsonObjectSchema,
  worker: JsonObjectSchema,
  deliveryState: JsonObjectSchema,
  permissionDecision: JsonObjectSchema,
  sandboxProfile: JsonObjectSchema,
  routingDecision: JsonObjectSchema,
  candidateModelSet: JsonObjectSchema,
  taskProfile: JsonObjectSchema,
  limitState: JsonObjectSchema,
  limitEvent: JsonObjectSchema,
  costState: JsonObjectSchema,
  hookRun: JsonObjectSchema,
  executionEnvironment: JsonObjectSchema,
  channel: JsonObjectSchema,
  job: JsonObjectSchema,
  jobItem: JsonObjectSchema,
  output: JsonObjectSchema,
  historyBoundary: JsonObjectSchema,
  telemetry: JsonObjectSchema,
  correlation: JsonObjectSchema,
  benchmark: BenchmarkSchema,
  trajectory: TrajectorySchema,
  reward: RewardSchema,
  comparison: ComparisonSchema,
};
export type EnvelopeField = keyof typeof ENVELOPE_FIELD_SCHEMAS;

const ENVELOPE_BASE = {
  type: EventTypeSchema,
  eventId: IdSchema,
  timestamp: TimestampSchema,
};

/**
 * The camelCase event envelope: what the published core schema admits, with `payload` narrowed to an object.
 * Deliberately loose (unknown fields kept): the core schema is open, and the event log is the source of truth —
 * relaying or replaying an event from another producer must not silently drop its fields.
 */
export const EventEnvelopeSchema = z
  .looseObject(ENVELOPE_BASE)
  .extend(z.object(ENVELOPE_FIELD_SCHEMAS).partial().shape);

/**
 * The envelope's static type without the index signature a loose object adds: `Omit`/`Pick` over an index
 * signature would erase every named field, and the typed events are built with both.
 */
export type EventEnvelope = z.infer<z.ZodObject<typeof ENVELOPE_BASE>> &
  Partial<z.infer<z.ZodObject<typeof ENVELOPE_FIELD_SCHEMAS>>>;
