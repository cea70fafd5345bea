import { type Command, commandMatches } from '../../kernel/match/command-match.js';

export type { Command } from '../../kernel/match/command-match.js';

/** A command as one line for prompts, records and grants: argv words quoted where a shell would split them. */
export function commandText(command: Command): string {
  if ('shell' in command) return command.shell;
  return command.argv.map(quoteWord).join(' ');
}

function quoteWord(word: string): string {
  if (word !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/** Whether a command is on the read-only allowlist: an argv (never a shell string) some prefix covers. */
export function isReadOnlyCommand(command: Command, readOnly: readonly string[]): boolean {
  if ('shell' in command) return false;
  return readOnly.some((prefix) => commandMatches(prefix, command));
}
