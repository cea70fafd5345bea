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

/**
 * The artifact checkpoint summary (the standard's `artifact_checkpoint_summary`) of file versions: per file, its
 * versions with their refs and previews' sources, newest last.
 */
export function fileCheckpoints(versions: readonly FileVersionEntry[]): {
  files: { path: string; versions: FileVersionEntry[]; latest: FileVersionEntry['after'] }[];
  versionCount: number;
} {
  const byPath = new Map<string, FileVersionEntry[]>();
  for (const version of versions) {
    const list = byPath.get(version.path) ?? [];
    list.push(version);
    byPath.set(version.path, list);
  }
  return {
    files: [...byPath].map(([path, list]) => ({
      path,
      versions: list,
      latest: (list.at(-1) as FileVersionEntry).after,
    })),
    versionCount: versions.length,
  };
}
