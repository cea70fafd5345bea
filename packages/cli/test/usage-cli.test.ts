import { spawnSync } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { bin, oarIn, tempDir } from './cli-helpers.js';

/**
 * The CLI for people (issue 25): `oar --help` and `--version` load no more than they print, and a usage mistake in
 * a terminal reads as text — the help, commander's message with its suggestion on a line of its own, the command's
 * usage — with its code; scripts (stderr not a terminal) and `--json` keep the one structured line.
 */

/** The real binary under a pseudo-terminal (`script`, util-linux): stdout and stderr are its terminal. */
function inTerminal(cwd: string, args: string[]): { code: number | null; text: string } {
  const command = [bin, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ');
  const result = spawnSync('script', ['-qec', command, '/dev/null'], { cwd, encoding: 'utf8', timeout: 60_000 });
  return { code: result.status, text: result.stdout.replace(/\r\n/g, '\n') };
}

/** The modules one run of the binary loads (an ESM resolve hook prints each resolved URL on stderr). */
function loadedModules(args: string[]): string[] {
  const hook = `export async function resolve(s, c, next) { const r = await next(s, c); process._rawDebug('@@loaded ' + r.url); return r; }`;
  const register = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hook)}`)});`;
  const result = spawnSync(
    process.execPath,
    ['--import', `data:text/javascript,${encodeURIComponent(register)}`, realpathSync(bin), ...args],
    { encoding: 'utf8', timeout: 60_000 },
  );
  expect(result.status, result.stderr).toBe(0);
  return result.stderr
    .split('\n')
    .filter((line) => line.startsWith('@@loaded '))
    .map((line) => line.slice('@@loaded '.length));
}

describe('start-up', { timeout: 120_000 }, () => {
  it.each([[['--version']], [['--help']], [['inspect', '--help']], [['session', 'update', '--help']]])(
    'oar %j loads commander and the command registrations, not the engine or its dependencies',
    (args) => {
      const loaded = loadedModules(args);
      // The probe works: the binary's own modules are seen.
      expect(loaded.some((url) => url.endsWith('/packages/cli/dist/main.js'))).toBe(true);
      expect(loaded.some((url) => url.includes('/node_modules/commander/'))).toBe(true);
      const heavy = loaded.filter((url) =>
        /\/packages\/(runtime|protocol|server)\/dist\/index\.js$|\/node_modules\/(zod|pg|kysely|better-sqlite3|ai|@ai-sdk|@modelcontextprotocol|@opentelemetry|ajv)\//.test(
          url,
        ),
      );
      expect(heavy).toEqual([]);
      // What each command does is loaded by its action.
      expect(loaded.filter((url) => url.endsWith('/runtime-actions.js'))).toEqual([]);
    },
  );
});

describe('usage mistakes in a terminal', { timeout: 120_000 }, () => {
  const cwd = tempDir('oar-usage-');

  it('bare `oar` prints the help, then the mistake and its code (exit 2)', () => {
    const { code, text } = inTerminal(cwd, []);
    expect(code).toBe(2);
    expect(text).toMatch(/^Usage: oar \[options\] \[command\]\n/);
    expect(text).toContain('\n  inspect [options] <session>');
    expect(text).toContain('\nerror: a command is required\ncode: usage_error\n');
    expect(text).not.toContain('{"error"');
    expect(text).not.toContain('\\n');
  });

  it('an unknown command: the error, then the suggestion on its own line, then the code', () => {
    const { code, text } = inTerminal(cwd, ['rn', 'hello']);
    expect(code).toBe(2);
    expect(text).toBe("error: unknown command 'rn'\n(Did you mean run?)\ncode: usage_error — see `oar --help`\n");
  });

  it("a missing argument: the error and the command's usage", () => {
    const { code, text } = inTerminal(cwd, ['inspect']);
    expect(code).toBe(2);
    expect(text).toBe(
      "error: missing required argument 'session'\nUsage: oar inspect [options] <session>\ncode: usage_error — see `oar inspect --help`\n",
    );
  });

  it('a group without its subcommand prints that group’s help', () => {
    const { code, text } = inTerminal(cwd, ['keys']);
    expect(code).toBe(2);
    expect(text).toMatch(/^Usage: oar keys \[options\] \[command\]\n/);
    expect(text).toContain('error: a command is required\ncode: usage_error\n');
  });

  it('an unknown option that is a pasted token is printed redacted, as text', () => {
    const token = `ghp_${'a1B2c3D4e5'.repeat(4).slice(0, 36)}`;
    const { code, text } = inTerminal(cwd, ['sessions', `--${token}`]);
    expect(code).toBe(2);
    expect(text).toMatch(/^error: unknown option '--\[REDACTED:[a-z_]+\]'\nUsage: oar sessions \[options\]\n/);
    expect(text).not.toContain(token);
  });

  it('with --json, the terminal gets the structured line', () => {
    const { code, text } = inTerminal(cwd, ['inspect', '--json']);
    expect(code).toBe(2);
    const error = (JSON.parse(text.trim()) as { error: { code: string; message: string; details: unknown } }).error;
    expect(error).toMatchObject({ code: 'usage_error', message: "missing required argument 'session'" });
  });
});

describe('usage mistakes for a script (stderr not a terminal)', { timeout: 120_000 }, () => {
  const cwd = tempDir('oar-usage-');

  it('keep the one structured line, the help in details.usage', () => {
    const bare = oarIn(cwd, []);
    expect(bare.code).toBe(2);
    const error = (JSON.parse(bare.stderr.trim()) as { error: Record<string, unknown> }).error;
    expect(error).toMatchObject({
      code: 'usage_error',
      message: 'a command is required (see details.usage)',
      retryable: false,
      details: { reason: 'commander.help', hint: 'oar --help', usage: expect.stringContaining('Usage: oar') },
    });
    const unknown = oarIn(cwd, ['rn']);
    expect(unknown.code).toBe(2);
    expect(JSON.parse(unknown.stderr.trim())).toMatchObject({
      error: { code: 'usage_error', message: "unknown command 'rn'\n(Did you mean run?)" },
    });
  });
});
