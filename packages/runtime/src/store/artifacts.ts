import { createHash } from 'node:crypto';
import type { Insertable } from 'kysely';
import { OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { Redactor } from '../redaction/redactor.js';
import { RedactionTally, redactionFact } from '../redaction/tally.js';
import type { ArtifactsTable } from './schema.js';
import type { Db } from './store.js';

/** Default size limit of one artifact (full tool outputs are stored whole up to this size). */
export const DEFAULT_MAX_ARTIFACT_BYTES = 16 * 1024 * 1024;
const PREVIEW_CHARS = 400;

export interface StoredArtifact {
  artifactId: string;
  uri: string;
  name?: string;
  mime: string;
  size: number;
  sha256: string;
  preview: string;
}

/** What an executor hands over to be stored: text or bytes, with an optional mime type and name. */
export interface ArtifactContent {
  text?: string;
  bytes?: Uint8Array;
  mime?: string;
  name?: string;
}

export function artifactUri(artifactId: string): string {
  return `artifact://${artifactId}`;
}

/** Parse `artifact://<id>` (optionally followed by a path-like suffix) to the artifact id. */
export function artifactIdFromRef(ref: string): string | undefined {
  return /^artifact:\/\/([A-Za-z0-9_]+)/.exec(ref)?.[1];
}

/** An artifact about to be stored: its row and what callers get back (the ref is known before the row lands). */
export interface PendingArtifact {
  row: Insertable<ArtifactsTable>;
  stored: StoredArtifact;
}

/**
 * An output redacted before it is described as an artifact (and hashed): the artifact never holds what the log may
 * not. `redaction` is the `output.redacted` payload when anything was found.
 */
export function prepareRedactedArtifact(
  sessionId: string,
  content: ArtifactContent,
  redactor: Pick<Redactor, 'redactText' | 'redactBytes'>,
  maxBytes?: number,
): { pending: PendingArtifact; redaction?: NonNullable<ReturnType<typeof redactionFact>> } {
  const tally = new RedactionTally();
  const clean = {
    ...content,
    ...(content.text !== undefined ? { text: redactor.redactText(content.text, tally) } : {}),
    ...(content.bytes !== undefined ? { bytes: redactor.redactBytes(content.bytes, tally) } : {}),
  };
  const pending = prepareArtifact(sessionId, clean, maxBytes);
  const redaction = redactionFact(tally, { sink: 'artifact', artifactId: pending.stored.artifactId });
  return { pending, ...(redaction ? { redaction } : {}) };
}

/** Describe one full output as an artifact (bytes, mime, size, hash, preview) without storing it yet. */
export function prepareArtifact(
  sessionId: string,
  content: ArtifactContent,
  maxBytes = DEFAULT_MAX_ARTIFACT_BYTES,
): PendingArtifact {
  const bytes = content.bytes ?? new TextEncoder().encode(content.text ?? '');
  if (bytes.byteLength > maxBytes) {
    throw new OarRuntimeError(
      'artifact_too_large',
      `output of ${bytes.byteLength} bytes exceeds the artifact limit of ${maxBytes}`,
      {
        details: { size: bytes.byteLength, limit: maxBytes },
      },
    );
  }
  const artifactId = newId('art');
  const mime = content.mime ?? 'text/plain';
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const text = content.text ?? (mime.startsWith('text/') ? new TextDecoder().decode(bytes) : '');
  const preview = text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}…` : text;
  return {
    row: {
      id: artifactId,
      session_id: sessionId,
      name: content.name ?? null,
      mime,
      size: bytes.byteLength,
      sha256,
      preview,
      bytes: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength),
      created_at: new Date().toISOString(),
    },
    stored: {
      artifactId,
      uri: artifactUri(artifactId),
      ...(content.name ? { name: content.name } : {}),
      mime,
      size: bytes.byteLength,
      sha256,
      preview,
    },
  };
}

/**
 * Store one full output as an artifact, on its own. A worker does not use this: it writes an artifact in the
 * same transaction as the first event that references it (see the worker's engine), so a crash in between can
 * leave neither an orphan row nor an event pointing at nothing.
 */
export async function putArtifact(
  db: Db,
  sessionId: string,
  content: ArtifactContent,
  maxBytes = DEFAULT_MAX_ARTIFACT_BYTES,
): Promise<StoredArtifact> {
  const pending = prepareArtifact(sessionId, content, maxBytes);
  await db.insertInto('oar_artifacts').values(pending.row).execute();
  return pending.stored;
}

/** An artifact of one session: a ref from another session resolves to nothing (artifacts never cross sessions). */
export async function getArtifact(
  db: Db,
  sessionId: string,
  artifactId: string,
): Promise<(StoredArtifact & { sessionId: string; bytes: Uint8Array; createdAt: string }) | undefined> {
  const row = await db
    .selectFrom('oar_artifacts')
    .selectAll()
    .where('id', '=', artifactId)
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    artifactId: row.id,
    sessionId: row.session_id,
    uri: artifactUri(row.id),
    ...(row.name ? { name: row.name } : {}),
    mime: row.mime,
    size: Number(row.size),
    sha256: row.sha256,
    preview: row.preview,
    bytes: new Uint8Array(row.bytes),
    createdAt: row.created_at,
  };
}

export async function getArtifactText(db: Db, sessionId: string, artifactId: string): Promise<string | undefined> {
  const artifact = await getArtifact(db, sessionId, artifactId);
  return artifact ? new TextDecoder().decode(artifact.bytes) : undefined;
}
