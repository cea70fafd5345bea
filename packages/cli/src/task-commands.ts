import type { Command } from 'commander';
import type { GlobalOptions } from './options.js';
import { globals } from './runtime-commands.js';
import type { TaskOptions } from './task-actions.js';

/**
 * `oar task …`: the standard's task commands over a store's sessions (docs/tasks.md). What each does is in
 * task-actions.ts, imported when it runs.
 */
const actions = () => import('./task-actions.js');

const repeat = (value: string, values: string[] = []) => [...values, value];

export function registerTaskCommands(program: Command, setExit: (code: number) => void): void {
  const task = program
    .command('task')
    .description('create, start and follow tasks: objectives with an assignee, dependencies and acceptance');
  const run =
    (name: keyof Awaited<ReturnType<typeof actions>>) =>
    async (...args: unknown[]) => {
      const action = (await actions())[name] as (...a: unknown[]) => Promise<number>;
      setExit(await action(...args.slice(0, -1)));
    };

  /** A command on one task of a session, its options, `--json`, and the action of that name. */
  const onTask = (name: string, description: string, options: (command: Command) => Command = (c) => c) =>
    options(
      globals(task.command(name))
        .description(description)
        .argument('<session>', 'session id')
        .argument('<task>', 'task id'),
    )
      .option('--json', 'print the result as JSON')
      .action(run(`${name}Task` as keyof Awaited<ReturnType<typeof actions>>));

  globals(task.command('create'))
    .description('create a task (accepted, not started): `oar task start` starts it')
    .argument('<session>', 'session id')
    .requiredOption('--objective <text>', 'what the task must achieve')
    .option('--title <text>', 'a short title')
    .option('--id <id>', 'the task id (the same id and definition again returns the first)')
    .option('--parent <task>', 'the parent task')
    .option('--depends-on <task>', 'a task this one waits for (repeatable)', repeat)
    .option('--agent <name>', 'the agent that does the work (default: the main agent)')
    .option('--external <name>', 'done outside the runtime by NAME; reported with progress/complete/fail')
    .option('--acceptance <criterion>', 'an acceptance criterion (repeatable): completion waits for its owner', repeat)
    .option('--priority <text>', 'a priority (free text)')
    .option('--thread <id>', 'the thread its agent works in (default: a thread of its own)')
    .option('--json', 'print the result as JSON')
    .action(run('createTask'));

  onTask('update', "change a task's definition (its next attempt runs with it)", (c) =>
    c
      .option('--objective <text>', 'what the task must achieve')
      .option('--title <text>', 'a short title')
      .option('--acceptance <criterion>', 'the acceptance criteria (repeatable; replaces them)', repeat)
      .option('--priority <text>', 'a priority (free text)'),
  );

  const detach = (c: Command) =>
    c.option('--detach', 'record it and return: a worker elsewhere (oar serve, oar worker, oar resume) runs it');
  onTask(
    'start',
    "start a task: its agent's turn runs here until the session settles (held while a dependency is open)",
    (c) => detach(c).option('--thread <id>', 'the thread its agent works in'),
  );
  onTask('resume', 'resume a paused task (a stopped attempt starts again) and run it here', (c) =>
    detach(c)
      .option('--children', 'resume the descendants its pause paused too')
      .option('--reason <text>', 'why (recorded)'),
  );
  onTask('retry', 'retry a failed, cancelled or lost task as a new attempt and run it here', detach);
  onTask('progress', 'report progress of a task: a message, a percent, counts', (c) =>
    c
      .option('--message <text>', 'what happened')
      .option('--percent <n>', 'how far, 0 to 100')
      .option('--completed <n>', 'items done')
      .option('--total <n>', 'items in all'),
  );
  onTask('pause', "pause a task: a running turn of it is stopped, nothing of it starts until it's resumed", (c) =>
    c.option('--children', 'pause its descendants too').option('--reason <text>', 'why (recorded)'),
  );
  onTask(
    'complete',
    'complete a task (acceptance checked, or external work done): tasks waiting for it are released',
    (c) => c.option('--summary <text>', 'what was done'),
  );
  onTask('fail', 'fail a task (a running turn of it is stopped)', (c) =>
    c
      .requiredOption('--message <text>', 'why it failed')
      .option('--code <code>', 'an error code of your own (default task_failed)'),
  );
  onTask('cancel', 'cancel a task: running work of it is asked to stop (cancelling), then it ends cancelled', (c) =>
    c.option('--children', 'cancel its open descendants too').option('--reason <text>', 'why (recorded)'),
  );
  onTask('archive', 'archive an ended task (update_task archived): out of the lists, still shown by id');

  for (const name of ['link', 'unlink'] as const) {
    const edge = globals(task.command(name))
      .description(
        name === 'link'
          ? 'add an edge: KIND is parent, child, dependency, dependent, source, derived, artifact, evidence or subagent'
          : 'remove an edge of the task graph (from both of its tasks)',
      )
      .argument('<session>', 'session id')
      .argument('<task>', 'task id')
      .argument('<kind>', 'edge kind')
      .argument('<target>', 'the other task (or artifact, evidence, sub-agent id)');
    if (name === 'link') edge.option('--reason <text>', 'why (recorded)');
    edge.option('--json', 'print the result as JSON').action(run(`${name}Tasks`));
  }

  globals(task.command('list'))
    .description("list a session's tasks with their status, attempts and edges (archived ones with --archived)")
    .argument('<session>', 'session id')
    .option('--archived', 'list the archived tasks too')
    .option('--json', 'print the tasks as JSON')
    .action(async (sessionId: string, options: GlobalOptions & { json?: boolean }) =>
      setExit(await (await actions()).listTasks(sessionId, options)),
    );

  globals(task.command('show'))
    .description('show one task: definition, status, attempts, progress, edges both ways')
    .argument('<session>', 'session id')
    .argument('<task>', 'task id')
    .option('--json', 'print the task as JSON')
    .action(async (sessionId: string, taskId: string, options: TaskOptions) =>
      setExit(await (await actions()).showTask(sessionId, taskId, options)),
    );
}
