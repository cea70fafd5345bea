import { z } from 'zod';
import { artifactCreated } from '../facts/action.js';
import { OarRuntimeError } from '../kernel/errors.js';
import type { EventDraft } from '../log/draft.js';
import type { TurnAttachment } from '../read-models/thread-state.js';
import type { Redactor } from '../redaction/redactor.js';
import { DEFAULT_MAX_ARTIFACT_BYTES, type PendingArtifact, prepareRedactedArtifact } from '../store/artifacts.js';

/**
 * Files attached to a turn (docs/engine.md "Turn attachments"): each is stored as an artifact of the session — redacted
 * like every output, in the same transaction as the `turn.submitted` that names it, so a failed submit leaves no row
 * — and recorded on the turn as `{artifactId, name, mimeType, size, uri}`. The protocol loop shows the model each
 * one's ref (it reads them with `expand_ref`); a runner gets them as the run context's `input.attachments`.
 */

/** The most files one turn carries. */
export const MAX_TURN_ATTACHMENTS = 16;
/** The most bytes a turn's files hold together (each is also within the binding's `maxArtifactBytes`). */
export const MAX_TURN_ATTACHMENT_BYTES = 64 * 1024 * 1024;

/** A file as a caller attaches it: its text, or its bytes as base64. */
export const TurnAttachmentInputSchema = z.strictObject({
  name: z.string().min(1).max(200),
  mimeType: z.string().min(1).max(200).optional(),
  text: z.string().optional(),
  base64: z.string().optional(),
});
export type TurnAttachmentInput = z.infer<typeof TurnAttachmentInputSchema>;

const MIME = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
// A name is shown to the model and to people: one file name, no path, no control characters.
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
const BAD_NAME = /[/\\\u0000-\u001f\u007f]/;

function invalid(index: number, field: string, message: string): OarRuntimeError {
  return new OarRuntimeError('invalid_input', `attachment ${index + 1}: ${message}`, {
    details: { field: `attachments/${index}/${field}` },
  });
}

export interface PreparedAttachments {
  /** The artifact rows, written with the submit. */
  artifacts: PendingArtifact[];
  /** What the turn records. */
  recorded: TurnAttachment[];
  /** `artifact.changed` (and `output.redacted` where a secret was found) for each, after the `turn.submitted`. */
  facts: (ids: { threadId: string; turnId: string }) => EventDraft[];
}

/**
 * Check a turn's attachments without reading their content: the count, each name, one of text / base64, the MIME
 * type, the base64 alphabet. A caller can check before it records anything else (`oar run` before the session).
 */
export function checkAttachments(attachments: readonly TurnAttachmentInput[]): void {
  if (attachments.length > MAX_TURN_ATTACHMENTS) {
    throw new OarRuntimeError(
      'invalid_input',
      `a turn carries at most ${MAX_TURN_ATTACHMENTS} attachments (${attachments.length} given)`,
      { details: { field: 'attachments', limit: MAX_TURN_ATTACHMENTS } },
    );
  }
  // Counted before anything is decoded or redacted (base64: three bytes per four characters).
  const total = attachments.reduce(
    (sum, a) =>
      sum + (a.text !== undefined ? Buffer.byteLength(a.text) : Math.floor(((a.base64?.length ?? 0) * 3) / 4)),
    0,
  );
  if (total > MAX_TURN_ATTACHMENT_BYTES) {
    throw new OarRuntimeError(
      'invalid_input',
      `a turn's attachments hold at most ${MAX_TURN_ATTACHMENT_BYTES} bytes together (${total} given)`,
      { details: { field: 'attachments', limit: MAX_TURN_ATTACHMENT_BYTES } },
    );
  }
  attachments.forEach((attachment, index) => {
    const name = attachment.name.trim();
    if (!name || BAD_NAME.test(name)) {
      throw invalid(index, 'name', 'a name is one file name, without a path or control characters');
    }
    if ((attachment.text === undefined) === (attachment.base64 === undefined)) {
      throw invalid(index, 'text', 'give exactly one of text or base64');
    }
    if (attachment.mimeType !== undefined && !MIME.test(attachment.mimeType)) {
      throw invalid(index, 'mimeType', `"${attachment.mimeType.slice(0, 80)}" is not a MIME type`);
    }
    const base64 = attachment.base64?.replace(/\s+/g, '');
    if (base64 !== undefined && (base64.length % 4 !== 0 || !BASE64.test(base64))) {
      throw invalid(index, 'base64', 'not valid base64');
    }
  });
}

/** Check, redact and describe a turn's attachments; nothing is written yet. */
export function prepareAttachments(
  sessionId: string,
  attachments: readonly TurnAttachmentInput[],
  redactor: Redactor,
  maxBytes = DEFAULT_MAX_ARTIFACT_BYTES,
): PreparedAttachments {
  checkAttachments(attachments);
  const prepared = attachments.map((attachment, index) => {
    // A name is shown and stored like any text: redacted too (a file named after a token is still a token).
    const name = redactor.redactText(attachment.name.trim());
    const base64 = attachment.base64?.replace(/\s+/g, '');
    const mime = attachment.mimeType ?? (base64 === undefined ? 'text/plain' : 'application/octet-stream');
    const content =
      base64 === undefined ? { text: attachment.text ?? '' } : { bytes: new Uint8Array(Buffer.from(base64, 'base64')) };
    try {
      return prepareRedactedArtifact(sessionId, { ...content, mime, name }, redactor, maxBytes);
    } catch (error) {
      if (error instanceof OarRuntimeError) {
        throw new OarRuntimeError(error.code, `attachment ${index + 1} (${name}): ${error.message}`, {
          details: { ...error.error.details, field: `attachments/${index}` },
        });
      }
      throw error;
    }
  });
  return {
    artifacts: prepared.map((p) => p.pending),
    recorded: prepared.map(({ pending: { stored } }) => ({
      artifactId: stored.artifactId,
      name: stored.name ?? '',
      mimeType: stored.mime,
      size: stored.size,
      uri: stored.uri,
    })),
    facts: (ids) =>
      prepared.flatMap(({ pending, redaction }) => [
        artifactCreated(ids, pending.stored),
        ...(redaction ? [{ type: 'output.redacted', ...ids, payload: redaction } as EventDraft] : []),
      ]),
  };
}
