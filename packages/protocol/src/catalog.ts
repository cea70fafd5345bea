import { z } from 'zod';

/**
 * What a turn can call: the tool and agent inventory the runtime offers the model. Validation checks
 * declarations against it; recovery only accepts direct requests naming one of its tools.
 */
export const CatalogToolSchema = z.object({
  name: z.string().min(1),
  description: z.string().default(''),
  /** JSON Schema (2020-12) of the tool's input object. */
  inputSchema: z.record(z.string(), z.unknown()).default({ type: 'object' }),
  capabilities: z.array(z.string()).default([]),
});
export type CatalogTool = z.infer<typeof CatalogToolSchema>;

export const CatalogAgentSchema = z.object({
  name: z.string().min(1),
  description: z.string().default(''),
  capabilities: z.array(z.string()).default([]),
});
export type CatalogAgent = z.infer<typeof CatalogAgentSchema>;

/**
 * A configured pipeline or service as the model sees it: like a tool, it has an input schema the validator checks
 * the action's input against. Listed apart from tools because the executor type differs (`pipeline` / `service`).
 */
export const CatalogExecutorSchema = z.object({
  name: z.string().min(1),
  description: z.string().default(''),
  capabilities: z.array(z.string()).default([]),
  /** JSON Schema (2020-12) of the action's input object. */
  inputSchema: z.record(z.string(), z.unknown()).default({ type: 'object' }),
});
export type CatalogExecutor = z.infer<typeof CatalogExecutorSchema>;

export const CatalogSchema = z.object({
  tools: z.array(CatalogToolSchema).default([]),
  agents: z.array(CatalogAgentSchema).default([]),
  /** Optional, so catalogs written before pipelines and services existed keep their shape. */
  pipelines: z.array(CatalogExecutorSchema).optional(),
  services: z.array(CatalogExecutorSchema).optional(),
});
export type Catalog = z.infer<typeof CatalogSchema>;
export type CatalogInput = z.input<typeof CatalogSchema>;

export const EMPTY_CATALOG: Catalog = { tools: [], agents: [] };

/** The entries that have every one of `capabilities` (all of them when none is asked for), in catalog order. */
export function withCapabilities<T extends { capabilities: readonly string[] }>(
  entries: readonly T[],
  capabilities: readonly string[],
): T[] {
  return entries.filter((entry) => capabilities.every((c) => entry.capabilities.includes(c)));
}
