import { z } from 'zod';
import { fsToolError, throwIfAborted } from '../errors.js';
import { defineTool } from '../tool.js';
import { openWorkspaceFile } from '../workspace.js';
import { type BeforeImage, beforeImageOf, filePathInput, filePathOf, fileVersion, replaceContent } from './files.js';
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
  confinedToWorkspace: true,
  async execute(input, context) {
    // The last point where stopping leaves nothing half done: the open below may create the file.
    throwIfAborted(context.signal);
    // Opened without truncating and verified (inside the workspace, a regular file, one link) before any byte is
    // written; only then is the old content replaced, through the same descriptor.
    const file = await openWorkspaceFile(context.workspaceRoot, input.filePath, 'write');
    const content = Buffer.from(input.content, 'utf8');
    let before: BeforeImage | undefined;
    let bytes: number;
    try {
      // The content it replaces, read through the same descriptor: kept as the file's version (rollback, review).
      before = file.created ? undefined : await beforeImageOf(file);
      bytes = await replaceContent(file.handle, content);
    } catch (error) {
      throw fsToolError(error, file.relative);
    } finally {
      await file.handle.close();
    }
    const existed = !file.created;
    const summary = `${existed ? 'Overwrote' : 'Created'} ${file.relative} (${plural(bytes, 'byte')})`;
    return {
      text: summary,
      summary,
      structured: { path: file.relative, bytes, created: !existed, action: existed ? 'overwrote' : 'created' },
      fileVersion: fileVersion(file.relative, before, content),
    };
  },
});
