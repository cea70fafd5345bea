import { actionIds, artifactCreated } from '../facts/action.js';
import { sha256Hex } from '../kernel/digest.js';
import { OarRuntimeError } from '../kernel/errors.js';
import type { EventDraft } from '../log/draft.js';
import type { RecordedFileVersion } from '../read-models/file-versions.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import { BINARY_SNIFF_BYTES, looksBinary } from '../tools/builtin/files.js';
import type { FileVersionOutput } from '../tools/tool.js';

/** The name of a file's before-image artifact: what rollback and review look for, and retention keeps. */
export const FILE_VERSION_ARTIFACT_PREFIX = 'file-version:';

/**
 * Keep a file-changing call's before-image as an artifact of the session: the drafts that announce it and the
 * `fileVersion` field for the call's `tool.result`. Recorded with the result, so a crash between the write and the
 * record leaves no version, and a rollback then finds the file's digest unknown and refuses it (never guesses).
 */
export async function keepFileVersion(
  ctx: ExecutorContext,
  version: FileVersionOutput,
): Promise<{ drafts: EventDraft[]; fileVersion: RecordedFileVersion }> {
  const { path, before, after } = version;
  const tooLarge = (digest: { sha256: string; size: number }) => ({
    drafts: [],
    fileVersion: { path, before: { ...digest, restorable: false, reason: 'too_large' as const }, after },
  });
  if (version.beforeDigest) return tooLarge(version.beforeDigest);
  if (before === undefined) return { drafts: [], fileVersion: { path, after } };
  const sha256 = sha256Hex(before);
  const size = before.byteLength;
  // Over the limit: not stored, and not scanned for secrets first either (the scan would be for nothing).
  if (size > ctx.config.limits.maxArtifactBytes) return tooLarge({ sha256, size });
  try {
    const stored = await ctx.artifacts.put(
      {
        name: `${FILE_VERSION_ARTIFACT_PREFIX}${path}`,
        bytes: before,
        mime: looksBinary(before.subarray(0, BINARY_SNIFF_BYTES)) ? 'application/octet-stream' : 'text/plain',
      },
      ctx.config.limits.maxArtifactBytes,
    );
    // Redaction changed the bytes: what is stored is not what the file held.
    const exact = stored.sha256 === sha256;
    return {
      drafts: [artifactCreated(actionIds(ctx), stored)],
      fileVersion: {
        path,
        before: {
          sha256,
          size,
          restorable: exact,
          artifactId: stored.artifactId,
          uri: stored.uri,
          ...(exact ? {} : { reason: 'redacted' as const }),
        },
        after,
      },
    };
  } catch (error) {
    if (!(error instanceof OarRuntimeError && error.code === 'artifact_too_large')) throw error;
    // Over the artifact limit: the change is recorded, its before-image is not.
    return tooLarge({ sha256, size });
  }
}
