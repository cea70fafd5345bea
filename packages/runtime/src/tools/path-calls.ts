import {
  close,
  closeSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  open,
  openSync,
  readlinkSync,
  realpathSync,
  type Stats,
} from 'node:fs';
import { type FileHandle, lstat, mkdir, readlink, realpath, statfs } from 'node:fs/promises';
import { promisify } from 'node:util';
import { setRecent } from '../kernel/lru.js';

/**
 * The file-system calls workspace confinement makes to resolve a path and walk to it (tools/workspace.ts), in two
 * implementations chosen per workspace root by where it lives.
 *
 * On a local file system they are synchronous: realpath, lstat, readlink and opening a directory answer from the
 * kernel's directory cache in microseconds, while each trip through libuv's thread pool costs about 50 µs and queues
 * behind other I/O — ten of them were a third of a confined `read`. On a network or FUSE file system a call may
 * wait on a server for seconds, and a synchronous one would freeze every session of the process, so there they go
 * through the thread pool as before. Reading and writing a file's content is asynchronous everywhere.
 */
export interface PathCalls {
  realpath(path: string): Promise<string>;
  lstat(path: string): Promise<Stats>;
  readlink(path: string): Promise<string>;
  /** Open a directory (flags include `O_DIRECTORY`) and return its descriptor. */
  openDirectory(path: string, flags: number): Promise<number>;
  close(fd: number): Promise<void>;
  mkdir(path: string): Promise<void>;
  /** The status of an opened file (its inode is in memory: no disk to wait for, but a network file system may ask). */
  fstat(handle: FileHandle): Promise<Stats>;
}

const syncCalls: PathCalls = {
  realpath: async (path) => realpathSync.native(path),
  lstat: async (path) => lstatSync(path),
  readlink: async (path) => readlinkSync(path),
  openDirectory: async (path, flags) => openSync(path, flags),
  close: async (fd) => closeSync(fd),
  mkdir: async (path) => {
    mkdirSync(path);
  },
  fstat: async (handle) => fstatSync(handle.fd),
};

const openAsync = promisify(open);
const closeAsync = promisify(close);

const asyncCalls: PathCalls = {
  realpath: (path) => realpath(path),
  lstat: (path) => lstat(path),
  readlink: (path) => readlink(path),
  openDirectory: (path, flags) => openAsync(path, flags),
  close: (fd) => closeAsync(fd),
  mkdir: async (path) => {
    await mkdir(path);
  },
  fstat: (handle) => handle.stat(),
};

/**
 * Linux `statfs` magic numbers of file systems whose calls may wait on something other than this machine's kernel:
 * NFS, SMB/CIFS (three), FUSE (sshfs, s3fs, rclone…), 9p, Ceph, Lustre, GPFS, AFS (two), autofs (a mount point that
 * mounts on first use); GlusterFS goes through FUSE.
 */
const REMOTE_FILE_SYSTEMS = new Set([
  0x6969, 0x517b, 0xff534d42, 0xfe534d42, 0x65735546, 0x01021997, 0x00c36400, 0x0bd00bd0, 0x47504653, 0x5346414f,
  0x6b414653, 0x0187,
]);

const MAX_ROOTS = 64;
const byRoot = new Map<string, PathCalls>();

/**
 * The calls to use under `root`, decided once per root from its file system — asked asynchronously, so a dead
 * network root cannot freeze the process here either. Only Linux's `statfs` types are known: elsewhere (macOS and
 * the BSDs number theirs differently) every root gets the asynchronous calls. A root whose file system cannot be
 * asked (gone, not readable) gets the asynchronous calls, and is asked again next time.
 */
export async function pathCalls(root: string): Promise<PathCalls> {
  const known = byRoot.get(root);
  if (known) return known;
  if (process.platform !== 'linux') return asyncCalls;
  let type: number;
  try {
    type = Number((await statfs(root)).type);
  } catch {
    return asyncCalls;
  }
  const calls = callsFor(type);
  setRecent(byRoot, root, calls, MAX_ROOTS);
  return calls;
}

/** The calls for a file system of `statfs` type `type`. */
export function callsFor(type: number): PathCalls {
  return REMOTE_FILE_SYSTEMS.has(type) ? asyncCalls : syncCalls;
}
