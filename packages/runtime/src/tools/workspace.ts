import { constants, readlinkSync, type Stats } from 'node:fs';
import { type FileHandle, lstat, mkdir, open, readlink, realpath, unlink } from 'node:fs/promises';
import path from 'node:path';
import { ToolError } from '../kernel/errors.js';
import { fsToolError, isMissing } from './errors.js';
import { type PathCalls, pathCalls } from './path-calls.js';

/**
 * Workspace confinement: every path a file tool touches must resolve, after following every symlink, to a place
 * inside the workspace root. The check is made on real paths, not on the text of the request, because a symlink
 * (to a file or to any parent directory) can lead outside while the requested text looks harmless.
 *
 * Resolving is a check made before the use, so a process racing the tool could swap a directory for a symlink in
 * between. Tools that read or write a file's content therefore go through `openWorkspaceFile`, which makes the open
 * itself safe: it never follows a symlink, verifies the opened descriptor, and refuses hard links. The OS sandbox
 * stays the hard boundary; this gives the model a clear `path_outside_workspace` error instead of a silent escape.
 *
 * Resolving and the directory walk go through `pathCalls` (tools/path-calls.ts): synchronous on a local file
 * system, through the thread pool on a network one. The file's own open, its content and its close are always
 * asynchronous.
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
  /** The root's real path when the caller has just resolved it (one `realpath` less). */
  knownRealRoot?: string,
): Promise<string> {
  if (requested.includes('\0')) {
    throw new ToolError('invalid_path', 'The path contains a NUL byte.', { details: { requested } });
  }
  const realRoot = knownRealRoot ?? (await realWorkspaceRoot(root));
  const lexical = lexicalTarget(root, realRoot, requested);
  if (!isInside(realRoot, lexical)) throw outsideError(requested, lexical);

  const target = await realpathLenient(await pathCalls(realRoot), lexical, requested);
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
    return await (await pathCalls(root)).realpath(root);
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
  calls: PathCalls,
  target: string,
  requested: string,
  hops = 0,
): Promise<{ path: string; exists: boolean }> {
  try {
    return { path: await calls.realpath(target), exists: true };
  } catch (error) {
    if (!isMissing(error)) throw fsToolError(error, requested);
  }
  const parent = path.dirname(target);
  if (parent === target) return { path: target, exists: false };
  const realParent = (await realpathLenient(calls, parent, requested, hops)).path;
  const candidate = path.join(realParent, path.basename(target));
  const link = await readSymlink(calls, candidate, requested);
  if (link === undefined) return { path: candidate, exists: false };
  if (hops >= MAX_SYMLINK_HOPS) {
    throw new ToolError('invalid_path', `${requested} has too many levels of symbolic links.`, {
      details: { requested },
    });
  }
  return realpathLenient(calls, path.resolve(realParent, link), requested, hops + 1);
}

/** The target text of a symlink, or undefined if `candidate` is missing or not a symlink. */
async function readSymlink(calls: PathCalls, candidate: string, requested: string): Promise<string | undefined> {
  try {
    const stats = await calls.lstat(candidate);
    return stats.isSymbolicLink() ? await calls.readlink(candidate) : undefined;
  } catch (error) {
    if (isMissing(error)) return undefined;
    throw fsToolError(error, requested);
  }
}

/**
 * What the caller will do with an opened file: `read` opens read-only, `update` read-write (edit), `write`
 * read-write and creates the file and its missing parent directories. No mode truncates: a writer truncates through
 * the descriptor once the open is verified, so a refused open has changed nothing.
 */
export type OpenMode = 'read' | 'update' | 'write';

/** A workspace file opened by `openWorkspaceFile`. The caller owns `handle` and must close it. */
export interface WorkspaceFile {
  handle: FileHandle;
  /** Real absolute path of the opened file, inside the workspace. */
  absolute: string;
  /** Workspace-relative path of the opened file, for outputs and summaries. */
  relative: string;
  /** `fstat` of the descriptor, taken at open time. */
  stats: Stats;
  /** True when this call created the file (`write` mode only). */
  created: boolean;
}

// A path that keeps changing between resolution and open is retried this many times in all, then refused.
const MAX_OPEN_ATTEMPTS = 3;

/** Thrown inside the open helpers when the path changed since it was resolved: resolve again and retry. */
class PathChanged extends Error {}

const O_NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const O_DIRECTORY = constants.O_DIRECTORY ?? 0;
// O_NONBLOCK: opening a FIFO must not wait for a peer (it is refused as not a regular file right after).
const OPEN_EXTRA = O_NOFOLLOW | (constants.O_NONBLOCK ?? 0) | (constants.O_NOCTTY ?? 0);
const OPEN_FLAGS: Record<OpenMode, number> = {
  read: constants.O_RDONLY | OPEN_EXTRA,
  update: constants.O_RDWR | OPEN_EXTRA,
  // Read-write, not write-only: the content before an overwrite is kept as the file's version (ToolOutput.fileVersion).
  write: constants.O_RDWR | OPEN_EXTRA,
};

/**
 * Open a workspace file so that no race can make it reach outside the workspace, and refuse hard links.
 *
 * The path is resolved as `resolveWorkspacePath` does (symlinks that stay inside are followed; `read` and `update`
 * need an existing file, `write` creates one). The resolved real path has no symlink left in it, so it is then
 * opened without following any: on Linux, component by component from a descriptor of the root, each directory
 * opened with `O_NOFOLLOW | O_DIRECTORY` relative to the previous descriptor (through `/proc/self/fd/N/name`, which
 * is `openat`), missing directories created the same way for `write`, the file itself with `O_NOFOLLOW` (and
 * `O_CREAT | O_EXCL` when it is new). A symlink swapped in anywhere on the way makes the open fail instead of being
 * followed. The opened descriptor is then checked before a byte is read or written: its path (`/proc/self/fd/N`)
 * must still be the resolved one, it must be a regular file, and it must have exactly one link — a hard link is
 * another name for the same file, which may be outside the workspace and cannot be found cheaply, so any file with
 * `nlink > 1` is refused with `path_outside_workspace`. A path that changed under the open is resolved and opened
 * again, at most MAX_OPEN_ATTEMPTS times in all, then refused with `path_outside_workspace`.
 *
 * Without /proc (macOS, BSD) the file is opened by its full path with `O_NOFOLLOW` and verified afterwards (its
 * real path must be unchanged and name the same device and inode as the descriptor): a best effort, since a parent
 * directory swapped and swapped back between those steps goes unnoticed.
 */
export async function openWorkspaceFile(root: string, requested: string, mode: OpenMode): Promise<WorkspaceFile> {
  const realRoot = await realWorkspaceRoot(root);
  let absolute = realRoot;
  for (let attempt = 1; attempt <= MAX_OPEN_ATTEMPTS; attempt += 1) {
    const options = mode === 'write' ? { forWrite: true } : { mustExist: true };
    absolute = await resolveWorkspacePath(root, requested, options, realRoot);
    try {
      return await openResolved(realRoot, absolute, mode);
    } catch (error) {
      if (!(error instanceof PathChanged)) throw error;
    }
  }
  throw new ToolError(
    'path_outside_workspace',
    `${requested} changed while it was being opened (a symlink or directory was swapped on its path); refused so ` +
      'the file cannot be reached outside the workspace. Try again once nothing else is changing it.',
    { details: { requested, resolved: absolute, reason: 'changed_during_open' } },
  );
}

interface Opened {
  handle: FileHandle;
  created: boolean;
  /** Linux: the pinned parent directory's descriptor, kept open until the file is verified. */
  dir?: number;
  /** How `dir` is closed. */
  calls?: PathCalls;
  /** Where the file was opened or created, for removing a file this call created when verification fails. */
  target: string;
}

/** Open the resolved real path `absolute` without following symlinks, then verify what was opened. */
async function openResolved(realRoot: string, absolute: string, mode: OpenMode): Promise<WorkspaceFile> {
  const relative = toWorkspaceRelative(realRoot, absolute);
  if (relative === '.') throw directoryError(relative, mode);
  const opened = (await procFdAvailable())
    ? await openPinned(realRoot, absolute, relative, mode)
    : await openByPath(absolute, relative, mode);
  const { handle, created, dir } = opened;
  try {
    const stats = opened.calls ? await opened.calls.fstat(handle) : await handle.stat();
    if (!(await isOpenedFile(handle, stats, absolute, dir))) {
      if (created) await discardCreated(opened.target, stats);
      throw new PathChanged();
    }
    if (stats.isDirectory()) throw directoryError(relative, mode);
    if (!stats.isFile()) throw notAFileError(relative);
    if (stats.nlink > 1) throw hardLinkError(relative, absolute, stats.nlink);
    return { handle, absolute, relative, stats, created };
  } catch (error) {
    await handle.close();
    throw error instanceof PathChanged ? error : fsToolError(error, relative);
  } finally {
    if (dir !== undefined) await opened.calls?.close(dir);
  }
}

/**
 * Linux: walk from a descriptor of the root, one component at a time, each relative to the previous descriptor and
 * never following a symlink; the parent directory stays pinned while the file is opened or created in it.
 */
async function openPinned(realRoot: string, absolute: string, relative: string, mode: OpenMode): Promise<Opened> {
  const parts = path.relative(realRoot, absolute).split(path.sep);
  const name = parts.pop() as string;
  const calls = await pathCalls(realRoot);
  let dir: number;
  try {
    dir = await calls.openDirectory(realRoot, constants.O_RDONLY | O_DIRECTORY);
  } catch (error) {
    throw fsToolError(error, '.');
  }
  try {
    if (descriptorPath(dir) !== realRoot) throw new PathChanged();
    for (const part of parts) {
      const next = await openChildDirectory(calls, dir, part, mode === 'write', relative);
      // `dir` names the open child before the parent is closed: a failed close is not retried by the catch below
      // (Linux frees the number even then, and another open may already hold it).
      const parent = dir;
      dir = next;
      await calls.close(parent).catch(() => undefined);
    }
    const target = `${fdPath(dir)}/${name}`;
    return { ...(await openChild(target, mode, relative)), dir, calls, target };
  } catch (error) {
    await calls.close(dir);
    throw error;
  }
}

/** Open (creating it for `write` when missing) the directory `name` inside the open directory `dir`. */
async function openChildDirectory(
  calls: PathCalls,
  dir: number,
  name: string,
  create: boolean,
  relative: string,
): Promise<number> {
  const child = `${fdPath(dir)}/${name}`;
  const flags = constants.O_RDONLY | O_DIRECTORY | O_NOFOLLOW;
  try {
    return await calls.openDirectory(child, flags);
  } catch (error) {
    if (!(create && errnoOf(error) === 'ENOENT')) throw await openError(error, child, relative);
  }
  try {
    await calls.mkdir(child);
  } catch (error) {
    if (errnoOf(error) !== 'EEXIST') throw fsToolError(error, relative);
  }
  try {
    return await calls.openDirectory(child, flags);
  } catch (error) {
    throw await openError(error, child, relative);
  }
}

/** Open the file itself, never following a symlink; `write` creates it exclusively when it is missing. */
async function openChild(
  target: string,
  mode: OpenMode,
  relative: string,
): Promise<{ handle: FileHandle; created: boolean }> {
  try {
    return { handle: await open(target, OPEN_FLAGS[mode]), created: false };
  } catch (error) {
    if (!(mode === 'write' && errnoOf(error) === 'ENOENT')) throw await openError(error, target, relative);
  }
  try {
    const handle = await open(target, OPEN_FLAGS.write | constants.O_CREAT | constants.O_EXCL, 0o666);
    return { handle, created: true };
  } catch (error) {
    // EEXIST: created by someone else in between; start over and open what is there now.
    throw errnoOf(error) === 'EEXIST' ? new PathChanged() : await openError(error, target, relative);
  }
}

/**
 * Other platforms: open by full path with `O_NOFOLLOW` on the last component (missing parents created first for
 * `write`, as before); `isOpenedFile` then compares the descriptor with what the path names now.
 */
async function openByPath(absolute: string, relative: string, mode: OpenMode): Promise<Opened> {
  if (mode === 'write') {
    try {
      await mkdir(path.dirname(absolute), { recursive: true });
    } catch (error) {
      throw fsToolError(error, relative);
    }
  }
  return { ...(await openChild(absolute, mode, relative)), target: absolute };
}

/**
 * Whether the descriptor is the file at `absolute`. On Linux the kernel names the opened file: `/proc/self/fd/N`
 * must read back as `absolute` exactly (a parent directory moved or swapped meanwhile shows up as another path).
 * Elsewhere: the real path of `absolute` must be itself and name the same device and inode as the descriptor.
 */
async function isOpenedFile(handle: FileHandle, stats: Stats, absolute: string, dir?: number): Promise<boolean> {
  try {
    if (dir !== undefined) return descriptorPath(handle.fd) === absolute;
    if ((await realpath(absolute)) !== absolute) return false;
    const named = await lstat(absolute);
    return named.dev === stats.dev && named.ino === stats.ino;
  } catch {
    return false;
  }
}

/** Remove a file this call just created, if `target` still names it (same device and inode). */
async function discardCreated(target: string, stats: Stats): Promise<void> {
  try {
    const named = await lstat(target);
    if (named.dev === stats.dev && named.ino === stats.ino) await unlink(target);
  } catch {
    // Already gone or replaced: nothing of ours to remove.
  }
}

/**
 * The error for a failed open. A symlink where a directory or the file was expected (ELOOP, or ENOTDIR under
 * O_DIRECTORY) or a component gone since resolution (ENOENT) means the path changed: retry. Anything else is the
 * usual file-system error.
 */
async function openError(error: unknown, target: string, relative: string): Promise<Error> {
  const errno = errnoOf(error);
  if (errno === 'ELOOP' || errno === 'ENOENT') return new PathChanged();
  if (errno === 'ENOTDIR') {
    const isLink = await lstat(target).then(
      (stats) => stats.isSymbolicLink(),
      () => false,
    );
    if (isLink) return new PathChanged();
  }
  // A FIFO or socket opened for writing with nobody at the other end.
  if (errno === 'ENXIO') return notAFileError(relative);
  return fsToolError(error, relative);
}

/**
 * The path the kernel names an open descriptor by (`/proc/self/fd/N`). Read synchronously: procfs answers from
 * memory and never waits on a disk or a network, and a call to the thread pool costs more than the answer (two of
 * them were a tenth of a confined `read`).
 */
function descriptorPath(fd: number): string {
  return readlinkSync(fdPath(fd));
}

let procFd: Promise<boolean> | undefined;

/** Whether `/proc/self/fd` names open descriptors (Linux with /proc mounted); checked once per process. */
function procFdAvailable(): Promise<boolean> {
  procFd ??=
    process.platform === 'linux'
      ? open('/', constants.O_RDONLY | O_DIRECTORY).then(
          async (handle) => {
            try {
              return (await readlink(fdPath(handle.fd))) === '/';
            } catch {
              return false;
            } finally {
              await handle.close();
            }
          },
          () => false,
        )
      : Promise.resolve(false);
  return procFd;
}

function fdPath(fd: number): string {
  return `/proc/self/fd/${fd}`;
}

function errnoOf(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

function directoryError(relative: string, mode: OpenMode): ToolError {
  const hint = mode === 'write' ? '' : '; use glob to list files';
  return new ToolError('is_directory', `${relative} is a directory${hint}.`, { details: { path: relative } });
}

function notAFileError(relative: string): ToolError {
  return new ToolError('not_a_file', `${relative} is not a regular file.`, { details: { path: relative } });
}

function hardLinkError(relative: string, resolved: string, links: number): ToolError {
  return new ToolError(
    'path_outside_workspace',
    `${relative} is a hard link (the file has ${links} names): another name may be outside the workspace, so the ` +
      'file tools refuse every file with more than one link.',
    { details: { path: relative, resolved, links, reason: 'hard_link' } },
  );
}

function outsideError(requested: string, resolved: string): ToolError {
  return new ToolError('path_outside_workspace', `${requested} resolves outside the workspace.`, {
    details: { requested, resolved },
  });
}
