import {
  checkSequence,
  OAR_SCHEMA_VERSION,
  type RuntimeEvent,
  type SessionSnapshot,
  validateEventProfile,
} from '@oar/protocol';
import { expect } from 'vitest';
import { type PublishedValidators, publishedValidators } from '../../../protocol/test/support/agentruntime.js';

/**
 * Conformance checks for what the runtime produces, against the PUBLISHED Agent Runtime schemas
 * (conformance/agentruntime/schemas, draft 2020-12, Ajv2020 with the README's two caveats handled by the
 * protocol package's test support): the core event and snapshot schemas as published, and the Lime profile event
 * and snapshot schemas with ONLY their `schemaVersion` const relaxed to OAR's. On top of those, OAR's own event
 * profile (`validateEventProfile`) and the gap-free sequence rule (`checkSequence`).
 */

let validators: PublishedValidators | undefined;

/** Ajv validators over the published schemas (compiled once per test file). */
export function published(): PublishedValidators {
  validators ??= publishedValidators(OAR_SCHEMA_VERSION);
  return validators;
}

function ajvErrors(validate: (data: unknown) => boolean): string {
  const errors = (validate as unknown as { errors?: unknown[] | null }).errors ?? [];
  return JSON.stringify(errors.slice(0, 5));
}

/** Every problem of one event, as readable lines (empty = conforms). */
export function eventProblems(event: unknown): string[] {
  const v = published();
  const problems: string[] = [];
  const label = `${(event as RuntimeEvent).type}#${(event as RuntimeEvent).sequence}`;
  if (!v.coreEvent(event)) problems.push(`${label}: core event schema: ${ajvErrors(v.coreEvent)}`);
  if (!v.limeEventAs(event)) problems.push(`${label}: Lime profile event schema: ${ajvErrors(v.limeEventAs)}`);
  for (const issue of validateEventProfile(event)) {
    problems.push(`${label}: OAR profile ${issue.code} at ${issue.path}: ${issue.message}`);
  }
  return problems;
}

/**
 * Asserts that a session's events (a complete log, or several sessions' complete logs) conform: each event to the
 * published core and Lime profile event schemas and OAR's profile, and the sequences gap-free from 1 per session.
 */
export function assertEventsConform(events: readonly RuntimeEvent[]): void {
  expect(events.length, 'no events to check').toBeGreaterThan(0);
  const problems = events.flatMap((event) => eventProblems(event));
  for (const issue of checkSequence(events)) problems.push(`sequence ${issue.code} at ${issue.path}: ${issue.message}`);
  expect(problems).toEqual([]);
}

/** Asserts that a session snapshot conforms to the published core snapshot and (relaxed) Lime profile snapshot. */
export function assertSnapshotConforms(snapshot: SessionSnapshot): void {
  const v = published();
  const problems: string[] = [];
  if (!v.coreSnapshot(snapshot)) problems.push(`core snapshot schema: ${ajvErrors(v.coreSnapshot)}`);
  if (!v.limeSnapshotAs(snapshot)) problems.push(`Lime profile snapshot schema: ${ajvErrors(v.limeSnapshotAs)}`);
  if (snapshot.schemaVersion !== OAR_SCHEMA_VERSION) {
    problems.push(`schemaVersion is ${JSON.stringify(snapshot.schemaVersion)}, expected "${OAR_SCHEMA_VERSION}"`);
  }
  expect(problems).toEqual([]);
}
