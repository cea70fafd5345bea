import { AgentAPIError } from './errors.js';
import { AgentRunAPIProxy } from './proxy.js';
import { LineSplitter, Peer, PeerError, type PeerLimits, type RequestStream, wireError } from './rpc.js';
import {
  type AgentRunContext,
  type AgentRunnerManifestInput,
  AgentRunnerManifestSchema,
  AgentRunRequestSchema,
  type ResultType,
} from './schemas.js';

/** The host → runner methods. */
export const RUNNER_METHODS = {
  list: 'LIST_AGENT_RUNNERS',
  run: 'RUN_AGENT',
  cancel: 'CANCEL_AGENT_RUN',
} as const;

/** What a runner's `run` gets besides the context. */
export interface RunTools {
  /** The host API of this run (models, tools, history, events, artifacts, state). */
  api: AgentRunAPIProxy;
  /** Send one result; `sequence` and `timestamp` are filled in. */
  emit(type: ResultType | string, data?: Record<string, unknown>): Promise<void>;
  /** Aborted when the host cancels the run (an interrupt, the deadline). */
  signal: AbortSignal;
}

export interface RunnerSpec {
  manifest: AgentRunnerManifestInput;
  /**
   * Run once. Returning without a terminal result sends `run.completed`; throwing sends `run.failed` (code
   * `runner.error`, or `cancelled` after a cancel).
   */
  run(ctx: AgentRunContext, tools: RunTools): Promise<void>;
}

export interface Runner {
  readonly runners: readonly RunnerSpec[];
  /** Serve the host over this process's stdin/stdout; the process exits when stdin closes (the host is gone). */
  serveStdio(limits?: Partial<PeerLimits>): void;
  /** Serve one connection whose lines go out through `writeLine`; give it the received lines (in-process hosts). */
  connect(writeLine: (line: string) => Promise<void> | void, limits?: Partial<PeerLimits>): Peer;
}

/** A runner process with one or more runners: `defineRunner({runners: [{manifest, run}]}).serveStdio()`. */
export function defineRunner(definition: { runners: RunnerSpec[] }): Runner {
  const runners = definition.runners;
  // A manifest the SDK already knows to be wrong is a bug of the runner: fail at start, not at the host.
  for (const spec of runners) AgentRunnerManifestSchema.parse(spec.manifest);
  const connect = (writeLine: (line: string) => Promise<void> | void, limits?: Partial<PeerLimits>): Peer => {
    const active = new Map<string, AbortController>();
    // The handler is created before the peer it answers through; it only runs once the peer receives a line.
    const holder: { peer?: Peer } = {};
    const peer = new Peer(
      writeLine,
      async (method, params, stream) => {
        if (method === RUNNER_METHODS.list) return { runners: runners.map((r) => r.manifest) };
        if (method === RUNNER_METHODS.cancel) {
          const runId = (params as { run_id?: unknown } | undefined)?.run_id;
          const controller = typeof runId === 'string' ? active.get(runId) : undefined;
          controller?.abort(new AgentAPIError({ code: 'runtime_error', message: 'cancelled by the host' }));
          return { cancelled: controller !== undefined };
        }
        if (method === RUNNER_METHODS.run) return runOne(holder.peer as Peer, runners, params, stream, active);
        throw new PeerError(wireError('not_found', `unknown method ${method}`));
      },
      limits,
    );
    holder.peer = peer;
    return peer;
  };
  return {
    runners,
    connect,
    serveStdio(limits) {
      const out = process.stdout;
      const peer = connect(
        (line) =>
          new Promise<void>((resolve, reject) => {
            // Backpressure: the next frame waits until this one is handed to the OS.
            out.write(`${line}\n`, (error) => (error ? reject(error) : resolve()));
          }),
        limits,
      );
      const splitter = new LineSplitter(
        peer.limits.maxFrameBytes,
        (line) => peer.receive(line),
        () => peer.fault(wireError('frame_too_large', 'a line longer than the frame limit')),
      );
      process.stdin.setEncoding('utf8');
      process.stdin.on('data', (chunk: string) => splitter.push(chunk));
      // The host closed the pipe (it ended the run, or it died): nothing can be answered any more.
      process.stdin.on('end', () => {
        peer.close();
        process.exit(0);
      });
    },
  };
}

async function runOne(
  peer: Peer,
  runners: readonly RunnerSpec[],
  params: unknown,
  stream: RequestStream,
  active: Map<string, AbortController>,
): Promise<null> {
  const parsed = AgentRunRequestSchema.safeParse(params);
  if (!parsed.success) throw new PeerError(wireError('invalid_argument', 'RUN_AGENT params do not match'));
  const request = parsed.data;
  const spec = runners.find((r) => r.manifest.id === request.runner_id);
  if (!spec) throw new PeerError(wireError('not_found', `no runner ${request.runner_id}`));
  const ctx = request.context;
  const controller = new AbortController();
  active.set(ctx.run_id, controller);
  const signal = AbortSignal.any([controller.signal, stream.signal]);
  let sequence = 0;
  let ended = false;
  const emit = async (type: string, data: Record<string, unknown> = {}) => {
    if (ended) return;
    if (type === 'run.completed' || type === 'run.failed') ended = true;
    await stream.send({ run_id: ctx.run_id, type, data, sequence: sequence++, timestamp: Date.now() });
  };
  const api = new AgentRunAPIProxy(peer, ctx.run_id, ctx.runtime.deadline_at, signal);
  try {
    await spec.run(ctx, { api, emit, signal });
    await emit('run.completed', {});
  } catch (error) {
    const cancelled = signal.aborted;
    await emit('run.failed', {
      code: cancelled ? 'cancelled' : 'runner.error',
      message: error instanceof Error ? error.message : String(error),
      retryable: false,
    });
  } finally {
    active.delete(ctx.run_id);
  }
  return null;
}
