import { lstat, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { fsToolError, isMissing } from './errors.js';
import { ToolError } from './tool.js';

/**
 * Workspace confinement: every path a file tool touches must resolve, after following every symlink, to a place
 * inside the workspace root. The check is made on real paths, not on the text of the request, because a symlink
 * (to a file or to any parent directory) can lead outside while the requested text looks harmless.
 *
 * This is a policy check, not a sandbox: a process racing the tool could swap a directory for a symlink between the
 * check and the use. The sandbox is the hard boundary; this keeps honest tools honest and gives the model a clear
 * `path_outside_workspace` error instead of a silent escape.
 */

export interface ResolveOptions {
  /** The path must exist (after following symlinks); otherwise `not_found`. */
  mustExist?: boolean;
  /** The path will be created or overwritten: the workspace root itself is not a valid target. */
  forWrite?: boolean;
}

// Linux's own limit (MAXSYMLINKS is 40); a longer chain is a loop or an attack.
const MAX_SYMLINK_HOPS = 40;

/**
 * Resolve `requested` (workspace-relative, or absolute inside the workspace) to an absolute real path inside the
 * workspace root. A path that does not exist yet resolves through its nearest existing ancestor, whose real path
 * must also be inside — so creating a file under a symlinked directory that points outside is denied, and so is
 * writing through a dangling symlink whose target is outside.
 */
export async function resolveWorkspacePath(
  root: string,
  requested: string,
  options: ResolveOptions = {},
): Promise<string> {
  if (requested.includes('\0')) {
    throw new ToolError('invalid_path', 'The path contains a NUL byte.', { details: { requested } });
  }
  const realRoot = await realWorkspaceRoot(root);
  const lexical = lexicalTarget(root, realRoot, requested);
  if (!isInside(realRoot, lexical)) throw outsideError(requested, lexical);

  const target = await realpathLenient(lexical, requested);
  if (!isInside(realRoot, target.path)) throw outsideError(requested, target.path);
  if (options.mustExist && !target.exists) {
    throw new ToolError('not_found', `${requested} does not exist.`, { details: { path: requested } });
  }
  if (options.forWrite && target.path === realRoot) {
    throw new ToolError('is_directory', 'The workspace root is a directory, not a file.', {
      details: { path: requested },
    });
  }
  return target.path;
}

/**
 * The workspace-relative form (POSIX separators, `.` for the root) of an absolute path. Both arguments must be in
 * the same form — real paths as `resolveWorkspacePath` returns them and `ToolContext.workspaceRoot` promises.
 */
export function toWorkspaceRelative(root: string, absolute: string): string {
  if (!isInside(root, absolute)) throw outsideError(absolute, absolute);
  const relative = path.relative(root, absolute);
  return relative === '' ? '.' : relative.split(path.sep).join('/');
}

/**
 * The workspace-relative form of a requested path, computed from its text alone (no I/O), for `paths(input)` and
 * permission rules that run before the call. An escaping request stays `..`-prefixed (or absolute without a root),
 * so workspace path rules never match it; execution denies it regardless.
 */
export function requestedWorkspacePath(requested: string, root?: string): string {
  if (root !== undefined) {
    const base = path.resolve(root);
    const relative = path.relative(base, path.resolve(base, requested));
    return relative === '' ? '.' : relative.split(path.sep).join('/');
  }
  const posix = requested.split(path.sep).join('/');
  const normalized = path.posix.normalize(posix);
  return normalized.length > 1 ? normalized.replace(/\/$/, '') : normalized;
}

/** True if `candidate` is `root` or below it (both absolute, same form). */
export function isInside(root: string, candidate: string): boolean {
  const relative = path.relative(root, candidate);
  return relative === '' || (relative !== '..' && !relative.startsWith(`..${path.sep}`) && !path.isAbsolute(relative));
}

/**
 * The real path of the workspace root. Tools call it once per call and use the result for resolving and for
 * relative output paths, so a root configured through a symlink (/tmp → /private/tmp) still compares equal.
 */
export async function realWorkspaceRoot(root: string): Promise<string> {
  try {
    return await realpath(root);
  } catch (error) {
    throw new ToolError('workspace_unavailable', `The workspace root ${root} is not accessible.`, {
      details: { root, errno: (error as NodeJS.ErrnoException).code },
    });
  }
}

/**
 * The requested path joined to the real root. An absolute request may be written against the root as configured
 * (say /tmp/ws) while the real root differs (/private/tmp/ws); it is rebased so it is judged by where it points.
 */
function lexicalTarget(root: string, realRoot: string, requested: string): string {
  if (!path.isAbsolute(requested)) return path.resolve(realRoot, requested);
  const absolute = path.resolve(requested);
  if (isInside(realRoot, absolute)) return absolute;
  const configuredRoot = path.resolve(root);
  if (isInside(configuredRoot, absolute)) return path.join(realRoot, path.relative(configuredRoot, absolute));
  return absolute;
}

/**
 * `realpath` that also works for paths that do not exist yet: the missing tail is appended to the real path of the
 * nearest existing ancestor, and a dangling symlink on the way is followed to where it would create its target.
 */
async function realpathLenient(
  target: string,
  requested: string,
  hops = 0,
): Promise<{ path: string; exists: boolean }> {
  try {
    return { path: await realpath(target), exists: true };
  } catch (error) {
    if (!isMissing(error)) throw fsToolError(error, requested);
  }
  const parent = path.dirname(target);
  if (parent === target) return { path: target, exists: false };
  const realParent = (await realpathLenient(parent, requested, hops)).path;
  const candidate = path.join(realParent, path.basename(target));
  const link = await readSymlink(candidate, requested);
  if (link === undefined) return { path: candidate, exists: false };
  if (hops >= MAX_SYMLINK_HOPS) {
    throw new ToolError('invalid_path', `${requested} has too many levels of symbolic links.`, {
      details: { requested },
    });
  }
  return realpathLenient(path.resolve(realParent, link), requested, hops + 1);
}

/** The target text of a symlink, or undefined if `candidate` is missing or not a symlink. */
async function readSymlink(candidate: string, requested: string): Promise<string | undefined> {
  try {
    const stats = await lstat(candidate);
    return stats.isSymbolicLink() ? await readlink(candidate) : undefined;
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw fsToolError(error, requested);
  }
}

function outsideError(requested: string, resolved: string): ToolError {
  return new ToolError('path_outside_workspace', `${requested} resolves outside the workspace.`, {
    details: { requested, resolved },
  });
}
