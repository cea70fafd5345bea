import type { Command } from 'commander';
import type { ControlOptions } from './control-actions.js';
import { globals } from './runtime-commands.js';

/**
 * `oar fork`, `oar rollback`, `oar permission …` and `oar process …`: commands on a session's history, its policy and its processes
 * (docs/engine.md "Forking a session" and "Rolling back a thread", docs/permissions.md "Permission commands", docs/commands.md "Feeding and
 * stopping a process by hand"). What each does is in control-actions.ts, imported when it runs.
 */
const actions = () => import('./control-actions.js');

export function registerControlCommands(program: Command, setExit: (code: number) => void): void {
  globals(program.command('fork'))
    .description('start a new session from an event of another: its history up to there, its binding, its own id')
    .argument('<session>', 'the session to fork')
    .option('--at <sequence>', 'the last event the fork keeps (default: the session’s last; oar events lists them)')
    .option('--id <id>', 'the fork’s session id (default: a new one)')
    .option('--title <text>', 'the fork’s title (default: the source’s, with the event)')
    .option('--json', 'print JSON')
    .action(async (sessionId: string, options: ControlOptions) =>
      setExit(await (await actions()).forkSession(sessionId, options)),
    );

  globals(program.command('rollback'))
    .description(
      'return a thread to the boundary before TURN: later turns leave its history, OAR’s file changes undone',
    )
    .argument('<session>', 'session id')
    .argument('<turn>', 'the first turn to remove (oar inspect lists them)')
    .option('--thread <id>', 'the thread (default: the main thread)')
    .option('--keep-files', 'roll back the history only: leave the files as they are')
    .option('--dry-run', 'show what would be removed and restored, and any conflict; change nothing')
    .option('--json', 'print JSON')
    .action(async (sessionId: string, turnId: string, options: ControlOptions) =>
      setExit(await (await actions()).rollbackThread(sessionId, turnId, options)),
    );

  const permission = program.command('permission').description('evaluate a call against the policy, answer approvals');
  globals(permission.command('evaluate'))
    .description('how the policy would judge calling TOOL with --input now (recorded as permission.evaluated)')
    .argument('<session>', 'session id')
    .argument('<tool>', 'a tool bound to the session (exec with {"command": …} asks about a command)')
    .option('--input <json>', 'the call’s input as JSON, as the tool takes it (default {}: most tools need one)')
    .option('--thread <id>', 'the thread whose call it would be (default: the main thread)')
    .option('--turn <id>', 'the turn to record it on (default: the running, else the last one)')
    .option('--json', 'print JSON')
    .action(async (sessionId: string, tool: string, options: ControlOptions) =>
      setExit(await (await actions()).evaluatePermission(sessionId, tool, options)),
    );
  globals(permission.command('resolve'))
    .description('answer a pending tool approval: allow or deny; the session’s work then continues here')
    .argument('<session>', 'session id')
    .argument('<action>', 'the pending approval’s action id (oar inspect, oar decisions)')
    .argument('<decision>', 'allow or deny')
    .option('--for-session', 'allow this call and the same call for the rest of the session')
    .option('--reason <text>', 'why (recorded)')
    .option('--json', 'print JSON')
    .action(async (sessionId: string, actionId: string, decision: string, options: ControlOptions) =>
      setExit(await (await actions()).resolvePermission(sessionId, actionId, decision, options)),
    );

  const proc = program
    .command('process')
    .description('feed or stop a process a session’s command started (run where the session runs: oar serve)');
  globals(proc.command('write'))
    .description('write TEXT to a running background process’s standard input')
    .argument('<session>', 'session id')
    .argument('<process>', 'process id (oar environment lists them)')
    .argument('[text]', 'the text (a newline is not added); omit with --close to only close its input')
    .option('--close', 'close its standard input afterwards (end of input)')
    .option('--reason <text>', 'why (recorded)')
    .option('--wait <seconds>', 'how long to wait for the runtime running it to act (default 10)')
    .option('--json', 'print JSON')
    .action(async (sessionId: string, processId: string, text: string | undefined, options: ControlOptions) =>
      setExit(await (await actions()).writeProcessStdin(sessionId, processId, text, options)),
    );
  globals(proc.command('terminate'))
    .description('stop a running process and its whole group (SIGTERM, grace, SIGKILL)')
    .argument('<session>', 'session id')
    .argument('<process>', 'process id (oar environment lists them)')
    .option('--reason <text>', 'why (recorded)')
    .option('--wait <seconds>', 'how long to wait for the runtime running it to act (default 10)')
    .option('--json', 'print JSON')
    .action(async (sessionId: string, processId: string, options: ControlOptions) =>
      setExit(await (await actions()).terminateProcess(sessionId, processId, options)),
    );
}
