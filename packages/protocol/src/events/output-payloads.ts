import { z } from 'zod';

/**
 * Typed payloads of the Output family kept apart from payloads.ts: `output.expired`, what the artifact retention
 * policy recorded (docs/reliability.md "Artifact retention"). Loose like every payload: a relayed event keeps fields
 * another producer adds.
 */

const Id = z.string().min(1);
const Count = z.number().int().min(0);
const Timestamp = z.iso.datetime({ offset: true });

/** One expired artifact as its tombstone keeps it: never its content. */
export const ExpiredArtifactSchema = z.looseObject({
  artifactId: Id,
  name: z.string().optional(),
  size: Count,
  sha256: z.string(),
  createdAt: Timestamp,
});

/**
 * Artifacts were expired by the retention policy (`reason: retention`): their content deleted, each kept as a
 * tombstone — id, name, size, SHA-256 — so a ref to one resolves to `artifact_expired`. One event lists the
 * artifacts of one session one sweep expired (at most 100; a larger sweep records several). `expiredBefore`: the
 * cutoff (artifacts created before it were old enough); `policy`: the policy as it was applied.
 */
export const OutputExpiredPayloadSchema = z.looseObject({
  artifactIds: z.array(Id).min(1),
  artifacts: z.array(ExpiredArtifactSchema).optional(),
  count: Count,
  /** The bytes of content deleted, in all. */
  bytes: Count,
  reason: z.string(),
  expiredBefore: Timestamp.optional(),
  policy: z.looseObject({ maxAgeDays: z.number().min(0), keep: z.array(z.string()) }).optional(),
});
