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

export const CatalogSchema = z.object({
  tools: z.array(CatalogToolSchema).default([]),
  agents: z.array(CatalogAgentSchema).default([]),
});
export type Catalog = z.infer<typeof CatalogSchema>;
export type CatalogInput = z.input<typeof CatalogSchema>;

export const EMPTY_CATALOG: Catalog = { tools: [], agents: [] };
