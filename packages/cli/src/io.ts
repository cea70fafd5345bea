import { open } from 'node:fs/promises';
import { jsonTextTooDeep, MAX_JSON_DEPTH, MAX_OUTPUT_CHARS, type OarError, oarError } from '@oar/protocol';

/** A usage fault: the CLI prints the structured error on stderr and exits 2. */
export class UsageError extends Error {
  constructor(readonly error: OarError) {
    super(error.message);
  }
}

/**
 * The most bytes the CLI reads from one input, checked before the input is read whole (a file's size is stat'ed
 * first; standard input and devices are read only up to the limit). A 50 MB input once cost 2 GB of memory and
 * 50 s of parsing; no real input comes near these.
 */
export const INPUT_LIMITS = {
  /** One model output for `protocol check`: the runtime's own limit on a model output. */
  declaration: MAX_OUTPUT_CHARS,
  /** A `--catalog` file: hundreds of tools with their schemas fit in a fraction of it. */
  catalog: 4 * 1024 * 1024,
  /** A `protocol transcript` input. */
  transcript: 16 * 1024 * 1024,
} as const;

const MiB = (bytes: number) => `${Math.round((bytes / 1024 / 1024) * 100) / 100} MiB`;

function tooLarge(what: string, file: string, limit: number, size: number, atLeast: boolean): UsageError {
  const amount = atLeast ? `more than ${limit} bytes` : `${size} bytes`;
  return new UsageError(
    oarError('input_too_large', `${what} ${file} has ${amount}; at most ${limit} bytes (${MiB(limit)}) are read`, {
      details: { file, limit, size, ...(atLeast ? { sizeIsLowerBound: true } : {}) },
    }),
  );
}

/** Text of `bytes` as UTF-8 without a leading byte-order mark (editors on Windows like to write one). */
export function utf8WithoutBom(bytes: Buffer): string {
  const text = bytes.toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

/**
 * Read a file argument, or standard input for "-" (and when no file is given), refusing more than `limit` bytes
 * with `input_too_large` (exit 2) before reading it all.
 */
export async function readInput(file: string | undefined, limit: number, what = 'input'): Promise<string> {
  if (file === undefined || file === '-') {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of process.stdin) {
      size += (chunk as Buffer).length;
      // Stop reading at the limit: the rest is never buffered.
      if (size > limit) throw tooLarge(what, '-', limit, size, true);
      chunks.push(chunk as Buffer);
    }
    return utf8WithoutBom(Buffer.concat(chunks));
  }
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, 'r');
  } catch (error) {
    throw unreadable(file, error);
  }
  try {
    const stats = await handle.stat();
    if (stats.isFile() && stats.size > limit) throw tooLarge(what, file, limit, stats.size, false);
    // A device or a pipe has no size up front (and /dev/zero never ends): read at most one byte past the limit.
    const buffer = Buffer.alloc(Math.min(limit + 1, stats.isFile() ? stats.size + 1 : limit + 1));
    let size = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buffer, size, buffer.length - size, null);
      if (bytesRead === 0) break;
      size += bytesRead;
      if (size > limit) throw tooLarge(what, file, limit, size, true);
      if (size === buffer.length) break;
    }
    return utf8WithoutBom(buffer.subarray(0, size));
  } catch (error) {
    throw error instanceof UsageError ? error : unreadable(file, error);
  } finally {
    await handle.close();
  }
}

function unreadable(file: string, error: unknown): UsageError {
  return new UsageError(
    oarError('file_unreadable', `cannot read ${file}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`, {
      details: { file },
    }),
  );
}

export async function readJsonFile(file: string, what: string, limit: number): Promise<unknown> {
  const text = await readInput(file, limit, what);
  // Parsing is iterative, but what consumes the value (schema compilers, renderers) recurses: bound it first.
  if (jsonTextTooDeep(text)) {
    throw new UsageError(
      oarError('input_too_deep', `${what} ${file} nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`, {
        details: { file, limit: MAX_JSON_DEPTH },
      }),
    );
  }
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new UsageError(
      oarError('invalid_json', `${what} ${file} is not valid JSON: ${(error as Error).message}`, { details: { file } }),
    );
  }
}

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}
