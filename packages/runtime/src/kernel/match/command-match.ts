import path from 'node:path';

/**
 * Matching commands against permission rules' `command` prefixes (pure, no I/O). What an `exec` call runs, as rules
 * and the read-only allowlist see it: an argv array (no shell), or a shell string, which is only ever matched as a
 * whole (its words could hide anything: `ls; rm -rf .`).
 */
export type Command = { argv: readonly string[] } | { shell: string };

const SHORT_FLAGS = /^-[A-Za-z0-9]+$/;

/**
 * Whether a command prefix (`git status`, `rm -rf`, `npm test`) covers a command.
 *
 * On an argv: the prefix's leading words must be the argv's first words, in order (the first compared by its base
 * name too, so `/usr/bin/git push` is `git push`); the prefix's flags after them must all appear among the
 * argv's later arguments, in any order and grouping (`rm -rf` covers `rm -fr x`, `rm -r -f x` and `rm -f -r x`).
 * A shell string is covered only by the prefix that equals it whole (spaces trimmed and collapsed).
 */
export function commandMatches(prefix: string, command: Command): boolean {
  const tokens = prefix.trim().split(/\s+/);
  if ('shell' in command) return tokens.join(' ') === command.shell.trim().split(/\s+/).join(' ');
  const argv = command.argv;
  const flagAt = tokens.findIndex((token) => token.startsWith('-'));
  const words = flagAt < 0 ? tokens : tokens.slice(0, flagAt);
  const flags = flagAt < 0 ? [] : tokens.slice(flagAt);
  if (words.length === 0 || argv.length < words.length) return false;
  for (let i = 0; i < words.length; i++) {
    const given = argv[i] as string;
    const word = words[i] as string;
    const same = given === word || (i === 0 && !word.includes('/') && path.posix.basename(given) === word);
    if (!same) return false;
  }
  const rest = argv.slice(words.length);
  const restShort = new Set(rest.filter((arg) => SHORT_FLAGS.test(arg)).flatMap((arg) => [...arg.slice(1)]));
  return flags.every((flag) =>
    SHORT_FLAGS.test(flag) ? [...flag.slice(1)].every((letter) => restShort.has(letter)) : rest.includes(flag),
  );
}
