import { symlink } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { GLOB_MAX_RESULTS, globTool } from '../../src/tools/builtin/glob.js';
import { abortedContext, files, run, sandbox, toolContext, toolError } from './helpers.js';

async function layout(root: string): Promise<void> {
  await files(root, {
    'README.md': '#',
    'src/b.ts': '',
    'src/a.ts': '',
    'src/c.js': '',
    'src/nested/d.ts': '',
    '.hidden/x.ts': '',
    '.env': 'SECRET=1',
    'node_modules/pkg/index.ts': '',
    '.git/config': '',
  });
}

async function glob(root: string, input: Record<string, unknown>) {
  const out = await run(globTool, input, toolContext(root));
  return { out, list: out.text === '' ? [] : (out.text ?? '').split('\n') };
}

describe('glob', () => {
  it('lists matching files sorted, skipping dot files, .git and node_modules', async () => {
    const { root } = await sandbox();
    await layout(root);
    const { out, list } = await glob(root, { pattern: '**/*.ts' });
    expect(list).toEqual(['src/a.ts', 'src/b.ts', 'src/nested/d.ts']);
    expect(out.structured).toMatchObject({ pattern: '**/*.ts', path: '.', count: 3, truncated: false, files: list });
    expect(out.summary).toBe('Found 3 files matching "**/*.ts"');
  });

  it('includes dot files and skipped directories only when the pattern names them', async () => {
    const { root } = await sandbox();
    await layout(root);
    expect((await glob(root, { pattern: 'node_modules/**/*.ts' })).list).toEqual(['node_modules/pkg/index.ts']);
    expect((await glob(root, { pattern: '.git/*' })).list).toEqual(['.git/config']);
    expect((await glob(root, { pattern: '.hidden/**' })).list).toEqual(['.hidden/x.ts']);
    expect((await glob(root, { pattern: '.env' })).list).toEqual(['.env']);
    expect((await glob(root, { pattern: '*' })).list).toEqual(['README.md']);
  });

  it('matches relative to path and reports workspace-relative results', async () => {
    const { root } = await sandbox();
    await layout(root);
    const { out, list } = await glob(root, { pattern: '*.ts', path: 'src' });
    expect(list).toEqual(['src/a.ts', 'src/b.ts']);
    expect(out.structured).toMatchObject({ path: 'src' });
    expect(out.summary).toContain('under src');
  });

  it('reports no matches without failing', async () => {
    const { root } = await sandbox();
    await layout(root);
    const { out, list } = await glob(root, { pattern: '**/*.py' });
    expect(list).toEqual([]);
    expect(out.summary).toBe('No files match "**/*.py"');
  });

  it(`caps results at ${GLOB_MAX_RESULTS} and flags the truncation`, async () => {
    const { root } = await sandbox();
    const many: Record<string, string> = {};
    for (let i = 0; i < GLOB_MAX_RESULTS + 5; i += 1) many[`f/${String(i).padStart(4, '0')}.txt`] = '';
    await files(root, many);
    const { out, list } = await glob(root, { pattern: '**/*.txt' });
    expect(list).toHaveLength(GLOB_MAX_RESULTS);
    expect(list[0]).toBe('f/0000.txt');
    expect(out.structured).toMatchObject({ count: GLOB_MAX_RESULTS, truncated: true });
    expect(out.summary).toContain('truncated');
  });

  it('never lists files through symlinks that leave the workspace', async () => {
    const { root, outside } = await sandbox();
    await files(root, { 'src/a.ts': '' });
    await files(outside, { 'secret.ts': '', 'deep/more.ts': '' });
    await symlink(path.join(outside, 'secret.ts'), path.join(root, 'link.ts'));
    await symlink(outside, path.join(root, 'escape'));
    await symlink(path.join(root, 'src/a.ts'), path.join(root, 'alias.ts'));
    const { out, list } = await glob(root, { pattern: '**/*' });
    expect(list).toEqual(['alias.ts', 'src/a.ts']);
    expect(out.structured).toMatchObject({ skippedSymlinks: 2 });
    await toolError(run(globTool, { pattern: '*', path: 'escape' }, toolContext(root)), 'path_outside_workspace');
  });

  it('rejects bad search directories and patterns', async () => {
    const { root } = await sandbox();
    await layout(root);
    await toolError(run(globTool, { pattern: '*', path: 'README.md' }, toolContext(root)), 'not_a_directory');
    await toolError(run(globTool, { pattern: '*', path: 'missing' }, toolContext(root)), 'not_found');
    await toolError(run(globTool, { pattern: '*', path: '..' }, toolContext(root)), 'path_outside_workspace');
    await toolError(run(globTool, { pattern: '/etc/*' }, toolContext(root)), 'invalid_pattern');
    await toolError(run(globTool, { pattern: '../*' }, toolContext(root)), 'invalid_pattern');
  });

  it('stops when the call is aborted, including between directories', async () => {
    const { root } = await sandbox();
    await layout(root);
    await toolError(run(globTool, { pattern: '**/*' }, abortedContext(root)), 'aborted');

    // Abort after the call has passed its entry check: the walk's per-directory check must stop it.
    const controller = new AbortController();
    const context = toolContext(root, controller.signal);
    const walking = run(globTool, { pattern: '**/*' }, context);
    controller.abort();
    await toolError(walking, 'aborted');
  });

  it('declares read-only flags and its search directory as path', () => {
    expect(globTool).toMatchObject({ isReadOnly: true, isConcurrencySafe: true, isIdempotent: true });
    expect(globTool.paths?.({ pattern: '*' })).toEqual(['.']);
    expect(globTool.paths?.({ pattern: '*', path: 'src/' })).toEqual(['src']);
  });
});

describe('glob patterns cannot freeze the runtime', () => {
  const NESTED_EXTGLOB = '**/*(a*)*(a*)*(a*)*(a*)*(a*)*(a*)!';

  it('matches nested extglob stars against a long file name in linear time', async () => {
    // picomatch's backtracking RegExp took 25 s for a 20-character name and minutes beyond; RE2 takes one pass.
    const { root } = await sandbox();
    const name = 'a'.repeat(100);
    await files(root, { [`d/${name}`]: '', [`d/${name}!`]: '', 'd/b!': '' });
    const started = Date.now();
    const { list } = await glob(root, { pattern: NESTED_EXTGLOB });
    expect(list).toEqual([`d/${name}!`]);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('an interrupt ends a glob over a big tree promptly', async () => {
    const { root } = await sandbox();
    const tree: Record<string, string> = {};
    for (let d = 0; d < 40; d += 1) {
      for (let f = 0; f < 50; f += 1) tree[`dir${d}/${'a'.repeat(60)}${f}`] = '';
    }
    await files(root, tree);
    const controller = new AbortController();
    const started = Date.now();
    const globbing = run(globTool, { pattern: NESTED_EXTGLOB }, toolContext(root, controller.signal));
    setTimeout(() => controller.abort(), 50);
    await toolError(globbing, 'aborted');
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('refuses !( ) with invalid_pattern that says what is allowed; a leading ! inverts the pattern', async () => {
    const { root } = await sandbox();
    await layout(root);
    const error = await toolError(run(globTool, { pattern: 'src/!(*.ts)' }, toolContext(root)), 'invalid_pattern');
    expect(error.message).toContain('"!(…)" are not supported');
    expect((await glob(root, { pattern: '!**/*.ts' })).list).toEqual(['README.md', 'src/c.js']);
    expect((await glob(root, { pattern: 'src/@(a|c).*' })).list).toEqual(['src/a.ts', 'src/c.js']);
    await toolError(run(globTool, { pattern: `${'*'.repeat(1001)}` }, toolContext(root)), 'invalid_pattern');
  });
});
