import { symlink } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { GREP_MAX_FILE_BYTES, grepTool } from '../../src/tools/builtin/grep.js';
import { abortedContext, files, run, sandbox, toolContext, toolError } from './helpers.js';

async function layout(root: string): Promise<void> {
  await files(root, {
    'src/a.ts': 'const value = 1;\n// TODO: tidy\nexport { value };\n',
    'src/b.ts': 'let todo = 2;\r\n',
    'docs/guide.md': 'TODO write the guide\n',
    'node_modules/dep/index.js': '// TODO upstream\n',
    '.config/x.txt': 'TODO hidden\n',
  });
}

describe('grep', () => {
  it('prints path:line: text for each matching line', async () => {
    const { root } = await sandbox();
    await layout(root);
    const out = await run(grepTool, { pattern: 'TODO' }, toolContext(root));
    expect(out.text).toBe('docs/guide.md:1: TODO write the guide\nsrc/a.ts:2: // TODO: tidy');
    expect(out.summary).toBe('2 matches in 2 files for /TODO/');
    expect(out.structured).toMatchObject({
      matchCount: 2,
      fileCount: 2,
      files: ['docs/guide.md', 'src/a.ts'],
      filesSearched: 3,
      truncated: false,
    });
  });

  it('matches case-insensitively on request and strips CR from CRLF lines', async () => {
    const { root } = await sandbox();
    await layout(root);
    const out = await run(grepTool, { pattern: 'todo =', caseInsensitive: true }, toolContext(root));
    expect(out.text).toBe('src/b.ts:1: let todo = 2;');
  });

  it('filters files by glob: by name at any depth without a slash, by path with one', async () => {
    const { root } = await sandbox();
    await layout(root);
    const byName = await run(grepTool, { pattern: 'TODO', glob: '*.md' }, toolContext(root));
    expect(byName.text).toBe('docs/guide.md:1: TODO write the guide');
    const byPath = await run(grepTool, { pattern: 'TODO|todo', glob: 'src/**' }, toolContext(root));
    expect(byPath.structured).toMatchObject({ files: ['src/a.ts', 'src/b.ts'] });
    const named = await run(grepTool, { pattern: 'TODO', glob: 'node_modules/**' }, toolContext(root));
    expect(named.text).toBe('node_modules/dep/index.js:1: // TODO upstream');
    const dotted = await run(grepTool, { pattern: 'TODO', glob: '.config/*' }, toolContext(root));
    expect(dotted.text).toBe('.config/x.txt:1: TODO hidden');
  });

  it('caps the number of matches and flags the truncation', async () => {
    const { root } = await sandbox();
    await files(root, { 'many.txt': Array.from({ length: 50 }, (_, i) => `hit ${i}`).join('\n') });
    const out = await run(grepTool, { pattern: 'hit', maxMatches: 10 }, toolContext(root));
    expect(out.text?.split('\n')).toHaveLength(10);
    expect(out.structured).toMatchObject({ matchCount: 10, truncated: true });
    expect(out.summary).toContain('stopped at 10');
    const all = await run(grepTool, { pattern: 'hit' }, toolContext(root));
    expect(all.structured).toMatchObject({ matchCount: 50, truncated: false });
  });

  it('skips binary files and files over 1 MiB', async () => {
    const { root } = await sandbox();
    await files(root, {
      'bin.dat': new Uint8Array([...Buffer.from('needle'), 0, 1, 2]),
      'big.log': `needle\n${'x'.repeat(GREP_MAX_FILE_BYTES)}`,
      'ok.txt': 'needle',
    });
    const out = await run(grepTool, { pattern: 'needle' }, toolContext(root));
    expect(out.text).toBe('ok.txt:1: needle');
    expect(out.structured).toMatchObject({ skippedBinary: 1, skippedLarge: 1, filesSearched: 1 });
  });

  it('never searches through symlinks that leave the workspace', async () => {
    const { root, outside } = await sandbox();
    await files(root, { 'in.txt': 'needle inside' });
    await files(outside, { 'secret.txt': 'needle outside' });
    await symlink(path.join(outside, 'secret.txt'), path.join(root, 'link.txt'));
    await symlink(outside, path.join(root, 'escape'));
    const out = await run(grepTool, { pattern: 'needle' }, toolContext(root));
    expect(out.text).toBe('in.txt:1: needle inside');
  });

  it('reports no matches and rejects invalid regular expressions', async () => {
    const { root } = await sandbox();
    await layout(root);
    const none = await run(grepTool, { pattern: 'nothing-here' }, toolContext(root));
    expect(none.text).toBe('');
    expect(none.summary).toBe('No matches for /nothing-here/ in 3 files');
    const error = await toolError(run(grepTool, { pattern: '(unclosed' }, toolContext(root)), 'invalid_pattern');
    expect(error.options.details).toEqual({ pattern: '(unclosed' });
  });

  it('stops when the call is aborted', async () => {
    const { root } = await sandbox();
    await layout(root);
    await toolError(run(grepTool, { pattern: 'TODO' }, abortedContext(root)), 'aborted');
  });

  it('declares read-only flags and the whole workspace as its path', () => {
    expect(grepTool).toMatchObject({ isReadOnly: true, isConcurrencySafe: true, isIdempotent: true });
    expect(grepTool.paths?.({ pattern: 'x', caseInsensitive: false, maxMatches: 1 })).toEqual(['.']);
  });
});

describe('grep patterns run in linear time (RE2)', () => {
  it('a catastrophic-backtracking pattern completes instead of freezing the runtime', async () => {
    const { root } = await sandbox();
    await files(root, { 'big.txt': `${'a'.repeat(20_000)}!\n` });
    // With a backtracking engine this line would take longer than the age of the universe.
    const out = await run(grepTool, { pattern: '(a+)+$' }, toolContext(root));
    expect(out.structured).toMatchObject({ matchCount: 0 });
  });

  it('lookaround is not RE2 syntax: invalid_pattern says so', async () => {
    const { root } = await sandbox();
    await files(root, { 'a.txt': 'ab\n' });
    const error = await toolError(run(grepTool, { pattern: '(?<=a)b' }, toolContext(root)), 'invalid_pattern');
    expect(error.message).toContain('RE2');
  });
});

describe('grep cannot freeze the runtime', () => {
  it('a glob filter with nested extglob stars against a long file name finishes', async () => {
    const { root } = await sandbox();
    const name = 'a'.repeat(100);
    await files(root, { [`d/${name}`]: 'needle', [`d/${name}!`]: 'needle' });
    const started = Date.now();
    const out = await run(grepTool, { pattern: 'needle', glob: '*(a*)*(a*)*(a*)*(a*)*(a*)*(a*)!' }, toolContext(root));
    expect(out.text).toBe(`d/${name}!:1: needle`);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('an abort stops a match that runs long inside one line (the match runs in a worker thread)', async () => {
    // Linear time is not short time: this 117-character RE2 pattern needs over a minute for this one line, in a
    // single synchronous call that no per-file abort check could interrupt.
    const { root } = await sandbox();
    await files(root, { 'long.txt': `${'a'.repeat(100_000)}\n` });
    const controller = new AbortController();
    const started = Date.now();
    const grepping = run(grepTool, { pattern: `${'a{0,1000}'.repeat(12)}[0-9]` }, toolContext(root, controller.signal));
    setTimeout(() => controller.abort(), 1_000);
    await toolError(grepping, 'aborted');
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('long matching lines are cut at 500 characters', async () => {
    const { root } = await sandbox();
    await files(root, { 'wide.txt': `needle${'x'.repeat(600)}\n` });
    const out = await run(grepTool, { pattern: 'needle' }, toolContext(root));
    expect(out.text).toBe(`wide.txt:1: needle${'x'.repeat(494)}… [106 more characters]`);
  });
});
