import type { RuntimeEvent } from '@oar/protocol';
import { z } from 'zod';

/**
 * A file version as a call's end records it (`tool.result` / `tool.failed` `fileVersion`, executors/file-versions.ts):
 * the digest of the file before the call and the artifact keeping its bytes, and the digest of what the call left.
 * `before` is absent when the call created the file. `before.restorable` is false when the stored bytes are not the
 * file's (`redacted`: it held something that looks like a secret, which the store never keeps; `too_large`: over the
 * artifact limit, not stored): a rollback refuses such a file rather than write markers or nothing into it.
 */
export const RecordedFileVersionSchema = z.object({
  path: z.string(),
  before: z
    .object({
      sha256: z.string(),
      size: z.number().int(),
      restorable: z.boolean(),
      artifactId: z.string().optional(),
      uri: z.string().optional(),
      reason: z.enum(['redacted', 'too_large']).optional(),
    })
    .optional(),
  after: z.object({ sha256: z.string(), size: z.number().int() }),
});
export type RecordedFileVersion = z.infer<typeof RecordedFileVersionSchema>;

/** One version of a workspace file: which call made it, where, and what it replaced. */
export interface FileVersionEntry extends RecordedFileVersion {
  /** 1 for a file's first recorded change in the session, then 2, 3… */
  version: number;
  threadId: string;
  turnId?: string;
  toolCallId: string;
  tool: string;
  sequence: number;
  at: string;
  /** The call created the file (nothing before it). */
  created: boolean;
}

/** Every file version the events record, oldest first (`version` counts per path). */
export function fileVersionsOf(events: Iterable<RuntimeEvent>): FileVersionEntry[] {
  const versions: FileVersionEntry[] = [];
  const counts = new Map<string, number>();
  for (const event of events) {
    if (event.type !== 'tool.result' && event.type !== 'tool.failed') continue;
    const payload = (event.payload ?? {}) as Record<string, unknown>;
    if (payload.fileVersion === undefined) continue;
    const parsed = RecordedFileVersionSchema.safeParse(payload.fileVersion);
    if (!parsed.success || !event.threadId || !event.toolCallId) continue;
    const version = (counts.get(parsed.data.path) ?? 0) + 1;
    counts.set(parsed.data.path, version);
    versions.push({
      ...parsed.data,
      version,
      threadId: event.threadId,
      ...(event.turnId ? { turnId: event.turnId } : {}),
      toolCallId: event.toolCallId,
      tool: typeof payload.toolName === 'string' ? payload.toolName : 'unknown',
      sequence: event.sequence,
      at: event.timestamp,
      created: parsed.data.before === undefined,
    });
  }
  return versions;
}

/** A version as the checkpoint summary shows it: with the rollback that undid it, if one did. */
export type CheckpointVersion = FileVersionEntry & { rolledBack?: string };

/**
 * The artifact checkpoint summary (the standard's `artifact_checkpoint_summary`) from the events: per file, its
 * versions (numbered over the whole session) with their refs, each marked `rolledBack` by the rollback that undid
 * it, and `latest`, what OAR last made of the file — a version's after, or what a rollback wrote back (`null`: it
 * removed the file). `threadId` keeps the versions of one thread.
 */
export function fileCheckpoints(
  events: readonly RuntimeEvent[],
  threadId?: string,
): {
  files: { path: string; versions: CheckpointVersion[]; latest: FileVersionEntry['after'] | null }[];
  versionCount: number;
} {
  const versions: CheckpointVersion[] = fileVersionsOf(events);
  const latest = new Map<string, FileVersionEntry['after'] | null>();
  let next = 0;
  for (const event of events) {
    for (; next < versions.length && (versions[next] as CheckpointVersion).sequence <= event.sequence; next++) {
      const version = versions[next] as CheckpointVersion;
      latest.set(version.path, version.after);
    }
    if (event.type === 'history.rollback.completed') rolledBack(event, versions.slice(0, next), latest);
  }
  const byPath = new Map<string, CheckpointVersion[]>();
  for (const version of versions) {
    if (threadId !== undefined && version.threadId !== threadId) continue;
    byPath.set(version.path, [...(byPath.get(version.path) ?? []), version]);
  }
  return {
    files: [...byPath].map(([path, list]) => ({ path, versions: list, latest: latest.get(path) ?? null })),
    versionCount: [...byPath.values()].reduce((n, list) => n + list.length, 0),
  };
}

/** Mark the versions a rollback undid, and set each file it wrote back to what it wrote. */
function rolledBack(
  event: RuntimeEvent,
  versions: CheckpointVersion[],
  latest: Map<string, FileVersionEntry['after'] | null>,
): void {
  const payload = (event.payload ?? {}) as {
    rollbackId?: string;
    removedTurns?: string[];
    affected?: { subagentThreads?: string[] };
    files?: { path: string; action: string; fromVersion?: number }[];
  };
  const turns = new Set(payload.removedTurns ?? []);
  const threads = new Set(payload.affected?.subagentThreads ?? []);
  for (const version of versions) {
    const undone =
      (version.threadId === event.threadId && version.turnId !== undefined && turns.has(version.turnId)) ||
      threads.has(version.threadId);
    if (undone && !version.rolledBack) version.rolledBack = payload.rollbackId ?? event.eventId;
  }
  for (const file of payload.files ?? []) {
    const from = versions.find((v) => v.path === file.path && v.version === file.fromVersion);
    if (file.action === 'delete') latest.set(file.path, null);
    else if (file.action === 'restore' && from?.before) {
      latest.set(file.path, { sha256: from.before.sha256, size: from.before.size });
    }
  }
}
