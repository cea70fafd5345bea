import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { absoluteHooks, type HookConfig, type HookInput, HooksSchema } from '../../src/config/hooks.js';
import { OarConfigSchema } from '../../src/index.js';
import { runHook } from '../../src/policy/hooks/run-hook.js';
import { evaluatePermission } from '../../src/policy/permissions.js';
import { tempDir } from '../support/temp-dirs.js';

/**
 * The examples of docs/hooks.md and docs/mcp.md are what the runtime accepts and do what the pages say: the
 * configurations parse as config files, the shell hook and the TypeScript hook run under the hook protocol.
 */
const read = (page: string) =>
  readFileSync(fileURLToPath(new URL(`../../../../docs/${page}`, import.meta.url)), 'utf8');
const blocks = (page: string, lang: string) =>
  [...read(page).matchAll(new RegExp(`\`\`\`${lang}\\n([\\s\\S]*?)\\n\`\`\``, 'g'))].map((m) => m[1] as string);

const input = (toolInput: Record<string, unknown>): HookInput => ({
  version: 1,
  point: 'before_tool_call',
  hook: 'example',
  sessionId: 's',
  threadId: 't',
  turnId: 'u',
  agent: 'main',
  workspaceRoot: '/tmp',
  toolCallId: 'c',
  tool: { name: 'write', isReadOnly: false, isDestructive: false, isConcurrencySafe: false, capabilities: [] },
  executor: { type: 'tool', target: 'write' },
  input: toolInput,
});
const options = { signal: new AbortController().signal, env: process.env, cwd: '/tmp' };

describe('docs/hooks.md examples', () => {
  const configs = blocks('hooks.md', 'json')
    .map((text) => JSON.parse(text) as Record<string, unknown>)
    .filter((block) => 'hooks' in block)
    .map((block) => OarConfigSchema.parse(block));

  it('the configuration example is a valid config file with the documented defaults', () => {
    expect(configs).toHaveLength(1);
    const hooks = absoluteHooks(configs[0]?.hooks ?? [], '/srv/project');
    expect(hooks.map((h) => [h.name, h.point])).toEqual([
      ['protect-deploy', 'before_tool_call'],
      ['license-header', 'before_tool_call'],
      ['audit', 'after_tool_call'],
      ['notify', 'turn_end'],
    ]);
    expect(hooks[0]).toMatchObject({ command: ['/srv/project/hooks/protect-deploy.sh'], timeoutMs: 5000, env: [] });
    expect(hooks[1]).toMatchObject({ module: '/srv/project/hooks/license-header.mjs', timeoutMs: 10_000 });
    // `node` stays a bare name (looked up on PATH); the script next to it is resolved.
    expect(hooks[2]).toMatchObject({ command: ['node', '/srv/project/hooks/audit.mjs'], onFailure: 'allow' });
  });

  it('the protocol examples are a valid answer', () => {
    const answer = blocks('hooks.md', 'json')
      .map((text) => JSON.parse(text) as Record<string, unknown>)
      .find((block) => 'decision' in block);
    expect(answer).toMatchObject({ decision: 'rewrite', input: { content: 'replicas: 3\n' } });
  });

  it('the shell hook denies under deploy/ and allows elsewhere', async () => {
    const dir = tempDir('oar-hook-doc-');
    const script = join(dir, 'protect-deploy.sh');
    writeFileSync(script, `${blocks('hooks.md', 'sh')[0]}\n`);
    chmodSync(script, 0o755);
    const hook = HooksSchema.parse([
      { name: 'example', point: 'before_tool_call', command: [script] },
    ])[0] as HookConfig;
    const denied = await runHook(hook, input({ filePath: 'deploy/prod.yaml', content: 'x' }), options);
    expect(denied).toMatchObject({
      ok: true,
      output: { decision: 'deny', reason: expect.stringContaining('deploy/') },
    });
    const allowed = await runHook(hook, input({ filePath: 'src/app.ts', content: 'x' }), options);
    expect(allowed).toMatchObject({ ok: true, output: { decision: 'allow' } });
  });

  it('the TypeScript hook, compiled, rewrites a new source file and leaves others alone', async () => {
    const dir = tempDir('oar-hook-doc-');
    mkdirSync(join(dir, 'hooks'));
    const source = (blocks('hooks.md', 'ts')[0] as string).replace(/^import type .*\n/m, '');
    const compiled = ts.transpileModule(source, {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    const file = join(dir, 'hooks', 'license-header.mjs');
    writeFileSync(file, compiled);
    const hook = HooksSchema.parse([
      { name: 'example', point: 'before_tool_call', module: file, export: 'licenseHeader' },
    ])[0] as HookConfig;
    const rewritten = await runHook(hook, input({ filePath: 'src/a.ts', content: 'export {};\n' }), options);
    expect(rewritten).toMatchObject({
      ok: true,
      output: { decision: 'rewrite', input: { content: '// SPDX-License-Identifier: Apache-2.0\nexport {};\n' } },
    });
    const untouched = await runHook(hook, input({ filePath: 'README.md', content: '# x\n' }), options);
    expect(untouched).toMatchObject({ ok: true, output: { decision: 'allow' } });
  });
});

describe('docs/mcp.md examples', () => {
  const config = OarConfigSchema.parse(JSON.parse(blocks('mcp.md', 'json')[0] as string));

  it('the configuration example is a valid config file', () => {
    expect(config.mcp.servers.map((s) => s.name)).toEqual(['docs', 'everything', 'tracker']);
    expect(config.mcp.servers[2]).toMatchObject({
      auth: { header: 'Authorization', scheme: 'Bearer', env: 'TRACKER_MCP_TOKEN' },
      timeoutMs: 30_000,
      trustAnnotations: true,
    });
  });

  it('the permission rules name MCP tools as the page says (a glob over a server works)', () => {
    const request = (name: string) => ({
      executor: { type: 'tool' as const, target: name },
      tool: { name, isReadOnly: false, isDestructive: true, isConcurrencySafe: false, capabilities: ['mcp'] },
      paths: [],
    });
    expect(evaluatePermission(request('tracker.create_issue'), config.permissions).decision).toBe('allow');
    expect(evaluatePermission(request('everything.get-sum'), config.permissions).decision).toBe('deny');
    expect(evaluatePermission(request('docs.search'), config.permissions).decision).toBe('ask');
    const glob = { mode: 'bypass' as const, rules: [{ decision: 'ask' as const, tool: 'tracker.*' }] };
    expect(evaluatePermission(request('tracker.close_issue'), glob).decision).toBe('ask');
    expect(evaluatePermission(request('docs.search'), glob).decision).toBe('allow');
  });

  it('a config naming a value instead of a variable, or both command and url, is refused', () => {
    const bad = (server: Record<string, unknown>) => OarConfigSchema.safeParse({ mcp: { servers: [server] } }).success;
    expect(bad({ name: 'x', command: 'node', url: 'http://127.0.0.1:1/mcp' })).toBe(false);
    expect(bad({ name: 'x', url: 'http://127.0.0.1:1/mcp', auth: { env: 'Bearer sk-123' } })).toBe(false);
    expect(bad({ name: 'Bad Name', command: 'node' })).toBe(false);
    expect(bad({ name: 'x', url: 'ftp://example.com' })).toBe(false);
  });
});
