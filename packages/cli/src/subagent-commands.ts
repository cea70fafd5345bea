import type { Command } from 'commander';
import { globals } from './runtime-commands.js';
import type { SubagentOptions } from './subagent-actions.js';

/**
 * `oar subagent …`: the standard's sub-agent commands over a store's sessions (docs/engine.md "Sub-agents driven by
 * a client"). What each does is in subagent-actions.ts, imported when it runs.
 */
const actions = () => import('./subagent-actions.js');

export function registerSubagentCommands(program: Command, setExit: (code: number) => void): void {
  const sub = program.command('subagent').description('spawn, feed, wait for, close and reopen sub-agents');
  const detach = '--detach';
  const detachHelp = 'record it and return: a worker elsewhere (oar serve, oar worker, oar resume) runs it';

  globals(sub.command('list'))
    .description("list a session's sub-agents with their parent thread and status")
    .argument('<session>', 'session id')
    .option('--thread <id>', 'only the sub-agents of this parent thread')
    .option('--json', 'print JSON')
    .action(async (sessionId: string, options: SubagentOptions) =>
      setExit(await (await actions()).listSubagents(sessionId, options)),
    );

  globals(sub.command('spawn'))
    .description('start a sub-agent: a child thread of AGENT with INPUT as its first turn, run here until it settles')
    .argument('<session>', 'session id')
    .argument('<agent>', 'one of the session’s agents')
    .argument('<input>', 'its first turn')
    .option('--thread <id>', 'the parent thread (default: the main thread)')
    .option('--title <text>', 'a title for its thread')
    .option('--id <id>', 'the sub-agent id (the same id again returns the first)')
    .option(detach, detachHelp)
    .option('--json', 'print JSON')
    .action(async (sessionId: string, agent: string, input: string, options: SubagentOptions) =>
      setExit(await (await actions()).spawnSubagent(sessionId, agent, input, options)),
    );

  globals(sub.command('input'))
    .description('give a sub-agent another turn, run here until it settles')
    .argument('<session>', 'session id')
    .argument('<subagent>', 'sub-agent id')
    .argument('<input>', 'the turn')
    .option(detach, detachHelp)
    .option('--json', 'print JSON')
    .action(async (sessionId: string, subagentId: string, input: string, options: SubagentOptions) =>
      setExit(await (await actions()).inputSubagent(sessionId, subagentId, input, options)),
    );

  globals(sub.command('wait'))
    .description('wait until the sub-agents stopped working (default: those working now); exit 75 when it ran out')
    .argument('<session>', 'session id')
    .argument('[subagents...]', 'sub-agent ids')
    .option('--thread <id>', 'the sub-agents of this parent thread')
    .option('--timeout <seconds>', 'how long at most (default 30)')
    .option('--json', 'print JSON')
    .action(async (sessionId: string, ids: string[], options: SubagentOptions) =>
      setExit(await (await actions()).waitSubagents(sessionId, ids, options)),
    );

  globals(sub.command('close'))
    .description('close a sub-agent: its running turn is interrupted, its thread takes no more turns')
    .argument('<session>', 'session id')
    .argument('<subagent>', 'sub-agent id')
    .option('--reason <text>', 'why (recorded)')
    .option('--json', 'print JSON')
    .action(async (sessionId: string, subagentId: string, options: SubagentOptions) =>
      setExit(await (await actions()).closeSubagent(sessionId, subagentId, options)),
    );

  globals(sub.command('resume'))
    .description('reopen a closed sub-agent; with --input, a turn for it, run here until it settles')
    .argument('<session>', 'session id')
    .argument('<subagent>', 'sub-agent id')
    .option('--input <text>', 'a turn to give it')
    .option('--reason <text>', 'why (recorded)')
    .option(detach, detachHelp)
    .option('--json', 'print JSON')
    .action(async (sessionId: string, subagentId: string, options: SubagentOptions) =>
      setExit(await (await actions()).resumeSubagent(sessionId, subagentId, options)),
    );
}
