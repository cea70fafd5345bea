import picomatch from 'picomatch';
import { RE2JS } from 're2js';
import { describe, expect, it } from 'vitest';
import { ToolError } from '../../src/kernel/errors.js';
import { globSubject, translateGlob } from '../../src/kernel/match/glob-pattern.js';
import { MAX_PATTERN_LENGTH } from '../../src/kernel/match/pattern.js';

/** Match on the main thread (the tools match in a worker; the translation is what is tested here). */
function matcher(pattern: string, basename = false): (path: string) => boolean {
  const program = translateGlob(pattern, { basename });
  const compiled = RE2JS.compile(program.source);
  return (path) => compiled.matcher(globSubject(path, program.basename)).matches() !== program.negated;
}

function matches(pattern: string, path: string, basename = false): boolean {
  return matcher(pattern, basename)(path);
}

function rejection(pattern: string): ToolError {
  try {
    translateGlob(pattern);
  } catch (error) {
    expect(error).toBeInstanceOf(ToolError);
    return error as ToolError;
  }
  throw new Error(`expected "${pattern}" to be rejected`);
}

const PATHS = [
  'a',
  'a.ts',
  '.ts',
  '.env',
  'b',
  'ab',
  'abb',
  'axxb',
  'a/b',
  'a/xb',
  'a/x/b',
  'a/b/c',
  'a/.b',
  'a/.x/b',
  'a/.env',
  '.a/x',
  '.github/x.yml',
  'x/.a',
  'src/a.ts',
  'src/x/y/a.ts',
  'src/.x',
  'src/nested/d.ts',
  'b/c/d',
  'a2',
  'acd',
  'a.js',
  'a.b.ts',
  'README.md',
  'docs/guide.md',
  'aaa!',
  'x/aa!',
  '.x',
  'bx',
  'a+b',
  'a*b',
  'a^b',
  '#a',
  '{a}',
  '[abc',
  'a]',
  '{a,b',
  'a}',
  'a|b',
];

// Patterns whose meaning picomatch (dot: false) defines; the translation must agree on every path above.
const PATTERNS = [
  '*',
  '**',
  '**/*',
  '**/*.ts',
  '*.ts',
  'a/**',
  'a/**/b',
  'a/**b',
  'a**b',
  'a/*/b',
  'a/.*/b',
  'src/**/*.ts',
  'src/**',
  '.env',
  '**/.env',
  '.*',
  '**/x',
  'x/**',
  '{.github,src}/**',
  '{src,.github}/**',
  'src/{*.ts,.x}',
  '{a,.env}',
  '{a,b/c}/d',
  '{,a}b',
  'a{b,c{d,e}}',
  '*.{js,ts}',
  'a{1..3}',
  '{a}',
  '?',
  '?a',
  '??',
  '[.]env',
  '[^a]x',
  '[a-c]x',
  '[[:alpha:]]',
  'a[!b]c',
  '@(a|b).ts',
  '?(a|b).ts',
  '*(a|b)',
  '+(a)',
  '+(a)b',
  'a+(b)',
  '*(a*)!',
  '**/*(a*)*(a*)!',
  '@(.x)',
  '*(.x)',
  '(a|b)',
  'a+b',
  'a\\*b',
  '\\*',
  'a^b',
  '#a',
  '[abc',
  'a]',
  '{a,b',
  'a}',
  'a|b',
  './a',
  '!*.ts',
  '!**/*.md',
  '*.',
];

describe('glob translation to RE2', () => {
  it('agrees with picomatch (dot: false) on the glob and grep test corpus', () => {
    const disagreements: string[] = [];
    for (const pattern of PATTERNS) {
      const reference = picomatch(pattern, { dot: false });
      const ours = matcher(pattern);
      for (const path of PATHS) {
        const expected = reference(path);
        if (pattern === '[^a]x' && path === '.x') continue; // see the next test
        if (ours(path) !== expected) disagreements.push(`${pattern} vs ${path}: picomatch ${expected}`);
      }
    }
    expect(disagreements).toEqual([]);
  });

  it('differs from picomatch on purpose: [!a] means "not a" (as in bash), and no class matches a leading dot', () => {
    expect(picomatch('[!a]')('a')).toBe(true); // picomatch quirk
    expect(matches('[!a]', 'a')).toBe(false);
    expect(matches('[!a]', 'b')).toBe(true);
    expect(matches('[!a]', '/')).toBe(false);
    expect(matches('[^a]x', '.x')).toBe(false);
    expect(matches('[^a]x', 'bx')).toBe(true);
  });

  it('matches the file name at any depth in basename mode, like picomatch', () => {
    for (const [pattern, path] of [
      ['*.md', 'docs/a.md'],
      ['a*', 'x/.ab'],
      ['.*', 'x/.ab'],
      ['{a,b}', 'x/b'],
      ['*.md', 'docs/a.ts'],
    ] as const) {
      expect(matches(pattern, path, true), `${pattern} vs ${path}`).toBe(picomatch(pattern, { basename: true })(path));
    }
  });

  it('translates nested extglob stars to a pattern RE2 matches in linear time', () => {
    // picomatch's RegExp for this pattern needs minutes for a 30-character name; RE2 needs one pass.
    const pattern = '**/*(a*)*(a*)*(a*)*(a*)*(a*)*(a*)!';
    expect(matches(pattern, `dir/${'a'.repeat(200)}`)).toBe(false);
    expect(matches(pattern, `dir/${'a'.repeat(200)}!`)).toBe(true);
  });

  it('refuses what has no linear-time translation, saying what is allowed', () => {
    const negated = rejection('!(*.ts)');
    expect(negated.code).toBe('invalid_pattern');
    expect(negated.message).toContain('!(');
    expect(negated.options.details).toEqual({ pattern: '!(*.ts)' });
    expect(rejection('src/*.@(js|!(ts))').code).toBe('invalid_pattern');
    expect(rejection('*'.repeat(MAX_PATTERN_LENGTH + 1)).message).toContain(`${MAX_PATTERN_LENGTH} characters`);
    expect(rejection('a\u0000b').code).toBe('invalid_pattern');
  });

  it('translates in linear time: unclosed brackets are literal without re-parsing', () => {
    const pattern = '{('.repeat(MAX_PATTERN_LENGTH / 2);
    const started = Date.now();
    const program = translateGlob(pattern);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(RE2JS.compile(program.source).matcher(pattern).matches()).toBe(true);
  });
});
