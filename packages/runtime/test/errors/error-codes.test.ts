import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, type ErrorCodeInfo } from '../../src/kernel/error-codes.js';

/**
 * One table of error codes (src/error-codes.ts), documented in docs/errors.md. This test keeps four things in
 * step: every code the source can produce is in the table, nothing in the table is dead, every error the source
 * constructs carries the table's retryable flag, and the documentation lists exactly the table with the same exit
 * status and retryable flag.
 */

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const TABLE = ERROR_CODES as Record<string, ErrorCodeInfo>;

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sources(path);
    return path.endsWith('.ts') && !path.endsWith('.d.ts') ? [path] : [];
  });
}

const files = ['protocol', 'runtime', 'server', 'cli'].flatMap((pkg) => sources(join(ROOT, 'packages', pkg, 'src')));
const text = new Map(files.map((file) => [file, readFileSync(file, 'utf8')]));

/** The codes the source passes to the error constructors (including both arms of a conditional). */
function producedCodes(): Map<string, string> {
  const produced = new Map<string, string>();
  const where = (file: string) => file.slice(ROOT.length);
  for (const [file, source] of text) {
    if (file.endsWith('error-codes.ts')) continue;
    const constructors =
      /\b(?:new OarRuntimeError|new ToolError|oarError|fault|super|fsToolError|new UsageError\(oarError)\(\s*([^,()]+),/g;
    for (const match of source.matchAll(constructors)) {
      // The arms of a conditional, not what it compares: `x === 'abort' ? 'graph_aborted' : 'awaiting_…'`.
      const argument = match[1]!.replace(/[=!]==?\s*'[^']*'/g, '');
      for (const literal of argument.matchAll(/'([a-z][a-z0-9_]*)'/g)) produced.set(literal[1]!, where(file));
    }
    for (const match of source.matchAll(/\bnotFound\(\s*'([a-z_]+)'/g))
      produced.set(`${match[1]}_not_found`, where(file));
    // Error objects written out (the protocol package's `code:` fields are validation issue codes, not errors).
    if (!file.includes('/packages/protocol/')) {
      for (const match of source.matchAll(/\bcode: '([a-z][a-z0-9_]*)'/g)) {
        if (match[1] !== 'custom') produced.set(match[1]!, where(file)); // zod's own issue code
      }
    }
  }
  return produced;
}

/** The text of a call from its opening parenthesis to the matching closing one (strings are not special-cased). */
function callText(source: string, open: number): string {
  let depth = 0;
  for (let i = open; i < source.length; i++) {
    const c = source[i]!;
    if (c === '(' || c === '{' || c === '[') depth++;
    else if (c === ')' || c === '}' || c === ']') depth--;
    if (depth === 0) return source.slice(open, i + 1);
  }
  return source.slice(open);
}

/** Where the object literal around `index` opens (-1 when there is none). */
function enclosingBrace(source: string, index: number): number {
  let depth = 0;
  for (let i = index - 1; i >= 0; i--) {
    const c = source[i]!;
    if (c === '}' || c === ')' || c === ']') depth++;
    else if (c === '(' || c === '[') depth--;
    else if (c === '{') {
      if (depth === 0) return i;
      depth--;
    }
    if (depth < 0) return -1;
  }
  return -1;
}

type Retryable = boolean | 'computed';

/**
 * The retryable flag of each error the source constructs with a literal code: `new OarRuntimeError(code, message,
 * {retryable})`, `new ToolError(…)`, `oarError(…)` (absent means false, their default), and the store's
 * `fault(code, retryable, what)`. A flag computed at run time is `computed`. Errors whose code is a variable are
 * out of this reach.
 */
function constructedFlags(): Array<{ code: string; retryable: Retryable; where: string }> {
  const found: Array<{ code: string; retryable: Retryable; where: string }> = [];
  for (const [file, source] of text) {
    if (file.endsWith('error-codes.ts')) continue;
    const where = (index: number) => `${file.slice(ROOT.length)}:${source.slice(0, index).split('\n').length}`;
    for (const match of source.matchAll(/\b(new OarRuntimeError|new ToolError|oarError)\(\s*'([a-z][a-z0-9_]*)'/g)) {
      const call = callText(source, match.index + match[1]!.length);
      const flag = /\bretryable(?:\s*:\s*([^,}\n]+))?/.exec(call);
      const value = flag === null ? 'false' : (flag[1]?.trim() ?? 'computed');
      const retryable = value === 'true' ? true : value === 'false' ? false : 'computed';
      found.push({ code: match[2]!, retryable, where: where(match.index) });
    }
    // Error objects written out with their flag: `{ code: 'protocol_violation', message, retryable: true }`.
    if (!file.includes('/packages/protocol/')) {
      for (const match of source.matchAll(/\bcode: '([a-z][a-z0-9_]*)'/g)) {
        const open = enclosingBrace(source, match.index);
        const flag = open < 0 ? null : /\bretryable:\s*(true|false)\b/.exec(callText(source, open));
        if (flag) found.push({ code: match[1]!, retryable: flag[1] === 'true', where: where(match.index) });
      }
    }
    for (const match of source.matchAll(/\bfault\(\s*'([a-z][a-z0-9_]*)',\s*(true|false)\b/g)) {
      found.push({ code: match[1]!, retryable: match[2] === 'true', where: where(match.index) });
    }
  }
  return found;
}

describe('the error code table', () => {
  it('has every code the source can produce', () => {
    const missing = [...producedCodes()]
      .filter(([code]) => !(code in TABLE))
      .map(([code, file]) => `${code} (${file})`);
    expect(missing).toEqual([]);
  });

  it('has no dead code: each appears in the source outside the table', () => {
    const all = [...text].filter(([file]) => !file.endsWith('error-codes.ts')).map(([, source]) => source);
    const dead = Object.keys(TABLE).filter((code) => {
      if (all.some((source) => source.includes(`'${code}'`))) return false;
      // `notFound('session', …)` produces session_not_found.
      const kind = /^(.*)_not_found$/.exec(code)?.[1];
      return !(kind && all.some((source) => source.includes(`notFound('${kind}'`)));
    });
    expect(dead).toEqual([]);
  });

  it("is what the errors say: each constructed error carries its code's retryable flag", () => {
    const flags = constructedFlags();
    // The scan must see the errors it checks (a broken pattern would pass on nothing).
    expect(flags.length).toBeGreaterThan(100);
    const wrong = flags
      .filter(({ code, retryable }) => {
        const expected = TABLE[code]?.retryable;
        return typeof expected === 'boolean' && retryable !== expected;
      })
      .map(
        ({ code, retryable, where }) =>
          `${code}: ${String(retryable)} at ${where}, the table says ${TABLE[code]!.retryable}`,
      );
    expect(wrong).toEqual([]);
  });

  it("marks a code 'depends' only when its errors really differ", () => {
    const flags = constructedFlags();
    const uniform = Object.entries(TABLE)
      .filter(([, info]) => info.retryable === 'depends')
      .filter(([code]) => {
        const values = new Set(flags.filter((flag) => flag.code === code).map((flag) => flag.retryable));
        return !values.has('computed') && values.size < 2;
      })
      .map(([code]) => code);
    expect(uniform).toEqual([]);
  });

  it('is documented in docs/errors.md with the same exit status and retryable flag', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'errors.md'), 'utf8');
    const rows = new Map<string, { exit: string; retryable: string }>();
    for (const match of doc.matchAll(/^\| `([a-z_]+)` \| ([^|]+) \| ([^|]+) \|/gm)) {
      rows.set(match[1]!, { exit: match[2]!.trim(), retryable: match[3]!.trim() });
    }
    const expected = Object.fromEntries(
      Object.entries(TABLE).map(([code, info]) => [
        code,
        {
          exit: info.exit === null ? '—' : String(info.exit),
          retryable: info.retryable === 'depends' ? 'depends' : info.retryable ? 'yes' : 'no',
        },
      ]),
    );
    expect(Object.fromEntries(rows)).toEqual(expected);
  });
});
