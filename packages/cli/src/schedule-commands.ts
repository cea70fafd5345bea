import type { Command } from 'commander';
import { globals } from './runtime-commands.js';
import type { ScheduleOptions } from './schedule-actions.js';

/**
 * `oar schedules …` (docs/schedules.md): agents on a timetable — add, list, get, pause, resume, remove. A long-lived
 * worker (`oar serve`, `oar worker`) fires them; these commands only record and read. What each does is in
 * schedule-actions.ts, imported when it runs.
 */
const actions = () => import('./schedule-actions.js');

export function registerScheduleCommands(program: Command, setExit: (code: number) => void): void {
  const schedules = program
    .command('schedules')
    .description('run agents on a timetable, each firing with its own budget and permission policy');

  globals(schedules.command('add'))
    .description('add a schedule: a cron expression and what each firing starts (a turn, a new session or a job)')
    .requiredOption('--cron <expr>', 'five fields (minute first) or six (second first), e.g. "0 3 * * *"')
    .option('--id <id>', 'the schedule id (default: generated)')
    .option('--timezone <tz>', 'the IANA time zone the cron is read in (default UTC)')
    .option('--session <id>', 'each firing is a turn in this session (with --input)')
    .option('--new-session', 'each firing is a new session with a first turn (with --input)')
    .option('--input <text>', 'the turn`s text')
    .option('--title <title>', 'the title of the sessions firings create')
    .option('--agent <name>', 'the agent of the sessions or jobs firings create')
    .option('--job-items <file>', 'each firing is a job of these items (JSON lines; with --job-prompt)')
    .option('--job-prompt <template>', 'the prompt of each job item: {{field}}, {{item}}, {{index}}')
    .option('--job-name <name>', 'a name for the jobs')
    .option('--catch-up <policy>', 'firings missed while no worker ran: skip (default) or run_once')
    .option('--overlap <policy>', 'a firing while the previous one runs: skip (default), queue or cancel')
    .option('--budget-tokens <n>', 'the tokens each firing`s session may use')
    .option('--budget-cost <usd>', 'the US dollars each firing`s session may cost')
    .option('--binding <file>', 'the binding changes of the sessions firings create (JSON: permissions, limits…)')
    .option('--paused', 'add it paused')
    .option('--json', 'print JSON')
    .action(async (options: ScheduleOptions) => setExit(await (await actions()).addSchedule(options)));

  globals(schedules.command('list'))
    .description('list the schedules with their next cron time and last firing')
    .option('--json', 'print JSON')
    .action(async (options: ScheduleOptions) => setExit(await (await actions()).listSchedules(options)));

  for (const [name, description] of [
    ['get', 'show a schedule: its definition, next cron times and last firings'],
    ['pause', 'pause a schedule: no firing until it is resumed'],
    ['resume', 'resume a schedule: its next firing is its first cron time from now'],
    ['remove', 'remove a schedule and its firing records (what its firings started stays)'],
  ] as const) {
    globals(schedules.command(name))
      .description(description)
      .argument('<schedule>', 'schedule id')
      .option('--json', 'print JSON')
      .action(async (scheduleId: string, options: ScheduleOptions) =>
        setExit(await (await actions()).scheduleCommand(name, scheduleId, options)),
      );
  }
}
