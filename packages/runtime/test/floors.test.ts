import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The rules of the runtime's floors that are not about imports (those are dependency-cruiser's, `npm run deps`):
 * one place to authorize, one place a side effect's start is recorded, dialect differences only behind the store's
 * port, and files small enough to read (docs/architecture.md "Floors and ports").
 */
const SRC = join(import.meta.dirname, '../src');

function sources(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

const files = sources().map((path) => ({ path: relative(SRC, path), text: readFileSync(path, 'utf8') }));
/** The files whose code (comments aside) matches `pattern`. */
const filesWith = (pattern: RegExp) =>
  files.filter((file) => pattern.test(file.text.replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, ''))).map((file) => file.path);

describe('the runtime floors', () => {
  it('reads every source file', () => {
    expect(files.length).toBeGreaterThan(150);
    expect(files.map((f) => f.path)).toContain('policy/authorize.ts');
  });

  it('judges permissions in one file: policy/authorize.ts', () => {
    expect(filesWith(/[^\w.]evaluatePermission\(/).filter((path) => path !== 'policy/permissions.ts')).toEqual([
      'policy/authorize.ts',
    ]);
    expect(filesWith(/type: 'permission\.evaluated'/)).toEqual(['policy/authorize.ts']);
  });

  it("records a side effect's start in one file: scheduler/bracket.ts", () => {
    expect(filesWith(/type: 'tool\.started'/)).toEqual(['scheduler/bracket.ts']);
  });

  it("builds a model call's completion in one file: models/cost.ts", () => {
    expect(filesWith(/type: 'model\.completed'/)).toEqual(['models/cost.ts']);
  });

  it('asks which dialect the store is only inside store/', () => {
    const checks = filesWith(/dialect\s*[!=]==|[!=]==\s*'(postgres|sqlite)'/).filter(
      (path) => !path.startsWith('store/'),
    );
    expect(checks).toEqual([]);
  });

  it('keeps every source file at 600 lines or fewer, and only index.ts at the package root', () => {
    const long = files.filter((file) => file.text.split('\n').length > 600).map((file) => file.path);
    expect(long).toEqual([]);
    expect(files.filter((file) => !file.path.includes('/')).map((file) => file.path)).toEqual(['index.ts']);
  });
});
