import { z } from 'zod';
import { ToolError } from '../../kernel/errors.js';
import { type AnyTool, defineTool, type ToolContext, type ToolOutput, type ToolRecorder } from '../tool.js';
import { isBinary, outputView } from './output.js';
import type { ProcessEnd } from './process-group.js';
import { type BackgroundProcess, backgroundProcesses } from './processes.js';

export const PROCESS_TOOL = 'process';

const ProcessInputSchema = z
  .strictObject({
    processId: z.string().min(1).max(100).describe('The id `exec` returned for a background process.'),
    action: z
      .enum(['read', 'write', 'terminate'])
      .describe('read: its new output and status; write: send text to its stdin; terminate: stop it.'),
    input: z.string().max(1_000_000).optional().describe('For write: the text sent to its standard input.'),
    closeStdin: z.boolean().default(false).describe('For write: close its standard input afterwards (end of input).'),
    waitMs: z
      .number()
      .int()
      .min(0)
      .max(600_000)
      .default(0)
      .describe('For read: wait up to this long for the process to exit before reading (0: read at once).'),
  })
  .refine((value) => value.action !== 'write' || value.input !== undefined || value.closeStdin, {
    message: 'write needs `input` (or `closeStdin: true`)',
  });
export type ProcessInput = z.infer<typeof ProcessInputSchema>;

/**
 * The companion of `exec` for background processes: read new output, write stdin, terminate. A process belongs to
 * the thread that started it; any other id (unknown here, another session's or thread's, from before a restart)
 * is `unavailable`, recorded as a `runtime.warning` — never a crash.
 */
export function processTool(): AnyTool {
  return defineTool<ProcessInput>({
    name: PROCESS_TOOL,
    description:
      'Work with a background process started by exec (background: true): read its new output and status, write ' +
      'to its stdin, or terminate it.',
    input: ProcessInputSchema,
    isReadOnly: false,
    isConcurrencySafe: false,
    isDestructive: false,
    isIdempotent: false,
    interruptBehavior: 'cancel',
    capabilities: ['process'],
    factsOf: (input) =>
      input.action === 'read' ? { isReadOnly: true, isConcurrencySafe: true, isIdempotent: true } : {},
    operationOf: (input) => input.action,
    async execute(input, context) {
      const recorder = context.recorder;
      if (!recorder) throw new ToolError('unavailable', 'process runs only as a tool action of a session');
      const entry = await owned(input.processId, context, recorder);
      if (input.action === 'read') {
        if (input.waitMs > 0 && entry.group.running) await exitOrTimeout(entry, input.waitMs, context.signal);
        return read(entry, recorder);
      }
      if (input.action === 'write') return write(entry, input, recorder);
      return terminate(entry, recorder);
    },
  });
}

/** The process, if the calling thread owns it; otherwise `unavailable` with a warning on record. */
async function owned(processId: string, context: ToolContext, recorder: ToolRecorder): Promise<BackgroundProcess> {
  const caller = await context.caller?.();
  const entry = backgroundProcesses.get(processId);
  if (entry && caller && entry.sessionId === caller.sessionId && entry.threadId === caller.threadId) return entry;
  // The same answer for unknown and foreign ids: another session's process ids are not disclosed.
  const message = `process ${processId} is not available to this thread (unknown, from another session or thread, or from before a restart)`;
  await recorder.facts([
    {
      type: 'runtime.warning',
      processId,
      payload: { code: 'process_unavailable', message, retryable: false, details: { processId } },
    },
  ]);
  throw new ToolError('unavailable', message, { details: { processId } });
}

/** Until the process exits, `ms` pass or the call is interrupted, whichever comes first. */
function exitOrTimeout(entry: BackgroundProcess, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    void entry.group.ended.then(done);
  });
}

async function read(entry: BackgroundProcess, recorder: ToolRecorder): Promise<ToolOutput> {
  const output = entry.group.output();
  const fresh = output.subarray(entry.read);
  entry.read = output.length;
  const ended = entry.group.running ? undefined : await entry.group.ended;
  const binary = isBinary(fresh);
  const text = binary ? `[${fresh.length} bytes of binary output]` : fresh.toString('utf8');
  const status = ended ? endText(ended) : 'running';
  const structured = {
    processId: entry.processId,
    status: ended ? 'exited' : 'running',
    ...(ended ? { exitCode: ended.exitCode, signal: ended.signal } : {}),
    newBytes: fresh.length,
    outputBytes: entry.group.totalBytes,
  };
  if (ended) await recordEnd(entry, ended, recorder);
  const { view } = outputView(text, {
    exitCode: ended?.exitCode ?? 0,
    signal: ended?.signal ?? null,
    totalBytes: fresh.length,
    keptBytes: fresh.length,
  });
  const body = view.slice(view.indexOf('\n') + 1);
  const summary = `${entry.processId} ${status}; ${fresh.length} new bytes`;
  // The model's view: the status and the new output's head and tail; all of it is the call's stored text.
  return {
    text: fresh.length > 0 ? `${summary}\n${text}` : summary,
    summary,
    view: fresh.length > 0 ? `${summary}\n${body}` : summary,
    structured,
  };
}

async function write(entry: BackgroundProcess, input: ProcessInput, recorder: ToolRecorder): Promise<ToolOutput> {
  const text = input.input ?? '';
  if (!entry.group.running || !entry.group.write(text, input.closeStdin)) {
    throw new ToolError('process_exited', `process ${entry.processId} has exited or closed its input`, {
      details: { processId: entry.processId },
    });
  }
  await recorder.facts([
    {
      type: 'process.input',
      processId: entry.processId,
      payload: { processId: entry.processId, bytes: Buffer.byteLength(text), closed: input.closeStdin },
    },
  ]);
  const summary = `wrote ${Buffer.byteLength(text)} bytes to ${entry.processId}${input.closeStdin ? ' and closed its input' : ''}`;
  return { text: summary, summary, structured: { processId: entry.processId, bytes: Buffer.byteLength(text) } };
}

async function terminate(entry: BackgroundProcess, recorder: ToolRecorder): Promise<ToolOutput> {
  const wasRunning = entry.group.running;
  const ended = await entry.group.stop('terminated');
  await recordEnd(entry, ended, recorder);
  const summary = wasRunning
    ? `terminated ${entry.processId} (${endText(ended)})`
    : `${entry.processId} had already ${endText(ended)}`;
  return {
    text: summary,
    summary,
    structured: { processId: entry.processId, exitCode: ended.exitCode, signal: ended.signal, terminated: wasRunning },
  };
}

/**
 * Record a background process's end once: its whole output as an artifact, and the fact naming how it ended;
 * `facts` ride along (the request a `terminate_process` answers).
 */
export async function recordEnd(
  entry: BackgroundProcess,
  ended: ProcessEnd,
  recorder: Pick<ToolRecorder, 'facts' | 'artifact'>,
  facts: Record<string, unknown> = {},
): Promise<void> {
  if (entry.recorded) return;
  entry.recorded = true;
  const output = entry.group.output();
  const binary = isBinary(output);
  const stored =
    output.length > 0
      ? await recorder.artifact(
          binary
            ? { name: `${entry.processId}/output.bin`, mime: 'application/octet-stream', bytes: output }
            : { name: `${entry.processId}/output.txt`, mime: 'text/plain', text: output.toString('utf8') },
        )
      : undefined;
  const payload = {
    processId: entry.processId,
    exitCode: ended.exitCode,
    signal: ended.signal,
    durationMs: Date.now() - entry.startedAt,
    outputBytes: entry.group.totalBytes,
    ...(stored ? { outputRef: stored.uri } : {}),
    ...(ended.stoppedBy ? { reason: ended.stoppedBy } : {}),
    ...facts,
  };
  const type =
    ended.stoppedBy === 'timeout' ? 'process.failed' : ended.stoppedBy ? 'process.terminated' : 'process.completed';
  await recorder.facts([
    ...entry.group.truncation(entry.processId, stored?.artifactId),
    { type, processId: entry.processId, payload },
  ]);
}

function endText(end: ProcessEnd): string {
  if (end.stoppedBy)
    return `stopped (${end.stoppedBy}), ${end.exitCode !== null ? `exit ${end.exitCode}` : `signal ${end.signal}`}`;
  return end.exitCode !== null ? `exited with ${end.exitCode}` : `was killed by ${end.signal}`;
}
