import { mkdir, symlink } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  isInside,
  requestedWorkspacePath,
  resolveWorkspacePath,
  toWorkspaceRelative,
} from '../../src/tools/workspace.js';
import { files, sandbox, toolError } from './helpers.js';

describe('resolveWorkspacePath', () => {
  it('resolves relative paths inside the workspace to real absolute paths', async () => {
    const { root } = await sandbox();
    await files(root, { 'a/b.txt': 'x' });
    expect(await resolveWorkspacePath(root, 'a/b.txt', { mustExist: true })).toBe(path.join(root, 'a/b.txt'));
    expect(await resolveWorkspacePath(root, './a/../a/b.txt')).toBe(path.join(root, 'a/b.txt'));
    expect(await resolveWorkspacePath(root, '.')).toBe(root);
  });

  it('resolves paths that do not exist yet through their nearest existing ancestor', async () => {
    const { root } = await sandbox();
    expect(await resolveWorkspacePath(root, 'new/dir/file.txt', { forWrite: true })).toBe(
      path.join(root, 'new/dir/file.txt'),
    );
  });

  it('reports not_found for a missing path when it must exist', async () => {
    const { root } = await sandbox();
    await toolError(resolveWorkspacePath(root, 'missing.txt', { mustExist: true }), 'not_found');
  });

  it.each(['../x', 'a/../../x', '..', 'a/b/../../../outside/x'])('denies the escape %s', async (requested) => {
    const { root } = await sandbox();
    const error = await toolError(resolveWorkspacePath(root, requested), 'path_outside_workspace');
    expect(error.options.details).toMatchObject({ requested, resolved: path.resolve(root, requested) });
  });

  it('denies absolute paths outside and allows absolute paths inside', async () => {
    const { root, outside } = await sandbox();
    await files(root, { 'in.txt': 'x' });
    await files(outside, { 'secret.txt': 'x' });
    await toolError(resolveWorkspacePath(root, path.join(outside, 'secret.txt')), 'path_outside_workspace');
    await toolError(resolveWorkspacePath(root, '/etc/passwd'), 'path_outside_workspace');
    expect(await resolveWorkspacePath(root, path.join(root, 'in.txt'), { mustExist: true })).toBe(
      path.join(root, 'in.txt'),
    );
  });

  it('does not mistake a sibling with the root as name prefix for the inside', async () => {
    const { root, parent } = await sandbox();
    await mkdir(path.join(parent, 'ws-evil'));
    await toolError(resolveWorkspacePath(root, path.join(parent, 'ws-evil', 'x')), 'path_outside_workspace');
  });

  it('judges absolute paths written against a symlinked root by where they point', async () => {
    const { root, parent } = await sandbox();
    await files(root, { 'in.txt': 'x' });
    const alias = path.join(parent, 'alias');
    await symlink(root, alias);
    expect(await resolveWorkspacePath(alias, path.join(alias, 'in.txt'), { mustExist: true })).toBe(
      path.join(root, 'in.txt'),
    );
    expect(await resolveWorkspacePath(alias, 'in.txt')).toBe(path.join(root, 'in.txt'));
  });

  it('denies a symlinked file whose target is outside, for reads and writes', async () => {
    const { root, outside } = await sandbox();
    await files(outside, { 'secret.txt': 'x' });
    await symlink(path.join(outside, 'secret.txt'), path.join(root, 'link.txt'));
    const error = await toolError(
      resolveWorkspacePath(root, 'link.txt', { mustExist: true }),
      'path_outside_workspace',
    );
    expect(error.options.details).toMatchObject({ requested: 'link.txt', resolved: path.join(outside, 'secret.txt') });
    await toolError(resolveWorkspacePath(root, 'link.txt', { forWrite: true }), 'path_outside_workspace');
  });

  it('denies paths under a symlinked directory that leaves the workspace, existing or new', async () => {
    const { root, outside } = await sandbox();
    await files(outside, { 'secret.txt': 'x' });
    await symlink(outside, path.join(root, 'escape'));
    await toolError(resolveWorkspacePath(root, 'escape/secret.txt', { mustExist: true }), 'path_outside_workspace');
    await toolError(resolveWorkspacePath(root, 'escape/new.txt', { forWrite: true }), 'path_outside_workspace');
    await toolError(
      resolveWorkspacePath(root, 'escape/new/deeper/x.txt', { forWrite: true }),
      'path_outside_workspace',
    );
    await toolError(resolveWorkspacePath(root, 'escape'), 'path_outside_workspace');
  });

  it('denies writing through a dangling symlink whose target would be outside', async () => {
    const { root, outside } = await sandbox();
    await symlink(path.join(outside, 'not-yet.txt'), path.join(root, 'dangling.txt'));
    const error = await toolError(
      resolveWorkspacePath(root, 'dangling.txt', { forWrite: true }),
      'path_outside_workspace',
    );
    expect(error.options.details).toMatchObject({ resolved: path.join(outside, 'not-yet.txt') });
  });

  it('allows symlinks that stay inside and resolves them to their target', async () => {
    const { root } = await sandbox();
    await files(root, { 'real/target.txt': 'x' });
    await symlink(path.join(root, 'real/target.txt'), path.join(root, 'alias.txt'));
    await symlink('real', path.join(root, 'dirlink'));
    expect(await resolveWorkspacePath(root, 'alias.txt', { mustExist: true })).toBe(path.join(root, 'real/target.txt'));
    expect(await resolveWorkspacePath(root, 'dirlink/new.txt', { forWrite: true })).toBe(
      path.join(root, 'real/new.txt'),
    );
  });

  it('rejects NUL bytes, symlink loops and the root as a write target', async () => {
    const { root } = await sandbox();
    await toolError(resolveWorkspacePath(root, 'a\0b.txt'), 'invalid_path');
    await symlink('loop2', path.join(root, 'loop1'));
    await symlink('loop1', path.join(root, 'loop2'));
    await toolError(resolveWorkspacePath(root, 'loop1'), 'invalid_path');
    await toolError(resolveWorkspacePath(root, '.', { forWrite: true }), 'is_directory');
  });

  it('reports an inaccessible workspace root', async () => {
    const { parent } = await sandbox();
    await toolError(resolveWorkspacePath(path.join(parent, 'nope'), 'a.txt'), 'workspace_unavailable');
  });
});

describe('workspace-relative paths', () => {
  it('toWorkspaceRelative gives POSIX paths and . for the root, and refuses outside paths', async () => {
    const { root, outside } = await sandbox();
    expect(toWorkspaceRelative(root, root)).toBe('.');
    expect(toWorkspaceRelative(root, path.join(root, 'a', 'b.txt'))).toBe('a/b.txt');
    expect(() => toWorkspaceRelative(root, outside)).toThrow(/outside the workspace/);
  });

  it('requestedWorkspacePath normalizes lexically and keeps escapes visible', () => {
    expect(requestedWorkspacePath('./a//b/../c.txt')).toBe('a/c.txt');
    expect(requestedWorkspacePath('src/')).toBe('src');
    expect(requestedWorkspacePath('../x')).toBe('../x');
    expect(requestedWorkspacePath('/etc/passwd')).toBe('/etc/passwd');
    expect(requestedWorkspacePath('/ws/src/a.ts', '/ws')).toBe('src/a.ts');
    expect(requestedWorkspacePath('/other/a.ts', '/ws')).toBe('../other/a.ts');
    expect(requestedWorkspacePath('.', '/ws')).toBe('.');
  });

  it('isInside compares whole path segments', () => {
    expect(isInside('/ws', '/ws')).toBe(true);
    expect(isInside('/ws', '/ws/a')).toBe(true);
    expect(isInside('/ws', '/ws/..a')).toBe(true);
    expect(isInside('/ws', '/ws-b')).toBe(false);
    expect(isInside('/ws', '/')).toBe(false);
  });
});
