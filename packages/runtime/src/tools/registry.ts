import { type CatalogTool, type OarError, oarError, pointer } from '@oar/protocol';
import { z } from 'zod';
import { ToolError } from '../kernel/errors.js';
import type { AnyTool } from './tool.js';

/** One row of the tool inventory snapshot: the facts the scheduler and the UI rely on, without the schema. */
export const ToolInventoryEntrySchema = z.object({
  name: z.string().min(1),
  description: z.string(),
  capabilities: z.array(z.string()),
  isReadOnly: z.boolean(),
  isConcurrencySafe: z.boolean(),
  isDestructive: z.boolean(),
  isIdempotent: z.boolean(),
  interruptBehavior: z.enum(['cancel', 'block']),
  /** The operations its calls may perform (a business CLI's allowed `module.method` set), when it has some. */
  operations: z.array(z.string()).optional(),
});
export type ToolInventoryEntry = z.infer<typeof ToolInventoryEntrySchema>;

/** The result of validating a call's input: the parsed input (defaults applied), or a structured error. */
export type ParsedToolInput = { ok: true; tool: AnyTool; input: unknown } | { ok: false; error: OarError };

interface Registered {
  tool: AnyTool;
  /**
   * Converted once at registration: a schema that cannot be expressed as JSON Schema fails there, not mid-turn,
   * and every catalog shares one object, so the validator's per-schema compile cache keeps hitting.
   */
  inputSchema: Record<string, unknown>;
  /** Its catalog entry, built once: the same object in every step's catalog (the system prompt is reused by it). */
  entry: CatalogTool;
}

/** The tools a runtime offers, by unique name, with their catalog (what the model sees) and inventory views. */
export class ToolRegistry {
  readonly #tools = new Map<string, Registered>();
  #version = 0;

  /** Bumped by every change: a tool source that changes while sessions run (MCP `list_changed`) is seen by it. */
  get version(): number {
    return this.#version;
  }

  constructor(tools: Iterable<AnyTool> = []) {
    for (const tool of tools) this.register(tool);
  }

  register(tool: AnyTool): this {
    if (this.#tools.has(tool.name)) {
      throw new ToolError('duplicate_tool', `A tool named "${tool.name}" is already registered.`, {
        details: { tool: tool.name },
      });
    }
    const inputSchema = inputJsonSchema(tool);
    const entry: CatalogTool = Object.freeze({
      name: tool.name,
      description: tool.description,
      inputSchema,
      capabilities: [...tool.capabilities],
    });
    this.#tools.set(tool.name, { tool, inputSchema, entry });
    this.#version++;
    return this;
  }

  /** Remove a tool (an MCP server no longer lists it); false when there was none by that name. */
  unregister(name: string): boolean {
    const removed = this.#tools.delete(name);
    if (removed) this.#version++;
    return removed;
  }

  get(name: string): AnyTool | undefined {
    return this.#tools.get(name)?.tool;
  }

  /** Tools in registration order. */
  list(): AnyTool[] {
    return [...this.#tools.values()].map((entry) => entry.tool);
  }

  catalog(): CatalogTool[] {
    return [...this.#tools.values()].map(({ entry }) => entry);
  }

  inventory(): ToolInventoryEntry[] {
    return this.list().map((tool) => ({
      name: tool.name,
      description: tool.description,
      capabilities: [...tool.capabilities],
      isReadOnly: tool.isReadOnly,
      isConcurrencySafe: tool.isConcurrencySafe,
      isDestructive: tool.isDestructive,
      isIdempotent: tool.isIdempotent,
      interruptBehavior: tool.interruptBehavior,
      ...(tool.operations ? { operations: [...tool.operations] } : {}),
    }));
  }

  /** Validate a call's input with the tool's zod schema; the error lists every issue with a JSON-pointer path. */
  parseInput(name: string, input: unknown): ParsedToolInput {
    const tool = this.get(name);
    if (!tool) {
      return {
        ok: false,
        error: oarError('unknown_tool', `No tool named "${name}" is registered.`, {
          details: { tool: name, available: [...this.#tools.keys()] },
        }),
      };
    }
    const parsed = tool.input.safeParse(input);
    if (parsed.success) return { ok: true, tool, input: parsed.data };
    const issues = parsed.error.issues.map((issue) => ({
      path: pointer(issue.path),
      code: issue.code,
      message: issue.message,
    }));
    const listed = issues.map((issue) => `${issue.path === '' ? 'input' : issue.path}: ${issue.message}`).join('; ');
    return {
      ok: false,
      error: oarError('invalid_tool_input', `Invalid input for tool "${name}": ${listed}`, {
        retryable: false,
        details: { tool: name, issues },
      }),
    };
  }
}

/**
 * The JSON Schema (2020-12) of what the model sends. `io: 'input'` describes the input side of the zod schema, so
 * fields with defaults are optional there (the model may omit them) and their defaults are documented.
 */
function inputJsonSchema(tool: AnyTool): Record<string, unknown> {
  let schema: Record<string, unknown>;
  try {
    schema = z.toJSONSchema(tool.input, { target: 'draft-2020-12', io: 'input' }) as Record<string, unknown>;
  } catch (error) {
    throw new ToolError('invalid_tool_schema', `The input schema of tool "${tool.name}" has no JSON Schema form.`, {
      details: { tool: tool.name, reason: (error as Error).message },
    });
  }
  // Catalog inputs are objects (the protocol's `input` is a JSON object); catch a scalar schema at registration.
  if (schema.type !== 'object') {
    throw new ToolError('invalid_tool_schema', `The input schema of tool "${tool.name}" must describe an object.`, {
      details: { tool: tool.name },
    });
  }
  return schema;
}
