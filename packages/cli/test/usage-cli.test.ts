import { spawnSync } from 'node:child_process';
import { readFileSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { bin, oarIn, repoRoot, tempDir } from './cli-helpers.js';

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

/** The module URLs one run of the binary loads (an ESM resolve hook prints each resolved URL on stderr). */
function loadedUrls(args: string[], cwd?: string): string[] {
  const hook = `export async function resolve(s, c, next) { const r = await next(s, c); process._rawDebug('@@loaded ' + r.url); return r; }`;
  const register = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hook)}`)});`;
  const result = spawnSync(
    process.execPath,
    ['--import', `data:text/javascript,${encodeURIComponent(register)}`, realpathSync(bin), ...args],
    { encoding: 'utf8', timeout: 60_000, ...(cwd ? { cwd } : {}) },
  );
  expect(result.status, result.stderr).toBe(0);
  return result.stderr
    .split('\n')
    .filter((line) => line.startsWith('@@loaded '))
    .map((line) => line.slice('@@loaded '.length));
}

/**
 * What one run of the binary loads: the files of its bundle (packages/cli/bundle) stand for the modules esbuild put
 * in them (its metafile, written beside the bundle by scripts/package-assets.mjs), by repository-relative path;
 * anything loaded from outside the bundle (its externals, node_modules/pg/…) by its own path.
 */
function loadedModules(args: string[], cwd?: string): string[] {
  const meta = JSON.parse(readFileSync(join(repoRoot, 'packages/cli/bundle.meta.json'), 'utf8')) as {
    outputs: Record<string, { inputs: Record<string, unknown> }>;
  };
  const root = pathToFileURL(realpathSync(repoRoot)).href;
  return loadedUrls(args, cwd).flatMap((url) => {
    if (!url.startsWith(`${root}/`)) return [url];
    const path = url.slice(root.length + 1);
    const output = meta.outputs[path];
    return output ? [path, ...Object.keys(output.inputs)] : [path];
  });
}

/** The engine and the heavy dependencies a command that prints help must not load. */
const HEAVY =
  /(^|\/)packages\/(runtime|protocol|server)\/dist\/index\.js$|(^|\/)node_modules\/(zod|pg|kysely|better-sqlite3|ai|@ai-sdk|@modelcontextprotocol|@opentelemetry|ajv)\//;

describe('start-up', { timeout: 120_000 }, () => {
  it.each([
    [['--version']],
    [['--help']],
    [['inspect', '--help']],
    [['session', 'update', '--help']],
    [['permission', 'evaluate', '--help']],
    [['process', 'write', '--help']],
  ])('oar %j loads commander and the command registrations, not the engine or its dependencies', (args) => {
    const loaded = loadedModules(args);
    // The probe works: the binary's bundle and the modules in it are seen.
    expect(loaded).toContain('packages/cli/bundle/oar.js');
    expect(loaded).toContain('packages/cli/dist/main.js');
    expect(loaded.some((path) => path.includes('node_modules/commander/'))).toBe(true);
    expect(loaded.filter((path) => HEAVY.test(path))).toEqual([]);
    // What each command does is loaded by its action.
    expect(loaded.filter((path) => /\/(runtime|control)-actions\.js$/.test(path))).toEqual([]);
  });

  it('a command on a SQLite store loads the engine, but no PostgreSQL driver, MCP SDK or model provider', () => {
    const cwd = tempDir('oar-startup-');
    expect(oarIn(cwd, ['demo']).code).toBe(0);
    const loaded = loadedModules(['sessions'], cwd);
    // The probe works: the engine and the SQLite driver are seen.
    expect(loaded).toContain('packages/runtime/dist/index.js');
    expect(loaded.some((path) => path.includes('node_modules/better-sqlite3/'))).toBe(true);
    const unneeded = loaded.filter((path) =>
      /(^|\/)node_modules\/(pg|@modelcontextprotocol|@ai-sdk\/(openai|anthropic|openai-compatible))\//.test(path),
    );
    expect(unneeded).toEqual([]);
  });
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
