import { ARTIFACT_OPS, EVENT_OPS, HISTORY_OPS, RUNNER_ID_PATTERN, STORAGE_AREAS } from '@oar/runner-sdk';
import { z } from 'zod';

/**
 * What an agent bound to a runner records in the session's binding (docs/runners.md): the runner's id, the package
 * directory that provides it (absolute, so any worker can start it), the binding config (checked against the
 * runner's config_schema when a run starts) and a policy that can only narrow what the runner's manifest asks for.
 */
export const RunnerPolicySchema = z.strictObject({
  /** Model resource ids the runner may use (`default` is the agent's bound model); all bound ones when omitted. */
  models: z.array(z.string().min(1)).optional(),
  /** Tool names the runner may call; the agent's tools when omitted. */
  tools: z.array(z.string().min(1)).optional(),
  /** Knowledge base ids (of the binding's `knowledge`) the runner may search; all of them when omitted. */
  knowledgeBases: z.array(z.string().min(1)).optional(),
  history: z.array(z.enum(HISTORY_OPS)).optional(),
  events: z.array(z.enum(EVENT_OPS)).optional(),
  artifacts: z.array(z.enum(ARTIFACT_OPS)).optional(),
  storage: z.array(z.enum(STORAGE_AREAS)).optional(),
  /**
   * Platform actions (platform.request_action, action.requested) the runner may ask for; none when omitted. Each
   * must also be in the manifest's permissions.platform_api, and every request still waits for an approval.
   */
  platformActions: z.array(z.string().min(1).max(128)).optional(),
  /** false: no host-owned state (state.* and state.updated are refused). Default true. */
  state: z.boolean().optional(),
  /** Environment variable NAMES the runner process gets besides PATH (values are read when it starts). */
  env: z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/)).optional(),
  /** The run's deadline from its start (default 600,000: ten minutes). */
  timeoutMs: z.number().int().min(100).max(86_400_000).optional(),
  /** Proxy calls per minute (default 600). */
  callsPerMinute: z.number().int().min(1).max(100_000).optional(),
});
export type RunnerPolicy = z.infer<typeof RunnerPolicySchema>;

export const RunnerBindingSchema = z.strictObject({
  id: z.string().regex(RUNNER_ID_PATTERN, 'runner ids are plugin:author/name/runner'),
  /** The runner package's directory (absolute); filled in from the config's `runners.packages`. */
  package: z.string().min(1).optional(),
  /** The binding config: the runner's `ctx.config`, checked against its manifest's config_schema. */
  config: z.record(z.string(), z.unknown()).default({}),
  policy: RunnerPolicySchema.optional(),
  /**
   * Knowledge bases the runner may be granted (knowledge.retrieve): workspace folders whose text files are indexed
   * with SQLite FTS5. `folder` is relative to the workspace root and confined to it.
   */
  knowledge: z
    .array(z.strictObject({ id: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/), folder: z.string().min(1) }))
    .optional(),
});
export type RunnerBinding = z.infer<typeof RunnerBindingSchema>;

/**
 * A `runners.packages` entry naming an installed npm package (`npm:@acme/oar-runner-foo`) instead of a directory.
 * The prefix is explicit so an entry is never ambiguous: `foo` is always the directory `./foo`, `npm:foo` the package.
 */
export const NPM_ENTRY_PREFIX = 'npm:';

/** npm's rules for a package name (lower case, URL-safe, optionally scoped); checked before any resolution. */
export const NPM_PACKAGE_NAME = /^(?:@[a-z0-9-~][a-z0-9-._~]*\/)?[a-z0-9-~][a-z0-9-._~]*$/;
