import { z } from 'zod';

/**
 * How long stored outputs are kept (`retention` in oar.config.json; docs/reliability.md "Artifact retention").
 * A property of the store's operators, like `worker`: not part of a session's binding.
 */

/**
 * Artifact names never expired unless the policy's own `keep` says otherwise: file before-images
 * (`file-version:<path>`), which rollback and review need for as long as the session exists.
 */
export const DEFAULT_ARTIFACT_KEEP = ['file-version:*'] as const;

/** A name pattern: `*` stands for any run of characters (`/` included), everything else is literal. */
const KeepPattern = z
  .string()
  .min(1)
  .max(256)
  .refine((pattern) => pattern.replaceAll('*', '') !== '', {
    message: 'a pattern of stars only would keep every named artifact: leave retention.artifacts out instead',
  });

export const ArtifactRetentionSchema = z.strictObject({
  /**
   * Artifacts created more than this many days ago are expired: their content is deleted, their row kept as a
   * tombstone (name, size, SHA-256, when) so a ref to one says `artifact_expired`. Fractions are allowed (0.5: 12 h).
   */
  maxAgeDays: z.number().positive().max(36_500),
  /**
   * Artifact names never expired (`*` matches anything). Replaces the default, `["file-version:*"]`: `[]` lets file
   * before-images expire too. What is still needed is kept whatever this says (docs/reliability.md).
   */
  keep: z
    .array(KeepPattern)
    .max(64)
    .default([...DEFAULT_ARTIFACT_KEEP]),
  /** How often a long-lived worker (`oar serve`, `oar worker`) sweeps, in minutes (default 60). */
  sweepEveryMinutes: z.number().min(0.01).max(10_080).default(60),
  /** The most artifacts one sweep expires (default 1000); the next sweep goes on. */
  batchSize: z.number().int().min(1).max(100_000).default(1000),
});
export type ArtifactRetention = z.infer<typeof ArtifactRetentionSchema>;

export const RetentionSchema = z.strictObject({
  /** Absent: artifacts are kept for as long as their session (nothing expires). */
  artifacts: ArtifactRetentionSchema.optional(),
});
export type Retention = z.infer<typeof RetentionSchema>;
