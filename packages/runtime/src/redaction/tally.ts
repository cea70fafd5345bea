import type { RedactionKind } from './kinds.js';

/** How many secrets of each kind were replaced. Never values, never positions. */
export type RedactionCounts = Partial<Record<RedactionKind, number>>;

/**
 * A running count of replacements, passed to `Redactor.redactText` / `redactJson` / `redactBytes` so one fact can
 * cover everything a sink wrote (an event's payload, an artifact, an export). Mutable on purpose: counting into a
 * caller's tally costs nothing when nothing is found.
 */
export class RedactionTally {
  readonly counts: RedactionCounts = {};
  total = 0;

  add(kind: RedactionKind, count = 1): void {
    this.counts[kind] = (this.counts[kind] ?? 0) + count;
    this.total += count;
  }

  merge(other: RedactionTally): void {
    for (const [kind, count] of Object.entries(other.counts)) this.add(kind as RedactionKind, count);
  }
}

/** Where redacted data was headed (the `sink` of an `output.redacted` fact). Open: sinks are added over time. */
export type RedactionSink = 'event' | 'artifact' | 'export' | 'cli_output' | 'log' | 'stream' | (string & {});

/**
 * The `output.redacted` payload: counts per kind and the total, never values
 * (`OutputRedactedPayloadSchema` in @oar/protocol). `undefined` when nothing was redacted: no fact to record.
 */
export function redactionFact(
  tally: RedactionTally,
  where: { sink?: RedactionSink; source?: string; artifactId?: string } = {},
): { count: number; kinds: Record<string, number>; sink?: string; source?: string; artifactId?: string } | undefined {
  if (tally.total === 0) return undefined;
  const kinds = Object.fromEntries(
    Object.entries(tally.counts)
      .filter(([, count]) => (count ?? 0) > 0)
      .sort(([a], [b]) => (a < b ? -1 : 1)),
  ) as Record<string, number>;
  return {
    count: tally.total,
    kinds,
    ...(where.sink !== undefined ? { sink: where.sink } : {}),
    ...(where.source !== undefined ? { source: where.source } : {}),
    ...(where.artifactId !== undefined ? { artifactId: where.artifactId } : {}),
  };
}
