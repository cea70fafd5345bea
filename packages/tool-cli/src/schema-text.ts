import { z } from 'zod';

/**
 * A method's input schema as compact text, the form `INVALID_ACTION_INPUT` shows the model so it can correct a
 * call (`mode: enum(day|range|event)`, `start_at: datetime with offset`, `note?: string`): shorter than JSON
 * Schema and what a person would write. Generated from the JSON Schema zod emits, so it never disagrees with the
 * validation.
 */
type Json = Record<string, unknown>;

function typeText(schema: Json): string {
  if (Array.isArray(schema.enum)) return `enum(${(schema.enum as unknown[]).map(String).join('|')})`;
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  const alternatives = (schema.anyOf ?? schema.oneOf) as Json[] | undefined;
  if (alternatives) return alternatives.map(typeText).join(' | ');
  const type = schema.type;
  if (type === 'string') {
    if (schema.format === 'date') return 'date (YYYY-MM-DD)';
    if (schema.format === 'date-time') {
      // zod's `z.iso.datetime({ offset: true })` allows an offset; without it, only `Z`.
      const pattern = String(schema.pattern ?? '');
      return pattern.includes('[+-]') || pattern.includes('\\+') ? 'datetime with offset' : 'datetime (UTC, Z)';
    }
    if (schema.format) return `string (${String(schema.format)})`;
    return 'string';
  }
  if (type === 'integer' || type === 'number') {
    const bounds = [
      schema.minimum !== undefined ? `≥ ${schema.minimum}` : '',
      schema.maximum !== undefined ? `≤ ${schema.maximum}` : '',
    ].filter(Boolean);
    return bounds.length > 0 ? `${type} ${bounds.join(' ')}` : String(type);
  }
  if (type === 'array') return `array of ${typeText((schema.items as Json) ?? {})}`;
  if (type === 'object') {
    const properties = (schema.properties ?? {}) as Record<string, Json>;
    const required = new Set((schema.required as string[] | undefined) ?? []);
    const fields = Object.entries(properties).map(
      ([name, s]) => `${name}${required.has(name) ? '' : '?'}: ${typeText(s)}`,
    );
    return `{${fields.join(', ')}}`;
  }
  if (type === 'boolean' || type === 'null') return String(type);
  return 'any';
}

/** One line per top-level field of an object schema: `name: type` (`name?:` when optional). */
export function schemaText(schema: z.ZodType): Record<string, string> {
  return jsonSchemaText(
    z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input', unrepresentable: 'any' }) as Json,
  );
}

/** `schemaText` of a JSON Schema (a manifest's `inputSchema`, as OAR reads it before spawning the CLI). */
export function jsonSchemaText(json: Record<string, unknown>): Record<string, string> {
  const properties = (json.properties ?? {}) as Record<string, Json>;
  const required = new Set((json.required as string[] | undefined) ?? []);
  return Object.fromEntries(
    Object.entries(properties).map(([name, property]) => [required.has(name) ? name : `${name}?`, typeText(property)]),
  );
}
