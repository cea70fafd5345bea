/**
 * `@oar/protocol/schema-names`: the names of the JSON Schemas `schemaFor` exports (`oar schema NAME`), apart from
 * the schemas themselves, which need zod: a help text that lists them loads nothing.
 */
export const SCHEMA_NAMES = ['carrier', 'dsl', 'event', 'snapshot', 'ui'] as const;
export type JsonSchemaName = (typeof SCHEMA_NAMES)[number];
