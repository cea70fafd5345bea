import type { z } from 'zod';
import {
  type AddScheduleInput,
  AddScheduleInputSchema,
  type ScheduleDefinition,
  type ScheduleDefinitionInput,
  SchedulesSchema,
} from '../config/schedules.js';
import type { Commands } from '../control-plane/commands.js';
import type { JobView } from '../control-plane/jobs.js';
import {
  addSchedule,
  getSchedule,
  listSchedules,
  pauseSchedule,
  removeSchedule,
  resumeSchedule,
  type ScheduleIdInput,
  type ScheduleView,
  upsertConfigSchedules,
} from '../control-plane/schedules.js';
import { OarRuntimeError } from '../kernel/errors.js';
import type { EventLog } from '../log/event-log.js';
import type { FiringPort } from '../worker/schedule-firing.js';
import { ScheduleTicker, type TickerOptions } from '../worker/schedule-ticker.js';
import type { Worker } from '../worker/worker.js';
import type { RuntimeJobs } from './jobs.js';

/** `RuntimeOptions.schedules`: the config file's schedules, and this process's ticker (`false`: it fires nothing). */
export interface SchedulesOptions {
  definitions?: ScheduleDefinitionInput[];
  ticker?: false | TickerOptions;
}

export interface ScheduleDeps {
  log: EventLog;
  commands: Commands;
  jobs: RuntimeJobs;
  worker: Worker | undefined;
}

/** `input` parsed by `schema` (defaults applied), or `invalid_input` (`invalid_binding`) naming each bad field. */
function parsed<S extends z.ZodType>(method: string, schema: S, input: unknown): z.infer<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issues = result.error.issues.map((i) => ({ path: i.path.map(String).join('.'), message: i.message }));
  const first = issues[0];
  const binding = result.error.issues.some((i) => i.path.includes('binding'));
  throw new OarRuntimeError(
    binding ? 'invalid_binding' : 'invalid_input',
    `invalid input to ${method}${first ? `: ${first.path || 'the input'}: ${first.message}` : ''}`,
    { details: { method, issues, ...(first?.path ? { field: first.path } : {}) } },
  );
}

const rejecting = <T>(run: () => Promise<T>): Promise<T> => {
  try {
    return run();
  } catch (error) {
    return Promise.reject(error);
  }
};

/**
 * The runtime's schedules (docs/schedules.md), as `runtime.schedules.add(…)`: the commands with their inputs checked,
 * and — in a runtime with a worker — the ticker that fires them (worker/schedule-ticker.ts), whose first tick adds or
 * updates the config file's schedules.
 */
export class RuntimeSchedules {
  readonly ticker: ScheduleTicker | undefined;
  private readonly definitions: ScheduleDefinition[];

  /**
   * `workerSessions`: what this runtime's worker drives. Only a worker of every session (`oar serve`, `oar worker`,
   * an embedded runtime) ticks: a CLI command's runtime, which drives the one session it runs, must not claim a
   * firing and exit.
   */
  constructor(
    private readonly deps: ScheduleDeps,
    options: SchedulesOptions = {},
    workerSessions?: 'all' | readonly string[],
  ) {
    this.definitions = parsed('schedules', SchedulesSchema, options.definitions ?? []);
    this.ticker =
      deps.worker && (workerSessions === undefined || workerSessions === 'all') && options.ticker !== false
        ? new ScheduleTicker(this.port(deps.worker), {
            ...options.ticker,
            prepare: () => this.syncConfig().then(() => undefined),
          })
        : undefined;
  }

  private get db() {
    return this.deps.log.store.db;
  }

  /** Add a schedule (source `api`); its first firing is its first cron time from now. */
  add(input: AddScheduleInput): Promise<ScheduleView> {
    return rejecting(() => {
      const { workspaceId, ...definition } = parsed('addSchedule', AddScheduleInputSchema, input);
      return addSchedule(this.db, definition, { workspaceId });
    });
  }

  list(input: { workspaceId?: string } = {}): Promise<ScheduleView[]> {
    return listSchedules(this.db, input);
  }

  /** A schedule with its next cron times and last firings. */
  get(input: ScheduleIdInput): Promise<ScheduleView> {
    return getSchedule(this.db, input);
  }

  pause(input: ScheduleIdInput): Promise<ScheduleView> {
    return pauseSchedule(this.db, input);
  }

  resume(input: ScheduleIdInput): Promise<ScheduleView> {
    return resumeSchedule(this.db, input);
  }

  remove(input: ScheduleIdInput): Promise<{ scheduleId: string; removed: true }> {
    return removeSchedule(this.db, input);
  }

  /** Add or update the config file's schedules in the store (what a worker's ticker does once as it starts). */
  syncConfig() {
    return upsertConfigSchedules(this.db, this.definitions);
  }

  /** Stop the ticker; resolves once a tick in progress ended. */
  async close(): Promise<void> {
    await this.ticker?.stop();
  }

  /** What firing needs, from this runtime's control plane and worker. */
  private port(worker: Worker): FiringPort {
    const { commands, log, jobs } = this.deps;
    return {
      db: log.store.db,
      createSession: (input) => commands.createSession(input),
      mainThreadId: async (sessionId) => {
        const threadId = (await log.readModels(sessionId, [])).session?.threadIds[0];
        if (!threadId) throw new OarRuntimeError('session_not_found', `unknown session id "${sessionId}"`);
        return threadId;
      },
      submitTurn: (input) => commands.submitTurn(input),
      interruptTurn: (input) => commands.interruptTurn(input),
      jobOf: async (sessionId) => (await jobs.list({ sessionId, limit: 1 })).jobs[0],
      startJob: (input) => jobs.start(input),
      cancelJob: (jobId, reason) => jobs.cancel({ jobId, reason }),
      turnRunning: async (sessionId, threadId, turnId) => {
        const thread = await log.thread(sessionId, threadId);
        return thread.activeTurnId === turnId || thread.queue.some((q) => q.turnId === turnId);
      },
      jobRunning: async (jobId) => ((await jobs.get({ jobId })) as JobView).status === 'running',
      look: (sessionId) => worker.look(sessionId),
    };
  }
}
