import { unlink } from 'node:fs/promises';
import type { WorkspaceFiles } from '../control-plane/command-context.js';
import { sha256Hex } from '../kernel/digest.js';
import { ToolError } from '../kernel/errors.js';
import { readFileBytes, replaceContent } from '../tools/builtin/files.js';
import { fsToolError, isMissing } from '../tools/errors.js';
import { openWorkspaceFile, type WorkspaceFile } from '../tools/workspace.js';

/**
 * The workspace files port over the file tools' opens: confined to the workspace, no symlink followed out of it, no
 * hard link or special file touched — a rollback writes back exactly where `write` and `edit` wrote.
 */

/** Nothing at the path: an errno, or the file tools' own `not_found`. */
const absent = (error: unknown) => isMissing(error) || (error instanceof ToolError && error.code === 'not_found');

/** The file opened (read-only, or read-write to restore it), or undefined when there is none. */
async function opened(root: string, path: string, mode: 'read' | 'update'): Promise<WorkspaceFile | undefined> {
  try {
    return await openWorkspaceFile(root, path, mode);
  } catch (error) {
    if (absent(error)) return undefined;
    throw error;
  }
}

export const workspaceFiles: WorkspaceFiles = {
  async digest(root, path) {
    const file = await opened(root, path, 'read');
    if (!file) return null;
    try {
      const bytes = await readFileBytes(file);
      return { sha256: sha256Hex(bytes), path: file.relative, size: bytes.length };
    } finally {
      await file.handle.close();
    }
  },
  async restore(root, path, bytes, expected) {
    const file = await opened(root, path, 'update');
    if (!file) return false;
    try {
      // The content it replaces is checked through the descriptor it writes through: nothing slips in between.
      if (file.relative !== path || sha256Hex(await readFileBytes(file)) !== expected) return false;
      if (bytes !== undefined) {
        await replaceContent(file.handle, bytes);
        return true;
      }
      // A file OAR created: removed by the real path the verified open resolved.
      await unlink(file.absolute).catch((error: unknown) => {
        if (!isMissing(error)) throw error;
      });
      return true;
    } catch (error) {
      throw fsToolError(error, path);
    } finally {
      await file.handle.close();
    }
  },
};
