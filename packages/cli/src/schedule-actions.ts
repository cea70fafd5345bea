/*
 * The work of `oar schedules …` (schedule-commands.ts), imported when one runs. Each opens the store, records or
 * reads, and returns: a schedule is fired by a long-lived worker (`oar serve`, `oar worker`), never by a command
 * that exits.
 */
import { oarError } from '@oar/protocol';
import { type AddScheduleInput, EXIT, type ScheduleView } from '@oar/runtime';
import { printJson, readInput, UsageError } from './io.js';
import { parseItems } from './job-actions.js';
import type { GlobalOptions } from './options.js';
import { openForSessions, openRuntime, withRuntime } from './runtime-actions.js';

export interface ScheduleOptions extends GlobalOptions {
  cron?: string;
  id?: string;
  timezone?: string;
  session?: string;
  newSession?: boolean;
  input?: string;
  title?: string;
  agent?: string;
  jobItems?: string;
  jobPrompt?: string;
  jobName?: string;
  catchUp?: string;
  overlap?: string;
  budgetTokens?: string;
  budgetCost?: string;
  binding?: string;
  paused?: boolean;
  json?: boolean;
}

/** The largest items or binding file read. */
const FILE_LIMIT = 16 * 1024 * 1024;

const out = (line: string) => process.stdout.write(`${line}\n`);

const usage = (message: string, details: Record<string, unknown> = {}) =>
  new UsageError(oarError('invalid_option', message, { details }));

/** What each firing starts, from exactly one of --session, --new-session and --job-items. */
async function startOf(options: ScheduleOptions): Promise<AddScheduleInput['start']> {
  const kinds = [options.session !== undefined, options.newSession === true, options.jobItems !== undefined];
  if (kinds.filter(Boolean).length !== 1) {
    throw usage('give one of --session ID, --new-session or --job-items FILE: what each firing starts');
  }
  if (options.jobItems !== undefined) {
    if (!options.jobPrompt) throw usage('--job-items needs --job-prompt TEMPLATE');
    return {
      kind: 'job',
      items: parseItems(await readInput(options.jobItems, FILE_LIMIT, '--job-items')),
      prompt: options.jobPrompt,
      ...(options.jobName ? { name: options.jobName } : {}),
      ...(options.agent ? { agent: options.agent } : {}),
    };
  }
  if (!options.input) throw usage('a turn or session schedule needs --input TEXT');
  if (options.session !== undefined) return { kind: 'turn', sessionId: options.session, input: options.input };
  return {
    kind: 'session',
    input: options.input,
    ...(options.title ? { title: options.title } : {}),
    ...(options.agent ? { agent: options.agent } : {}),
  };
}

function positiveNumber(name: string, text: string | undefined, integer: boolean): number | undefined {
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0 || (integer && !Number.isInteger(value))) {
    throw usage(`${name} must be a positive ${integer ? 'whole number' : 'number'}, not "${text}"`, { option: name });
  }
  return value;
}

async function bindingOf(file: string | undefined): Promise<Record<string, unknown> | undefined> {
  if (file === undefined) return undefined;
  const text = await readInput(file, FILE_LIMIT, '--binding');
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch (error) {
    throw new UsageError(oarError('invalid_json', `--binding is not JSON: ${(error as Error).message}`));
  }
}

export async function addSchedule(options: ScheduleOptions): Promise<number> {
  const start = await startOf(options);
  const tokens = positiveNumber('--budget-tokens', options.budgetTokens, true);
  const costUsd = positiveNumber('--budget-cost', options.budgetCost, false);
  const binding = await bindingOf(options.binding);
  const input = {
    cron: options.cron ?? '',
    start,
    ...(options.id ? { scheduleId: options.id } : {}),
    ...(options.timezone ? { timezone: options.timezone } : {}),
    ...(options.catchUp ? { catchUp: options.catchUp } : {}),
    ...(options.overlap ? { overlap: options.overlap } : {}),
    ...(tokens || costUsd
      ? { budget: { session: { ...(tokens ? { tokens } : {}), ...(costUsd ? { costUsd } : {}) } } }
      : {}),
    ...(binding ? { binding } : {}),
    ...(options.paused ? { paused: true } : {}),
  } as AddScheduleInput;
  // The first schedule of a project may come before its first session: the store is made if missing. The runtime's
  // worker drives no session (`[]`), so it fires nothing either.
  return withRuntime(await openRuntime(options, []), async (runtime) => {
    const schedule = await runtime.schedules.add(input);
    if (options.json) printJson(schedule);
    else {
      out(`schedule ${schedule.scheduleId} added: ${describe(schedule)}`);
      if (schedule.nextFirings[0]) out(`  next firing ${schedule.nextFirings[0]} (fired by oar serve or oar worker)`);
    }
    return EXIT.ok;
  });
}

const describe = (s: ScheduleView) =>
  `${s.cron}${s.timezone ? ` (${s.timezone})` : ''} → ${s.start.kind}${s.paused ? ', paused' : ''}`;

const lastLine = (s: ScheduleView) => {
  const last = s.lastFirings[0];
  return last ? `last ${last.fireAt} ${last.status}${last.reason ? ` (${last.reason})` : ''}` : 'never fired';
};

export async function listSchedules(options: ScheduleOptions): Promise<number> {
  return withRuntime(await openForSessions(options, false), async (runtime) => {
    const schedules = await runtime.schedules.list();
    if (options.json) printJson({ schedules });
    else if (schedules.length === 0) out('no schedules');
    else {
      for (const s of schedules) {
        out(`${s.scheduleId}  ${describe(s)}  next ${s.nextFirings[0] ?? '-'}  ${lastLine(s)}  [${s.source}]`);
      }
    }
    return EXIT.ok;
  });
}

export async function scheduleCommand(
  command: 'get' | 'pause' | 'resume' | 'remove',
  scheduleId: string,
  options: ScheduleOptions,
): Promise<number> {
  return withRuntime(await openForSessions(options, false), async (runtime) => {
    if (command === 'remove') {
      const removed = await runtime.schedules.remove({ scheduleId });
      if (options.json) printJson(removed);
      else out(`schedule ${scheduleId} removed`);
      return EXIT.ok;
    }
    const schedule = await runtime.schedules[command]({ scheduleId });
    if (options.json) printJson(schedule);
    else {
      out(`${schedule.scheduleId}  ${describe(schedule)}  [${schedule.source}]`);
      if (command === 'get') {
        for (const next of schedule.nextFirings) out(`  next ${next}`);
        for (const f of schedule.lastFirings) {
          const started = f.started ? ` → ${f.started.jobId ?? f.started.turnId ?? ''} in ${f.started.sessionId}` : '';
          out(`  ${f.fireAt} ${f.status}${f.reason ? ` (${f.reason})` : ''}${started}`);
        }
      }
    }
    return EXIT.ok;
  });
}
