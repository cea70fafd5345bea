import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, type ErrorCodeInfo } from '../../src/error-codes.js';

/**
 * One table of error codes (src/error-codes.ts), documented in docs/errors.md. This test keeps three things in
 * step: every code the source can produce is in the table, nothing in the table is dead, and the documentation
 * lists exactly the table with the same exit status and retryable flag.
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

  it('is documented in docs/errors.md with the same exit status and retryable flag', () => {
    const doc = readFileSync(join(ROOT, 'docs', 'errors.md'), 'utf8');
    const rows = new Map<string, { exit: string; retryable: string }>();
    for (const match of doc.matchAll(/^\| `([a-z_]+)` \| ([^|]+) \| ([^|]+) \|/gm)) {
      rows.set(match[1]!, { exit: match[2]!.trim(), retryable: match[3]!.trim() });
    }
    const expected = Object.fromEntries(
      Object.entries(TABLE).map(([code, info]) => [
        code,
        { exit: info.exit === null ? '—' : String(info.exit), retryable: info.retryable ? 'yes' : 'no' },
      ]),
    );
    expect(Object.fromEntries(rows)).toEqual(expected);
  });
});
