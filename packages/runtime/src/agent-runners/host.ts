import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { oarError } from '@oar/protocol';
import type { Runner } from '@oar/runner-sdk';
import { failureOutcome, taskEnded } from '../facts/task-end.js';
import { localActor } from '../kernel/actor.js';
import { isClosing, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { EventDraft } from '../log/draft.js';
import { completeTurn, failTurn } from '../loop/turn-end.js';
import type { ThreadView, TurnState } from '../read-models/thread-state.js';
import type { AgentConfig, Engine } from '../scheduler/engine.js';
import { computeAccess, type RunAccess } from './access.js';
import { checkRunnerConfig } from './config-check.js';
import { expireDecisions } from './decisions.js';
import {
  type DiscoveredRunner,
  listPackageRunners,
  packageTransport,
  type RunnerPackage,
  readRunnerPackage,
  runnerEnv,
} from './packages.js';
import { apiHandler } from './proxy.js';
import { ResultStream, type RunEnd } from './results.js';
import { buildRunContext } from './run-context.js';
import { type RunnerRunIds, RunSession, runnerStatus } from './run-session.js';
import { runTools } from './tool-proxy.js';
import { inProcessTransport, type RunnerConnection, type RunnerTransport } from './transport.js';

/**
 * The runner host: an agent bound to a runner (`agent.runner`) runs each turn as one runner run instead of the
 * protocol loop. The run is one task attempt of the turn, driven by the worker holding the thread's lease, behind
 * the same narrow engine context as every executor:
 *
 *   task.created (taskKind runner) + task.attempt.started + run.status runner_started   (durable, before the process)
 *   → start the runner's package → LIST_AGENT_RUNNERS → check the manifest and the binding config
 *   → run.status runner_access (the frozen effective access: ids and ops) → RUN_AGENT with the run context
 *   → results mapped to facts; proxy calls checked and audited (run.status runner_api)
 *   → run.status runner_ended + task.attempt.completed|failed + task.completed|failed → turn.completed|failed
 *
 * The thread's state key `oar.runner.active` names the run while it is in flight: a worker that finds it set for the
 * active turn when it starts driving (the previous holder died) records the run lost and fails the turn.
 */

/** The thread-state key naming the runner run in flight (cleared in the same append as its end). */
export const ACTIVE_RUN_KEY = 'oar.runner.active';

/** How long past its deadline a run is failed: time for the calls that ended at the deadline to say so. */
export const DEADLINE_GRACE_MS = 250;

/** How long a cancelled runner may take to stop before its process group is killed. */
export const CANCEL_GRACE_MS = 2_000;

/** Runners served in this process (tests, built-in runners): a binding's package `inprocess:<name>` names one. */
const inProcess = new Map<string, Runner>();

export function registerInProcessRunner(name: string, runner: Runner): void {
  inProcess.set(name, runner);
}

const IN_PROCESS = 'inprocess:';

interface ActiveRun {
  turnId: string;
  runId: string;
  taskId: string;
  runnerId: string;
  /** The runner's process group and the machine it runs on, once started (a crash leaves them to clean up). */
  pid?: number;
  host?: string;
}

/** Run the active turn of a thread whose agent is bound to a runner. Returns true: the thread moved on. */
export async function runnerTurn(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  agent: AgentConfig,
  signal: AbortSignal,
): Promise<boolean> {
  const binding = agent.runner;
  if (!binding) return false;
  const active = thread.state[ACTIVE_RUN_KEY] as ActiveRun | undefined;
  if (active && active.turnId === turn.turnId) {
    await recordLost(engine, thread, turn, active);
    return true;
  }
  const ids: RunnerRunIds = {
    threadId: thread.threadId,
    turnId: turn.turnId,
    taskId: newId('task'),
    runId: newId('run'),
  };
  const started: ActiveRun = { turnId: turn.turnId, runId: ids.runId, taskId: ids.taskId, runnerId: binding.id };
  // Write-ahead: the attempt is on record before any process exists, so a crash from here on is found on resume.
  await engine.append(
    thread.sessionId,
    [
      {
        type: 'task.created',
        ...ids,
        ...(thread.parent ? { parentTaskId: thread.parent.delegationTaskId } : {}),
        payload: { title: `runner ${binding.id}`, objective: turn.input.slice(0, 200), taskKind: 'runner' },
      },
      { type: 'task.attempt.started', ...ids, payload: { attempt: 1, status: 'running' } },
      {
        type: 'run.status',
        ...ids,
        status: 'running',
        payload: {
          phase: 'runner_started',
          title: `runner ${binding.id}`,
          runner: { runId: ids.runId, runnerId: binding.id },
        },
      },
      stateFact(ids, started),
    ],
    { durable: true },
  );
  const outcome = await runOnce(engine, thread, turn, agent, ids, signal, (pid) =>
    engine.append(thread.sessionId, [stateFact(ids, { ...started, pid, host: hostname() })], { durable: true }),
  );
  if (outcome.kind === 'closing') return false; // recorded nothing, like a crash: the next worker finds it lost
  const stderr = outcome.stderr ? { stderr: outcome.stderr } : {};
  const ended = (status: string, extra: Record<string, unknown> = {}): EventDraft =>
    runnerStatus({ ids, runnerId: binding.id }, `runner ${binding.id}: ${status}`, {
      phase: 'runner_ended',
      status,
      ignoredResults: outcome.ignored,
      ...stderr,
      ...extra,
    });
  if (outcome.kind === 'cancelled') {
    // The interrupt's own handling (the worker) records the turn's end; the attempt ends here.
    await engine.append(thread.sessionId, [
      ended('cancelled'),
      {
        type: 'task.attempt.failed',
        ...ids,
        payload: {
          retryable: false,
          failureCategory: 'cancelled',
          error: oarError('interrupted', 'the turn was interrupted'),
        },
      },
      { type: 'task.cancelled', ...ids, payload: { reason: 'interrupted', requestedBy: 'interrupt' } },
      stateFact(ids, null),
    ]);
    return true;
  }
  const end = outcome.end;
  if (end.ok) {
    const answer = engine.redactor.redactText(end.answer);
    await engine.append(thread.sessionId, [
      ended('completed'),
      { type: 'task.attempt.completed', ...ids, payload: { summary: answer.slice(0, 200) } },
      { type: 'task.completed', ...ids, payload: { summary: answer.slice(0, 200) } },
      stateFact(ids, null),
    ]);
    await completeTurn(engine, thread, turn, {
      outcome: 'answered',
      answer,
      extra: { runner: { runId: ids.runId, runnerId: binding.id } },
    });
    return true;
  }
  const error = { ...end.error, details: { ...(end.error.details ?? {}), runnerId: binding.id, runId: ids.runId } };
  await engine.append(thread.sessionId, [
    ended('failed', { code: error.code }),
    { type: 'task.attempt.failed', ...ids, payload: { retryable: error.retryable, failureCategory: 'runner', error } },
    // Past its deadline (`runner_timeout`) the run's task is timed out, not merely failed.
    taskEnded(ids, failureOutcome(error)),
    stateFact(ids, null),
  ]);
  await failTurn(engine, thread, turn, error);
  return true;
}

function stateFact(ids: RunnerRunIds, value: ActiveRun | null): EventDraft {
  return {
    type: 'thread.updated',
    threadId: ids.threadId,
    turnId: ids.turnId,
    payload: { changed: [`state.${ACTIVE_RUN_KEY}`], state: { key: ACTIVE_RUN_KEY, value } },
  };
}

/** A run that was in flight when its worker died: never left running, never run again. */
async function recordLost(engine: Engine, thread: ThreadView, turn: TurnState, active: ActiveRun): Promise<void> {
  // Its process group may still hold helpers the runner started (the runner itself exits when its stdin closes):
  // on the machine that started it, they go now. (A recycled pid of another group leader is the accepted risk.)
  if (active.pid !== undefined && active.host === hostname()) {
    try {
      process.kill(-active.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  const ids: RunnerRunIds = {
    threadId: thread.threadId,
    turnId: turn.turnId,
    taskId: active.taskId,
    runId: active.runId,
  };
  const error = oarError(
    'runner_lost',
    `runner ${active.runnerId} was running when its host stopped; it is not run again`,
    {
      details: { runnerId: active.runnerId, runId: active.runId },
    },
  );
  // Its open questions are closed first (each guarded: an answer committed meanwhile stands): nobody is left to act.
  const unanswered = thread.pending
    .filter((p) => p.runId === active.runId && p.actionType !== 'user_input')
    .map((p) => ({
      actionId: p.actionId,
      actionType: p.actionType as 'tool_approval' | 'platform_action',
      toolName: p.toolName ?? '',
      ...(p.toolCallId ? { toolCallId: p.toolCallId } : {}),
    }));
  await expireDecisions(engine, thread.sessionId, ids, unanswered, 'the runner run was lost');
  await engine.append(thread.sessionId, [
    runnerStatus({ ids, runnerId: active.runnerId }, `runner ${active.runnerId}: lost`, {
      phase: 'runner_ended',
      status: 'lost',
    }),
    { type: 'task.attempt.failed', ...ids, payload: { retryable: false, failureCategory: 'lost', error } },
    { type: 'task.failed', ...ids, payload: { error } },
    stateFact(ids, null),
  ]);
  await failTurn(engine, thread, turn, error);
}

type RunOutcome =
  | { kind: 'ended'; end: RunEnd; stderr?: string; ignored: number }
  | { kind: 'cancelled'; stderr?: string; ignored: number }
  | { kind: 'closing' };

function unavailable(message: string, details: Record<string, unknown>): RunOutcome {
  return { kind: 'ended', end: { ok: false, error: oarError('runner_unavailable', message, { details }) }, ignored: 0 };
}

/** The package and transport of a binding: a directory started as a child process, or an in-process runner. */
async function transportOf(
  packageRef: string | undefined,
  runnerId: string,
  env: readonly string[],
): Promise<{ pkg: RunnerPackage; transport: RunnerTransport } | { error: string }> {
  if (!packageRef) return { error: 'the binding names no runner package (configure runners.packages)' };
  if (packageRef.startsWith(IN_PROCESS)) {
    const runner = inProcess.get(packageRef.slice(IN_PROCESS.length));
    if (!runner) return { error: `no in-process runner ${packageRef} in this process` };
    const plugin = runnerId.split(':')[1]?.split('/').slice(0, 2).join('/') ?? '';
    return { pkg: { plugin, command: '', args: [], dir: packageRef }, transport: inProcessTransport(runner) };
  }
  const pkg = await readRunnerPackage(packageRef);
  if ('reason' in pkg) return { error: pkg.reason };
  return { pkg, transport: packageTransport(pkg, runnerEnv(env, process.env)) };
}

async function runOnce(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  agent: AgentConfig,
  ids: RunnerRunIds,
  signal: AbortSignal,
  started: (pid: number) => Promise<void>,
): Promise<RunOutcome> {
  const binding = agent.runner as NonNullable<AgentConfig['runner']>;
  const found = await transportOf(binding.package, binding.id, binding.policy?.env ?? []);
  if ('error' in found)
    return unavailable(`runner ${binding.id} cannot be started: ${found.error}`, { runnerId: binding.id });
  let session: RunSession | undefined;
  const runController = new AbortController();
  const runSignal = AbortSignal.any([signal, runController.signal]);
  let connection: RunnerConnection;
  try {
    connection = await found.transport.connect((method, params, stream) =>
      session ? apiHandler(session)(method, params, stream) : Promise.reject(new Error('no run is active yet')),
    );
  } catch (error) {
    return unavailable(`runner ${binding.id} cannot be started: ${(error as Error).message}`, { runnerId: binding.id });
  }
  const stderr = () => {
    const text = connection.stderr();
    return text ? engine.redactor.redactText(text.slice(-4_096)) : undefined;
  };
  try {
    if (connection.pid !== undefined) await started(connection.pid);
    const listed = await listPackageRunners(found.pkg, connection);
    const discovered: DiscoveredRunner | undefined = listed.runners.find((r) => r.id === binding.id);
    if (!discovered) {
      // Why it was skipped: notes (what a LangBot manifest was read as) skipped nothing.
      const skips = listed.diagnostics.filter((d) => d.severity !== 'note');
      const diagnostic = skips.find((d) => d.runner === binding.id) ?? skips[0];
      return unavailable(
        `runner ${binding.id} is not provided by its package${diagnostic ? `: ${diagnostic.reason}` : ''}`,
        {
          runnerId: binding.id,
          ...(diagnostic ? { diagnostic: { ...diagnostic } } : {}),
        },
      );
    }
    const manifest = discovered.manifest;
    let config: Record<string, unknown>;
    try {
      config = checkRunnerConfig(binding.id, manifest.config_schema, binding.config);
    } catch (error) {
      if (error instanceof OarRuntimeError)
        return { kind: 'ended', end: { ok: false, error: error.error }, ignored: 0 };
      throw error;
    }
    const access: RunAccess = computeAccess(manifest, binding.policy, {
      models: ['default', ...Object.keys(engine.binding.models)],
      tools: agent.tools ?? engine.binding.tools,
      knowledgeBases: (binding.knowledge ?? []).map((kb) => kb.id),
    });
    const deadlineAt = Date.now() + access.timeoutMs;
    session = new RunSession(engine, thread, agent, binding.id, ids, access, deadlineAt, runSignal);
    session.capabilities = manifest.capabilities;
    await session.record([
      runnerStatus(session, `runner ${binding.id}: access`, {
        phase: 'runner_access',
        runnerName: manifest.name,
        access,
        configFields: Object.keys(config).sort(),
        deadlineAt: new Date(deadlineAt).toISOString(),
      }),
    ]);
    const workspace = await engine.session(thread.sessionId);
    const context = buildRunContext({
      thread,
      turn,
      runId: ids.runId,
      manifest,
      access,
      config,
      deadlineAt,
      traceId: turn.trace?.traceId ?? randomUUID().replace(/-/g, ''),
      tools: runTools(session),
      workspaceId: workspace?.workspaceId ?? 'default',
      // The session's actor, as the governed tool path uses it (executors/tool.ts).
      actor: workspace?.actor ?? localActor(),
    });
    const stream = new ResultStream(session);
    const failed = (code: string, message: string, details: Record<string, unknown> = {}) =>
      stream.drained().then(() => stream.finish({ ok: false, error: oarError(code, message, { details }) }));
    connection.peer
      .request(
        'RUN_AGENT',
        { runner_id: binding.id, runner_name: manifest.name, context },
        {
          onChunk: (chunk) => stream.push(chunk),
          signal: runSignal,
        },
      )
      .then(
        () => failed('runner_no_result', 'the result stream ended without run.completed or run.failed'),
        (error: unknown) => {
          const code = (error as { code?: string }).code;
          if (code === 'runner_exited')
            return failed('runner_crashed', `the runner exited during the run: ${(error as Error).message}`);
          return failed('runner_protocol_error', `the run request failed: ${(error as Error).message}`, {
            reason: code ?? null,
          });
        },
      );
    void connection.exited.then((exit) =>
      exit.fault
        ? failed('runner_protocol_error', `the runner broke the wire: ${exit.fault.message}`, {
            reason: exit.fault.code,
          })
        : failed('runner_crashed', `the runner exited during the run (code ${exit.code}, signal ${exit.signal})`),
    );
    // The run is failed a moment after its deadline: a call that ends at the deadline (a question nobody answered)
    // gets its deadline_exceeded to the runner first, instead of a closed connection.
    const remaining = Math.max(0, deadlineAt - Date.now()) + DEADLINE_GRACE_MS;
    const timer = setTimeout(
      () =>
        stream.finish({
          ok: false,
          error: oarError('runner_timeout', `the run passed its deadline (${access.timeoutMs} ms)`, {
            retryable: true,
          }),
        }),
      remaining,
    );
    const onAbort = () => stream.finish({ ok: false, error: oarError('interrupted', 'the turn was interrupted') });
    signal.addEventListener('abort', onAbort, { once: true });
    if (signal.aborted) onAbort();
    let end = await stream.ended;
    // An action.requested decision is answered (or closed by the deadline or an interrupt) before the end is recorded.
    if (session.requestedActions.size > 0) {
      await Promise.allSettled([...session.requestedActions]);
      if (end.ok && session.requestedActionTimedOut) {
        end = {
          ok: false,
          error: oarError('runner_timeout', 'the run passed its deadline waiting for a platform action decision', {
            retryable: true,
          }),
        };
      }
    }
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
    session.end();
    const cancel = signal.aborted || (!end.ok && end.error.code === 'runner_timeout');
    if (cancel) {
      // Ask first (a runner that supports interrupt stops cleanly), then kill the group past the grace period.
      void connection.peer
        .request('CANCEL_AGENT_RUN', { run_id: ids.runId }, { signal: AbortSignal.timeout(CANCEL_GRACE_MS) })
        .catch(() => undefined);
      await connection.close(CANCEL_GRACE_MS);
    }
    // Calls the runner made before it heard of the end get their (refusing) answer, then it is closed.
    await connection.peer.settled(1_000);
    runController.abort(new Error('the run ended'));
    // Questions nobody answered are closed now, before the turn's end (their calls stop waiting with the run).
    if (!isClosing(signal)) {
      await expireDecisions(engine, thread.sessionId, ids, [...session.openDecisions.values()], 'the runner run ended');
    }
    await Promise.race([stream.drained(), new Promise((resolve) => setTimeout(resolve, 1_000))]);
    engine.deltas?.end();
    if (signal.aborted) {
      return isClosing(signal)
        ? { kind: 'closing' }
        : { kind: 'cancelled', ...withStderr(stderr()), ignored: stream.ignoredCount };
    }
    return { kind: 'ended', end, ...withStderr(stderr()), ignored: stream.ignoredCount };
  } finally {
    session?.end();
    runController.abort(new Error('the run ended'));
    await connection.close(500);
  }
}

function withStderr(text: string | undefined): { stderr?: string } {
  return text ? { stderr: text } : {};
}
