import { open } from 'node:fs/promises';
import { jsonTextTooDeep, MAX_JSON_DEPTH } from '@oar/protocol';
import { OarRuntimeError } from './errors.js';

/**
 * The most bytes OAR reads from the files it is pointed at, checked before the file is read whole (its size is
 * stat'ed first; a device or a pipe is read only up to the limit), as the CLI does for its own inputs. No real file
 * comes near these; a file over the limit is `input_too_large` (exit 2), one nested deeper than MAX_JSON_DEPTH
 * `input_too_deep` (exit 2).
 */
export const INPUT_FILE_LIMITS = {
  /** `oar.config.json` or `--config FILE`: hundreds of agents, models and permission rules fit in a fraction. */
  config: 1024 * 1024,
  /** A scripted model's file (`script:FILE`): each step holds at most one model output (1 MiB). */
  modelScript: 16 * 1024 * 1024,
  /** A file attached to a turn (`oar run --attach`): the default artifact limit (the binding's may be lower). */
  attachment: 16 * 1024 * 1024,
} as const;

const MiB = (bytes: number) => `${Math.round((bytes / 1024 / 1024) * 100) / 100} MiB`;

/** `input_too_large` for `what` read from `file` (`atLeast`: reading stopped past the limit, so `size` is a bound). */
export function inputTooLarge(
  what: string,
  file: string,
  limit: number,
  size: number,
  atLeast: boolean,
): OarRuntimeError {
  const amount = atLeast ? `more than ${limit} bytes` : `${size} bytes`;
  return new OarRuntimeError(
    'input_too_large',
    `${what} ${file} has ${amount}; at most ${limit} bytes (${MiB(limit)}) are read`,
    { details: { file, limit, size, ...(atLeast ? { sizeIsLowerBound: true } : {}) } },
  );
}

/** `bytes` as UTF-8 text without a leading byte-order mark (some Windows editors write one; it is not JSON). */
export function utf8WithoutBom(bytes: Uint8Array): string {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/**
 * The text of `file` as UTF-8 without a leading byte-order mark, refusing more than `limit` bytes with
 * `input_too_large` before reading it whole. File-system errors (ENOENT, EACCES…) are thrown as they are, for the
 * caller to name (a missing default config is no error at all).
 */
export async function readBoundedText(file: string, limit: number, what: string): Promise<string> {
  return utf8WithoutBom(await readBoundedBytes(file, limit, what));
}

/** The bytes of `file`, refusing more than `limit` with `input_too_large` before reading it whole. */
export async function readBoundedBytes(file: string, limit: number, what: string): Promise<Buffer> {
  const handle = await open(file, 'r');
  try {
    const stats = await handle.stat();
    if (stats.isFile() && stats.size > limit) throw inputTooLarge(what, file, limit, stats.size, false);
    // A device or a pipe has no size up front (and /dev/zero never ends): read at most one byte past the limit.
    const buffer = Buffer.alloc(Math.min(limit + 1, stats.isFile() ? stats.size + 1 : limit + 1));
    let size = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, size, buffer.length - size, null);
      if (bytesRead === 0) break;
      size += bytesRead;
      if (size > limit) throw inputTooLarge(what, file, limit, size, true);
      if (size === buffer.length) break;
    }
    return buffer.subarray(0, size);
  } finally {
    await handle.close();
  }
}

/**
 * `input_too_deep` when JSON `text` nests arrays and objects deeper than MAX_JSON_DEPTH: parsing is iterative, but
 * what consumes the value (schema validation, hashing, the transcript) recurses. Checked by a linear scan first.
 */
export function checkJsonDepth(text: string, file: string, what: string): void {
  if (!jsonTextTooDeep(text)) return;
  throw new OarRuntimeError(
    'input_too_deep',
    `${what} ${file} nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`,
    { details: { file, limit: MAX_JSON_DEPTH } },
  );
}
