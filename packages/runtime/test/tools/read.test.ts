import { mkdir, symlink } from 'node:fs/promises';
import path from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { READ_MAX_BYTES, readTool } from '../../src/tools/builtin/read.js';
import { abortedContext, files, run, sandbox, toolContext, toolError } from './helpers.js';

const numbered = (lines: string[], from = 1) =>
  lines.map((line, i) => `${String(from + i).padStart(6)}\t${line}`).join('\n');

describe('read', () => {
  it('a small file read whole pages exactly like a large file streamed line by line', async () => {
    // Small files (up to 64 KiB) are read in one call and split in memory; larger ones are streamed through the line
    // reader. The same text must give the same lines either way: CRLF, lone CR, empty lines, a final ending or not.
    const { root } = await sandbox();
    const padding = `\n${'x\n'.repeat(40_000)}`; // makes the second file large enough to be streamed
    const piece = fc.constantFrom('a', 'é', '字', ' ', '\t', '\n', '\r', '\r\n', '\n\n', '\r\r\n', '');
    await fc.assert(
      fc.asyncProperty(fc.array(piece, { maxLength: 40 }), fc.integer({ min: 1, max: 5 }), async (parts, offset) => {
        const text = parts.join('');
        await files(root, { 'small.txt': text, 'large.txt': text + padding });
        const small = await run(readTool, { filePath: 'small.txt', offset }, toolContext(root));
        const shown = (small.structured as { linesReturned: number }).linesReturned;
        const large = await run(
          readTool,
          { filePath: 'large.txt', offset, limit: Math.max(1, shown) },
          toolContext(root),
        );
        if (shown > 0) expect(large.text).toBe(small.text);
        // The small file's line count is what the streamed reader counts for the same text.
        const lines = (small.structured as { totalLines: number }).totalLines;
        const streamed = await run(readTool, { filePath: 'large.txt', offset: lines + 1, limit: 1 }, toolContext(root));
        expect((streamed.structured as { firstLine: number | null }).firstLine).toBe(lines + 1);
      }),
      { numRuns: 60, seed: 4242 },
    );
  });

  it('returns the file with cat -n style line numbers', async () => {
    const { root } = await sandbox();
    await files(root, { 'src/a.ts': 'first\nsecond\r\nthird\n' });
    const out = await run(readTool, { filePath: 'src/a.ts' }, toolContext(root));
    expect(out.text).toBe(numbered(['first', 'second', 'third']));
    expect(out.summary).toBe('Read src/a.ts lines 1-3 of 3');
    expect(out.structured).toMatchObject({
      path: 'src/a.ts',
      linesReturned: 3,
      firstLine: 1,
      lastLine: 3,
      totalLines: 3,
      truncated: false,
      truncatedBy: null,
      nextOffset: null,
    });
  });

  it('pages with offset and limit and says where to continue', async () => {
    const { root } = await sandbox();
    await files(root, { 'a.txt': 'l1\nl2\nl3\nl4\nl5' });
    const out = await run(readTool, { filePath: 'a.txt', offset: 2, limit: 2 }, toolContext(root));
    expect(out.text).toBe(numbered(['l2', 'l3'], 2));
    expect(out.structured).toMatchObject({
      firstLine: 2,
      lastLine: 3,
      truncated: true,
      truncatedBy: 'lines',
      nextOffset: 4,
    });
    expect(out.summary).toContain('continue with offset 4');
  });

  it('stops at 2000 lines by default', async () => {
    const { root } = await sandbox();
    const lines = Array.from({ length: 2500 }, (_, i) => `line ${i + 1}`);
    await files(root, { 'long.txt': lines.join('\n') });
    const out = await run(readTool, { filePath: 'long.txt' }, toolContext(root));
    expect(out.text?.split('\n')).toHaveLength(2000);
    expect(out.structured).toMatchObject({ lastLine: 2000, truncatedBy: 'lines', nextOffset: 2001, totalLines: null });
    const rest = await run(readTool, { filePath: 'long.txt', offset: 2001 }, toolContext(root));
    expect(rest.structured).toMatchObject({ firstLine: 2001, lastLine: 2500, truncated: false, totalLines: 2500 });
  });

  it('stops at the byte budget', async () => {
    const { root } = await sandbox();
    const line = 'x'.repeat(1000);
    await files(root, { 'wide.txt': Array.from({ length: 400 }, () => line).join('\n') });
    const out = await run(readTool, { filePath: 'wide.txt' }, toolContext(root));
    expect(Buffer.byteLength(out.text ?? '')).toBeLessThanOrEqual(READ_MAX_BYTES);
    const returned = (out.structured as { linesReturned: number }).linesReturned;
    expect(returned).toBeGreaterThan(200);
    expect(returned).toBeLessThan(400);
    expect(out.structured).toMatchObject({ truncated: true, truncatedBy: 'bytes', nextOffset: returned + 1 });
    expect(out.summary).toContain('size limit');
  });

  it('shows the head of a single line larger than the budget', async () => {
    const { root } = await sandbox();
    await files(root, { 'min.js': `${'y'.repeat(READ_MAX_BYTES + 1000)}\nsecond` });
    const out = await run(readTool, { filePath: 'min.js' }, toolContext(root));
    expect(Buffer.byteLength(out.text ?? '')).toBe(READ_MAX_BYTES);
    expect(out.text?.startsWith('     1\tyyy')).toBe(true);
    expect(out.structured).toMatchObject({ linesReturned: 1, truncatedBy: 'bytes', nextOffset: 2 });
  });

  it('handles empty files and offsets past the end', async () => {
    const { root } = await sandbox();
    await files(root, { 'empty.txt': '', 'two.txt': 'a\nb\n' });
    const empty = await run(readTool, { filePath: 'empty.txt' }, toolContext(root));
    expect(empty.text).toBe('');
    expect(empty.summary).toBe('Read empty.txt: empty file');
    const past = await run(readTool, { filePath: 'two.txt', offset: 10 }, toolContext(root));
    expect(past.text).toBe('');
    expect(past.summary).toContain('past the end (2 lines)');
  });

  it('refuses binary files, missing files and directories', async () => {
    const { root } = await sandbox();
    await files(root, { 'img.png': new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01]) });
    await mkdir(path.join(root, 'dir'));
    await toolError(run(readTool, { filePath: 'img.png' }, toolContext(root)), 'binary_file');
    const missing = await toolError(run(readTool, { filePath: 'nope.txt' }, toolContext(root)), 'not_found');
    expect(missing.options.retryable).toBeUndefined();
    await toolError(run(readTool, { filePath: 'dir' }, toolContext(root)), 'is_directory');
  });

  it('refuses paths outside the workspace, including through symlinks', async () => {
    const { root, outside } = await sandbox();
    await files(outside, { 'secret.txt': 'top secret' });
    await symlink(path.join(outside, 'secret.txt'), path.join(root, 'link.txt'));
    await symlink(outside, path.join(root, 'escape'));
    for (const filePath of [
      '../outside/secret.txt',
      'link.txt',
      'escape/secret.txt',
      path.join(outside, 'secret.txt'),
    ]) {
      await toolError(run(readTool, { filePath }, toolContext(root)), 'path_outside_workspace');
    }
  });

  it('reads through a symlink that stays inside and an absolute path inside', async () => {
    const { root } = await sandbox();
    await files(root, { 'docs/real.md': 'hello' });
    await symlink(path.join(root, 'docs/real.md'), path.join(root, 'alias.md'));
    const viaLink = await run(readTool, { filePath: 'alias.md' }, toolContext(root));
    expect(viaLink.text).toBe(numbered(['hello']));
    expect(viaLink.structured).toMatchObject({ path: 'docs/real.md' });
    const absolute = await run(readTool, { filePath: path.join(root, 'docs/real.md') }, toolContext(root));
    expect(absolute.text).toBe(numbered(['hello']));
  });

  it('stops when the call is aborted', async () => {
    const { root } = await sandbox();
    await files(root, { 'a.txt': 'x' });
    const error = await toolError(run(readTool, { filePath: 'a.txt' }, abortedContext(root)), 'aborted');
    expect(error.options.retryable).toBe(false);
  });

  it('declares read-only, cancellable flags and its path', () => {
    expect(readTool).toMatchObject({
      isReadOnly: true,
      isConcurrencySafe: true,
      isDestructive: false,
      isIdempotent: true,
      interruptBehavior: 'cancel',
      capabilities: ['filesystem', 'read'],
    });
    expect(readTool.paths?.({ filePath: './src/../src/a.ts', offset: 1, limit: 10 })).toEqual(['src/a.ts']);
    expect(readTool.paths?.({ filePath: '/ws/src/a.ts', offset: 1, limit: 10 }, '/ws')).toEqual(['src/a.ts']);
  });
});
