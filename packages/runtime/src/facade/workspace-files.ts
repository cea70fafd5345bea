import { createHash } from 'node:crypto';
import { unlink } from 'node:fs/promises';
import type { WorkspaceFiles } from '../control-plane/command-context.js';
import { ToolError } from '../kernel/errors.js';
import { readFileBytes, replaceContent } from '../tools/builtin/files.js';
import { fsToolError, isMissing } from '../tools/errors.js';
import { openWorkspaceFile } from '../tools/workspace.js';

/**
 * The workspace files port over the file tools' opens: confined to the workspace, no symlink followed, no hard link
 * or special file touched — a rollback writes back exactly where `write` and `edit` wrote.
 */
/** Nothing at the path: an errno, or the file tools' own `not_found`. */
const absent = (error: unknown) => isMissing(error) || (error instanceof ToolError && error.code === 'not_found');

export const workspaceFiles: WorkspaceFiles = {
  async digest(root, path) {
    let file: Awaited<ReturnType<typeof openWorkspaceFile>>;
    try {
      file = await openWorkspaceFile(root, path, 'read');
    } catch (error) {
      if (absent(error)) return null;
      throw error;
    }
    try {
      return createHash('sha256')
        .update(await readFileBytes(file))
        .digest('hex');
    } finally {
      await file.handle.close();
    }
  },
  async restore(root, path, bytes) {
    if (bytes === undefined) {
      let file: Awaited<ReturnType<typeof openWorkspaceFile>>;
      try {
        file = await openWorkspaceFile(root, path, 'read');
      } catch (error) {
        if (absent(error)) return;
        throw error;
      }
      // Verified a regular file inside the workspace, then removed by the real path the open resolved.
      await file.handle.close();
      await unlink(file.absolute).catch((error: unknown) => {
        if (!isMissing(error)) throw fsToolError(error, path);
      });
      return;
    }
    const file = await openWorkspaceFile(root, path, 'write');
    try {
      await replaceContent(file.handle, bytes);
    } catch (error) {
      throw fsToolError(error, path);
    } finally {
      await file.handle.close();
    }
  },
};
