import { createHash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { z } from 'zod';
import { ToolError } from '../../kernel/errors.js';
import { fsToolError } from '../errors.js';
import type { FileVersionOutput } from '../tool.js';
import { openWorkspaceFile, requestedWorkspacePath, type WorkspaceFile } from '../workspace.js';

/** How much of a file is inspected for a NUL byte, the same heuristic git and grep use. */
export const BINARY_SNIFF_BYTES = 8192;

/** The `filePath` input field shared by read, write and edit. */
export const filePathInput = z
  .string()
  .min(1)
  .describe('Path of the file, relative to the workspace root (an absolute path inside the workspace also works).');

/** `paths(input)` of a single-file tool: the one file it touches, workspace-relative. */
export function filePathOf(input: { filePath: string }, workspaceRoot?: string): string[] {
  return [requestedWorkspacePath(input.filePath, workspaceRoot)];
}

/** An open existing regular file of the workspace (see `openWorkspaceFile`); the caller closes `handle`. */
export type ExistingFile = WorkspaceFile;

/**
 * Open an existing regular file inside the workspace for reading (`read`) or reading and rewriting (`update`).
 * Directories, FIFOs, devices and hard links are refused on the opened descriptor, before anything is read.
 */
export async function openExistingFile(
  root: string,
  requested: string,
  mode: 'read' | 'update' = 'read',
): Promise<ExistingFile> {
  return openWorkspaceFile(root, requested, mode);
}

/** A NUL byte means binary: text encodings the tools handle (UTF-8, ASCII) never contain one. */
export function looksBinary(bytes: Uint8Array): boolean {
  return bytes.includes(0);
}

/** Check the head of a file for binary content without reading the whole file. */
export async function sniffBinary(file: ExistingFile): Promise<boolean> {
  try {
    const buffer = Buffer.alloc(BINARY_SNIFF_BYTES);
    const { bytesRead } = await file.handle.read(buffer, 0, BINARY_SNIFF_BYTES, 0);
    return looksBinary(buffer.subarray(0, bytesRead));
  } catch (error) {
    throw fsToolError(error, file.relative);
  }
}

/** Read a whole open file's bytes, from its start whatever the descriptor's position. */
export async function readFileBytes(file: WorkspaceFile): Promise<Buffer> {
  try {
    return await file.handle.readFile();
  } catch (error) {
    throw fsToolError(error, file.relative);
  }
}

/** A file's bytes as UTF-8 text; a NUL byte anywhere is `binary_file`. */
export function textOf(bytes: Buffer, relative: string): string {
  if (looksBinary(bytes)) throw binaryFileError(relative);
  return bytes.toString('utf8');
}

/**
 * The largest content a `write` keeps as the before-image of what it overwrites (the default artifact limit): a
 * larger file is hashed in chunks, never held in memory, and its version says it was not kept.
 */
export const MAX_BEFORE_IMAGE_BYTES = 16 * 1024 * 1024;

/** What a file held before a change: its bytes, or (too large to keep) only its digest. */
export type BeforeImage = Uint8Array | { sha256: string; size: number };

/** The content of an open file before it is replaced: whole up to MAX_BEFORE_IMAGE_BYTES, else its digest. */
export async function beforeImageOf(file: WorkspaceFile): Promise<BeforeImage> {
  if (file.stats.size <= MAX_BEFORE_IMAGE_BYTES) return readFileBytes(file);
  const hash = createHash('sha256');
  const chunk = Buffer.alloc(1024 * 1024);
  let size = 0;
  try {
    for (;;) {
      const { bytesRead } = await file.handle.read(chunk, 0, chunk.length, size);
      if (bytesRead === 0) break;
      hash.update(chunk.subarray(0, bytesRead));
      size += bytesRead;
    }
  } catch (error) {
    throw fsToolError(error, file.relative);
  }
  return { sha256: hash.digest('hex'), size };
}

/** The version a file-changing call reports (ToolOutput.fileVersion): what was before, the digest of after. */
export function fileVersion(relative: string, before: BeforeImage | undefined, after: Uint8Array): FileVersionOutput {
  return {
    path: relative,
    ...(before === undefined ? {} : before instanceof Uint8Array ? { before } : { beforeDigest: before }),
    after: { sha256: createHash('sha256').update(after).digest('hex'), size: after.byteLength },
  };
}

/**
 * Replace the whole content of an open file: truncate through the descriptor, then write at explicit positions (the
 * descriptor's own position may be anywhere after a read). Only called once the open is verified, so a refused
 * open never truncates anything.
 */
export async function replaceContent(handle: FileHandle, content: string | Uint8Array): Promise<number> {
  const bytes = typeof content === 'string' ? Buffer.from(content, 'utf8') : content;
  await handle.truncate(0);
  for (let written = 0; written < bytes.length; ) {
    const { bytesWritten } = await handle.write(bytes, written, bytes.length - written, written);
    written += bytesWritten;
  }
  return bytes.length;
}

export function binaryFileError(relative: string): ToolError {
  return new ToolError('binary_file', `${relative} is a binary file; only text files can be read or edited.`, {
    details: { path: relative },
  });
}

/**
 * The flags the three read-only file tools share (read, glob, grep): stated once so they cannot drift apart, and
 * spread explicitly into each definition so every tool still shows its flags where it is defined.
 */
export const READ_ONLY_FILE_TOOL = {
  isReadOnly: true,
  isConcurrencySafe: true,
  isDestructive: false,
  isIdempotent: true,
  interruptBehavior: 'cancel',
  capabilities: ['filesystem', 'read'],
} as const satisfies {
  isReadOnly: boolean;
  isConcurrencySafe: boolean;
  isDestructive: boolean;
  isIdempotent: boolean;
  interruptBehavior: 'cancel' | 'block';
  capabilities: readonly string[];
};
