import type { Stats } from 'node:fs';
import { open, readFile, stat } from 'node:fs/promises';
import { z } from 'zod';
import { fsToolError } from '../errors.js';
import { ToolError } from '../tool.js';
import { realWorkspaceRoot, requestedWorkspacePath, resolveWorkspacePath, toWorkspaceRelative } from '../workspace.js';

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

export interface ExistingFile {
  /** Real absolute path. */
  absolute: string;
  /** Workspace-relative path of the real file, for outputs and summaries. */
  relative: string;
  stats: Stats;
}

/**
 * Resolve a requested path to an existing regular file inside the workspace. Directories, FIFOs and devices are
 * refused up front: reading a FIFO would block the call until something writes to it.
 */
export async function resolveExistingFile(root: string, requested: string): Promise<ExistingFile> {
  const realRoot = await realWorkspaceRoot(root);
  // The configured root, not the real one: an absolute request may be written against either.
  const absolute = await resolveWorkspacePath(root, requested, { mustExist: true });
  const relative = toWorkspaceRelative(realRoot, absolute);
  let stats: Stats;
  try {
    stats = await stat(absolute);
  } catch (error) {
    throw fsToolError(error, relative);
  }
  if (stats.isDirectory()) {
    throw new ToolError('is_directory', `${relative} is a directory; use glob to list files.`, {
      details: { path: relative },
    });
  }
  if (!stats.isFile()) {
    throw new ToolError('not_a_file', `${relative} is not a regular file.`, { details: { path: relative } });
  }
  return { absolute, relative, stats };
}

/** A NUL byte means binary: text encodings the tools handle (UTF-8, ASCII) never contain one. */
export function looksBinary(bytes: Uint8Array): boolean {
  return bytes.includes(0);
}

/** Check the head of a file for binary content without reading the whole file. */
export async function sniffBinary(absolute: string, relative: string): Promise<boolean> {
  try {
    const handle = await open(absolute, 'r');
    try {
      const buffer = Buffer.alloc(BINARY_SNIFF_BYTES);
      const { bytesRead } = await handle.read(buffer, 0, BINARY_SNIFF_BYTES, 0);
      return looksBinary(buffer.subarray(0, bytesRead));
    } finally {
      await handle.close();
    }
  } catch (error) {
    throw fsToolError(error, relative);
  }
}

/** Read a whole file as UTF-8 text; a NUL byte anywhere is `binary_file`. */
export async function readTextFile(file: ExistingFile): Promise<string> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file.absolute);
  } catch (error) {
    throw fsToolError(error, file.relative);
  }
  if (looksBinary(bytes)) throw binaryFileError(file.relative);
  return bytes.toString('utf8');
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
