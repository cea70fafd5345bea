import { basename, extname } from 'node:path';
import { jsonTextTooDeep, MAX_JSON_DEPTH, MAX_OUTPUT_CHARS, type OarError, oarError } from '@oar/protocol';
import {
  checkAttachments,
  INPUT_FILE_LIMITS,
  inputTooLarge,
  MAX_TURN_ATTACHMENTS,
  OarRuntimeError,
  processRedactor,
  type Redactor,
  readBoundedBytes,
  readBoundedText,
  type TurnAttachmentInput,
  utf8WithoutBom,
} from '@oar/runtime';

/** A usage fault: the CLI prints the structured error on stderr and exits 2. */
export class UsageError extends Error {
  constructor(readonly error: OarError) {
    super(error.message);
  }
}

/** A `--flag N` that must be a positive whole number (a count, seconds, bytes): `fallback` when not given. */
export function positiveOption<T extends number | undefined>(
  name: string,
  text: string | undefined,
  fallback: T,
): number | T {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw new UsageError(oarError('invalid_option', `${name} must be a positive whole number, not "${text}"`));
  }
  return value;
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
      if (size > limit) throw new UsageError(inputTooLarge(what, '-', limit, size, true).error);
      chunks.push(chunk as Buffer);
    }
    return utf8WithoutBom(Buffer.concat(chunks));
  }
  try {
    return await readBoundedText(file, limit, what);
  } catch (error) {
    // Over the limit is the caller's mistake (exit 2), whatever else went wrong the file's.
    if (error instanceof OarRuntimeError && error.code === 'input_too_large') throw new UsageError(error.error);
    throw unreadable(file, error);
  }
}

/** MIME types by file extension, for the files `--attach` names (anything else is application/octet-stream). */
const MIME_BY_EXTENSION: Record<string, string> = {
  txt: 'text/plain',
  md: 'text/markdown',
  csv: 'text/csv',
  html: 'text/html',
  json: 'application/json',
  yaml: 'application/yaml',
  yml: 'application/yaml',
  xml: 'application/xml',
  pdf: 'application/pdf',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
};

/**
 * The files of `--attach`, as a turn's attachments: valid UTF-8 is sent as text (a source file, a CSV, a JSON file
 * keeps its text), anything else as base64 bytes. Each is bounded before it is read whole.
 */
export async function readAttachments(files: readonly string[]): Promise<TurnAttachmentInput[]> {
  if (files.length > MAX_TURN_ATTACHMENTS) {
    throw new UsageError(
      oarError('invalid_input', `a turn carries at most ${MAX_TURN_ATTACHMENTS} attachments (${files.length} given)`, {
        details: { field: 'attachments', limit: MAX_TURN_ATTACHMENTS },
      }),
    );
  }
  // One after another: at most one file's bytes are being read at a time.
  const attachments: TurnAttachmentInput[] = [];
  for (const file of files) attachments.push(await readAttachment(file));
  try {
    checkAttachments(attachments);
  } catch (error) {
    if (error instanceof OarRuntimeError) throw new UsageError(error.error);
    throw error;
  }
  return attachments;
}

/** One `--attach` file: text when it is valid UTF-8 (and not an image or a PDF), bytes otherwise. */
async function readAttachment(file: string): Promise<TurnAttachmentInput> {
  let bytes: Buffer;
  try {
    bytes = await readBoundedBytes(file, INPUT_FILE_LIMITS.attachment, 'an attached file');
  } catch (error) {
    if (error instanceof OarRuntimeError && error.code === 'input_too_large') throw new UsageError(error.error);
    throw unreadable(file, error);
  }
  const name = basename(file);
  const known = MIME_BY_EXTENSION[extname(name).slice(1).toLowerCase()];
  let text: string | undefined;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    text = undefined;
  }
  if (text !== undefined && (known === undefined || !/^(image\/|application\/pdf)/.test(known))) {
    return { name, mimeType: known ?? 'text/plain', text };
  }
  return { name, mimeType: known ?? 'application/octet-stream', base64: bytes.toString('base64') };
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

let redactor: Redactor | undefined;

/**
 * `value` with every secret this process can recognise replaced (credential shapes, and the values of the
 * provider key variables in its environment): for what the CLI prints that did not come from the log (which is
 * redacted when written). An error repeats its input — an unknown id, a bad config value, an unknown option — and
 * that input may be a pasted token.
 */
export function redactedForOutput<T>(value: T): T {
  redactor ??= processRedactor(process.env);
  return redactor.redactJson(value);
}

/**
 * How a turn's error is printed after its run: the code and message, and the model's own words when the turn
 * failed on output the runtime could not execute (`details.modelText`), so a plain-text reply is still seen.
 */
export function turnErrorText(error: Pick<OarError, 'code' | 'message' | 'details'>): string {
  const modelText = error.details?.modelText;
  const said = typeof modelText === 'string' ? `\nThe model said (nothing of it was executed):\n${modelText}\n` : '';
  return redactedForOutput(`\nerror: ${error.code}: ${error.message}\n${said}`);
}

/** The one structured error line on stderr: `{"error": {code, message, retryable, details}}`, redacted. */
export function printError(error: OarError): void {
  process.stderr.write(`${JSON.stringify({ error: redactedForOutput(error) })}\n`);
}
