/*
 * The work of `oar subagent …` (subagent-commands.ts), imported when one runs. Commands that give a sub-agent work
 * (spawn, input, resume) drive the session here until it settles unless `--detach`; the rest record and return.
 */
import { EXIT, type Runtime, type SubagentView } from '@oar/runtime';
import { printJson } from './io.js';
import type { GlobalOptions } from './options.js';
import { openForSessions, withRuntime } from './runtime-actions.js';

export interface SubagentOptions extends GlobalOptions {
  json?: boolean;
  detach?: boolean;
  reason?: string;
  thread?: string;
}

const out = (line: string) => process.stdout.write(`${line}\n`);
const line = (s: SubagentView) =>
  `${s.subagentId}  ${s.status}  ${s.agent}  thread ${s.childThreadId} (parent ${s.parentThreadId})`;

/** Record a command; unless `--detach`, drive the session until it settles and print the sub-agent then. */
async function working<T extends object>(
  sessionId: string,
  options: SubagentOptions,
  command: (runtime: Runtime) => Promise<T>,
  subagentOf: (result: T) => string,
): Promise<number> {
  const opened = await openForSessions(options, options.detach ? false : [sessionId]);
  return withRuntime(opened, async (runtime) => {
    const result = await command(runtime);
    if (!options.detach) await runtime.settled(sessionId);
    const id = subagentOf(result);
    const sub = (await runtime.listSubagents({ sessionId })).find((s) => s.subagentId === id);
    if (options.json) printJson({ ...result, ...(sub ? { subagent: sub } : {}) });
    else out(sub ? line(sub) : id);
    return EXIT.ok;
  });
}

export function spawnSubagent(
  sessionId: string,
  agent: string,
  input: string,
  options: SubagentOptions & { title?: string; id?: string },
): Promise<number> {
  return working(
    sessionId,
    options,
    (runtime) =>
      runtime.spawnSubagent({
        sessionId,
        agent,
        input,
        ...(options.thread ? { threadId: options.thread } : {}),
        ...(options.title ? { title: options.title } : {}),
        ...(options.id ? { subagentId: options.id } : {}),
      }),
    (r) => r.subagentId,
  );
}

export function inputSubagent(sessionId: string, subagentId: string, input: string, options: SubagentOptions) {
  return working(
    sessionId,
    options,
    (runtime) => runtime.sendSubagentInput({ sessionId, subagentId, input }),
    () => subagentId,
  );
}

export function resumeSubagent(
  sessionId: string,
  subagentId: string,
  options: SubagentOptions & { input?: string },
): Promise<number> {
  return working(
    sessionId,
    options,
    (runtime) =>
      runtime.resumeSubagent({
        sessionId,
        subagentId,
        ...(options.input ? { input: options.input } : {}),
        ...(options.reason ? { reason: options.reason } : {}),
      }),
    () => subagentId,
  );
}

export async function closeSubagent(sessionId: string, subagentId: string, options: SubagentOptions) {
  return withRuntime(await openForSessions(options, false), async (runtime) => {
    await runtime.closeSubagent({ sessionId, subagentId, ...(options.reason ? { reason: options.reason } : {}) });
    if (options.json) printJson({ subagentId, status: 'closed' });
    else out(`${subagentId}: closed`);
    return EXIT.ok;
  });
}

/** `oar subagent wait`: exit 75 (try again later) when the wait ran out with some still working. */
export async function waitSubagents(
  sessionId: string,
  ids: string[],
  options: SubagentOptions & { timeout?: string },
): Promise<number> {
  return withRuntime(await openForSessions(options, false), async (runtime) => {
    const timeoutMs = options.timeout !== undefined ? Number(options.timeout) * 1000 : undefined;
    const result = await runtime.waitSubagents({
      sessionId,
      ...(ids.length > 0 ? { subagentIds: ids } : {}),
      ...(options.thread ? { threadId: options.thread } : {}),
      ...(timeoutMs !== undefined && Number.isFinite(timeoutMs) ? { timeoutMs } : {}),
    });
    if (options.json) printJson(result);
    else {
      for (const sub of result.subagents) out(line(sub));
      if (result.timedOut) out('the wait ran out: some still work');
    }
    return result.timedOut ? EXIT.later : EXIT.ok;
  });
}

export async function listSubagents(sessionId: string, options: SubagentOptions): Promise<number> {
  return withRuntime(await openForSessions(options, false), async (runtime) => {
    const subagents = await runtime.listSubagents({
      sessionId,
      ...(options.thread ? { threadId: options.thread } : {}),
    });
    if (options.json) printJson(subagents);
    else if (subagents.length === 0) out('no sub-agents');
    else for (const sub of subagents) out(line(sub));
    return EXIT.ok;
  });
}
