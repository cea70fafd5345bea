import type { Command } from 'commander';
import type { JobOptions } from './job-actions.js';
import { globals } from './runtime-commands.js';

/**
 * `oar jobs …` (docs/jobs.md): start a batch of items, follow it, list, read, cancel and retry jobs. What each does
 * is in job-actions.ts, imported when it runs.
 */
const actions = () => import('./job-actions.js');

export function registerJobCommands(program: Command, setExit: (code: number) => void): void {
  const jobs = program.command('jobs').description('run a batch of items, each as turns of a thread of its own');
  const detach = '--detach';
  const detachHelp = 'record it and return: a worker elsewhere (oar serve, oar worker, oar resume) runs it';

  globals(jobs.command('start'))
    .description('start a job: one turn per item of FILE (JSON lines), PROMPT filled from each; run here until done')
    .requiredOption(
      '--items <file>',
      'the items, one JSON value a line (an object fills {{field}}, any value {{item}})',
    )
    .requiredOption('--prompt <template>', 'the prompt of each item: {{field}}, {{item}}, {{index}}')
    .option('--name <name>', 'a name for the job')
    .option('--session <id>', 'run it in this session (default: a new session of its own)')
    .option('--agent <name>', 'the agent that runs the items (default: the main agent)')
    .option('--concurrency <n>', 'items running at once (default 4)')
    .option('--max-attempts <n>', 'attempts per item, the first included (default 3)')
    .option('--backoff-ms <ms>', 'the wait before a second attempt, doubled for each later one (default 1000)')
    .option('--fail-fast', 'one item failing every attempt fails the job and stops the rest')
    .option(detach, detachHelp)
    .option('--json', 'print JSON')
    .action(async (options: JobOptions) => setExit(await (await actions()).startJob(options)));

  globals(jobs.command('list'))
    .description('list the jobs, newest first, with their counts')
    .option('--session <id>', "only this session's jobs")
    .option('--status <status>', 'running, completed, failed or cancelled')
    .option('--json', 'print JSON')
    .action(async (options: JobOptions) => setExit(await (await actions()).listJobs(options)));

  globals(jobs.command('get'))
    .description('show a job: its counts and every item with its thread, attempts and outcome')
    .argument('<job>', 'job id')
    .option('--json', 'print JSON')
    .action(async (jobId: string, options: JobOptions) => setExit(await (await actions()).getJob(jobId, options)));

  globals(jobs.command('cancel'))
    .description('cancel a job: its running items are interrupted, the rest never start')
    .argument('<job>', 'job id')
    .option('--reason <text>', 'why (recorded)')
    .option('--json', 'print JSON')
    .action(async (jobId: string, options: JobOptions) => setExit(await (await actions()).cancelJob(jobId, options)));

  globals(jobs.command('retry'))
    .description("run a finished job's failed and cancelled items again; run here until done")
    .argument('<job>', 'job id')
    .option(detach, detachHelp)
    .option('--json', 'print JSON')
    .action(async (jobId: string, options: JobOptions) => setExit(await (await actions()).retryJob(jobId, options)));
}
