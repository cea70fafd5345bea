import { mkdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { fsToolError, isMissing, throwIfAborted } from '../errors.js';
import { defineTool, ToolError } from '../tool.js';
import { realWorkspaceRoot, resolveWorkspacePath, toWorkspaceRelative } from '../workspace.js';
import { filePathInput, filePathOf } from './files.js';
import { plural } from './format.js';

const WriteInputSchema = z.strictObject({
  filePath: filePathInput,
  content: z.string().describe('The complete content of the file (UTF-8 text). Replaces any existing content.'),
});
export type WriteInput = z.infer<typeof WriteInputSchema>;

/**
 * Create or overwrite a file. Tool flags are static, so `isDestructive` is false even though an overwrite replaces
 * content: whether overwriting a given path needs approval is the permission policy's call, made on `paths(input)`.
 */
export const writeTool = defineTool<WriteInput>({
  name: 'write',
  description:
    'Write a text file in the workspace: creates it (and any missing parent directories) or replaces its whole ' +
    'content. To change part of an existing file, prefer edit.',
  input: WriteInputSchema,
  isReadOnly: false,
  isConcurrencySafe: false,
  isDestructive: false,
  // Writing the same content twice leaves the same file: safe to re-run after a crash.
  isIdempotent: true,
  // A write cut off halfway leaves a truncated file, worse than either the old or the new content.
  interruptBehavior: 'block',
  capabilities: ['filesystem', 'write'],
  paths: filePathOf,
  async execute(input, context) {
    throwIfAborted(context.signal);
    const root = await realWorkspaceRoot(context.workspaceRoot);
    const absolute = await resolveWorkspacePath(context.workspaceRoot, input.filePath, { forWrite: true });
    const relative = toWorkspaceRelative(root, absolute);
    const existed = await existsAsFile(absolute, relative);
    // The last point where stopping leaves nothing half done.
    throwIfAborted(context.signal);
    try {
      if (!existed) await mkdir(path.dirname(absolute), { recursive: true });
      await writeFile(absolute, input.content, 'utf8');
    } catch (error) {
      throw fsToolError(error, relative);
    }
    const bytes = Buffer.byteLength(input.content, 'utf8');
    const summary = `${existed ? 'Overwrote' : 'Created'} ${relative} (${plural(bytes, 'byte')})`;
    return {
      text: summary,
      summary,
      structured: { path: relative, bytes, created: !existed, action: existed ? 'overwrote' : 'created' },
    };
  },
});

/** True for an existing regular file, false for nothing there; anything else cannot be written as a file. */
async function existsAsFile(absolute: string, relative: string): Promise<boolean> {
  try {
    const stats = await stat(absolute);
    if (stats.isFile()) return true;
    if (stats.isDirectory()) {
      throw new ToolError('is_directory', `${relative} is a directory.`, { details: { path: relative } });
    }
    throw new ToolError('not_a_file', `${relative} is not a regular file.`, { details: { path: relative } });
  } catch (error) {
    if (isMissing(error)) return false;
    throw fsToolError(error, relative);
  }
}
