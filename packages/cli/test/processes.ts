import { type ChildProcess, spawn } from 'node:child_process';
import type { RuntimeEvent } from '@oar/protocol';
import { Runtime, Store } from '@oar/runtime';
import { bin } from './cli-helpers.js';

/**
 * Real `oar` processes running side by side (workers, racing runs, a killed or stopped process) and the log they
 * leave, for the tests that need several processes at once (leases-cli, scale-out). Nothing here times anything:
 * waits give up only to name what never came.
 */

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Proc {
  child: ChildProcess;
  pid: number;
  out: string;
  err: string;
  exit: Promise<Exit>;
  exited: boolean;
}

/** Every process started and not yet exited: `killAll` ends them after a test (SIGCONT first: one may be stopped). */
const running = new Set<Proc>();

/** Start `oar ARGS` in `cwd`, collecting its output (asynchronously: processes run side by side). */
export function start(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}): Proc {
  const child = spawn(bin, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const proc: Proc = {
    child,
    pid: child.pid ?? -1,
    out: '',
    err: '',
    exited: false,
    exit: Promise.resolve({ code: 0, signal: null }),
  };
  child.stdout?.on('data', (chunk: Buffer) => {
    proc.out += chunk.toString();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    proc.err += chunk.toString();
  });
  proc.exit = new Promise((resolve) =>
    child.on('close', (code, signal) => {
      proc.exited = true;
      running.delete(proc);
      resolve({ code, signal });
    }),
  );
  running.add(proc);
  return proc;
}

export async function killAll(): Promise<void> {
  const procs = [...running];
  for (const proc of procs) {
    proc.child.kill('SIGCONT');
    proc.child.kill('SIGKILL');
  }
  await Promise.all(procs.map((p) => p.exit));
}

/** Wait for a process to exit; one that does not within `ms` is killed and reported as hanging (not a timing check). */
export async function exitOf(proc: Proc, what: string, ms = 90_000): Promise<Exit> {
  let timer: NodeJS.Timeout | undefined;
  const hang = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      proc.child.kill('SIGCONT');
      proc.child.kill('SIGKILL');
      reject(new Error(`${what} (pid ${proc.pid}) never exited; killed.\nstdout:\n${proc.out}\nstderr:\n${proc.err}`));
    }, ms);
  });
  try {
    return await Promise.race([proc.exit, hang]);
  } finally {
    clearTimeout(timer);
  }
}

/** Run `oar ARGS` to completion. */
export async function oar(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Proc & Exit> {
  const proc = start(cwd, args, env);
  return Object.assign(proc, await exitOf(proc, `oar ${args.join(' ')}`));
}

export function describeProc(proc: Proc & Partial<Exit>): string {
  return `pid ${proc.pid} exit ${proc.code} (signal ${proc.signal})\nstdout:\n${proc.out}\nstderr:\n${proc.err}`;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Poll until `check` holds; a condition that never comes is an error naming what was awaited. */
export async function until(check: () => boolean | Promise<boolean>, what: () => string, ms = 60_000): Promise<void> {
  for (const deadline = Date.now() + ms; !(await check()); await sleep(20)) {
    if (Date.now() > deadline) throw new Error(`gave up waiting: ${what()}`);
  }
}

// ----- scripts ---------------------------------------------------------------------------------------------

/** A call of a side-effect fixture tool, labelled by its action id (unique in a script). */
export interface LabelledCall {
  id: string;
  tool: string;
  delayMs?: number;
  depends?: string;
}

/** One scripted model step: an action graph of labelled calls, after `thinkMs` of "thinking" when given. */
export function labelledAct(calls: LabelledCall[], thinkMs?: number) {
  return {
    ...(thinkMs !== undefined ? { delayMs: thinkMs } : {}),
    protocol: {
      kind: 'act',
      calls: calls.map((c) => ({
        id: c.id,
        type: 'tool',
        name: c.tool,
        args: { label: c.id, ...(c.delayMs !== undefined ? { delayMs: c.delayMs } : {}) },
        ...(c.depends ? { depends: c.depends } : {}),
      })),
    },
  };
}

// ----- the log -----------------------------------------------------------------------------------------------

export function graphActionId(event: RuntimeEvent): string | undefined {
  return (event.payload as { graphActionId?: string }).graphActionId;
}

export const ofType = (events: RuntimeEvent[], type: string, actionId?: string) =>
  events.filter((e) => e.type === type && (actionId === undefined || graphActionId(e) === actionId));

export interface Replay {
  equal: boolean;
  differences: string[];
  contradictions: { sequence: number; reason: string }[];
  events: number;
}

/**
 * Read a session's log and replay it, as `oar events` / `oar replay` do: a control plane without a worker, with a
 * fixed runtime id so that reading writes nothing to the store.
 */
export async function readLog(
  p: { cwd: string; store: string },
  sessionId: string,
): Promise<{ events: RuntimeEvent[]; replay: Replay }> {
  const store = await Store.open(p.store, { cwd: p.cwd });
  try {
    const runtime = await Runtime.create({
      store,
      workspaceRoot: p.cwd,
      worker: false,
      resumeOnStart: false,
      runtimeId: 'rt_processes_test',
      model: () => {
        throw new Error('reading only');
      },
    });
    try {
      return { events: await runtime.log.read(sessionId), replay: await runtime.replaySession(sessionId) };
    } finally {
      await runtime.close();
    }
  } finally {
    await store.close();
  }
}

// ----- PostgreSQL --------------------------------------------------------------------------------------------

/** `url` with `?schema=NAME` (the form `oar` takes in a config's `store`). */
export function withSchema(url: string, schema: string): string {
  const parsed = new URL(url);
  parsed.searchParams.set('schema', schema);
  return parsed.toString();
}

export const randomName = (prefix: string) => `${prefix}${Math.random().toString(36).slice(2, 10)}`;
