import { stat } from 'node:fs/promises';
import { StringDecoder } from 'node:string_decoder';
import { IDEMPOTENCY_KEY_ENV } from '@oar/tool-cli';
import { z } from 'zod';
import type { ExecConfig } from '../../config/exec.js';
import { EnvVarNameSchema } from '../../config/models.js';
import { ToolError } from '../../kernel/errors.js';
import { newId } from '../../kernel/ids.js';
import { abortedError } from '../errors.js';
import { type AnyTool, defineTool, type ToolContext, type ToolFacts, type ToolOutput } from '../tool.js';
import { requestedWorkspacePath, resolveWorkspacePath, toWorkspaceRelative } from '../workspace.js';
import { type Command, commandText, isReadOnlyCommand } from './command.js';
import { isBinary, outputView, sandboxViolations, statusLine } from './output.js';
import { type ProcessEnd, ProcessGroup } from './process-group.js';
import {
  type BackgroundProcess,
  backgroundProcesses,
  type ForegroundProcess,
  foregroundProcesses,
} from './processes.js';
import { bwrapAvailable, planSandbox, type SandboxProfile } from './sandbox.js';

export const EXEC_TOOL = 'exec';

/** Bounds of one call's input: they keep a runaway argument list or stdin out of the record. */
const MAX_ARGS = 1_000;
const MAX_ARG_CHARS = 32_000;
const MAX_STDIN_CHARS = 1_000_000;

const ExecInputSchema = z
  .strictObject({
    command: z
      .array(z.string().max(MAX_ARG_CHARS))
      .min(1)
      .max(MAX_ARGS)
      .optional()
      .describe('The program and its arguments, run without a shell, e.g. ["npm", "test"] or ["git", "status"].'),
    shell: z
      .string()
      .min(1)
      .max(MAX_ARG_CHARS)
      .optional()
      .describe(
        'A shell command line, run with /bin/sh -c (pipes, redirections). Needs a human approval unless a ' +
          'permission rule allows this exact line: prefer `command`.',
      ),
    cwd: z.string().min(1).default('.').describe('Working directory, relative to the workspace root.'),
    env: z
      .record(EnvVarNameSchema, z.string().max(MAX_ARG_CHARS))
      .optional()
      .describe('Extra environment variables for this command (the binding decides which others it sees).'),
    stdin: z.string().max(MAX_STDIN_CHARS).optional().describe("Text written to the command's standard input."),
    timeoutMs: z.number().int().min(100).optional().describe('Stop the command after this many milliseconds.'),
    background: z
      .boolean()
      .default(false)
      .describe(
        'Start the command and return its process id at once (a server, a watcher); read its output, write to ' +
          'its stdin or stop it with the `process` tool.',
      ),
  })
  .refine((input) => (input.command === undefined) !== (input.shell === undefined), {
    message: 'give exactly one of `command` (an argv array) or `shell` (a command line)',
  });
export type ExecInput = z.infer<typeof ExecInputSchema>;

/** The command a call runs: its argv, or its shell string (matched only whole). */
export function execCommand(input: Pick<ExecInput, 'command' | 'shell'>): Command {
  return input.shell !== undefined ? { shell: input.shell } : { argv: input.command ?? [] };
}

export interface ExecToolOptions {
  config: ExecConfig;
  /** The store's SQLite file, hidden from commands (none for PostgreSQL). */
  storeFile?: string;
  /** Where the allowed variables are read from (default process.env). */
  env?: NodeJS.ProcessEnv;
  /** The most bytes of output kept and stored (the binding's artifact limit). */
  maxOutputBytes?: number;
}

/**
 * The `exec` tool of a binding: runs a command in the workspace under the sandbox (docs/commands.md). Asynchronous
 * because whether the sandbox can start here decides the calls' facts: an unsandboxed call is asked by default.
 */
export async function execTool(options: ExecToolOptions): Promise<AnyTool> {
  const { config } = options;
  const sandboxOk = config.sandbox.profile === 'bwrap' && (await bwrapAvailable()).ok;
  // Unsandboxed and `ask`: every call is treated as destructive, so the default modes ask a human.
  const askUnsandboxed = !sandboxOk && config.sandbox.unsandboxed === 'ask';
  const factsOf = (input: ExecInput): Partial<ToolFacts> => {
    const command = execCommand(input);
    if (!askUnsandboxed && !input.background && isReadOnlyCommand(command, config.readOnlyCommands)) {
      return { isReadOnly: true, isConcurrencySafe: true, isDestructive: false, isIdempotent: true };
    }
    return {};
  };
  return defineTool<ExecInput>({
    name: EXEC_TOOL,
    description:
      'Run a command in the workspace (sandboxed: the workspace is writable, the rest of the system read-only, ' +
      `${config.sandbox.network ? 'network allowed' : 'no network'}). Give \`command\` as an argv array; the ` +
      'result shows the exit code and the head and tail of the output, the full output is stored. Use ' +
      '`background: true` for servers and watchers.',
    input: ExecInputSchema,
    // The safe flags: an unknown command may do anything. `factsOf` lifts them for allowlisted read-only commands.
    isReadOnly: false,
    isConcurrencySafe: false,
    isDestructive: true,
    isIdempotent: false,
    interruptBehavior: 'cancel',
    capabilities: ['shell', 'process', ...(config.sandbox.network ? ['network'] : [])],
    // The invocation's own timer is a backstop: each call runs under its own timeout (below), then the kill grace.
    timeoutMs: config.maxTimeoutMs + config.killGraceMs + 5_000,
    factsOf,
    operationOf: (input) => commandText(execCommand(input)),
    commandOf: (input) => execCommand(input),
    // The working directory and the arguments that are not options, so a path rule (and the default credential
    // rules: `cat .env`) sees them; what a program opens by itself is for the sandbox to contain.
    paths: (input, workspaceRoot) => {
      const words = input.command?.slice(1).filter(looksLikePath) ?? [];
      return [input.cwd, ...words].map((word) => requestedWorkspacePath(word, workspaceRoot));
    },
    check: (input) => {
      if (input.timeoutMs !== undefined && input.timeoutMs > config.maxTimeoutMs) {
        return new ToolError(
          'invalid_tool_input',
          `timeoutMs is over the binding's maxTimeoutMs (${config.maxTimeoutMs})`,
          {
            details: { field: 'timeoutMs', max: config.maxTimeoutMs },
          },
        );
      }
      if (input.background && config.maxBackground === 0) {
        return new ToolError('invalid_tool_input', 'background processes are turned off (exec.maxBackground is 0)', {
          details: { field: 'background' },
        });
      }
      return undefined;
    },
    execute: (input, context) => runExec(input, context, options),
  });
}

/** Run one call: sandbox plan, recorded start, the process under its timeout and the turn's interrupt, the end. */
async function runExec(input: ExecInput, context: ToolContext, options: ExecToolOptions): Promise<ToolOutput> {
  const { config } = options;
  const recorder = context.recorder;
  if (!recorder) throw new ToolError('unavailable', 'exec runs only as a tool action of a session (no recorder here)');
  if (context.signal.aborted) throw abortedError();
  const root = context.workspaceRoot;
  const cwd = await resolveWorkspacePath(root, input.cwd, { mustExist: true });
  if (!(await stat(cwd)).isDirectory()) {
    throw new ToolError('not_a_directory', `${input.cwd} is not a directory`, { details: { path: input.cwd } });
  }
  const command = execCommand(input);
  const argv = 'shell' in command ? ['/bin/sh', '-c', command.shell] : [...command.argv];
  const source = options.env ?? process.env;
  const env: Record<string, string> = {};
  const passed: string[] = [];
  for (const name of [...config.env, ...config.secrets]) {
    const value = source[name];
    if (value === undefined) continue;
    env[name] = value;
    passed.push(name);
  }
  Object.assign(env, input.env ?? {});
  // After the model's variables: the key is the runtime's, a command cannot be handed another call's.
  if (context.idempotencyKey) env[IDEMPOTENCY_KEY_ENV] = context.idempotencyKey;
  const plan = await planSandbox({
    settings: config.sandbox,
    workspaceRoot: root,
    cwd,
    argv,
    ...(options.storeFile ? { storeFile: options.storeFile } : {}),
    ...(source.HOME ? { home: source.HOME } : {}),
  });
  const processId = newId('proc');
  const timeoutMs = input.timeoutMs ?? config.timeoutMs;
  // A background process runs until it exits or is stopped; a timeout applies to it only when the call gives one.
  const timed = !input.background || input.timeoutMs !== undefined;
  const text = commandText(command);
  const caller = await context.caller?.();
  const background = input.background;
  // A background process belongs to a thread: without one to own it, it is not started at all.
  if (background && !caller)
    throw new ToolError('unavailable', 'a background process needs a session thread to own it');
  if (background && caller) {
    const running = backgroundProcesses.running(caller.sessionId);
    if (running >= config.maxBackground) {
      throw new ToolError('too_many_processes', `the session already has ${running} background processes running`, {
        retryable: true,
        details: { running, max: config.maxBackground },
      });
    }
  }
  // The profile is on record before the process exists, whatever it is.
  await recorder.facts([{ type: 'sandbox.applied', processId, payload: sandboxPayload(plan.profile, text) }]);
  if (plan.profile.profile === 'none' && config.sandbox.unsandboxed === 'deny') {
    throw new ToolError(
      'sandbox_unavailable',
      `the sandbox cannot start here (${plan.profile.reason}); exec.sandbox.unsandboxed is deny`,
      {
        details: { reason: plan.profile.reason },
      },
    );
  }
  const group = new ProcessGroup({
    argv: plan.argv,
    cwd,
    env,
    maxBytes: options.maxOutputBytes ?? 16 * 1024 * 1024,
    killGraceMs: config.killGraceMs,
  });
  const started = Date.now();
  // A start that cannot be recorded (the store failed, the lease is gone) must not leave a process nobody knows of.
  const recordStart = recorder.facts([
    {
      type: 'process.started',
      processId,
      payload: {
        processId,
        command: text,
        ...('argv' in command ? { argv: [...command.argv] } : { shell: true }),
        cwd: toWorkspaceRelative(root, cwd),
        // Names only: values never enter the record (secret ones are redacted from the output too).
        env: passed.sort(),
        ...(input.env ? { explicitEnv: Object.keys(input.env).sort() } : {}),
        ...(config.secrets.length > 0 ? { secretEnv: [...config.secrets].sort() } : {}),
        sandboxProfile: plan.profile.profile,
        network: plan.profile.network,
        ...(timed ? { timeoutMs } : {}),
        background,
        stdin: input.stdin !== undefined,
        ...(group.pid !== undefined ? { pid: group.pid } : {}),
      },
    },
  ]);
  try {
    await recordStart;
  } catch (error) {
    await group.stop('not_recorded');
    throw error;
  }
  streamLive(group, processId, recorder.live);
  if (input.stdin !== undefined) {
    group.write(input.stdin, !background);
    await recorder.facts([
      {
        type: 'process.input',
        processId,
        payload: { processId, bytes: Buffer.byteLength(input.stdin), closed: !background },
      },
    ]);
  } else if (!background) {
    group.write('', true);
  }
  const timer = timed ? setTimeout(() => void group.stop('timeout'), timeoutMs) : undefined;
  timer?.unref?.();
  if (background && caller) {
    const entry: BackgroundProcess = {
      processId,
      sessionId: caller.sessionId,
      owner: recorder.owner,
      threadId: caller.threadId,
      command: text,
      group,
      startedAt: started,
      profile: plan.profile,
      network: config.sandbox.network,
      read: 0,
    };
    backgroundProcesses.add(entry);
    // Interrupting the turn, losing the thread's lease or closing the runtime stops it (its group, whole).
    const stop = () => void group.stop(stopReason(recorder.turnSignal));
    if (recorder.turnSignal.aborted) stop();
    else recorder.turnSignal.addEventListener('abort', stop, { once: true });
    void group.ended.then(() => {
      clearTimeout(timer);
      recorder.turnSignal.removeEventListener('abort', stop);
    });
    const summary = `started in the background as ${processId}: ${text}`;
    return {
      text: `${summary}\nRead its output, write to its stdin or stop it with the process tool (processId ${processId}).`,
      summary,
      structured: { processId, background: true, command: text, pid: group.pid ?? null },
    };
  }
  const onAbort = () => void group.stop(stopReason(context.signal));
  if (context.signal.aborted) onAbort();
  else context.signal.addEventListener('abort', onAbort, { once: true });
  // While it runs, a person or client may stop it (`terminate_process`, worker/process-requests.ts).
  const foreground: ForegroundProcess | undefined = caller
    ? { processId, sessionId: caller.sessionId, threadId: caller.threadId, group }
    : undefined;
  if (foreground) foregroundProcesses.set(processId, foreground);
  let end: ProcessEnd;
  try {
    end = await group.ended;
  } finally {
    clearTimeout(timer);
    context.signal.removeEventListener('abort', onAbort);
    foregroundProcesses.delete(processId);
  }
  return finishForeground({
    processId,
    text,
    group,
    end,
    started,
    timeoutMs,
    recorder,
    profile: plan.profile,
    ...(foreground?.answers ? { answers: foreground.answers } : {}),
  });
}

/** The recorded end of a foreground call and what the model sees. */
async function finishForeground(run: {
  processId: string;
  text: string;
  group: ProcessGroup;
  end: ProcessEnd;
  started: number;
  timeoutMs: number;
  recorder: NonNullable<ToolContext['recorder']>;
  profile: SandboxProfile;
  /** The request a stop answers (`terminate_process`): recorded with the end. */
  answers?: Record<string, unknown>;
}): Promise<ToolOutput> {
  const { processId, group, end, recorder } = run;
  const durationMs = Date.now() - run.started;
  const violations = run.profile.profile === 'bwrap' ? sandboxViolations(group.stderrLines(), run.profile.network) : [];
  if (violations.length > 0) {
    await recorder.facts(
      violations.map((violation) => ({
        type: 'sandbox.violation' as const,
        processId,
        payload: {
          processId,
          kind: violation.kind,
          message:
            violation.kind === 'write_blocked'
              ? 'the sandbox refused a write outside the workspace'
              : 'the sandbox refused a network connection',
          evidence: violation.evidence,
          command: run.text,
        },
      })),
    );
  }
  // Under bwrap the program is started inside the sandbox: a missing one is bwrap's own complaint, exit 1.
  const bwrapExec =
    run.profile.profile === 'bwrap' && end.exitCode === 1
      ? group.stderrLines().find((line) => line.startsWith('bwrap: execvp'))
      : undefined;
  const spawnError =
    end.spawnError ??
    (bwrapExec ? { code: /No such file/.test(bwrapExec) ? 'ENOENT' : 'EACCES', message: bwrapExec } : undefined);
  if (spawnError) {
    const error = {
      code: spawnError.code === 'ENOENT' ? 'command_not_found' : 'spawn_failed',
      message: spawnError.message,
    };
    await recorder.facts([{ type: 'process.failed', processId, payload: { processId, error, durationMs } }]);
    throw new ToolError(error.code, `${run.text}: ${error.message}`, { details: { processId } });
  }
  const output = group.output();
  const binary = isBinary(output);
  // More than maxOutputBytes: the rest was counted, not kept (the whole kept part is the call's output).
  const truncated = group.truncation(processId);
  if (truncated.length > 0) await recorder.facts(truncated);
  const facts = { exitCode: end.exitCode, signal: end.signal, totalBytes: group.totalBytes, keptBytes: output.length };
  const shared = {
    processId,
    exitCode: end.exitCode,
    signal: end.signal,
    durationMs,
    outputBytes: group.totalBytes,
    ...(group.truncated ? { outputTruncated: true } : {}),
    ...(binary ? { binary: true } : {}),
    ...(violations.length > 0 ? { violations: violations.map((v) => v.kind) } : {}),
  };
  if (end.stoppedBy) {
    // Stopped by the runtime: the output so far is kept, the call fails naming why.
    const stored = output.length > 0 ? await storeOutput(recorder, processId, output, binary) : undefined;
    const reason = end.stoppedBy;
    await recorder.facts([
      reason === 'timeout'
        ? {
            type: 'process.failed',
            processId,
            payload: { ...shared, reason, ...(stored ? { outputRef: stored.uri } : {}) },
          }
        : {
            type: 'process.terminated',
            processId,
            payload: { ...shared, reason, ...(stored ? { outputRef: stored.uri } : {}), ...run.answers },
          },
    ]);
    if (reason === 'terminated') {
      throw new ToolError('process_terminated', `${run.text} was terminated on request (terminate_process)`, {
        details: { processId, ...(stored ? { outputRef: stored.uri } : {}) },
      });
    }
    if (reason !== 'timeout') throw abortedError();
    const tail = binary ? '' : output.toString('utf8').slice(-2_000);
    throw new ToolError(
      'tool_timeout',
      `${run.text} was stopped after ${run.timeoutMs} ms (its process group was killed)`,
      {
        retryable: false,
        details: {
          processId,
          timeoutMs: run.timeoutMs,
          ...(stored ? { outputRef: stored.uri } : {}),
          ...(tail ? { tail } : {}),
        },
      },
    );
  }
  if (binary) {
    const stored = await storeOutput(recorder, processId, output, true);
    await recorder.facts([{ type: 'process.completed', processId, payload: { ...shared, outputRef: stored.uri } }]);
    const summary = `${statusLine(facts)}; the output is binary and not shown: ${stored.uri}`;
    return {
      text: summary,
      summary,
      structured: { ...shared, outputRef: stored.uri },
      ...(end.exitCode !== 0 ? { isError: true } : {}),
    };
  }
  const textOutput = output.toString('utf8');
  const { view, cut } = outputView(textOutput, facts);
  await recorder.facts([{ type: 'process.completed', processId, payload: shared }]);
  return {
    text: textOutput,
    summary: statusLine(facts),
    view,
    structured: shared,
    // A non-zero exit is the command's failure, not the tool's: the call completed, the result says it failed.
    ...(end.exitCode !== 0 ? { isError: true } : {}),
    ...(cut ? { spilled: "a command's output over the view: the model sees its head and tail, with the ref" } : {}),
  };
}

async function storeOutput(
  recorder: NonNullable<ToolContext['recorder']>,
  processId: string,
  output: Buffer,
  binary: boolean,
): Promise<{ uri: string }> {
  return recorder.artifact(
    binary
      ? { name: `${processId}/output.bin`, mime: 'application/octet-stream', bytes: output }
      : { name: `${processId}/output.txt`, mime: 'text/plain', text: output.toString('utf8') },
  );
}

/** The live output of a process, line by line (a secret is redacted whole, never split across two deltas). */
export function streamLive(
  group: ProcessGroup,
  processId: string,
  live: NonNullable<ToolContext['recorder']>['live'],
): void {
  const held = { stdout: '', stderr: '' };
  // A character split across two chunks is decoded whole.
  const decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  group.onOutput((stream, chunk) => {
    if (chunk.includes(0)) return; // binary: stored, never streamed
    held[stream] += decoders[stream].write(chunk);
    const cut = held[stream].lastIndexOf('\n') + 1;
    const ready = cut > 0 ? held[stream].slice(0, cut) : held[stream].length > 4096 ? held[stream] : '';
    if (ready === '') return;
    held[stream] = held[stream].slice(ready.length);
    live({ processId, stream, delta: ready });
  });
  void group.ended.then(() => {
    for (const stream of ['stdout', 'stderr'] as const) {
      if (held[stream] !== '') live({ processId, stream, delta: held[stream] });
      held[stream] = '';
    }
  });
}

/** An argument that may name a file: not an option, an assignment, or code (whitespace, shell syntax). */
function looksLikePath(arg: string): boolean {
  return arg !== '' && !arg.startsWith('-') && !/[=\s;|&<>$`(){}'"]/.test(arg);
}

/** Why the turn's signal stopped a process: the lease went to another worker, the runtime closes, or an interrupt. */
function stopReason(signal: AbortSignal): string {
  const code = (signal.reason as { code?: unknown } | undefined)?.code;
  return code === 'lease_lost' ? 'lease_lost' : code === 'runtime_closing' ? 'runtime_closing' : 'interrupted';
}

function sandboxPayload(profile: SandboxProfile, command: string): Record<string, unknown> {
  return { ...profile, command, sandboxProfile: { ...profile } };
}
