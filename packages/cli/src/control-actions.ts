/*
 * The work of `oar permission …` and `oar process …` (control-commands.ts), imported when one runs. A permission
 * answer drives the session here, as `oar respond` does. A process request only records: the process lives in the
 * runtime that started it (`oar serve`, a running `oar run`), whose worker carries the request out; this command
 * runs no worker of its own — it would claim the thread and find the processes of another runtime lost.
 */
import { oarError } from '@oar/protocol';
import { EXIT, type ProcessRequestResult, type Runtime } from '@oar/runtime';
import { printJson, UsageError } from './io.js';
import type { GlobalOptions } from './options.js';
import { answerAndContinue, openForSessions, type RunOptions, withRuntime } from './runtime-actions.js';

export interface ControlOptions extends GlobalOptions {
  at?: string;
  id?: string;
  title?: string;
  json?: boolean;
  reason?: string;
  thread?: string;
  turn?: string;
  input?: string;
  forSession?: boolean;
  close?: boolean;
  wait?: string;
  keepFiles?: boolean;
  dryRun?: boolean;
}

const out = (line: string) => process.stdout.write(`${line}\n`);

/** A command that records and returns, with no worker here. */
async function recording<T>(options: ControlOptions, command: (runtime: Runtime) => Promise<T>): Promise<T> {
  return withRuntime(await openForSessions(options, false), command);
}

/** `oar fork`: records the fork and returns; what was in progress at the fork point waits for a worker. */
export async function forkSession(sessionId: string, options: ControlOptions): Promise<number> {
  const at = options.at === undefined ? undefined : Number(options.at);
  if (at !== undefined && (!Number.isInteger(at) || at < 1)) {
    throw new UsageError(oarError('invalid_option', `--at takes an event sequence (1, 2, …), not "${options.at}"`));
  }
  return recording(options, async (runtime) => {
    const fork = await runtime.forkSession({
      sessionId,
      ...(at !== undefined ? { at } : {}),
      ...(options.id ? { forkId: options.id } : {}),
      ...(options.title ? { title: options.title } : {}),
    });
    const { snapshot } = await runtime.getSession({ sessionId: fork.sessionId, limit: 0 });
    const unfinished = snapshot.threads.some((t) => t.activeTurnId !== undefined);
    if (options.json) {
      printJson({ ...fork, unfinished });
      return EXIT.ok;
    }
    out(`${fork.sessionId}: ${fork.events} events of ${sessionId} (through event ${fork.forkedFrom.sequence})`);
    out(
      unfinished
        ? `  work was in progress there: oar resume ${fork.sessionId} continues it in the fork`
        : `  go on with it: oar run --session ${fork.sessionId} "…"`,
    );
    return EXIT.ok;
  });
}

/** `oar rollback`: records the rollback (or plans it with --dry-run) and prints what it did to the files. */
export async function rollbackThread(sessionId: string, turnId: string, options: ControlOptions): Promise<number> {
  const result = await recording(options, (runtime) =>
    runtime.rollbackThread({
      sessionId,
      turnId,
      ...(options.thread ? { threadId: options.thread } : {}),
      ...(options.keepFiles ? { files: 'keep' as const } : {}),
      ...(options.dryRun ? { dryRun: true } : {}),
      requestedBy: 'cli',
    }),
  );
  if (options.json) {
    printJson(result);
    return EXIT.ok;
  }
  const planned = result.status === 'planned';
  out(
    `${planned ? 'would remove' : 'removed'} ${result.removedTurns.length} turn(s) of ${result.threadId}: ${result.removedTurns.join(', ')}`,
  );
  out(`  the thread ${planned ? 'would go' : 'goes'} on after ${result.keptThroughTurnId ?? 'its start'}`);
  for (const file of result.files) out(`  ${file.action.padEnd(9)} ${file.path}`);
  for (const conflict of result.conflicts) out(`  conflict  ${conflict.path}: ${conflict.message}`);
  const { commands, subagentThreads, runningProcesses } = result.affected;
  if (commands > 0) out(`  not undone: what ${commands} command(s) did (only OAR’s write and edit are versioned)`);
  if (subagentThreads.length > 0) out(`  sub-agent threads of the removed turns: ${subagentThreads.join(', ')}`);
  if (runningProcesses.length > 0) out(`  still running: ${runningProcesses.join(', ')} (oar process terminate)`);
  return planned && result.conflicts.length > 0 ? EXIT.failed : EXIT.ok;
}

export async function evaluatePermission(sessionId: string, toolName: string, options: ControlOptions) {
  const input = jsonObject('--input', options.input);
  const result = await recording(options, (runtime) =>
    runtime.evaluatePermission({
      sessionId,
      toolName,
      ...(input ? { input } : {}),
      ...(options.thread ? { threadId: options.thread } : {}),
      ...(options.turn ? { turnId: options.turn } : {}),
      requestedBy: 'cli',
    }),
  );
  if (options.json) {
    printJson(result);
    return EXIT.ok;
  }
  const e = result.evaluation;
  out(`${result.decision}: ${String(e.reason ?? '')}`);
  out(`  mode ${String(e.mode)}, source ${String(e.source)}${e.rule ? `, rule ${String(e.rule)}` : ''}`);
  if (Array.isArray(e.paths)) out(`  paths: ${e.paths.join(', ')}`);
  if (Array.isArray(e.decisions)) out(`  a person would be offered: ${e.decisions.join(', ')}`);
  out(
    result.recorded.eventId
      ? `  recorded: ${result.recorded.eventId} (turn ${'turnId' in result.recorded ? result.recorded.turnId : ''})`
      : `  not recorded: ${'reason' in result.recorded ? result.recorded.reason : ''}`,
  );
  return EXIT.ok;
}

export function resolvePermission(
  sessionId: string,
  actionId: string,
  decision: string,
  options: ControlOptions & RunOptions,
): Promise<number> {
  if (decision !== 'allow' && decision !== 'deny') {
    throw new UsageError(oarError('invalid_option', `the decision is allow or deny, not "${decision}"`));
  }
  if (options.forSession && decision === 'deny') {
    throw new UsageError(oarError('invalid_option', '--for-session goes with allow: a deny is for this call'));
  }
  return answerAndContinue(sessionId, options, (runtime) =>
    runtime.resolvePermission({
      sessionId,
      actionId,
      decision,
      ...(options.forSession ? { scope: 'session' as const } : {}),
      ...(options.reason ? { reason: options.reason } : {}),
      resolvedBy: 'cli',
    }),
  );
}

export async function writeProcessStdin(
  sessionId: string,
  processId: string,
  text: string | undefined,
  options: ControlOptions,
): Promise<number> {
  if (text === undefined && !options.close) {
    throw new UsageError(oarError('invalid_option', 'give the text to write, or --close to close its input'));
  }
  const result = await recording(options, (runtime) =>
    runtime.writeProcessStdin({
      sessionId,
      processId,
      ...(text !== undefined ? { input: text } : {}),
      ...(options.close ? { closeStdin: true } : {}),
      ...processOptions(options),
    }),
  );
  return reportProcess(result, options);
}

export async function terminateProcess(sessionId: string, processId: string, options: ControlOptions) {
  const result = await recording(options, (runtime) =>
    runtime.terminateProcess({ sessionId, processId, ...processOptions(options) }),
  );
  return reportProcess(result, options);
}

function processOptions(options: ControlOptions) {
  const seconds = options.wait === undefined ? undefined : Number(options.wait);
  if (seconds !== undefined && (!Number.isFinite(seconds) || seconds < 0 || seconds > 600)) {
    throw new UsageError(oarError('invalid_option', `--wait takes 0 to 600 seconds, not "${options.wait}"`));
  }
  return {
    requestedBy: 'cli',
    ...(options.reason ? { reason: options.reason } : {}),
    ...(seconds !== undefined ? { waitMs: Math.round(seconds * 1000) } : {}),
  };
}

/** Done (written, terminated, ended): 0; refused: 1; nobody acted in time: 75, the request stays on record. */
function reportProcess(result: ProcessRequestResult, options: ControlOptions): number {
  if (options.json) printJson(result);
  else if (result.status === 'written') out(`wrote ${result.bytes ?? 0} bytes to ${result.processId}`);
  else if (result.status === 'refused') out(`refused: ${result.error?.message ?? ''}`);
  else if (result.status === 'requested') {
    out(
      `requested (${result.requestId}): no runtime running ${result.processId} acted yet — it runs where the session's work runs (oar serve, oar worker); the request stays on record until then`,
    );
  } else {
    const how =
      result.exitCode !== undefined && result.exitCode !== null
        ? `exit ${result.exitCode}`
        : `signal ${result.signal ?? '?'}`;
    out(`${result.processId} ${result.status === 'terminated' ? 'terminated' : 'had already ended'} (${how})`);
  }
  if (result.status === 'refused') return EXIT.failed;
  return result.status === 'requested' ? EXIT.later : EXIT.ok;
}

function jsonObject(flag: string, text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new UsageError(oarError('invalid_option', `${flag} is not JSON: ${(error as Error).message}`));
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new UsageError(oarError('invalid_option', `${flag} is a JSON object, such as {"filePath": "a.txt"}`));
  }
  return value as Record<string, unknown>;
}
