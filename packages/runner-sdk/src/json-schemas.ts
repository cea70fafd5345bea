import { z } from 'zod';
import {
  AgentAPIErrorSchema,
  AgentApiRequestSchema,
  AgentRunContextSchema,
  AgentRunnerManifestSchema,
  AgentRunRequestSchema,
  AgentRunResultSchema,
} from './schemas.js';

/**
 * The wire entities as JSON Schemas (draft 2020-12), generated from the zod schemas: what a runner in another
 * language is written from (`oar schema` does not need them; a Python runner validates against them).
 */
export function runnerJsonSchemas(): Record<string, unknown> {
  const schemas = {
    AgentRunnerManifest: AgentRunnerManifestSchema,
    AgentRunRequest: AgentRunRequestSchema,
    AgentRunContext: AgentRunContextSchema,
    AgentRunResult: AgentRunResultSchema,
    AgentApiRequest: AgentApiRequestSchema,
    AgentAPIError: AgentAPIErrorSchema,
  };
  return Object.fromEntries(
    Object.entries(schemas).map(([name, schema]) => [
      name,
      {
        $id: `https://oar.dev/schemas/agentrunner/v1/${name}.json`,
        ...z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' }),
      },
    ]),
  );
}
