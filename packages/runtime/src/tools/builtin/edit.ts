import { z } from 'zod';
import { ToolError } from '../../kernel/errors.js';
import { fsToolError, throwIfAborted } from '../errors.js';
import { defineTool, type ToolOutput } from '../tool.js';
import {
  type ExistingFile,
  filePathInput,
  filePathOf,
  fileVersion,
  openExistingFile,
  readFileBytes,
  replaceContent,
  textOf,
} from './files.js';
import { plural } from './format.js';

const EditInputSchema = z.strictObject({
  filePath: filePathInput,
  oldString: z
    .string()
    .min(1)
    .describe(
      'The exact text to replace, including whitespace and indentation, copied from the file (without the line ' +
        'numbers read shows). It must occur exactly once unless replaceAll is true.',
    ),
  newString: z.string().describe('The text to put in its place (empty to delete oldString).'),
  replaceAll: z.boolean().default(false).describe('Replace every occurrence of oldString instead of exactly one.'),
});
export type EditInput = z.infer<typeof EditInputSchema>;

export const editTool = defineTool<EditInput>({
  name: 'edit',
  description:
    'Edit a text file in the workspace by exact string replacement: oldString must occur exactly once (or set ' +
    'replaceAll). Read the file first and copy oldString exactly; include surrounding lines to make it unique.',
  input: EditInputSchema,
  isReadOnly: false,
  isConcurrencySafe: false,
  // Static flag; approval for changing a given path is the permission policy's call, made on `paths(input)`.
  isDestructive: false,
  // After a successful run, oldString is gone (no_match) or, if newString contains it, would be replaced again.
  isIdempotent: false,
  interruptBehavior: 'block',
  capabilities: ['filesystem', 'write', 'edit'],
  paths: filePathOf,
  confinedToWorkspace: true,
  async execute(input, context) {
    throwIfAborted(context.signal);
    if (input.oldString === input.newString) {
      throw new ToolError('no_change', 'oldString and newString are identical; the edit would change nothing.', {
        details: { path: input.filePath },
      });
    }
    const file = await openExistingFile(context.workspaceRoot, input.filePath, 'update');
    try {
      return await applyEdit(file, input, context.signal);
    } finally {
      await file.handle.close();
    }
  },
});

async function applyEdit(file: ExistingFile, input: EditInput, signal: AbortSignal): Promise<ToolOutput> {
  const original = await readFileBytes(file);
  const content = textOf(original, file.relative);
  const positions = occurrences(content, input.oldString);
  const first = positions[0];
  if (first === undefined) {
    throw new ToolError(
      'no_match',
      `oldString was not found in ${file.relative}. Read the file again and copy the text exactly, including ` +
        'whitespace and indentation.',
      { details: { path: file.relative } },
    );
  }
  if (positions.length > 1 && !input.replaceAll) {
    throw new ToolError(
      'ambiguous_match',
      `oldString occurs ${positions.length} times in ${file.relative}. Include more surrounding text to make it ` +
        'unique, or set replaceAll to replace every occurrence.',
      { details: { path: file.relative, count: positions.length } },
    );
  }
  // Spliced by position, not String.replace: `$&` and `$1` in newString must stay literal text.
  const updated = input.replaceAll
    ? content.split(input.oldString).join(input.newString)
    : content.slice(0, first) + input.newString + content.slice(first + input.oldString.length);
  throwIfAborted(signal);
  const bytes = Buffer.from(updated, 'utf8');
  try {
    // Through the descriptor the content was read from: the file replaced is the file that was read.
    await replaceContent(file.handle, bytes);
  } catch (error) {
    throw fsToolError(error, file.relative);
  }
  const firstLine = lineOf(content, first);
  const summary = `Edited ${file.relative}: ${plural(positions.length, 'replacement')} (first at line ${firstLine})`;
  return {
    text: summary,
    summary,
    structured: {
      path: file.relative,
      replacements: positions.length,
      firstLine,
      bytes: bytes.byteLength,
    },
    // The exact bytes read (not the decoded text): what a rollback writes back.
    fileVersion: fileVersion(file.relative, original, bytes),
  };
}

/** Start offsets of the non-overlapping occurrences of `needle`, the same ones `split` replaces. */
function occurrences(haystack: string, needle: string): number[] {
  const positions: number[] = [];
  for (let at = haystack.indexOf(needle); at !== -1; at = haystack.indexOf(needle, at + needle.length)) {
    positions.push(at);
  }
  return positions;
}

/** 1-based line number of a character offset. */
function lineOf(text: string, offset: number): number {
  let line = 1;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) line += 1;
  return line;
}
