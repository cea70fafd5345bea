import { readFile, symlink } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { workspaceTools } from '../../src/tools/builtin/index.js';
import type { AnyTool } from '../../src/tools/tool.js';
import { files, run, sandbox, toolContext, toolError } from './helpers.js';

const tool = (name: string): AnyTool => {
  const found = workspaceTools().find((t) => t.name === name);
  if (!found) throw new Error(`no built-in tool ${name}`);
  return found;
};

// The configured root may be a symlink (macOS /tmp → /private/tmp); tools must compare real paths on both sides.
describe('workspace root configured through a symlink', () => {
  it('every tool works and reports paths relative to the real root', async () => {
    const { root, outside, parent } = await sandbox();
    await files(root, { 'src/a.ts': 'const a = 1;\n' });
    await symlink(path.join(root, 'src/a.ts'), path.join(root, 'alias.ts'));
    await files(outside, { 'secret.txt': 'x' });
    const alias = path.join(parent, 'alias-root');
    await symlink(root, alias);
    const context = toolContext(alias);

    expect((await run(tool('read'), { filePath: 'src/a.ts' }, context)).structured).toMatchObject({ path: 'src/a.ts' });
    expect((await run(tool('read'), { filePath: path.join(alias, 'src/a.ts') }, context)).structured).toMatchObject({
      path: 'src/a.ts',
    });
    expect((await run(tool('glob'), { pattern: '**/*.ts' }, context)).text).toBe('alias.ts\nsrc/a.ts');
    expect((await run(tool('grep'), { pattern: 'const' }, context)).text).toBe(
      'alias.ts:1: const a = 1;\nsrc/a.ts:1: const a = 1;',
    );
    await run(tool('write'), { filePath: 'src/b.ts', content: 'b' }, context);
    expect(await readFile(path.join(root, 'src/b.ts'), 'utf8')).toBe('b');
    await run(tool('edit'), { filePath: 'src/a.ts', oldString: '1', newString: '2' }, context);
    expect(await readFile(path.join(root, 'src/a.ts'), 'utf8')).toBe('const a = 2;\n');
    await toolError(run(tool('read'), { filePath: '../outside/secret.txt' }, context), 'path_outside_workspace');
  });
});
