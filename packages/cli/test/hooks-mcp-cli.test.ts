import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { bin, type CliResult, ndjson, outputOf, repoRoot, tempDir, writeJson } from './cli-helpers.js';

/**
 * Hooks and MCP end to end through the real `oar` binary, as a new user would set them up in oar.config.json: a
 * command hook vetoes one write and visibly rewrites another; an MCP server's tool (a real server over stdio) is
 * called through `oar run` under the same permissions, events and artifacts as a built-in tool.
 */
const MCP_SERVER = join(repoRoot, 'packages/runtime/test/fixtures/mcp/test-server.mjs');

const GUARD = `import { readFileSync } from 'node:fs';
const event = JSON.parse(readFileSync(0, 'utf8'));
const path = String(event.input.filePath);
if (path.startsWith('secret')) {
  console.log(JSON.stringify({ decision: 'deny', reason: 'secret files are off limits' }));
} else {
  console.log(JSON.stringify({ decision: 'rewrite', reason: 'license header', input: { ...event.input, content: '// SPDX-License-Identifier: Apache-2.0\\n' + event.input.content } }));
}
`;

function oar(cwd: string, args: string[]): Promise<CliResult> {
  return outputOf(spawn(bin, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: process.env }));
}

const call = (id: string, name: string, args: Record<string, unknown>) => ({ id, type: 'tool', name, args });

describe('oar run with hooks and an MCP server', { timeout: 120_000 }, () => {
  it('a hook vetoes one call and rewrites another visibly; an MCP tool runs governed', async () => {
    const cwd = tempDir('oar-hooks-mcp-');
    mkdirSync(join(cwd, 'hooks'));
    writeFileSync(join(cwd, 'hooks', 'guard.mjs'), GUARD);
    writeJson(cwd, 'script.json', {
      steps: [
        {
          protocol: {
            kind: 'act',
            message: 'Writing.',
            calls: [
              call('s1', 'write', { filePath: 'secret.txt', content: 'TOP SECRET\n' }),
              call('n1', 'write', { filePath: 'notes.js', content: 'console.log(1);\n' }),
            ],
          },
        },
        { protocol: { kind: 'act', message: 'Looking up.', calls: [call('l1', 'docs.lookup', { word: 'hook' })] } },
        { protocol: { kind: 'answer', message: 'Done.' } },
      ],
    });
    writeJson(cwd, 'oar.config.json', {
      model: 'script:script.json',
      permissions: { mode: 'accept-edits' },
      hooks: [
        {
          name: 'guard',
          point: 'before_tool_call',
          command: ['node', './hooks/guard.mjs'],
          matcher: { tools: ['write'] },
          timeoutMs: 10_000,
        },
      ],
      mcp: { servers: [{ name: 'docs', command: 'node', args: [MCP_SERVER] }] },
    });
    const run = await oar(cwd, ['run', '--json', 'write the files and look something up']);
    expect(run.code, run.stderr).toBe(0);
    const result = (ndjson(run.stdout).at(-1) as { result: { sessionId: string; status: string; answer?: string } })
      .result;
    expect(result).toMatchObject({ status: 'completed', answer: 'Done.' });
    expect(existsSync(join(cwd, 'secret.txt'))).toBe(false);
    expect(readFileSync(join(cwd, 'notes.js'), 'utf8')).toBe(
      '// SPDX-License-Identifier: Apache-2.0\nconsole.log(1);\n',
    );

    const events = await oar(cwd, ['events', result.sessionId, '--json']);
    const records = ndjson(events.stdout) as { type: string; toolCallId?: string; payload: Record<string, unknown> }[];
    const hooks = records.filter((e) => e.type === 'hook.completed').map((e) => e.payload);
    expect(hooks).toMatchObject([
      { hookName: 'guard', decision: 'deny', reason: 'secret files are off limits' },
      {
        hookName: 'guard',
        decision: 'rewrite',
        rewrite: {
          before: { filePath: 'notes.js', content: 'console.log(1);\n' },
          after: { filePath: 'notes.js', content: '// SPDX-License-Identifier: Apache-2.0\nconsole.log(1);\n' },
          changes: [{ path: '/content', op: 'replace' }],
        },
      },
    ]);
    const evaluated = records.filter((e) => e.type === 'permission.evaluated').map((e) => e.payload);
    expect(evaluated).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ decision: 'deny', source: 'hook', toolName: 'write' }),
        expect.objectContaining({ decision: 'allow', toolName: 'docs.lookup' }),
      ]),
    );
    const mcpResult = records.find((e) => e.type === 'tool.result' && e.payload.toolName === 'docs.lookup');
    expect(JSON.stringify(mcpResult?.payload)).toContain('definition of hook');
    // The session's binding names the hook and the server; `oar session show` says so.
    const shown = await oar(cwd, ['session', 'show', result.sessionId]);
    expect(shown.stdout).toContain('guard');
    expect(shown.stdout).toContain('docs');

    // Removing the hook from the file and updating the session from it is a recorded policy change.
    const config = JSON.parse(readFileSync(join(cwd, 'oar.config.json'), 'utf8')) as Record<string, unknown>;
    delete config.hooks;
    writeJson(cwd, 'oar.config.json', config);
    const update = await oar(cwd, ['session', 'update', result.sessionId, '--from-config']);
    expect(update.code, update.stderr).toBe(0);
    const after = ndjson((await oar(cwd, ['events', result.sessionId, '--json'])).stdout) as typeof records;
    expect(after.filter((e) => e.type === 'policy.changed').map((e) => e.payload)).toMatchObject([
      { policy: 'hooks', added: [], removed: ['guard'], hooks: [] },
    ]);
  });
});
