import { PERMISSION_MODES } from '@oar/runtime/constants';
import type { Command } from 'commander';
import { type GlobalOptions, LIMIT_FLAGS } from './options.js';
import type { ExportOptions, ResumeOptions, RunOptions, SessionUpdateOptions } from './runtime-actions.js';

/**
 * The commands over a store's sessions — run, resume, respond, limit, interrupt, compact, session, sessions, events,
 * inspect, replay, export — as commander sees them. What each does is in runtime-actions.ts, imported when it runs.
 */
const actions = () => import('./runtime-actions.js');

/** The options every command over a store takes. */
export function globals(command: Command): Command {
  return command
    .option('--config <file>', 'config file (default ./oar.config.json when present)')
    .option('--store <url>', 'SQLite path or postgres:// URL (default .oar/oar.db; env OAR_STORE)');
}

export function registerRuntimeCommands(program: Command, setExit: (code: number) => void): void {
  globals(program.command('run'))
    .description('run one turn of the main agent on a prompt, with live progress')
    .argument('<prompt>', 'what to do')
    .option(
      '--model <spec>',
      'model spec: openai:MODEL, anthropic:MODEL, openai-compatible:NAME, script:FILE or a configured name',
    )
    .option('--agent <name>', 'the agent that runs the session (default: the main agent)')
    .option('--runner <id>', 'run the main agent on this AgentRunner (`oar runners list`) instead of the protocol loop')
    .option('--workspace <dir>', 'workspace root for the file tools (default: the working directory)')
    .option('--session <id>', 'continue an existing session (with its own binding) instead of creating one')
    .option('--json', 'print every event as NDJSON, then a result line')
    .option('--stream', "print the model's text as it arrives (default in a terminal without --json)")
    .option('--no-stream', "do not print the model's text as it arrives")
    .option('--approve-all', 'approve every pending decision (without a TTY)')
    .option('--deny-all', 'deny every pending decision (without a TTY)')
    .option('--detach', 'record the turn and return at once; a worker runs it (`oar wait` follows it)')
    .option(
      '--attach <file>',
      'attach a file to the turn (repeatable): stored as an artifact, shown to the agent by ref',
      (file: string, files: string[] = []) => [...files, file],
    )
    .action(async (prompt: string, options: RunOptions) => setExit(await (await actions()).run(prompt, options)));

  globals(program.command('resume'))
    .description(
      'resume unfinished work after a crash or restart (completed actions never re-run); no session: list what is resumable',
    )
    .argument('[sessions...]', 'the sessions to resume')
    .option('--all', 'resume every resumable session')
    .option('--json', 'print events as NDJSON')
    .option('--approve-all', 'approve pending decisions of the named sessions')
    .option('--deny-all', 'deny pending decisions of the named sessions')
    .action(async (sessions: string[], options: ResumeOptions) =>
      setExit(await (await actions()).resume(sessions, options)),
    );

  globals(program.command('respond'))
    .description(
      'answer a pending decision (approve, deny, approve_for_session) or a lost action (happened, not_happened, retry); the session runs on with its binding',
    )
    .argument('<session>', 'session id')
    .argument('<action>', 'the decision id (actionId of action.required)')
    .argument('<decision>', 'approve | deny | approve_for_session | happened | not_happened | retry')
    .option('--reason <text>', 'why (recorded with the answer)')
    .option('--text <text>', 'the answer to an ask_user question')
    .option('--json', 'print events as NDJSON')
    .action(
      async (
        sessionId: string,
        actionId: string,
        decision: string,
        options: RunOptions & { reason?: string; text?: string },
      ) => setExit(await (await actions()).respond(sessionId, actionId, decision, options)),
    );

  const limits = globals(program.command('limit'))
    .description(
      "change a session's budget limits (recorded as limit.changed, in force at once); a turn waiting for a budget continues",
    )
    .argument('<session>', 'session id');
  for (const [flag, , what] of LIMIT_FLAGS)
    limits.option(`${flag} <value>`, `${what} (a number, or "none" to remove it)`);
  limits
    .option('--on-exceeded <policy>', 'what a call that would exceed a limit does: wait | fail')
    .option('--low-at <fraction>', 'the fraction of a limit at which quota.low is recorded (0..1)')
    .option('--reason <text>', 'why')
    .option('--json', 'print events as NDJSON, then the result')
    .action(async (sessionId: string, options: RunOptions & Record<string, string | undefined>) =>
      setExit(await (await actions()).limit(sessionId, options)),
    );

  globals(program.command('interrupt'))
    .description('interrupt the running turn of a session (whichever process drives it stops within one step)')
    .argument('<session>', 'session id')
    .option('--thread <id>', 'the thread (default: the main thread)')
    .option('--reason <text>', 'why')
    .option('--json', 'print the result as JSON')
    .action(async (sessionId: string, options: GlobalOptions & { thread?: string; reason?: string; json?: boolean }) =>
      setExit(await (await actions()).interrupt(sessionId, options)),
    );

  globals(program.command('compact'))
    .description(
      "compact a session's context now: its finished turns are summarised by the agent's model and shown as that summary",
    )
    .argument('<session>', 'session id')
    .option('--thread <id>', 'the thread (default: the main thread)')
    .option('--reason <text>', 'why (recorded with the request)')
    .option('--json', 'print the result as JSON')
    .action(async (sessionId: string, options: GlobalOptions & { thread?: string; reason?: string; json?: boolean }) =>
      setExit(await (await actions()).compact(sessionId, options)),
    );

  const session = program.command('session').description("show or change a session's binding");
  globals(session.command('show'))
    .description('print the binding a session runs with (agents, models, workspace, tools, permissions, limits)')
    .argument('<session>', 'session id')
    .action(async (sessionId: string, options: GlobalOptions) =>
      setExit(await (await actions()).showSession(sessionId, options)),
    );

  globals(session.command('update'))
    .description("change a session's binding (recorded; effective from its next turn)")
    .argument('<session>', 'session id')
    .option('--model <spec>', 'the model of the main agent and of agents without their own')
    .option('--workspace <dir>', 'the workspace root')
    .option('--permission-mode <mode>', PERMISSION_MODES.join(' | '))
    .option(
      '--from-config',
      'take agents, models, tools, permissions, limits and policies from the config file (secrets.env when it names it; [] clears it)',
    )
    .option('--json', 'print the result as JSON')
    .action(async (sessionId: string, options: SessionUpdateOptions) =>
      setExit(await (await actions()).updateSession(sessionId, options)),
    );

  globals(program.command('sessions'))
    .description('list sessions in the store')
    .option('--json', 'print JSON')
    .action(async (options: GlobalOptions & { json?: boolean }) =>
      setExit(await (await actions()).listSessions(options)),
    );

  globals(program.command('events'))
    .description('print the event log of a session')
    .argument('<session>', 'session id')
    .option('--json', 'NDJSON, one event per line')
    .option('--after <sequence>', 'only events after this sequence', '0')
    .option('--follow', 'keep printing new events until interrupted')
    .action(async (sessionId: string, options: GlobalOptions & { json?: boolean; after: string; follow?: boolean }) =>
      setExit(await (await actions()).events(sessionId, options)),
    );

  globals(program.command('inspect'))
    .description('show the session snapshot: threads, turns, pending decisions, tasks, usage')
    .argument('<session>', 'session id')
    .option('--json', 'print the snapshot as JSON (the published snapshot schema)')
    .action(async (sessionId: string, options: GlobalOptions & { json?: boolean }) =>
      setExit(await (await actions()).inspect(sessionId, options)),
    );

  globals(program.command('environment'))
    .description("show where a session's work runs: workspace, variables by name, process limits, live processes")
    .argument('<session>', 'session id')
    .option('--thread <thread>', 'only the processes of this thread')
    .option('--json', 'print it as JSON (the getExecutionEnvironment response)')
    .action(async (sessionId: string, options: GlobalOptions & { json?: boolean; thread?: string }) =>
      setExit(await (await actions()).environment(sessionId, options)),
    );

  globals(program.command('replay'))
    .description('rebuild every read model of a session from its event log and diff with the stored ones')
    .argument('<session>', 'session id')
    .option(
      '--repair',
      'rewrite the stored read models that differ from the rebuild, recorded as history.reconstructed and snapshot.repaired',
    )
    .action(async (sessionId: string, options: GlobalOptions & { repair?: boolean }) =>
      setExit(await (await actions()).replaySession(sessionId, options)),
    );

  globals(program.command('export'))
    .description(
      'export a session: the replay (events + snapshot), the evidence pack (--evidence) or the review pack ' +
        '(--review); each export is recorded in the session',
    )
    .argument('<session>', 'session id')
    .option('--evidence', 'export the evidence pack (timeline, failures, artifact refs, correlation ids)')
    .option('--review', 'export the review pack: changes with diffs, approvals, commands with exit codes, costs')
    .option('--thread <id>', 'with --review: only this thread')
    .option('--turn <id>', 'with --review: only this turn')
    .option('--task <id>', 'with --review: only this task')
    .option('--markdown', 'with --review: a Markdown document instead of JSON')
    .option('--out <file>', 'write to a file instead of standard output')
    .action(async (sessionId: string, options: ExportOptions) =>
      setExit(await (await actions()).exportSession(sessionId, options)),
    );
}
