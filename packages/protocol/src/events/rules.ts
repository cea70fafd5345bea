import type { EventType } from './catalog.js';
import type { EnvelopeField } from './envelope.js';

/**
 * One scope rule of OAR's event profile: an event whose type starts with one of `prefixes` must carry every field
 * in `required`. A full type name used as a prefix matches that type only (no standard type extends another's
 * full name). `origin: 'lime'` marks the rules copied one-for-one from the `if/then` blocks of
 * `agentruntime-lime-profile-event.schema.json`, so an OAR event always passes the Lime profile too;
 * `origin: 'oar'` marks rules OAR adds on top.
 */
export interface EventProfileRule {
  readonly id: string;
  readonly origin: 'lime' | 'oar';
  readonly prefixes: readonly string[];
  readonly required: readonly EnvelopeField[];
}

export const EVENT_PROFILE_RULES = [
  { id: 'thread-scope', origin: 'lime', prefixes: ['thread.'], required: ['threadId'] },
  {
    id: 'turn-scope',
    origin: 'lime',
    prefixes: [
      'turn.',
      'model.',
      'reasoning.',
      'tool.',
      'action.',
      'permission.',
      'sandbox.',
      'hook.',
      'context.',
      'routing.',
      'cost.',
      'rate_limit.',
      'quota.',
    ],
    required: ['threadId', 'turnId'],
  },
  // The Lime pattern is `^tool\.`: it does NOT except `tool.catalog.resolved`, so neither do we (OAR gives the
  // catalog step its own stepId/toolCallId).
  { id: 'tool-call', origin: 'lime', prefixes: ['tool.'], required: ['stepId', 'toolCallId'] },
  { id: 'action', origin: 'lime', prefixes: ['action.'], required: ['actionId'] },
  { id: 'task', origin: 'lime', prefixes: ['task.'], required: ['taskId'] },
  { id: 'task-attempt', origin: 'lime', prefixes: ['task.attempt.'], required: ['runId'] },
  { id: 'subagent', origin: 'lime', prefixes: ['subagent.'], required: ['subagentId'] },
  { id: 'evidence', origin: 'lime', prefixes: ['evidence.changed'], required: ['evidenceId'] },
  { id: 'benchmark', origin: 'lime', prefixes: ['benchmark.'], required: ['benchmark'] },
  {
    id: 'benchmark-trial',
    origin: 'lime',
    prefixes: ['benchmark.trial.', 'benchmark.reward.'],
    required: ['taskId', 'runId', 'refs'],
  },
  {
    id: 'benchmark-trial-start',
    origin: 'lime',
    prefixes: ['benchmark.trial.started'],
    required: ['threadId', 'turnId'],
  },
  {
    id: 'benchmark-comparison',
    origin: 'lime',
    prefixes: ['benchmark.comparison.completed'],
    required: ['comparison', 'refs'],
  },
  // An artifact fact without the id of the artifact it is about cannot be joined to the artifact service.
  { id: 'artifact', origin: 'oar', prefixes: ['artifact.changed'], required: ['artifactId'] },
  // A job's facts are read by job (its read model, `get_job`); an item's also by item.
  { id: 'job', origin: 'oar', prefixes: ['job.'], required: ['jobId'] },
  { id: 'job-item', origin: 'oar', prefixes: ['job.item.'], required: ['jobItemId'] },
] as const satisfies readonly EventProfileRule[];

/** Fields every OAR event carries regardless of type (the Lime profile's `required` list beyond the core's). */
export const PROFILE_BASE_FIELDS = ['schemaVersion', 'runtimeId', 'sessionId', 'sequence', 'payload'] as const;

type Rule = (typeof EVENT_PROFILE_RULES)[number];
type FieldsRequiredBy<T extends string, R> = R extends {
  readonly prefixes: readonly (infer P extends string)[];
  readonly required: readonly (infer F)[];
}
  ? T extends `${P}${string}`
    ? F
    : never
  : never;

/** The envelope fields the profile rules make required for event type `T`, computed from `EVENT_PROFILE_RULES`. */
export type ProfileRequiredField<T extends EventType> = FieldsRequiredBy<T, Rule>;

/** The rules that apply to `type`. */
export function profileRulesFor(type: string): EventProfileRule[] {
  return EVENT_PROFILE_RULES.filter((rule) => rule.prefixes.some((prefix) => type.startsWith(prefix)));
}

/** The envelope fields the profile rules make required for `type` (runtime twin of `ProfileRequiredField`). */
export function profileRequiredFields(type: string): EnvelopeField[] {
  const fields = new Set<EnvelopeField>();
  for (const rule of profileRulesFor(type)) for (const field of rule.required) fields.add(field);
  return [...fields];
}
