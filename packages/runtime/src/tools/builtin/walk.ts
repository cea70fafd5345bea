import type { Dirent } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { fsToolError, throwIfAborted } from '../errors.js';
import { isInside } from '../workspace.js';

/**
 * The directory walk shared by `glob` and `grep`. It decides what is *visited*; the callers decide what *matches*.
 *
 * - `.git` and `node_modules` are skipped at any depth unless the pattern names them: they are huge and almost never
 *   what the model is looking for.
 * - Dot entries are skipped unless the pattern mentions a dot segment; the glob matcher (which matches dot files
 *   only by a literal leading dot) would not match them anyway, so pruning them only saves work.
 * - Symlinks are never descended into (no cycles, no duplicates). A symlink to a file is listed only if its real
 *   path is inside the workspace; one that leaves the workspace is counted and ignored.
 * - Entries are visited in name order, so output and truncation are deterministic.
 */

const DEFAULT_SKIPPED_DIRS = ['.git', 'node_modules'] as const;

export interface WalkPolicy {
  /** Visit dot files and dot directories. */
  includeDot: boolean;
  /** Default-skipped directory names the pattern asks for explicitly. */
  enter: ReadonlySet<string>;
}

/** What a glob pattern asks the walk to visit. `undefined` (grep without a glob) visits the default set. */
export function walkPolicyFor(pattern: string | undefined): WalkPolicy {
  const text = pattern ?? '';
  return {
    includeDot: /(^|[/{,])\./.test(text),
    enter: new Set(DEFAULT_SKIPPED_DIRS.filter((name) => namesSegment(text, name))),
  };
}

export interface WalkedFile {
  /** Real absolute path to read. */
  absolute: string;
  /** Workspace-relative path as listed (a symlink is listed under its own name), POSIX separators. */
  relative: string;
  /** Path relative to the walk's base directory, what glob patterns are matched against. */
  fromBase: string;
}

export interface WalkStats {
  directories: number;
  /** Symlinks skipped because their real path leaves the workspace (or does not exist). */
  skippedSymlinks: number;
  /** Files left out because a permission rule denies (or would ask about) their path. */
  withheld: number;
}

export interface WalkOptions {
  /** Real workspace root. */
  root: string;
  /** Real absolute directory to walk, inside the root. */
  base: string;
  policy: WalkPolicy;
  signal: AbortSignal;
  /** Filled in while walking, so callers that stop early still see the counts. */
  stats: WalkStats;
  /** The permission policy's path check (see ToolContext.mayAccess): files it refuses are never listed or read. */
  mayAccess?: ((relative: string) => boolean) | undefined;
}

export function newWalkStats(): WalkStats {
  return { directories: 0, skippedSymlinks: 0, withheld: 0 };
}

/** Yield every regular file under `base` (see the rules above). Checks the abort signal before each directory. */
export async function* walkFiles(options: WalkOptions): AsyncGenerator<WalkedFile> {
  const baseRelative = path.relative(options.root, options.base).split(path.sep).join('/');
  yield* walkDirectory(options, options.base, baseRelative, '');
}

async function* walkDirectory(
  options: WalkOptions,
  directory: string,
  relative: string,
  fromBase: string,
): AsyncGenerator<WalkedFile> {
  throwIfAborted(options.signal);
  options.stats.directories += 1;
  const entries = await readEntries(directory, relative);
  for (const entry of entries) {
    if (!options.policy.includeDot && entry.name.startsWith('.')) continue;
    const childAbsolute = path.join(directory, entry.name);
    const childRelative = relative === '' ? entry.name : `${relative}/${entry.name}`;
    const childFromBase = fromBase === '' ? entry.name : `${fromBase}/${entry.name}`;
    if (entry.isDirectory()) {
      if (isDefaultSkipped(entry.name) && !options.policy.enter.has(entry.name)) continue;
      yield* walkDirectory(options, childAbsolute, childRelative, childFromBase);
    } else if (entry.isFile()) {
      if (withheld(options, childRelative)) continue;
      yield { absolute: childAbsolute, relative: childRelative, fromBase: childFromBase };
    } else if (entry.isSymbolicLink()) {
      const target = await symlinkedFile(options.root, childAbsolute);
      if (target === undefined) options.stats.skippedSymlinks += 1;
      else if (target !== 'directory') {
        // Checked under both names: a link must not be a way around a rule on the file it points to.
        const real = path.relative(options.root, target).split(path.sep).join('/');
        if (withheld(options, childRelative) || withheld(options, real)) continue;
        yield { absolute: target, relative: childRelative, fromBase: childFromBase };
      }
    }
  }
}

async function readEntries(directory: string, relative: string): Promise<Dirent[]> {
  try {
    const entries = await readdir(directory, { withFileTypes: true });
    return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  } catch (error) {
    throw fsToolError(error, relative === '' ? '.' : relative);
  }
}

/**
 * The real path of a symlinked regular file inside the workspace; `'directory'` for a symlinked directory (listed
 * nowhere, never entered); undefined for a link that escapes, dangles, or points at something else.
 */
async function symlinkedFile(root: string, link: string): Promise<string | 'directory' | undefined> {
  try {
    const target = await realpath(link);
    if (!isInside(root, target)) return undefined;
    const stats = await stat(target);
    if (stats.isDirectory()) return 'directory';
    return stats.isFile() ? target : undefined;
  } catch {
    // A dangling or looping link has nothing to list.
    return undefined;
  }
}

function withheld(options: WalkOptions, relative: string): boolean {
  if (!options.mayAccess || options.mayAccess(relative)) return false;
  options.stats.withheld += 1;
  return true;
}

function isDefaultSkipped(name: string): boolean {
  return (DEFAULT_SKIPPED_DIRS as readonly string[]).includes(name);
}

/** Does the pattern name `segment` as a whole path segment (or brace alternative)? */
function namesSegment(pattern: string, segment: string): boolean {
  const escaped = segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[/{,])${escaped}($|[/},])`).test(pattern);
}

/** Paths go to the matching thread in batches: one message per file would cost more than the matching. */
export async function* batches(walk: AsyncIterable<WalkedFile>, size = 256): AsyncGenerator<WalkedFile[]> {
  let batch: WalkedFile[] = [];
  for await (const file of walk) {
    batch.push(file);
    if (batch.length === size) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}
