import type { BindingUpdate } from '../config/binding.js';
import type { ScheduleDefinition, ScheduleFact } from '../config/schedules.js';
import type { StartJobInput } from '../control-plane/jobs.js';
import {
  type FiringRow,
  finishFiring,
  firingRows,
  type ScheduleRow,
  type StartedWork,
} from '../control-plane/schedule-rows.js';
import { overlapDecision } from '../control-plane/schedule-timing.js';
import type { CreateSessionInput } from '../control-plane/sessions.js';
import type { InterruptTurnInput, SubmitTurnInput } from '../control-plane/turns.js';
import { canonicalJson } from '../kernel/canonical-json.js';
import { sha256Hex } from '../kernel/digest.js';
import { OarRuntimeError, toOarError } from '../kernel/errors.js';
import type { Db } from '../store/store.js';
import { DEFAULT_WORKSPACE, sessionIdIn } from '../store/workspaces.js';

/**
 * One firing of a schedule, once its cron time is claimed (worker/schedule-ticker.ts): the overlap policy against
 * the previous firing's work, then the work itself through the control plane — a turn, a new session with its
 * first turn, or a job in a new session — and the firing's record. Every id is derived from (schedule, cron time),
 * so a firing started again after a crash finds what the first attempt made instead of making it twice.
 */

/** What firing needs of the runtime: the control plane's commands and what is running. */
export interface FiringPort {
  db: Db;
  createSession(input: CreateSessionInput): Promise<{ sessionId: string; threadId: string }>;
  mainThreadId(sessionId: string): Promise<string>;
  submitTurn(input: SubmitTurnInput): Promise<{ threadId: string; turnId: string }>;
  interruptTurn(input: InterruptTurnInput): Promise<unknown>;
  /** The job already in a session (a firing restarted after a crash), if any. */
  jobOf(sessionId: string): Promise<{ jobId: string } | undefined>;
  startJob(input: StartJobInput): Promise<{ jobId: string }>;
  cancelJob(jobId: string, reason: string): Promise<unknown>;
  /** Whether a turn is queued or running (not ended). */
  turnRunning(sessionId: string, threadId: string, turnId: string): Promise<boolean>;
  jobRunning(jobId: string): Promise<boolean>;
  /** This process's worker looks at the session now. */
  look(sessionId: string): Promise<void>;
}

/** The ids a firing's work gets: derived, so a second attempt of the same firing meets the first's. */
export function firingIds(scheduleId: string, fireAt: string, workspaceId: string | undefined) {
  const hash = sha256Hex(`${scheduleId}\n${fireAt}`).slice(0, 24);
  return {
    sessionId: sessionIdIn(workspaceId ?? DEFAULT_WORKSPACE, `ses_sch_${hash}`),
    turnId: `turn_sch_${hash}`,
  };
}

/** The binding changes of the sessions a schedule's firings create: `binding`, with `budget` as its budgets. */
export function firingBinding(definition: ScheduleDefinition): BindingUpdate | undefined {
  if (!definition.binding && !definition.budget) return undefined;
  return { ...definition.binding, ...(definition.budget ? { budgets: definition.budget } : {}) };
}

function factOf(schedule: ScheduleRow, fireAt: string, missed: number | undefined): ScheduleFact {
  const binding = firingBinding(schedule.definition);
  return {
    scheduleId: schedule.scheduleId,
    firedAt: fireAt,
    kind: schedule.definition.start.kind,
    ...(binding ? { bindingHash: `sha256:${sha256Hex(canonicalJson(binding))}` } : {}),
    ...(missed ? { catchUp: { missed } } : {}),
  };
}

/** Whether the work a previous firing started is still going. */
async function stillRunning(port: FiringPort, started: StartedWork): Promise<boolean> {
  if (started.jobId) return port.jobRunning(started.jobId);
  if (started.threadId && started.turnId) return port.turnRunning(started.sessionId, started.threadId, started.turnId);
  return false;
}

async function cancelPrevious(port: FiringPort, started: StartedWork, reason: string): Promise<void> {
  if (started.jobId) await port.cancelJob(started.jobId, reason);
  else if (started.threadId && started.turnId) {
    await port.interruptTurn({
      sessionId: started.sessionId,
      threadId: started.threadId,
      turnId: started.turnId,
      reason,
      waitMs: 0,
    });
  }
}

/**
 * Fire a claimed cron time: the overlap policy, then the work, then the record (`started`, `skipped` with reason
 * `overlap`, `queued`, or `failed` with the error's code). Never throws for the work's failure: it is recorded.
 */
export async function fire(
  port: FiringPort,
  schedule: ScheduleRow,
  fireAt: string,
  options: { missed?: number } = {},
): Promise<FiringRow['status']> {
  const ref = { scheduleId: schedule.scheduleId, fireAt };
  const definition = schedule.definition;
  try {
    const previous = (
      await firingRows(port.db, schedule.scheduleId, { before: fireAt, status: 'started', limit: 1 })
    )[0];
    const running = previous?.started ? await stillRunning(port, previous.started) : false;
    let decision = overlapDecision(definition.overlap, running, definition.start.kind);
    // Queued firings start one at a time, oldest first: one behind an earlier firing not started yet (queued, or
    // claimed by another worker this moment) waits too — else both would start once the work before them ended.
    if (decision === 'start' && definition.overlap === 'queue' && definition.start.kind !== 'turn') {
      const earlier = await firingRows(port.db, schedule.scheduleId, {
        before: fireAt,
        status: ['queued', 'claimed'],
        limit: 1,
      });
      if (earlier.length > 0) decision = 'wait';
    }
    if (decision === 'skip' || decision === 'wait') {
      const status = decision === 'skip' ? 'skipped' : 'queued';
      await finishFiring(port.db, { ...ref, status, reason: 'overlap', details: { previous: previous?.fireAt } });
      return status;
    }
    if (decision === 'cancel_then_start' && previous?.started) {
      await cancelPrevious(port, previous.started, `schedule ${schedule.scheduleId}: firing of ${fireAt} cancels it`);
    }
    const started = await startWork(port, schedule, fireAt, factOf(schedule, fireAt, options.missed));
    await finishFiring(port.db, {
      ...ref,
      status: 'started',
      started,
      ...(options.missed ? { details: { missed: options.missed } } : {}),
    });
    await port.look(started.sessionId).catch(() => undefined);
    return 'started';
  } catch (failure) {
    const error = toOarError(failure);
    // A store that failed us is retried (the claim stays `claimed`, taken over after the grace period); anything
    // else is this firing's own failure, on record.
    if (error.code === 'store_unavailable') throw failure;
    await finishFiring(port.db, { ...ref, status: 'failed', reason: error.code, details: { error } });
    return 'failed';
  }
}

async function startWork(
  port: FiringPort,
  schedule: ScheduleRow,
  fireAt: string,
  fact: ScheduleFact,
): Promise<StartedWork> {
  const start = schedule.definition.start;
  const ids = firingIds(schedule.scheduleId, fireAt, schedule.workspaceId);
  const submit = (sessionId: string, threadId: string | undefined, input: string) =>
    port.submitTurn({
      sessionId,
      ...(threadId ? { threadId } : {}),
      turnId: ids.turnId,
      input,
      source: 'schedule',
      // A firing never refuses to wait behind another turn: `overlap` decided already whether it should run.
      ifBusy: 'enqueue',
      schedule: fact,
    });
  if (start.kind === 'turn') {
    const turn = await submit(start.sessionId, start.threadId, start.input);
    return { sessionId: start.sessionId, threadId: turn.threadId, turnId: turn.turnId };
  }
  const title =
    start.kind === 'session'
      ? (start.title ?? `schedule ${schedule.scheduleId}`)
      : `job: ${start.name ?? `schedule ${schedule.scheduleId}`}`;
  const session = await sessionOf(
    port,
    schedule,
    ids.sessionId,
    title,
    fact,
    start.kind === 'session' ? start.agent : undefined,
  );
  if (start.kind === 'session') {
    const turn = await submit(session.sessionId, session.threadId, start.input);
    return { sessionId: session.sessionId, threadId: turn.threadId, turnId: turn.turnId };
  }
  const job =
    (await port.jobOf(session.sessionId)) ??
    (await port.startJob({
      // One job per firing: its id derived from the firing's session, so a second attempt (a claim taken over while
      // the first worker was still starting it) finds the first's job instead of starting another.
      jobId: `job_${sha256Hex(session.sessionId).slice(0, 24)}`,
      sessionId: session.sessionId,
      items: start.items,
      prompt: start.prompt,
      ...(start.name ? { name: start.name } : {}),
      ...(start.agent ? { agent: start.agent } : {}),
      ...(start.policy ? { policy: start.policy } : {}),
      requestedBy: `schedule:${schedule.scheduleId}`,
    }));
  return { sessionId: session.sessionId, jobId: job.jobId };
}

/** The firing's own session: created with the schedule's binding and fact, or found (a second attempt). */
async function sessionOf(
  port: FiringPort,
  schedule: ScheduleRow,
  sessionId: string,
  title: string,
  fact: ScheduleFact,
  agent: string | undefined,
): Promise<{ sessionId: string; threadId: string }> {
  const binding = firingBinding(schedule.definition);
  try {
    return await port.createSession({
      // The chosen id without the workspace prefix: createSession adds it.
      sessionId: sessionId.slice(sessionId.indexOf('ses_sch_')),
      title,
      ...(agent ? { agent } : {}),
      ...(binding ? { binding } : {}),
      ...(schedule.workspaceId ? { workspaceId: schedule.workspaceId } : {}),
      actor: `schedule:${schedule.scheduleId}`,
      schedule: fact,
    });
  } catch (error) {
    if (!(error instanceof OarRuntimeError && error.code === 'session_exists')) throw error;
    return { sessionId, threadId: await port.mainThreadId(sessionId) };
  }
}
