import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { OarConfigSchema } from '../../runtime/src/config/oar-config.js';
import { ModelScriptSchema } from '../../runtime/src/models/script-schema.js';
import { main } from '../src/main.js';
import { repoRoot } from './cli-helpers.js';

/**
 * Every command line and configuration example in README.md and docs/*.md is checked against the real thing:
 * - a ```json / ```jsonc block that is an oar.config.json (every top-level key is a config key) is validated
 *   against the config schema; a fragment says where it belongs with `<!-- config fragment: permissions.rules[] -->`
 *   right before it, and is validated in place; a model script (`steps`) against the script schema;
 * - every `oar …` / `npx oar …` command in a ```sh block is parsed by the real CLI (its commander definitions, built
 *   by `main`) with every command's action replaced by a no-op: the command, its options and its arguments must
 *   exist and fit, and nothing runs.
 * A block that cannot be checked says why, visibly in the page source, right before it:
 * `<!-- not run: needs a real model key -->`. A marker without a reason fails.
 * The files are read as they are when the test runs: a new section or a new flag is checked with no change here.
 */

interface Block {
  file: string;
  /** The 1-based line of the opening fence. */
  line: number;
  lang: string;
  body: string;
  /** The HTML comment right before the block (blank lines between allowed), without `<!--` and `-->`. */
  marker?: string;
}

const PAGES = [
  'README.md',
  ...readdirSync(join(repoRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The fenced blocks of a Markdown file, with the marker before each. */
function blocksOf(file: string): Block[] {
  const lines = readFileSync(join(repoRoot, file), 'utf8').split('\n');
  const blocks: Block[] = [];
  let open: { fence: string; lang: string; line: number; body: string[]; marker?: string } | undefined;
  let lastMarker: string | undefined;
  for (const [index, text] of lines.entries()) {
    const fence = /^\s*(`{3,}|~{3,})\s*([^`\s]*)/.exec(text);
    if (open) {
      const closes = fence !== null && fence[1]?.[0] === open.fence[0] && (fence[1]?.length ?? 0) >= open.fence.length;
      if (closes && fence?.[2] === '') {
        blocks.push({ file, line: open.line, lang: open.lang, body: open.body.join('\n'), marker: open.marker });
        open = undefined;
      } else {
        open.body.push(text);
      }
      continue;
    }
    if (fence) {
      open = { fence: fence[1] as string, lang: fence[2] ?? '', line: index + 1, body: [], marker: lastMarker };
      lastMarker = undefined;
      continue;
    }
    const comment = /^\s*<!--\s*([\s\S]*?)\s*-->\s*$/.exec(text);
    if (comment) lastMarker = comment[1];
    else if (text.trim() !== '') lastMarker = undefined;
  }
  return blocks;
}

const BLOCKS = PAGES.flatMap(blocksOf);
const where = (block: Block) => `${block.file}:${block.line}`;

/** `not run: REASON` → the reason ('' when the marker has none); undefined when the block is not marked. */
function notRun(block: Block): string | undefined {
  const match = /^not run\b:?\s*(.*)$/s.exec(block.marker ?? '');
  return match ? (match[1] ?? '').trim() : undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// Configuration examples
// ---------------------------------------------------------------------------------------------------------------

const CONFIG_KEYS = new Set(OarConfigSchema.keyof().options as string[]);
const SCRIPT_KEYS = new Set(ModelScriptSchema.keyof().options as string[]);

/** JSON with `//` comments removed (a ```jsonc block), strings left alone. */
function withoutComments(text: string): string {
  return text.replace(/("(?:[^"\\]|\\.)*")|\/\/[^\n]*/g, (_match, string: string | undefined) => string ?? '');
}

/** The JSON values of a block: the whole block, or one per line (a list of alternatives). None: not JSON. */
function jsonValues(block: Block): unknown[] {
  const text = block.lang === 'jsonc' ? withoutComments(block.body) : block.body;
  try {
    return [JSON.parse(text)];
  } catch {
    const lines = text.split('\n').filter((line) => line.trim() !== '');
    try {
      return lines.map((line) => JSON.parse(line));
    } catch {
      return [];
    }
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);
const isConfig = (value: unknown) =>
  isObject(value) && Object.keys(value).length > 0 && Object.keys(value).every((key) => CONFIG_KEYS.has(key));
const isScript = (value: unknown) =>
  isObject(value) && 'steps' in value && Object.keys(value).every((key) => SCRIPT_KEYS.has(key));

/** `permissions.rules[]` + a rule → `{permissions: {rules: [rule]}}`. */
function placed(path: string, value: unknown): unknown {
  return path
    .split('.')
    .reverse()
    .reduce((inner, segment) => {
      const array = segment.endsWith('[]');
      const key = array ? segment.slice(0, -2) : segment;
      return { [key]: array ? [inner] : inner };
    }, value);
}

function configIssues(value: unknown): string[] {
  const parsed = OarConfigSchema.safeParse(value);
  return parsed.success ? [] : parsed.error.issues.map((issue) => `${issue.path.join('.') || '/'}: ${issue.message}`);
}

// ---------------------------------------------------------------------------------------------------------------
// Command lines
// ---------------------------------------------------------------------------------------------------------------

interface Word {
  text: string;
  quoted: boolean;
}

/**
 * A shell line as words, the way sh splits it for what docs use: quotes, backslash escapes, comments, and the
 * operators `&&`, `||`, `|`, `;`, `&` as words of their own. `$VAR` stays literal (its value does not matter here).
 */
function shellWords(line: string): Word[] {
  const words: Word[] = [];
  let current = '';
  let quoted = false;
  let inWord = false;
  const flush = () => {
    if (inWord) words.push({ text: current, quoted });
    current = '';
    quoted = false;
    inWord = false;
  };
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string;
    if (c === "'" || c === '"') {
      const end = line.indexOf(c, i + 1);
      const inner = line.slice(i + 1, end === -1 ? undefined : end);
      current += c === '"' ? inner.replace(/\\(["\\$`])/g, '$1') : inner;
      quoted = true;
      inWord = true;
      i = end === -1 ? line.length : end;
    } else if (c === '\\' && i + 1 < line.length) {
      current += line[++i];
      inWord = true;
    } else if (/\s/.test(c)) {
      flush();
    } else if (c === '#' && !inWord) {
      break;
    } else if ('|&;'.includes(c)) {
      flush();
      const two = line.slice(i, i + 2);
      const op = two === '&&' || two === '||' ? two : c;
      i += op.length - 1;
      words.push({ text: op, quoted: false });
    } else {
      current += c;
      inWord = true;
    }
  }
  flush();
  return words;
}

const OPERATORS = new Set(['&&', '||', '|', ';', '&']);

/** The `oar` invocations of a block: each one's arguments (after `oar`), with the line it starts on. */
function oarCommands(block: Block): { line: number; args: string[] }[] {
  const commands: { line: number; args: string[] }[] = [];
  const lines = block.body.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = i;
    let text = lines[i] as string;
    while (text.endsWith('\\') && i + 1 < lines.length) text = `${text.slice(0, -1)} ${lines[++i]}`;
    const words = shellWords(text.replace(/^\s*\$\s+/, ''));
    const segments: Word[][] = [[]];
    for (const word of words) {
      if (!word.quoted && OPERATORS.has(word.text)) segments.push([]);
      else segments.at(-1)?.push(word);
    }
    for (const segment of segments) {
      let rest = segment;
      // Variable assignments before the command, and `npx` (with its own flags) before `oar`.
      while (rest[0] && !rest[0].quoted && /^[A-Za-z_][A-Za-z0-9_]*=/.test(rest[0].text)) rest = rest.slice(1);
      if (rest[0]?.text === 'npx') {
        rest = rest.slice(1);
        while (rest[0]?.text.startsWith('-')) rest = rest.slice(1);
      }
      if (rest[0]?.text !== 'oar' || rest[0].quoted) continue;
      const args: string[] = [];
      for (let w = 1; w < rest.length; w++) {
        const word = rest[w] as Word;
        // Redirections are the shell's, not oar's.
        if (!word.quoted && /^\d?>>?$|^<$/.test(word.text)) {
          w++;
          continue;
        }
        if (!word.quoted && /^\d?>>?\S|^<\S/.test(word.text)) continue;
        // A synopsis marks optional parts with brackets: `[--json]`, `[--workspace-id ID]`.
        args.push(word.quoted ? word.text : word.text.replace(/^\[/, '').replace(/\]$/, ''));
      }
      commands.push({ line: block.line + 1 + start, args });
    }
  }
  return commands;
}

/** Parse `args` with the real CLI, every action a no-op: the exit code and what it printed. */
async function parseOnly(args: string[]): Promise<{ code: number; output: string }> {
  let output = '';
  const capture = (chunk: unknown) => {
    output += String(chunk);
    return true;
  };
  const out = vi.spyOn(process.stdout, 'write').mockImplementation(capture as never);
  const err = vi.spyOn(process.stderr, 'write').mockImplementation(capture as never);
  try {
    return { code: await main(args), output };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

const SHELL_LANGS = new Set(['sh', 'bash', 'shell', 'console']);
const JSON_LANGS = new Set(['json', 'jsonc']);

describe('README and docs/ examples', () => {
  // Parse only: every command's action is replaced before the CLI builds its program (and restored after).
  const action = Command.prototype.action;
  beforeAll(() => {
    Command.prototype.action = function (this: Command) {
      return action.call(this, () => undefined);
    };
  });
  afterAll(() => {
    Command.prototype.action = action;
  });

  it('finds the examples (the extraction itself works)', () => {
    expect(
      BLOCKS.filter((b) => JSON_LANGS.has(b.lang)).filter((b) => jsonValues(b).some(isConfig)).length,
    ).toBeGreaterThan(10);
    expect(BLOCKS.filter((b) => SHELL_LANGS.has(b.lang)).flatMap(oarCommands).length).toBeGreaterThan(20);
    expect(
      oarCommands({ file: 'x', line: 1, lang: 'sh', body: 'OAR_STORE=x npx oar run "a b" --json | jq . # c' }),
    ).toEqual([{ line: 2, args: ['run', 'a b', '--json'] }]);
  });

  it('a "not run" marker says why', () => {
    const bare = BLOCKS.filter((b) => notRun(b) === '').map(where);
    expect(bare, 'write the reason: <!-- not run: needs a real model key -->').toEqual([]);
  });

  it('every configuration example is a valid oar.config.json (fragments where they say they belong)', () => {
    const problems: string[] = [];
    let checked = 0;
    for (const block of BLOCKS.filter((b) => JSON_LANGS.has(b.lang) && notRun(b) === undefined)) {
      const fragment = /^config fragment:\s*(\S+)$/.exec(block.marker ?? '')?.[1];
      const values = jsonValues(block);
      if (fragment !== undefined && values.length === 0) problems.push(`${where(block)}: the fragment is not JSON`);
      for (const value of values) {
        const config = fragment !== undefined ? placed(fragment, value) : isConfig(value) ? value : undefined;
        if (config !== undefined) {
          checked++;
          for (const issue of configIssues(config)) problems.push(`${where(block)}: ${issue}`);
        } else if (isScript(value)) {
          checked++;
          const parsed = ModelScriptSchema.safeParse(value);
          if (!parsed.success) problems.push(`${where(block)}: model script: ${parsed.error.issues[0]?.message}`);
        }
      }
    }
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThan(10);
  });

  it('every oar command line parses with the real CLI: its commands, options and arguments exist', async () => {
    const problems: string[] = [];
    let parsed = 0;
    for (const block of BLOCKS.filter((b) => SHELL_LANGS.has(b.lang) && notRun(b) === undefined)) {
      for (const command of oarCommands(block)) {
        parsed++;
        const { code, output } = await parseOnly(command.args);
        if (code !== 0)
          problems.push(`${block.file}:${command.line}: oar ${command.args.join(' ')} → ${code} ${output.trim()}`);
      }
    }
    expect(problems).toEqual([]);
    expect(parsed).toBeGreaterThan(20);
  });

  it('the parse-only check does catch a wrong command and a wrong flag', async () => {
    expect((await parseOnly(['run', '--no-such-flag', 'hi'])).code).toBe(2);
    expect((await parseOnly(['no-such-command'])).code).toBe(2);
    expect((await parseOnly(['run', '--json', 'hi'])).code).toBe(0);
  });
});
