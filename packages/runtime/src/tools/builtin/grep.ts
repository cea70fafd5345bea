import { z } from 'zod';
import { ToolError } from '../../kernel/errors.js';
import { type GlobProgram, globSubject, translateGlob } from '../../kernel/match/glob-pattern.js';
import { checkPatternLength } from '../../kernel/match/pattern.js';
import { fsToolError, isMissing, throwIfAborted } from '../errors.js';
import { type MatchProgram, PatternMatcher } from '../match-worker.js';
import { defineTool } from '../tool.js';
import { openWorkspaceFile, realWorkspaceRoot } from '../workspace.js';
import { looksBinary, READ_ONLY_FILE_TOOL } from './files.js';
import { plural } from './format.js';
import { batches, newWalkStats, type WalkedFile, walkFiles, walkPolicyFor } from './walk.js';

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
    .describe(
      'Regular expression (RE2 syntax: JavaScript without lookaround or backreferences) searched for in each line, e.g. "function\\s+\\w+" or "TODO".',
    ),
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
    'Search the contents of text files in the workspace with a regular expression (RE2 syntax). Returns one ' +
    '`path:line: text` line per matching line. Binary files and files over 1 MiB are skipped; dot files, .git and ' +
    'node_modules are searched only when the glob names them.',
  input: GrepInputSchema,
  ...READ_ONLY_FILE_TOOL,
  capabilities: [...READ_ONLY_FILE_TOOL.capabilities, 'search'],
  // Without a directory input the whole workspace is read; a path rule for "." decides.
  paths: () => ['.'],
  async execute(input, context) {
    throwIfAborted(context.signal);
    checkPatternLength(input.pattern, 'regular expression');
    const glob = input.glob === undefined ? undefined : globProgram(input.glob);
    const root = await realWorkspaceRoot(context.workspaceRoot);
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
    const skipped = { binary: 0, tooLarge: 0, refused: 0 };
    let filesSearched = 0;
    let truncated = false;
    // Program 0 is the regular expression, program 1 the glob (see match-worker.ts for why both run in a worker).
    const programs: MatchProgram[] = [
      {
        source: input.pattern,
        caseInsensitive: input.caseInsensitive,
        what: 'regular expression',
        pattern: input.pattern,
      },
      ...(glob ? [{ source: glob.source, what: 'glob pattern', pattern: input.glob ?? '' }] : []),
    ];
    const matcher = await PatternMatcher.start(programs, context.signal);
    try {
      search: for await (const batch of batches(walk)) {
        const selected = glob ? await globFilter(matcher, glob, batch) : batch;
        for (const file of selected) {
          throwIfAborted(context.signal);
          const text = await readSearchable(root, file, skipped);
          if (text === undefined) continue;
          filesSearched += 1;
          // One more than still fits, so a further match shows that the output is truncated.
          const hits = await matcher.matchingLines(0, text, input.maxMatches - lines.length + 1, GREP_MAX_LINE_CHARS);
          for (const hit of hits) {
            if (lines.length === input.maxMatches) {
              truncated = true;
              break search;
            }
            if (matchedFiles.at(-1) !== file.relative) matchedFiles.push(file.relative);
            const cut =
              hit.length > GREP_MAX_LINE_CHARS ? `… [${hit.length - GREP_MAX_LINE_CHARS} more characters]` : '';
            lines.push(`${file.relative}:${hit.line + 1}: ${hit.text}${cut}`);
          }
        }
      }
    } finally {
      matcher.close();
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
        skippedRefused: skipped.refused,
        skippedSymlinks: walkStats.skippedSymlinks,
        truncated,
      },
    };
  },
});

/**
 * A glob without "/" matches the file name at any depth, as in grep's --include (picomatch's `basename` rule); one
 * with a slash matches the workspace-relative path.
 */
function globProgram(glob: string): GlobProgram {
  return translateGlob(glob, { basename: !glob.includes('/') });
}

async function globFilter(matcher: PatternMatcher, glob: GlobProgram, batch: WalkedFile[]): Promise<WalkedFile[]> {
  const matched = await matcher.fullMatches(
    1,
    batch.map((file) => globSubject(file.relative, glob.basename)),
  );
  return batch.filter((_, index) => matched[index] !== glob.negated);
}

/**
 * The file's text, or undefined (and counted) when it is too large, binary, or refused by confinement. It is read
 * through the descriptor `openWorkspaceFile` verified (inside the workspace, one link, nothing swapped on its path),
 * like `read`: a hard link to a file outside, or a symlink swapped in after the walk, is skipped, never searched.
 */
async function readSearchable(
  root: string,
  file: WalkedFile,
  skipped: { binary: number; tooLarge: number; refused: number },
): Promise<string | undefined> {
  let opened: Awaited<ReturnType<typeof openWorkspaceFile>> | undefined;
  try {
    opened = await openWorkspaceFile(root, file.relative, 'read');
    if (opened.stats.size > GREP_MAX_FILE_BYTES) {
      skipped.tooLarge += 1;
      return undefined;
    }
    const bytes = await opened.handle.readFile();
    if (looksBinary(bytes)) {
      skipped.binary += 1;
      return undefined;
    }
    return bytes.toString('utf8');
  } catch (error) {
    if (error instanceof ToolError && error.code === 'path_outside_workspace') {
      skipped.refused += 1;
      return undefined;
    }
    // Deleted between the directory listing and the read: nothing left to search.
    if (isMissing(error) || (error instanceof ToolError && error.code === 'not_found')) return undefined;
    throw fsToolError(error, file.relative);
  } finally {
    await opened?.handle.close().catch(() => undefined);
  }
}

function summarize(pattern: string, matches: number, files: number, searched: number, truncated: boolean): string {
  if (matches === 0) return `No matches for /${pattern}/ in ${plural(searched, 'file')}`;
  const stopped = truncated ? ` (stopped at ${matches}; narrow the pattern or glob)` : '';
  return `${plural(matches, 'match', 'matches')} in ${plural(files, 'file')} for /${pattern}/${stopped}`;
}
