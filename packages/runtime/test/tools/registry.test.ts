import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { workspaceTools } from '../../src/tools/builtin/index.js';
import { ToolRegistry } from '../../src/tools/registry.js';
import { type AnyTool, defineTool } from '../../src/tools/tool.js';
import { sandbox, toolContext } from './helpers.js';

const echo = defineTool({
  name: 'echo',
  description: 'Echo a message back.',
  input: z.strictObject({ message: z.string().describe('What to echo'), times: z.number().int().default(1) }),
  isReadOnly: true,
  isConcurrencySafe: true,
  isDestructive: false,
  isIdempotent: true,
  interruptBehavior: 'cancel',
  capabilities: ['custom'],
  async execute(input) {
    return { text: input.message.repeat(input.times), summary: 'echoed' };
  },
});

describe('ToolRegistry', () => {
  it('registers, finds and lists tools in registration order', () => {
    const registry = new ToolRegistry(workspaceTools()).register(echo);
    expect(registry.list().map((tool) => tool.name)).toEqual(['read', 'glob', 'grep', 'write', 'edit', 'echo']);
    expect(registry.get('echo')).toBe(echo);
    expect(registry.get('missing')).toBeUndefined();
  });

  it('rejects a second tool with the same name', () => {
    const registry = new ToolRegistry([echo]);
    expect(() => registry.register({ ...echo, description: 'another' })).toThrow(
      expect.objectContaining({ name: 'ToolError', code: 'duplicate_tool' }),
    );
    expect(registry.list()).toEqual([echo]);
  });

  it('publishes a draft 2020-12 object schema per tool in the catalog, converted once', () => {
    const registry = new ToolRegistry(workspaceTools());
    const catalog = registry.catalog();
    const read = catalog.find((tool) => tool.name === 'read');
    expect(read).toMatchObject({
      description: expect.stringContaining('cat -n'),
      capabilities: ['filesystem', 'read'],
    });
    expect(read?.inputSchema).toMatchObject({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      type: 'object',
      required: ['filePath'],
      additionalProperties: false,
      properties: {
        filePath: { type: 'string', description: expect.any(String) },
        offset: { type: 'integer', default: 1 },
        limit: { type: 'integer', default: 2000 },
      },
    });
    const edit = catalog.find((tool) => tool.name === 'edit');
    expect(edit?.inputSchema.required).toEqual(['filePath', 'oldString', 'newString']);
    expect(registry.catalog()[0]?.inputSchema).toBe(read?.inputSchema);
  });

  it('refuses a tool whose input is not an object schema', () => {
    const scalar = { ...echo, name: 'scalar', input: z.string() } as unknown as AnyTool;
    expect(() => new ToolRegistry([scalar])).toThrow(/must describe an object/);
  });

  it('reports the inventory flags of every tool', () => {
    const inventory = new ToolRegistry(workspaceTools()).inventory();
    expect(
      inventory.map((entry) => [entry.name, entry.isReadOnly, entry.isIdempotent, entry.interruptBehavior]),
    ).toEqual([
      ['read', true, true, 'cancel'],
      ['glob', true, true, 'cancel'],
      ['grep', true, true, 'cancel'],
      ['write', false, true, 'block'],
      ['edit', false, false, 'block'],
    ]);
    expect(inventory[3]).toEqual({
      name: 'write',
      description: expect.any(String),
      capabilities: ['filesystem', 'write'],
      isReadOnly: false,
      isConcurrencySafe: false,
      isDestructive: false,
      isIdempotent: true,
      interruptBehavior: 'block',
    });
  });

  it('parses input with defaults, or returns a structured invalid_tool_input error', async () => {
    const registry = new ToolRegistry([echo]);
    const ok = registry.parseInput('echo', { message: 'hi' });
    if (!ok.ok) throw new Error(`expected valid input, got ${ok.error.message}`);
    expect(ok.input).toEqual({ message: 'hi', times: 1 });
    const { root } = await sandbox();
    expect((await ok.tool.execute(ok.input, toolContext(root))).text).toBe('hi');

    const bad = registry.parseInput('echo', { message: 42, extra: true });
    if (bad.ok) throw new Error('expected invalid input to be rejected');
    expect(bad.error).toMatchObject({ code: 'invalid_tool_input', retryable: false });
    expect(bad.error.message).toContain('/message');
    expect(bad.error.details?.issues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ path: '/message', code: 'invalid_type' }),
        expect.objectContaining({ path: '', code: 'unrecognized_keys' }),
      ]),
    );
  });

  it('returns unknown_tool for a name nobody registered', () => {
    const result = new ToolRegistry([echo]).parseInput('nope', {});
    expect(result).toMatchObject({
      ok: false,
      error: { code: 'unknown_tool', retryable: false, details: { tool: 'nope', available: ['echo'] } },
    });
  });
});
