import { readFile, stat } from 'node:fs/promises';
import picomatch from 'picomatch';
import { z } from 'zod';
import { fsToolError, isMissing, throwIfAborted } from '../errors.js';
import { compileLinePattern } from '../pattern.js';
import { defineTool } from '../tool.js';
import { realWorkspaceRoot } from '../workspace.js';
import { looksBinary, READ_ONLY_FILE_TOOL } from './files.js';
import { clip, plural } from './format.js';
import { newWalkStats, type WalkedFile, walkFiles, walkPolicyFor } from './walk.js';

export const GREP_DEFAULT_MATCHES = 200;
export const GREP_MAX_MATCHES = 2000;
/** Larger files are skipped: they are data or generated, and reading them would dominate the call. */
export const GREP_MAX_FILE_BYTES = 1024 * 1024;
/** A matching line is shown up to this many characters (minified code would otherwise flood the output). */
export const GREP_MAX_LINE_CHARS = 500;

const GrepInputSchema = z.strictObject({
  pattern: z
    .string()
    .min(1)
    .describe('JavaScript regular expression searched for in each line, e.g. "function\\s+\\w+" or "TODO".'),
  glob: z
    .string()
    .min(1)
    .optional()
    .describe(
      'Only search files whose workspace-relative path matches this glob, e.g. "src/**/*.ts". A glob without "/" ' +
        'matches file names at any depth ("*.md").',
    ),
  caseInsensitive: z.boolean().default(false).describe('Match letters regardless of case.'),
  maxMatches: z
    .number()
    .int()
    .min(1)
    .max(GREP_MAX_MATCHES)
    .default(GREP_DEFAULT_MATCHES)
    .describe(`Stop after this many matching lines (default ${GREP_DEFAULT_MATCHES}).`),
});
export type GrepInput = z.infer<typeof GrepInputSchema>;

export const grepTool = defineTool<GrepInput>({
  name: 'grep',
  description:
    'Search the contents of text files in the workspace with a JavaScript regular expression. Returns one ' +
    '`path:line: text` line per matching line. Binary files and files over 1 MiB are skipped; dot files, .git and ' +
    'node_modules are searched only when the glob names them.',
  input: GrepInputSchema,
  ...READ_ONLY_FILE_TOOL,
  capabilities: [...READ_ONLY_FILE_TOOL.capabilities],
  // Without a directory input the whole workspace is read; a path rule for "." decides.
  paths: () => ['.'],
  async execute(input, context) {
    throwIfAborted(context.signal);
    const regex = compileLinePattern(input.pattern, { caseInsensitive: input.caseInsensitive });
    const root = await realWorkspaceRoot(context.workspaceRoot);
    const inGlob = input.glob === undefined ? () => true : globFilter(input.glob);
    const walkStats = newWalkStats();
    const walk = walkFiles({
      root,
      base: root,
      policy: walkPolicyFor(input.glob),
      signal: context.signal,
      stats: walkStats,
      mayAccess: context.mayAccess,
    });

    const lines: string[] = [];
    const matchedFiles: string[] = [];
    const skipped = { binary: 0, tooLarge: 0 };
    let filesSearched = 0;
    let truncated = false;
    search: for await (const file of walk) {
      if (!inGlob(file.relative)) continue;
      throwIfAborted(context.signal);
      const text = await readSearchable(file, skipped);
      if (text === undefined) continue;
      filesSearched += 1;
      let fileMatched = false;
      const fileLines = text.split(/\r?\n/);
      for (let index = 0; index < fileLines.length; index += 1) {
        const line = fileLines[index] ?? '';
        if (!regex.test(line)) continue;
        if (lines.length === input.maxMatches) {
          truncated = true;
          break search;
        }
        if (!fileMatched) matchedFiles.push(file.relative);
        fileMatched = true;
        lines.push(`${file.relative}:${index + 1}: ${clip(line, GREP_MAX_LINE_CHARS)}`);
      }
    }

    return {
      text: lines.join('\n'),
      summary: summarize(input.pattern, lines.length, matchedFiles.length, filesSearched, truncated),
      structured: {
        pattern: input.pattern,
        glob: input.glob ?? null,
        matchCount: lines.length,
        fileCount: matchedFiles.length,
        files: matchedFiles,
        filesSearched,
        skippedBinary: skipped.binary,
        skippedLarge: skipped.tooLarge,
        skippedSymlinks: walkStats.skippedSymlinks,
        truncated,
      },
    };
  },
});

/**
 * A glob without "/" matches the file name at any depth, as in grep's --include. picomatch's `basename` option is
 * applied only then: with it, a pattern that has a slash would be matched against the bare file name and fail.
 */
function globFilter(glob: string): (relative: string) => boolean {
  return picomatch(glob, { dot: false, basename: !glob.includes('/') });
}

/** The file's text, or undefined (and counted) when it is too large or binary. */
async function readSearchable(
  file: WalkedFile,
  skipped: { binary: number; tooLarge: number },
): Promise<string | undefined> {
  try {
    if ((await stat(file.absolute)).size > GREP_MAX_FILE_BYTES) {
      skipped.tooLarge += 1;
      return undefined;
    }
    const bytes = await readFile(file.absolute);
    if (looksBinary(bytes)) {
      skipped.binary += 1;
      return undefined;
    }
    return bytes.toString('utf8');
  } catch (error) {
    // Deleted between the directory listing and the read: nothing left to search.
    if (isMissing(error)) return undefined;
    throw fsToolError(error, file.relative);
  }
}

function summarize(pattern: string, matches: number, files: number, searched: number, truncated: boolean): string {
  if (matches === 0) return `No matches for /${pattern}/ in ${plural(searched, 'file')}`;
  const stopped = truncated ? ` (stopped at ${matches}; narrow the pattern or glob)` : '';
  return `${plural(matches, 'match', 'matches')} in ${plural(files, 'file')} for /${pattern}/${stopped}`;
}
