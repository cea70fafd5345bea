import { z } from 'zod';
import { CONFIG_FILE, OarConfigSchema } from './oar-config.js';

/**
 * `oar.config.json` as a JSON Schema (draft 2020-12), generated from the zod schema that loadConfig checks, so the
 * two cannot drift. Shipped as schemas/oar.config.schema.json (`npm run schemas -w @oar/runtime` rewrites it;
 * a test says when it is stale), which `oar init` names in the file's `$schema` for editors to complete and check.
 * What zod checks in code (a key given as a value, an `npm:` runner name) an editor cannot: loadConfig still does.
 */
export function configJsonSchema(): Record<string, unknown> {
  const { $schema, ...schema } = z.toJSONSchema(OarConfigSchema, { target: 'draft-2020-12', io: 'input' });
  return {
    $schema,
    title: CONFIG_FILE,
    description: 'OAR configuration: store, models, agents, tools, permissions, hooks, MCP servers, runners, limits.',
    ...schema,
  };
}
