import { z } from 'zod';
import { carrierParametersJsonSchema } from './carrier.js';
import { DslEnvelopeSchema } from './dsl.js';
import { OAR_SCHEMA_VERSION, SchemaVersionSchema } from './events/envelope.js';
import { RuntimeEventExportSchema } from './events/runtime-event.js';
import { type JsonSchemaName, SCHEMA_NAMES } from './schema-names.js';
import { SessionSnapshotSchema } from './snapshot.js';
import { UI_SCHEMA_VERSION, UiSchemaSchema } from './ui-schema.js';

/**
 * JSON Schema (draft 2020-12) exports of OAR's wire formats, generated from the zod schemas so the two can never
 * drift. Consumers in other languages validate OAR output with these; tests check them against the published
 * Agent Runtime schemas.
 */

type JsonSchemaObject = Record<string, unknown>;

/**
 * The one deliberate difference from the zod schemas: zod accepts any profile's `schemaVersion` (foreign events
 * must parse), while an exported OAR schema describes OAR output, so it pins `OAR_SCHEMA_VERSION`.
 */
function generate(schema: z.ZodType, title: string, pinVersion: z.ZodType): JsonSchemaObject {
  const json = z.toJSONSchema(schema, {
    target: 'draft-2020-12',
    io: 'output',
    override: (ctx) => {
      if ((ctx.zodSchema as unknown) === pinVersion) ctx.jsonSchema.const = OAR_SCHEMA_VERSION;
    },
  });
  return { ...json, title };
}

/** An OAR profile event: the envelope, and one `oneOf` branch per standard type with its required ids and typed payload. */
export function eventJsonSchema(): JsonSchemaObject {
  return generate(RuntimeEventExportSchema, `OAR runtime event (${OAR_SCHEMA_VERSION})`, SchemaVersionSchema);
}

/** An OAR session snapshot (Lime-profile compatible read model). */
export function snapshotJsonSchema(): JsonSchemaObject {
  return generate(
    SessionSnapshotSchema,
    `OAR session snapshot (${OAR_SCHEMA_VERSION})`,
    SessionSnapshotSchema.shape.schemaVersion,
  );
}

/**
 * The full DSL envelope of a ```json agent-protocol block. Cross-field rules (intent ↔ payload type, md:
 * references) are checked by the parser, not expressible here.
 */
export function dslJsonSchema(): JsonSchemaObject {
  const json = z.toJSONSchema(DslEnvelopeSchema, { target: 'draft-2020-12', io: 'input' });
  return { ...json, title: 'agent.protocol declaration (version 1)' };
}

/** The provider-facing AgentProtocolOutput parameters: one object schema, no top-level combinators. */
export function carrierJsonSchema(): JsonSchemaObject {
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'AgentProtocolOutput arguments',
    ...carrierParametersJsonSchema(),
  };
}

/** Tool UI as clients receive it (`ui_schema` v1), compiled by the backend from a ToolAgentOutput's hints. */
export function uiJsonSchema(): JsonSchemaObject {
  const json = z.toJSONSchema(UiSchemaSchema, { target: 'draft-2020-12', io: 'output' });
  return { ...json, title: `OAR ui_schema (${UI_SCHEMA_VERSION})` };
}

/** Every exported JSON Schema by name (`oar schema NAME`). Each call builds a fresh object. */
export const JSON_SCHEMAS = {
  carrier: carrierJsonSchema,
  dsl: dslJsonSchema,
  event: eventJsonSchema,
  snapshot: snapshotJsonSchema,
  ui: uiJsonSchema,
} satisfies Record<JsonSchemaName, () => JsonSchemaObject>;
export { type JsonSchemaName, SCHEMA_NAMES };

/** The named schema, or undefined for an unknown name. */
export function schemaFor(name: string): JsonSchemaObject | undefined {
  return Object.hasOwn(JSON_SCHEMAS, name) ? JSON_SCHEMAS[name as JsonSchemaName]() : undefined;
}
