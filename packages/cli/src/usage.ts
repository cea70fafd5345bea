import type { Command, CommanderError } from 'commander';

/**
 * A command-line mistake commander caught — an unknown command or option, a missing argument, a command group
 * without its subcommand (bare `oar` included) — printed on stderr; the caller exits 2 (`usage_error`).
 *
 * For a script (stderr is not a terminal) and with `--json`: the one structured line every error is,
 * `{"error": {code: "usage_error", message, retryable, details: {reason, hint, usage?}}}`. For a person at a
 * terminal: the same as text — commander's message with its suggestion on a line of its own, the command's usage
 * (or the whole help when a command is missing), and the code.
 */
export async function printUsageError(
  program: Command,
  argv: readonly string[],
  error: CommanderError,
  commanderText: string,
): Promise<void> {
  // Commander shows the help, and throws '(outputHelp)', for a group called without its subcommand.
  const helpShown = error.code === 'commander.help';
  if (process.stderr.isTTY === true && !argv.includes('--json')) {
    process.stderr.write(await usageText(program, argv, error, helpShown ? commanderText.trim() : undefined));
    return;
  }
  const [{ oarError }, { printError }] = await Promise.all([import('@oar/protocol'), import('./io.js')]);
  const message = helpShown ? 'a command is required (see details.usage)' : error.message.replace(/^error: /, '');
  printError(
    oarError('usage_error', message, {
      details: { reason: error.code, hint: 'oar --help', ...(helpShown ? { usage: commanderText.trim() } : {}) },
    }),
  );
}

async function usageText(
  program: Command,
  argv: readonly string[],
  error: CommanderError,
  help: string | undefined,
): Promise<string> {
  const command = commandOf(program, argv);
  const path = commandPath(command);
  if (help !== undefined) return `${help}\n\nerror: a command is required\ncode: usage_error\n`;
  // The message repeats what was typed (an unknown option may be a pasted token): redacted like every output.
  const { redactedForOutput } = await import('./io.js');
  const lines = [redactedForOutput(error.message.trim())];
  if (error.code !== 'commander.unknownCommand') {
    lines.push(`Usage: ${command.createHelp().commandUsage(command)}`);
  }
  lines.push(`code: usage_error — see \`${path} --help\``);
  return `${lines.join('\n')}\n`;
}

/** The (sub)command the words of `argv` name, as far as they name one: the command a mistake was made in. */
function commandOf(program: Command, argv: readonly string[]): Command {
  let command = program;
  for (const word of argv) {
    if (word.startsWith('-')) continue;
    const sub = command.commands.find((c) => c.name() === word || c.aliases().includes(word));
    if (!sub) break;
    command = sub;
  }
  return command;
}

function commandPath(command: Command): string {
  const names: string[] = [];
  for (let c: Command | null = command; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}
