import { z } from 'zod';
import type { Route } from './route.js';

/**
 * The OpenAPI 3.1 document, generated from the routes' own zod schemas (the ones the handlers validate with), so
 * it cannot drift from what the server does. JSON Schema 2020-12 is OpenAPI 3.1's dialect, which zod emits.
 */

const ErrorSchema = z.object({
  error: z.object({
    code: z.string().describe('stable error code (docs/errors.md)'),
    message: z.string(),
    retryable: z.boolean(),
    details: z.record(z.string(), z.unknown()).optional(),
  }),
});

function jsonSchema(schema: z.ZodType, io: 'input' | 'output'): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io,
    unrepresentable: 'any',
  }) as Record<string, unknown>;
  return rest;
}

/** The path and query parameters of a route, from its schemas. */
function parameters(route: Route): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const [where, schema] of [
    ['path', route.spec.params],
    ['query', route.spec.query],
  ] as const) {
    if (!schema) continue;
    const json = jsonSchema(schema, 'input') as {
      properties?: Record<string, Record<string, unknown>>;
      required?: string[];
    };
    for (const [name, property] of Object.entries(json.properties ?? {})) {
      const { description, ...rest } = property;
      out.push({
        name,
        in: where,
        required: where === 'path' || (json.required ?? []).includes(name),
        schema: rest,
        ...(description ? { description } : {}),
      });
    }
  }
  return out;
}

/** The error body, inline in each response (a `$ref` here trips some 3.1 validators' dynamic-scope handling). */
const ERROR_SCHEMA = jsonSchema(ErrorSchema, 'output');
const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: ERROR_SCHEMA } },
});

function responses(route: Route): Record<string, unknown> {
  const { spec } = route;
  const ok: Record<string, unknown> = {};
  if (spec.produces === 'bytes') {
    ok['200'] = { description: 'the bytes, with the stored MIME type', content: { '*/*': { schema: {} } } };
    ok['206'] = { description: 'the requested range (Content-Range)' };
    ok['416'] = errorResponse('the range is outside the artifact (range_not_satisfiable)');
  } else {
    const content: Record<string, unknown> = {};
    if (spec.response) content['application/json'] = { schema: jsonSchema(spec.response, 'output') };
    if (spec.produces === 'sse') {
      content['text/event-stream'] = {
        schema: { type: 'string', description: 'Server-Sent Events; `id:` is the event sequence' },
      };
    }
    ok[String(spec.status ?? 200)] = { description: spec.summary, content };
  }
  const errors: Record<string, unknown> = {
    '400': errorResponse('malformed request: invalid JSON or a value of the wrong shape (invalid_input)'),
    '404': errorResponse('unknown id, or one of another workspace (…_not_found)'),
    '413': errorResponse('the body is larger than the server accepts (payload_too_large)'),
    '422': errorResponse('well-formed but not possible as asked'),
    '500': errorResponse('internal error'),
    '503': errorResponse('the server or its store cannot serve now (retryable)'),
  };
  if (spec.scope !== 'public') {
    errors['401'] = errorResponse('no key, or an unknown, revoked or expired one (unauthorized)');
    errors['403'] = errorResponse("the key's scope does not allow this route (forbidden)");
  }
  if (spec.method !== 'get') errors['429'] = errorResponse("over the key's write rate limit (too_many_requests)");
  if (spec.conflicts) errors['409'] = errorResponse('conflicts with the current state (e.g. thread_busy)');
  if (spec.tag === 'artifacts') {
    errors['410'] = errorResponse(
      'the retention policy expired the artifact; details hold its tombstone (artifact_expired)',
    );
  }
  return { ...ok, ...errors };
}

export function openApiDocument(routes: readonly Route[], info: { version: string }): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const { spec } = route;
    const operation: Record<string, unknown> = {
      operationId: spec.operationId,
      summary: spec.summary,
      ...(spec.description ? { description: spec.description } : {}),
      tags: [spec.tag],
      'x-oar-scope': spec.scope,
      parameters: parameters(route),
      ...(spec.body
        ? {
            requestBody: {
              required: true,
              content: { 'application/json': { schema: jsonSchema(spec.body, 'input') } },
            },
          }
        : {}),
      responses: responses(route),
      ...(spec.scope === 'public' ? { security: [] } : {}),
    };
    paths[spec.path] = { ...(paths[spec.path] ?? {}), [spec.method]: operation };
  }
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    info: {
      title: 'OAR HTTP API',
      version: info.version,
      description:
        'The control plane of the Open Agent Runtime: sessions, turns, decisions, tasks, artifacts, exports and live event streams. See docs/http-api.md.',
    },
    servers: [{ url: '/' }],
    security: [{ apiKey: [] }],
    paths,
    components: {
      securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'an OAR API key (oar_…)' } },
      schemas: { Error: ERROR_SCHEMA },
    },
  };
}
