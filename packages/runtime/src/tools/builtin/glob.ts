import { stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ToolError } from '../../kernel/errors.js';
import { globSubject, translateGlob } from '../../kernel/match/glob-pattern.js';
import { fsToolError, throwIfAborted } from '../errors.js';
import { PatternMatcher } from '../match-worker.js';
import { defineTool } from '../tool.js';
import { realWorkspaceRoot, requestedWorkspacePath, resolveWorkspacePath, toWorkspaceRelative } from '../workspace.js';
import { READ_ONLY_FILE_TOOL } from './files.js';
import { plural } from './format.js';
import { batches, newWalkStats, walkFiles, walkPolicyFor } from './walk.js';

export const GLOB_MAX_RESULTS = 1000;

const GlobInputSchema = z.strictObject({
  pattern: z
    .string()
    .min(1)
    .describe(
      'Glob pattern matched against file paths relative to `path`, e.g. "**/*.ts" or "src/**/index.{js,ts}". ' +
        'Dot files, .git and node_modules are included only when the pattern names them. Supports *, **, ?, ' +
        '[abc], {a,b}, @(a|b), ?(a), *(a), +(a) and a leading ! to invert; not !(a). At most 1000 characters.',
    ),
  path: z
    .string()
    .min(1)
    .optional()
    .describe('Directory to search, relative to the workspace root (default: the whole workspace).'),
});
export type GlobInput = z.infer<typeof GlobInputSchema>;

export const globTool = defineTool<GlobInput>({
  name: 'glob',
  description:
    'Find files in the workspace by glob pattern. Returns matching file paths (relative to the workspace root), ' +
    `one per line, sorted; at most ${GLOB_MAX_RESULTS}. Use grep to search file contents.`,
  input: GlobInputSchema,
  ...READ_ONLY_FILE_TOOL,
  capabilities: [...READ_ONLY_FILE_TOOL.capabilities, 'search'],
  paths: (input, workspaceRoot) => [requestedWorkspacePath(input.path ?? '.', workspaceRoot)],
  async execute(input, context) {
    throwIfAborted(context.signal);
    checkRelativePattern(input.pattern);
    const program = translateGlob(input.pattern);
    const root = await realWorkspaceRoot(context.workspaceRoot);
    const base = await resolveWorkspacePath(context.workspaceRoot, input.path ?? '.', { mustExist: true });
    const baseRelative = toWorkspaceRelative(root, base);
    await requireDirectory(base, baseRelative);

    const stats = newWalkStats();
    const walk = walkFiles({
      root,
      base,
      policy: walkPolicyFor(input.pattern),
      signal: context.signal,
      stats,
      mayAccess: context.mayAccess,
    });
    const files: string[] = [];
    let truncated = false;
    const matcher = await PatternMatcher.start(
      [{ source: program.source, what: 'glob pattern', pattern: input.pattern }],
      context.signal,
    );
    try {
      search: for await (const batch of batches(walk)) {
        const matched = await matcher.fullMatches(
          0,
          batch.map((file) => globSubject(file.fromBase, false)),
        );
        for (const [index, file] of batch.entries()) {
          if (matched[index] === program.negated) continue;
          if (files.length === GLOB_MAX_RESULTS) {
            truncated = true;
            break search;
          }
          files.push(file.relative);
        }
      }
    } finally {
      matcher.close();
    }
    files.sort();

    const where = baseRelative === '.' ? '' : ` under ${baseRelative}`;
    const summary =
      files.length === 0
        ? `No files match "${input.pattern}"${where}`
        : `Found ${plural(files.length, 'file')} matching "${input.pattern}"${where}${truncated ? ` (truncated at ${GLOB_MAX_RESULTS})` : ''}`;
    return {
      text: files.join('\n'),
      summary,
      structured: {
        pattern: input.pattern,
        path: baseRelative,
        count: files.length,
        truncated,
        files,
        skippedSymlinks: stats.skippedSymlinks,
        withheld: stats.withheld,
      },
    };
  },
});

/**
 * The walk only produces paths below the search directory, so an absolute or `..` pattern could never match;
 * saying so beats an empty result the model would misread as "no such files".
 */
function checkRelativePattern(pattern: string): void {
  if (path.posix.isAbsolute(pattern) || pattern.split('/').includes('..')) {
    throw new ToolError(
      'invalid_pattern',
      `The glob pattern "${pattern}" must be relative to the search directory; set \`path\` to choose the directory.`,
      { details: { pattern } },
    );
  }
}

async function requireDirectory(absolute: string, relative: string): Promise<void> {
  let isDirectory: boolean;
  try {
    isDirectory = (await stat(absolute)).isDirectory();
  } catch (error) {
    throw fsToolError(error, relative);
  }
  if (!isDirectory) {
    throw new ToolError('not_a_directory', `${relative} is a file, not a directory; use read to open it.`, {
      details: { path: relative },
    });
  }
}
