import { readFile, symlink } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { editTool } from '../../src/tools/builtin/edit.js';
import { abortedContext, files, run, sandbox, toolContext, toolError } from './helpers.js';

const read = (root: string, name: string) => readFile(path.join(root, name), 'utf8');

describe('edit', () => {
  it('replaces the one occurrence of oldString', async () => {
    const { root } = await sandbox();
    await files(root, { 'src/a.ts': 'const a = 1;\nconst b = 2;\n' });
    const out = await run(
      editTool,
      { filePath: 'src/a.ts', oldString: 'b = 2', newString: 'b = 3' },
      toolContext(root),
    );
    expect(await read(root, 'src/a.ts')).toBe('const a = 1;\nconst b = 3;\n');
    expect(out.structured).toEqual({ path: 'src/a.ts', replacements: 1, firstLine: 2, bytes: 26 });
    expect(out.summary).toBe('Edited src/a.ts: 1 replacement (first at line 2)');
  });

  it('replaces every occurrence with replaceAll', async () => {
    const { root } = await sandbox();
    await files(root, { 'a.txt': 'x\nfoo foo\nfoo\n' });
    const out = await run(
      editTool,
      { filePath: 'a.txt', oldString: 'foo', newString: 'bar', replaceAll: true },
      toolContext(root),
    );
    expect(await read(root, 'a.txt')).toBe('x\nbar bar\nbar\n');
    expect(out.structured).toMatchObject({ replacements: 3, firstLine: 2 });
  });

  it('keeps replacement patterns in newString literal', async () => {
    const { root } = await sandbox();
    await files(root, { 'a.txt': 'price: X' });
    await run(editTool, { filePath: 'a.txt', oldString: 'X', newString: "$& $1 $$ $'" }, toolContext(root));
    expect(await read(root, 'a.txt')).toBe("price: $& $1 $$ $'");
  });

  it('fails with no_match, ambiguous_match or no_change and leaves the file alone', async () => {
    const { root } = await sandbox();
    await files(root, { 'a.txt': 'one two two' });
    await toolError(
      run(editTool, { filePath: 'a.txt', oldString: 'three', newString: '3' }, toolContext(root)),
      'no_match',
    );
    const ambiguous = await toolError(
      run(editTool, { filePath: 'a.txt', oldString: 'two', newString: '2' }, toolContext(root)),
      'ambiguous_match',
    );
    expect(ambiguous.options.details).toMatchObject({ count: 2 });
    await toolError(
      run(editTool, { filePath: 'a.txt', oldString: 'one', newString: 'one' }, toolContext(root)),
      'no_change',
    );
    expect(await read(root, 'a.txt')).toBe('one two two');
  });

  it('is not idempotent: re-running a successful edit fails', async () => {
    const { root } = await sandbox();
    await files(root, { 'a.txt': 'alpha' });
    const input = { filePath: 'a.txt', oldString: 'alpha', newString: 'beta' };
    await run(editTool, input, toolContext(root));
    await toolError(run(editTool, input, toolContext(root)), 'no_match');
    expect(editTool.isIdempotent).toBe(false);
  });

  it('refuses missing, binary and outside files', async () => {
    const { root, outside } = await sandbox();
    await files(root, { 'bin.dat': new Uint8Array([0x61, 0x00, 0x62]) });
    await files(outside, { 'secret.txt': 'secret' });
    await symlink(path.join(outside, 'secret.txt'), path.join(root, 'link.txt'));
    await toolError(
      run(editTool, { filePath: 'nope.txt', oldString: 'a', newString: 'b' }, toolContext(root)),
      'not_found',
    );
    await toolError(
      run(editTool, { filePath: 'bin.dat', oldString: 'a', newString: 'b' }, toolContext(root)),
      'binary_file',
    );
    await toolError(
      run(editTool, { filePath: 'link.txt', oldString: 'secret', newString: 'pwned' }, toolContext(root)),
      'path_outside_workspace',
    );
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('secret');
  });

  it('changes nothing when the call is aborted', async () => {
    const { root } = await sandbox();
    await files(root, { 'a.txt': 'keep' });
    await toolError(
      run(editTool, { filePath: 'a.txt', oldString: 'keep', newString: 'lose' }, abortedContext(root)),
      'aborted',
    );
    expect(await read(root, 'a.txt')).toBe('keep');
  });

  it('declares a blocking, non-idempotent edit', () => {
    expect(editTool).toMatchObject({
      isReadOnly: false,
      isConcurrencySafe: false,
      isIdempotent: false,
      interruptBehavior: 'block',
      capabilities: ['filesystem', 'write', 'edit'],
    });
  });
});
