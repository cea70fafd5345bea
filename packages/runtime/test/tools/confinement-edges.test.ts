import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { link, lstat, readdir, readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ToolError } from '../../src/kernel/errors.js';
import { editTool } from '../../src/tools/builtin/edit.js';
import { grepTool } from '../../src/tools/builtin/grep.js';
import { readTool } from '../../src/tools/builtin/read.js';
import { writeTool } from '../../src/tools/builtin/write.js';
import type { AnyTool } from '../../src/tools/tool.js';
import { files, run, sandbox, toolContext, toolError } from './helpers.js';

const SECRET = 'TOP-SECRET-OUTSIDE';

// The sandbox's `outside/` sits next to `ws/` under os.tmpdir(), so both are on one file system and link() works.
describe('hard links', () => {
  async function hardLinked() {
    const box = await sandbox();
    await files(box.outside, { 'secret.txt': `${SECRET}\n` });
    await files(box.root, { 'plain.txt': 'plain\n' });
    await link(path.join(box.outside, 'secret.txt'), path.join(box.root, 'hl.txt'));
    return box;
  }

  it('read refuses a hard link to a file outside the workspace', async () => {
    const { root } = await hardLinked();
    const error = await toolError(run(readTool, { filePath: 'hl.txt' }, toolContext(root)), 'path_outside_workspace');
    expect(error.message).toContain('hard link');
    expect(error.message).not.toContain(SECRET);
    expect(error.error.details).toMatchObject({ path: 'hl.txt', links: 2, reason: 'hard_link' });
    expect(JSON.stringify(error.error)).not.toContain(SECRET);
    // An ordinary file next to it still reads.
    expect((await run(readTool, { filePath: 'plain.txt' }, toolContext(root))).text).toBe('     1\tplain');
  });

  it('write refuses a hard link to a file outside the workspace and changes nothing', async () => {
    const { root, outside } = await hardLinked();
    const before = await stat(path.join(outside, 'secret.txt'));
    const error = await toolError(
      run(writeTool, { filePath: 'hl.txt', content: 'pwned' }, toolContext(root)),
      'path_outside_workspace',
    );
    expect(error.message).toContain('hard link');
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe(`${SECRET}\n`);
    // Not even truncated and rewritten with the same bytes: the refusal comes before any write.
    expect((await stat(path.join(outside, 'secret.txt'))).mtimeMs).toBe(before.mtimeMs);
  });

  it('edit refuses a hard link to a file outside the workspace and changes nothing', async () => {
    const { root, outside } = await hardLinked();
    const error = await toolError(
      run(editTool, { filePath: 'hl.txt', oldString: 'SECRET', newString: 'PWNED' }, toolContext(root)),
      'path_outside_workspace',
    );
    expect(error.message).toContain('hard link');
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe(`${SECRET}\n`);
  });

  it('grep skips a hard link to a file outside the workspace: its content is never searched', async () => {
    const { root } = await hardLinked();
    await files(root, { 'plain.txt': `no ${SECRET.slice(0, 3)} here\nTOP line\n` });
    const result = await run(grepTool, { pattern: 'TOP' }, toolContext(root));
    expect(result.text).not.toContain(SECRET);
    expect(result.text).toContain('plain.txt');
    expect(result.structured).toMatchObject({ skippedRefused: 1 });
  });

  it('refuses any regular file with more than one link, even when both names are inside', async () => {
    // The other names of an inode cannot be found cheaply, so the rule is simply nlink > 1.
    const { root } = await sandbox();
    await files(root, { 'a.txt': 'a\n' });
    await link(path.join(root, 'a.txt'), path.join(root, 'b.txt'));
    for (const filePath of ['a.txt', 'b.txt']) {
      await toolError(run(readTool, { filePath }, toolContext(root)), 'path_outside_workspace');
      await toolError(run(writeTool, { filePath, content: 'x' }, toolContext(root)), 'path_outside_workspace');
    }
    expect(await readFile(path.join(root, 'a.txt'), 'utf8')).toBe('a\n');
  });
});

describe('special files', () => {
  it('a FIFO is refused as not a regular file, without waiting for a peer', async () => {
    const { root } = await sandbox();
    execFileSync('mkfifo', [path.join(root, 'pipe')]);
    await toolError(run(readTool, { filePath: 'pipe' }, toolContext(root)), 'not_a_file');
    await toolError(run(writeTool, { filePath: 'pipe', content: 'x' }, toolContext(root)), 'not_a_file');
    await toolError(
      run(editTool, { filePath: 'pipe', oldString: 'a', newString: 'b' }, toolContext(root)),
      'not_a_file',
    );
  });
});

/**
 * A child process swaps a path on the tool's way between an in-workspace entry and a symlink to the outside, as fast
 * as it can, while the tool runs again and again. `file` mode swaps the last component (a regular file ⇄ a symlink to
 * the outside secret); `dir` mode swaps a parent directory (a real directory ⇄ a symlink to an outside directory
 * holding a file of the same name). Rename is atomic, so every state the tool can observe is one of the two.
 */
const SWAPPER = `
const fs = require('node:fs');
const [mode, target, outsideTarget, insideContent] = process.argv.slice(1);
const attempt = (f) => { try { f(); } catch {} };
// Hold each state for a random moment (0-100 µs) so every window of the tool is hit sooner or later.
const dwell = () => { const end = performance.now() + Math.random() / 10; while (performance.now() < end); };
const deadline = Date.now() + 60000;
process.stdout.write('ready\\n');
for (let i = 0; Date.now() < deadline; i++) {
  const ln = target + '.ln';
  if (mode === 'file') {
    attempt(() => fs.writeFileSync(target + '.tmp', insideContent));
    attempt(() => fs.symlinkSync(outsideTarget, ln));
    attempt(() => fs.renameSync(target + '.tmp', target));
    dwell();
    attempt(() => fs.renameSync(ln, target));
    dwell();
  } else {
    const parked = target + '.parked' + i;
    attempt(() => fs.symlinkSync(outsideTarget, ln));
    attempt(() => fs.renameSync(target, parked));
    attempt(() => fs.renameSync(ln, target));
    dwell();
    attempt(() => { if (fs.lstatSync(target).isSymbolicLink()) fs.unlinkSync(target); });
    attempt(() => fs.renameSync(parked, target));
    dwell();
  }
}
`;

async function startSwapper(mode: 'file' | 'dir', target: string, outsideTarget: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', SWAPPER, mode, target, outsideTarget, 'inside\n'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const stdout = child.stdout;
  if (!stdout) throw new Error('swapper has no stdout');
  await once(stdout, 'data');
  return child;
}

async function stopSwapper(child: ChildProcess): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
  }
}

interface RaceTally {
  calls: number;
  succeeded: number;
  /** Results (text, summary, structured) that contained the outside secret. */
  leaks: string[];
  /** Error codes seen, for the failure message. */
  codes: Record<string, number>;
}

/**
 * Run `inputs` round-robin through the tool while the swapper runs: for `durationMs`, and (`untilSuccess`) on until at
 * least one call has succeeded, within a hard cap, so the race is shown to let honest calls through.
 */
async function race(
  tool: AnyTool,
  root: string,
  inputs: Record<string, unknown>[],
  swap: { mode: 'file' | 'dir'; target: string; outsideTarget: string },
  { durationMs = 1500, untilSuccess = true } = {},
): Promise<RaceTally> {
  const tally: RaceTally = { calls: 0, succeeded: 0, leaks: [], codes: {} };
  const child = await startSwapper(swap.mode, swap.target, swap.outsideTarget);
  try {
    const end = Date.now() + durationMs;
    const cap = untilSuccess ? end + 10_000 : end;
    while (Date.now() < (tally.succeeded > 0 ? end : cap)) {
      const input = inputs[tally.calls % inputs.length];
      tally.calls += 1;
      try {
        const out = await run(tool, input, toolContext(root));
        tally.succeeded += 1;
        const seen = JSON.stringify(out);
        if (seen.includes(SECRET)) tally.leaks.push(seen);
      } catch (error) {
        const code = error instanceof ToolError ? error.code : `thrown:${String(error)}`;
        tally.codes[code] = (tally.codes[code] ?? 0) + 1;
        const seen = error instanceof ToolError ? JSON.stringify(error.error) : String(error);
        if (seen.includes(SECRET)) tally.leaks.push(seen);
      }
    }
  } finally {
    await stopSwapper(child);
  }
  return tally;
}

describe('symlink swaps racing the file tools', () => {
  async function fileSwap() {
    const box = await sandbox();
    await files(box.outside, { 'secret.txt': `${SECRET}\n` });
    await files(box.root, { 'f.txt': 'inside\n' });
    const swap = {
      mode: 'file' as const,
      target: path.join(box.root, 'f.txt'),
      outsideTarget: path.join(box.outside, 'secret.txt'),
    };
    return { ...box, swap };
  }

  async function dirSwap() {
    const box = await sandbox();
    await files(box.outside, { 'dir/f.txt': `${SECRET}\n` });
    await files(box.root, { 'dir/f.txt': 'inside\n' });
    const swap = {
      mode: 'dir' as const,
      target: path.join(box.root, 'dir'),
      outsideTarget: path.join(box.outside, 'dir'),
    };
    return { ...box, swap };
  }

  it('read never returns the outside file when the file itself is swapped for a symlink', async () => {
    const { root, swap } = await fileSwap();
    const tally = await race(readTool, root, [{ filePath: 'f.txt' }], swap);
    expect(tally.leaks, JSON.stringify(tally.codes)).toEqual([]);
    expect(tally.succeeded, JSON.stringify(tally)).toBeGreaterThan(0);
  });

  it('read never returns the outside file when a parent directory is swapped for a symlink', async () => {
    const { root, swap } = await dirSwap();
    const tally = await race(readTool, root, [{ filePath: 'dir/f.txt' }], swap);
    expect(tally.leaks, JSON.stringify(tally.codes)).toEqual([]);
    expect(tally.succeeded, JSON.stringify(tally)).toBeGreaterThan(0);
  });

  it('write never modifies the outside file when the file itself is swapped for a symlink', async () => {
    const { root, outside, swap } = await fileSwap();
    const tally = await race(writeTool, root, [{ filePath: 'f.txt', content: 'pwned\n' }], swap);
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8'), JSON.stringify(tally)).toBe(`${SECRET}\n`);
    expect(await readdir(outside), JSON.stringify(tally)).toEqual(['secret.txt']);
    expect(tally.succeeded, JSON.stringify(tally)).toBeGreaterThan(0);
  });

  it('write never writes or creates anything outside when a parent directory is swapped for a symlink', async () => {
    const { root, outside, swap } = await dirSwap();
    const tally = await race(
      writeTool,
      root,
      [
        { filePath: 'dir/f.txt', content: 'pwned\n' },
        { filePath: 'dir/new.txt', content: 'pwned\n' },
        { filePath: 'dir/sub/new.txt', content: 'pwned\n' },
      ],
      swap,
    );
    expect(await readFile(path.join(outside, 'dir/f.txt'), 'utf8'), JSON.stringify(tally)).toBe(`${SECRET}\n`);
    expect(await readdir(path.join(outside, 'dir')), JSON.stringify(tally)).toEqual(['f.txt']);
    expect(tally.succeeded, JSON.stringify(tally)).toBeGreaterThan(0);
  });

  it('edit never modifies the outside file under either swap', async () => {
    const edit = { oldString: 'SECRET', newString: 'PWNED', replaceAll: true };
    const one = await fileSwap();
    const fileTally = await race(editTool, one.root, [{ filePath: 'f.txt', ...edit }], one.swap, {
      durationMs: 1000,
      untilSuccess: false,
    });
    expect(await readFile(path.join(one.outside, 'secret.txt'), 'utf8'), JSON.stringify(fileTally)).toBe(`${SECRET}\n`);
    const two = await dirSwap();
    const dirTally = await race(editTool, two.root, [{ filePath: 'dir/f.txt', ...edit }], two.swap, {
      durationMs: 1000,
      untilSuccess: false,
    });
    expect(await readFile(path.join(two.outside, 'dir/f.txt'), 'utf8'), JSON.stringify(dirTally)).toBe(`${SECRET}\n`);
  });

  it('the swapper really swaps (a sanity check of the harness)', async () => {
    const { swap } = await dirSwap();
    const child = await startSwapper(swap.mode, swap.target, swap.outsideTarget);
    let sawLink = false;
    let sawDir = false;
    try {
      const end = Date.now() + 2000;
      while (Date.now() < end && !(sawLink && sawDir)) {
        const kind = await lstat(swap.target).then(
          (s) => (s.isSymbolicLink() ? 'link' : s.isDirectory() ? 'dir' : 'other'),
          () => 'missing',
        );
        if (kind === 'link') sawLink = true;
        if (kind === 'dir') sawDir = true;
      }
    } finally {
      await stopSwapper(child);
    }
    expect({ sawLink, sawDir }).toEqual({ sawLink: true, sawDir: true });
  });
});
