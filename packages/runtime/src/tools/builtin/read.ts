import { createInterface } from 'node:readline';
import { z } from 'zod';
import { fsToolError, throwIfAborted } from '../errors.js';
import { defineTool } from '../tool.js';
import {
  BINARY_SNIFF_BYTES,
  binaryFileError,
  type ExistingFile,
  filePathInput,
  filePathOf,
  looksBinary,
  openExistingFile,
  READ_ONLY_FILE_TOOL,
  sniffBinary,
} from './files.js';

export const READ_DEFAULT_LIMIT = 2000;
/** Output budget of one read; a larger file is read in pages with `offset`. */
export const READ_MAX_BYTES = 256 * 1024;

const ReadInputSchema = z.strictObject({
  filePath: filePathInput,
  offset: z
    .number()
    .int()
    .min(1)
    .default(1)
    .describe('1-based line number to start reading from. To continue a truncated read, pass its nextOffset.'),
  limit: z
    .number()
    .int()
    .min(1)
    .default(READ_DEFAULT_LIMIT)
    .describe(`Maximum number of lines to return (default ${READ_DEFAULT_LIMIT}).`),
});
export type ReadInput = z.infer<typeof ReadInputSchema>;

export const readTool = defineTool<ReadInput>({
  name: 'read',
  description:
    'Read a text file in the workspace. Returns its lines numbered like `cat -n` (line number, tab, text). ' +
    `At most ${READ_DEFAULT_LIMIT} lines and ${READ_MAX_BYTES / 1024} KiB per call; when the result is truncated, ` +
    'call again with offset set to the reported nextOffset. Binary files and directories are refused.',
  input: ReadInputSchema,
  ...READ_ONLY_FILE_TOOL,
  capabilities: [...READ_ONLY_FILE_TOOL.capabilities],
  paths: filePathOf,
  async execute(input, context) {
    throwIfAborted(context.signal);
    const file = await openExistingFile(context.workspaceRoot, input.filePath);
    let page: Page;
    try {
      const whole = await readSmallFile(file);
      if (whole !== undefined) {
        if (looksBinary(whole.subarray(0, BINARY_SNIFF_BYTES))) throw binaryFileError(file.relative);
        page = pageOfText(whole.toString('utf8'), input.offset, input.limit);
      } else {
        if (await sniffBinary(file)) throw binaryFileError(file.relative);
        page = await readPage(file, input.offset, input.limit, context.signal);
      }
      throwIfAborted(context.signal);
    } finally {
      await file.handle.close();
    }
    return {
      text: page.lines.join('\n'),
      summary: summarize(file.relative, input.offset, page),
      structured: {
        path: file.relative,
        offset: input.offset,
        linesReturned: page.lines.length,
        firstLine: page.lines.length > 0 ? input.offset : null,
        lastLine: page.lines.length > 0 ? input.offset + page.lines.length - 1 : null,
        totalLines: page.totalLines ?? null,
        truncated: page.truncatedBy !== undefined,
        truncatedBy: page.truncatedBy ?? null,
        nextOffset: page.nextOffset ?? null,
        fileBytes: file.stats.size,
      },
    };
  },
});

interface Page {
  /** Numbered lines, `cat -n` style. */
  lines: string[];
  truncatedBy?: 'lines' | 'bytes';
  /** Where the next page starts, when truncated. */
  nextOffset?: number;
  /** Known only when the whole file was scanned (not truncated). */
  totalLines?: number;
}

/** Lines into one page: numbered, within the line limit and the byte budget. */
class PageBuilder {
  private readonly lines: string[] = [];
  private bytes = 0;
  private lineNumber = 0;

  constructor(
    private readonly offset: number,
    private readonly limit: number,
  ) {}

  /** Take the next line of the file; a page when it is full (stop reading then). */
  add(line: string): Page | undefined {
    this.lineNumber += 1;
    const { lines, lineNumber } = this;
    if (lineNumber < this.offset) return undefined;
    if (lines.length === this.limit) return { lines, truncatedBy: 'lines', nextOffset: lineNumber };
    const numbered = `${String(lineNumber).padStart(6)}\t${line}`;
    const size = Buffer.byteLength(numbered) + 1;
    if (this.bytes + size > READ_MAX_BYTES) {
      if (lines.length > 0) return { lines, truncatedBy: 'bytes', nextOffset: lineNumber };
      // A single line larger than the budget (minified code, a data blob): show its head rather than nothing.
      const head = Buffer.from(numbered).subarray(0, READ_MAX_BYTES).toString('utf8');
      return { lines: [head], truncatedBy: 'bytes', nextOffset: lineNumber + 1 };
    }
    lines.push(numbered);
    this.bytes += size;
    return undefined;
  }

  /** The file ended before the page was full. */
  end(): Page {
    return { lines: this.lines, totalLines: this.lineNumber };
  }
}

/**
 * A file at most this large is read in one call and split in memory. A read through the thread pool costs more
 * than the bytes: the stream and line reader took half of a small `read`'s time.
 */
const WHOLE_READ_BYTES = 64 * 1024;

/** The whole file, when it is small (and did not grow past its size since it was opened); else undefined. */
async function readSmallFile(file: ExistingFile): Promise<Buffer | undefined> {
  if (file.stats.size > WHOLE_READ_BYTES) return undefined;
  // One byte more than the size: a file that grew since it was opened is read as a stream instead.
  const buffer = Buffer.alloc(file.stats.size + 1);
  let size = 0;
  try {
    // Until the end of the file or a full buffer: a read may return less than asked (FUSE, network file systems).
    for (;;) {
      const { bytesRead } = await file.handle.read(buffer, size, buffer.length - size, size);
      if (bytesRead === 0) break;
      size += bytesRead;
      if (size === buffer.length) break;
    }
  } catch (error) {
    throw fsToolError(error, file.relative);
  }
  return size > file.stats.size ? undefined : buffer.subarray(0, size);
}

/** The line endings the line reader splits on (`\r\n`, `\n`, a lone `\r`), so both paths page alike. */
const LINE_ENDING = /\r?\n|\r(?!\n)/;

/** The page of a whole text: lines as the streaming reader yields them (no empty line after a final ending). */
function pageOfText(text: string, offset: number, limit: number): Page {
  const lines = text.split(LINE_ENDING);
  if (lines.at(-1) === '') lines.pop();
  const page = new PageBuilder(offset, limit);
  for (const line of lines) {
    const full = page.add(line);
    if (full) return full;
  }
  return page.end();
}

/**
 * Stream the file line by line so a huge file costs memory proportional to the page, not to the file, and stop as
 * soon as the page is full.
 */
async function readPage(file: ExistingFile, offset: number, limit: number, signal: AbortSignal): Promise<Page> {
  // From the descriptor the confinement check verified, never from the path again; the caller closes it.
  const stream = file.handle.createReadStream({ encoding: 'utf8', start: 0, autoClose: false, signal });
  const reader = createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY });
  const page = new PageBuilder(offset, limit);
  try {
    for await (const line of reader) {
      const full = page.add(line);
      if (full) return full;
    }
  } catch (error) {
    throw fsToolError(error, file.relative);
  } finally {
    reader.close();
    stream.destroy();
  }
  throwIfAborted(signal);
  return page.end();
}

function summarize(relative: string, offset: number, page: Page): string {
  const count = page.lines.length;
  if (count === 0) {
    return page.totalLines === 0
      ? `Read ${relative}: empty file`
      : `Read ${relative}: offset ${offset} is past the end (${page.totalLines} lines)`;
  }
  const range = `lines ${offset}-${offset + count - 1}`;
  if (page.truncatedBy === undefined) return `Read ${relative} ${range} of ${page.totalLines}`;
  const reason = page.truncatedBy === 'lines' ? 'line limit' : 'size limit';
  return `Read ${relative} ${range} (truncated by ${reason}; continue with offset ${page.nextOffset})`;
}
