import { createHash } from 'node:crypto';
import { mkdir, readFile, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MAX_BEFORE_IMAGE_BYTES } from '../../src/tools/builtin/files.js';
import { writeTool } from '../../src/tools/builtin/write.js';
import { abortedContext, files, run, sandbox, toolContext, toolError } from './helpers.js';

const digest = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

const exists = (target: string) =>
  stat(target).then(
    () => true,
    () => false,
  );

describe('write', () => {
  it('creates a file and its missing parent directories', async () => {
    const { root } = await sandbox();
    const out = await run(writeTool, { filePath: 'new/deep/file.txt', content: 'héllo' }, toolContext(root));
    expect(await readFile(path.join(root, 'new/deep/file.txt'), 'utf8')).toBe('héllo');
    expect(out.structured).toEqual({ path: 'new/deep/file.txt', bytes: 6, created: true, action: 'created' });
    expect(out.summary).toBe('Created new/deep/file.txt (6 bytes)');
  });

  it('overwrites an existing file and is idempotent', async () => {
    const { root } = await sandbox();
    await files(root, { 'a.txt': 'old content' });
    const first = await run(writeTool, { filePath: 'a.txt', content: 'new' }, toolContext(root));
    expect(first.structured).toMatchObject({ created: false, action: 'overwrote', bytes: 3 });
    expect(first.summary).toBe('Overwrote a.txt (3 bytes)');
    const second = await run(writeTool, { filePath: 'a.txt', content: 'new' }, toolContext(root));
    expect(second.structured).toEqual(first.structured);
    expect(await readFile(path.join(root, 'a.txt'), 'utf8')).toBe('new');
  });

  it('reports the content it replaced as the file version: whole, or only its digest when over the limit', async () => {
    const { root } = await sandbox();
    await files(root, { 'a.txt': 'old content', 'big.bin': '' });
    const big = Buffer.alloc(MAX_BEFORE_IMAGE_BYTES + 10, 7);
    await writeFile(path.join(root, 'big.bin'), big);
    const out = await run(writeTool, { filePath: 'a.txt', content: 'new' }, toolContext(root));
    expect(Buffer.from(out.fileVersion?.before ?? []).toString()).toBe('old content');
    expect(out.fileVersion?.after).toEqual({ sha256: digest(Buffer.from('new')), size: 3 });
    const large = await run(writeTool, { filePath: 'big.bin', content: 'small' }, toolContext(root));
    expect(large.fileVersion?.before).toBeUndefined();
    expect(large.fileVersion?.beforeDigest).toEqual({ sha256: digest(big), size: big.byteLength });
    const created = await run(writeTool, { filePath: 'fresh.txt', content: 'x' }, toolContext(root));
    expect(created.fileVersion).toMatchObject({ path: 'fresh.txt', after: { size: 1 } });
    expect(created.fileVersion?.before).toBeUndefined();
    expect(created.fileVersion?.beforeDigest).toBeUndefined();
  });

  it('writes an empty file', async () => {
    const { root } = await sandbox();
    const out = await run(writeTool, { filePath: 'empty', content: '' }, toolContext(root));
    expect(out.structured).toMatchObject({ bytes: 0, created: true });
    expect(await readFile(path.join(root, 'empty'), 'utf8')).toBe('');
  });

  it('refuses directories and paths whose parent is a file', async () => {
    const { root } = await sandbox();
    await mkdir(path.join(root, 'dir'));
    await files(root, { 'file.txt': 'x' });
    await toolError(run(writeTool, { filePath: 'dir', content: 'x' }, toolContext(root)), 'is_directory');
    await toolError(run(writeTool, { filePath: '.', content: 'x' }, toolContext(root)), 'is_directory');
    await toolError(run(writeTool, { filePath: 'file.txt/child', content: 'x' }, toolContext(root)), 'not_a_directory');
  });

  it('never writes outside the workspace', async () => {
    const { root, outside } = await sandbox();
    await files(outside, { 'secret.txt': 'original' });
    await symlink(path.join(outside, 'secret.txt'), path.join(root, 'link.txt'));
    await symlink(outside, path.join(root, 'escape'));
    await symlink(path.join(outside, 'planted.txt'), path.join(root, 'dangling.txt'));
    const attempts = [
      '../outside/new.txt',
      'a/../../outside/new.txt',
      path.join(outside, 'new.txt'),
      'link.txt',
      'escape/secret.txt',
      'escape/new.txt',
      'escape/sub/new.txt',
      'dangling.txt',
    ];
    for (const filePath of attempts) {
      await toolError(run(writeTool, { filePath, content: 'pwned' }, toolContext(root)), 'path_outside_workspace');
    }
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('original');
    for (const name of ['new.txt', 'sub', 'planted.txt']) expect(await exists(path.join(outside, name))).toBe(false);
  });

  it('writes through a symlink that stays inside to its target', async () => {
    const { root } = await sandbox();
    await files(root, { 'real/target.txt': 'old' });
    await symlink(path.join(root, 'real'), path.join(root, 'dirlink'));
    const out = await run(writeTool, { filePath: 'dirlink/target.txt', content: 'new' }, toolContext(root));
    expect(out.structured).toMatchObject({ path: 'real/target.txt', created: false });
    expect(await readFile(path.join(root, 'real/target.txt'), 'utf8')).toBe('new');
  });

  it('writes nothing when the call is aborted', async () => {
    const { root } = await sandbox();
    const error = await toolError(run(writeTool, { filePath: 'a.txt', content: 'x' }, abortedContext(root)), 'aborted');
    expect(error.options.retryable).toBe(false);
    expect(await exists(path.join(root, 'a.txt'))).toBe(false);
  });

  it('declares a blocking, idempotent, non-read-only write', () => {
    expect(writeTool).toMatchObject({
      isReadOnly: false,
      isConcurrencySafe: false,
      isDestructive: false,
      isIdempotent: true,
      interruptBehavior: 'block',
      capabilities: ['filesystem', 'write'],
    });
    expect(writeTool.paths?.({ filePath: 'src//x.ts', content: '' })).toEqual(['src/x.ts']);
  });
});
