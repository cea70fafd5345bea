import { type Insertable, sql } from 'kysely';
import { sha256Hex } from '../kernel/digest.js';
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
  const sha256 = sha256Hex(bytes);
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

/**
 * An artifact of one session: a ref from another session resolves to nothing (artifacts never cross sessions). An
 * artifact the retention policy expired throws `artifact_expired` (its tombstone in `details`): every reader — a
 * ref, `expand_ref`, the HTTP API, a runner's artifacts API — says it existed and is gone, never "unknown".
 */
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
  if (row.expired_at) {
    throw artifactExpired({
      artifactId: row.id,
      sessionId: row.session_id,
      ...(row.name ? { name: row.name } : {}),
      mime: row.mime,
      size: Number(row.size),
      sha256: row.sha256,
      createdAt: row.created_at,
      expiredAt: row.expired_at,
    });
  }
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

/** An artifact's bytes when it still holds them: undefined for an unknown or an expired one (a tombstone). */
export async function storedArtifact(db: Db, sessionId: string, artifactId: string) {
  return getArtifact(db, sessionId, artifactId).catch((error: unknown) => {
    if (isArtifactExpired(error)) return undefined;
    throw error;
  });
}

export async function getArtifactText(db: Db, sessionId: string, artifactId: string): Promise<string | undefined> {
  const artifact = await getArtifact(db, sessionId, artifactId);
  return artifact ? new TextDecoder().decode(artifact.bytes) : undefined;
}

/** What is left of an expired artifact: its description, never its bytes. */
export interface ArtifactTombstone {
  artifactId: string;
  sessionId: string;
  name?: string;
  mime: string;
  size: number;
  sha256: string;
  createdAt: string;
  expiredAt: string;
}

/** The error every reader of an expired artifact gets: not retryable, the bytes will not come back. */
export function artifactExpired(tombstone: ArtifactTombstone): OarRuntimeError {
  const { artifactId, name, expiredAt } = tombstone;
  return new OarRuntimeError(
    'artifact_expired',
    `artifact ${artifactId}${name ? ` (${name})` : ''} expired at ${expiredAt} under the artifact retention policy: ` +
      'its content was deleted; only its name, size and SHA-256 are kept',
    { details: { ...tombstone, uri: artifactUri(artifactId) } },
  );
}

/** Whether a reader's error says the artifact expired (a caller that has a better answer than failing catches it). */
export function isArtifactExpired(error: unknown): error is OarRuntimeError {
  return error instanceof OarRuntimeError && error.code === 'artifact_expired';
}

/** An artifact that still holds bytes and is old enough to expire: one row of the retention sweep. */
export interface ExpiryCandidate {
  sessionId: string;
  artifactId: string;
  name?: string;
  mime: string;
  size: number;
  sha256: string;
  createdAt: string;
}

/**
 * One page of the retention sweep, oldest first: artifacts of any session that still hold their bytes, created
 * before `before`, after the `(createdAt, artifactId)` cursor, whose name starts with none of `skipPrefixes`. One
 * range read of the partial index `oar_artifacts_unexpired` (migration 0008): tombstones are not in it. The prefix
 * test is `substr`, the same on both dialects (LIKE is not: SQLite's ignores case, PostgreSQL's does not).
 */
export async function expiryCandidates(
  db: Db,
  query: {
    before: string;
    after?: { createdAt: string; artifactId: string };
    skipPrefixes: readonly string[];
    limit: number;
  },
): Promise<ExpiryCandidate[]> {
  const { after } = query;
  const rows = await db
    .selectFrom('oar_artifacts')
    .select(['id', 'session_id', 'name', 'mime', 'size', 'sha256', 'created_at'])
    .where('expired_at', 'is', null)
    .where('created_at', '<', query.before)
    .$if(after !== undefined, (qb) =>
      qb.where((eb) =>
        eb.or([
          eb('created_at', '>', after?.createdAt ?? ''),
          eb.and([eb('created_at', '=', after?.createdAt ?? ''), eb('id', '>', after?.artifactId ?? '')]),
        ]),
      ),
    )
    .where((eb) =>
      eb.and(
        query.skipPrefixes.map((prefix) =>
          eb.or([
            eb('name', 'is', null),
            eb(eb.fn<string>('substr', ['name', sql.lit(1), sql.lit(prefix.length)]), '<>', prefix),
          ]),
        ),
      ),
    )
    .orderBy('created_at')
    .orderBy('id')
    .limit(query.limit)
    .execute();
  return rows.map((row) => ({
    sessionId: row.session_id,
    artifactId: row.id,
    ...(row.name ? { name: row.name } : {}),
    mime: row.mime,
    size: Number(row.size),
    sha256: row.sha256,
    createdAt: row.created_at,
  }));
}

/**
 * Expire artifacts of one session: delete their bytes and preview (a preview is the content's start) and stamp
 * `expired_at`, keeping the row as the tombstone. Only rows that still hold bytes are touched; returns how many were.
 */
export async function tombstoneArtifacts(
  db: Db,
  sessionId: string,
  artifactIds: readonly string[],
  expiredAt: string,
): Promise<number> {
  if (artifactIds.length === 0) return 0;
  const result = await db
    .updateTable('oar_artifacts')
    .set({ bytes: Buffer.alloc(0), preview: '', expired_at: expiredAt })
    .where('session_id', '=', sessionId)
    .where('id', 'in', artifactIds)
    .where('expired_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}
