import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { ExecSandbox } from '../../config/exec.js';

/**
 * The OS sandbox of `exec` (Linux, bubblewrap): the system read-only, the workspace read-write, a private /tmp,
 * $HOME and the store hidden, a private network namespace unless the binding allows the network, its own PID
 * namespace (so nothing outlives the sandbox), and `--die-with-parent`. docs/commands.md "Sandbox profiles".
 */

/** The profile recorded in `sandbox.applied` before a process starts. */
export interface SandboxProfile {
  profile: 'bwrap' | 'none';
  network: boolean;
  /** Paths the command may write (the workspace, the private /tmp). */
  writable: string[];
  /** Paths hidden from the command. */
  hidden: string[];
  /** Why the profile is `none` (the sandbox is off, or could not start here). */
  reason?: string;
}

export interface SandboxPlan {
  profile: SandboxProfile;
  /** The argv to spawn: the command itself, or bwrap with the command after `--`. */
  argv: string[];
}

const probes = new Map<string, Promise<{ ok: true } | { ok: false; reason: string }>>();

/** Whether bubblewrap (`binary`) can start here (installed, user namespaces allowed): checked once per process. */
export function bwrapAvailable(binary = 'bwrap'): Promise<{ ok: true } | { ok: false; reason: string }> {
  const known = probes.get(binary);
  if (known) return known;
  const probe = new Promise<{ ok: true } | { ok: false; reason: string }>((resolve) => {
    if (process.platform !== 'linux') {
      resolve({ ok: false, reason: `bubblewrap needs Linux (this is ${process.platform})` });
      return;
    }
    let stderr = '';
    const child = spawn(binary, ['--ro-bind', '/', '/', '--unshare-net', '--unshare-pid', '--', 'true'], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    child.on('error', (error: NodeJS.ErrnoException) =>
      resolve({
        ok: false,
        reason: error.code === 'ENOENT' ? 'bwrap is not installed (Debian: apt-get install bubblewrap)' : error.message,
      }),
    );
    child.on('close', (code) =>
      resolve(
        code === 0 ? { ok: true } : { ok: false, reason: `bwrap cannot start: ${stderr.trim() || `exit ${code}`}` },
      ),
    );
  });
  probes.set(binary, probe);
  return probe;
}

export interface SandboxInput {
  settings: ExecSandbox;
  workspaceRoot: string;
  cwd: string;
  /** The store's file (SQLite) or nothing (PostgreSQL): hidden from commands with its directory. */
  storeFile?: string;
  home?: string;
  argv: string[];
  /** The bubblewrap binary (default `bwrap` on the PATH). */
  bwrap?: string;
}

/** How a command runs: under bwrap when the profile asks for it and it can start, otherwise unsandboxed. */
export async function planSandbox(input: SandboxInput): Promise<SandboxPlan> {
  const { settings } = input;
  if (settings.profile === 'none') {
    return { argv: input.argv, profile: noneProfile('the binding turns the sandbox off (profile: none)') };
  }
  const available = await bwrapAvailable(input.bwrap);
  if (!available.ok) return { argv: input.argv, profile: noneProfile(available.reason) };
  const root = input.workspaceRoot;
  const args = ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--tmpfs', '/tmp'];
  const hidden: string[] = [];
  const hide = (dir: string) => {
    // A directory holding the workspace is hidden around it (the workspace is bound again right after).
    if (!existsSync(dir)) return;
    args.push('--tmpfs', dir);
    hidden.push(dir);
  };
  if (input.home && input.home !== '/') hide(input.home);
  for (const dir of settings.hide) hide(dir);
  args.push('--bind', root, root);
  // The store: its directory when it is neither the workspace nor above it, else its files one by one.
  const storeFiles: string[] = [];
  if (input.storeFile) {
    const dir = path.dirname(input.storeFile);
    if (!isInsideOrSame(dir, root)) {
      if (existsSync(dir)) {
        args.push('--tmpfs', dir);
        hidden.push(dir);
      }
    } else {
      for (const suffix of ['', '-wal', '-shm', '-journal']) {
        const file = `${input.storeFile}${suffix}`;
        if (existsSync(file)) {
          args.push('--ro-bind', '/dev/null', file);
          storeFiles.push(file);
        }
      }
    }
  }
  hidden.push(...storeFiles);
  args.push('--unshare-pid', '--unshare-ipc', '--unshare-uts', '--die-with-parent', '--new-session');
  if (!settings.network) args.push('--unshare-net');
  args.push('--chdir', input.cwd, '--', ...input.argv);
  return {
    argv: [input.bwrap ?? 'bwrap', ...args],
    profile: { profile: 'bwrap', network: settings.network, writable: [root, '/tmp (private)'], hidden },
  };
}

function noneProfile(reason: string): SandboxProfile {
  return { profile: 'none', network: true, writable: ['/'], hidden: [], reason };
}

/** `dir` is `inner` or one of its ancestors. */
function isInsideOrSame(dir: string, inner: string): boolean {
  const relative = path.relative(dir, inner);
  return relative === '' || (!relative.startsWith('..') && !path.isAbsolute(relative));
}
