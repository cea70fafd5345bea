import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import fc from 'fast-check';

/**
 * Test support: the vendored Agent Runtime conformance material (conformance/agentruntime at the repository root,
 * so a clone needs nothing beside it), Ajv validators for the published schemas, and fast-check arbitraries derived
 * from OAR's own JSON Schema exports.
 */

const here = path.dirname(fileURLToPath(import.meta.url));
export const CONFORMANCE_DIR = path.resolve(here, '../../../../conformance/agentruntime');
export const FIXTURE_DIR = path.join(CONFORMANCE_DIR, 'fixtures/lime-profile');
export const LIME_SCHEMA_VERSION = 'lime-profile-0.4.0';

type Json = Record<string, unknown>;

export function readJson(file: string): Json {
  return JSON.parse(readFileSync(file, 'utf8')) as Json;
}

export function fixtureFiles(): string[] {
  return readdirSync(FIXTURE_DIR)
    .filter((name) => name.endsWith('.json'))
    .sort();
}

export function fixture(name: string): Json {
  return readJson(path.join(FIXTURE_DIR, name));
}

export function publishedSchema(name: string): Json {
  return readJson(path.join(CONFORMANCE_DIR, 'schemas', name));
}

const LIME_BASE = 'https://limecloud.github.io/agentruntime/schemas/';

// ajv-formats is CommonJS with `exports.default`; under NodeNext the default import is the module object.
const addFormats = ((ajvFormats as unknown as { default?: unknown }).default ?? ajvFormats) as (ajv: Ajv2020) => void;

/** A copy of a Lime profile schema whose `schemaVersion` const is swapped for `version` (and whose $id differs). */
function withVersion(schema: Json, version: string): Json {
  const copy = structuredClone(schema) as { $id: string; allOf: Array<{ properties?: Record<string, Json> }> };
  const constraints = copy.allOf[1]?.properties;
  if (!constraints?.schemaVersion || !('const' in constraints.schemaVersion)) {
    throw new Error('unexpected Lime schema layout: allOf[1].properties.schemaVersion.const not found');
  }
  constraints.schemaVersion.const = version;
  copy.$id = copy.$id.replace('.schema.json', `.${version}.schema.json`);
  return copy;
}

function registered(ajv: Ajv2020, id: unknown): (data: unknown) => boolean {
  const validate = ajv.getSchema(String(id));
  if (!validate) throw new Error(`schema ${String(id)} not registered`);
  return validate;
}

export interface PublishedValidators {
  coreEvent: (data: unknown) => boolean;
  coreSnapshot: (data: unknown) => boolean;
  /** The Lime profile schemas exactly as published. */
  limeEvent: (data: unknown) => boolean;
  limeSnapshot: (data: unknown) => boolean;
  /** The Lime profile schemas with only the `schemaVersion` const swapped for `version`. */
  limeEventAs: (data: unknown) => boolean;
  limeSnapshotAs: (data: unknown) => boolean;
  ajv: Ajv2020;
}

/**
 * Ajv2020 over the published schemas. Two caveats from the vendored README: the core schemas are registered a
 * second time under the limecloud.github.io URI so the Lime schemas' relative `$ref` resolves, and `strict: false`
 * because the core `payload` is a union type and the Lime `if` blocks have no `type`.
 */
export function publishedValidators(version: string): PublishedValidators {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  const coreEvent = publishedSchema('agentruntime-event.schema.json');
  const coreSnapshot = publishedSchema('agentruntime-snapshot.schema.json');
  const limeEvent = publishedSchema('agentruntime-lime-profile-event.schema.json');
  const limeSnapshot = publishedSchema('agentruntime-lime-profile-snapshot.schema.json');
  ajv.addSchema(coreEvent);
  ajv.addSchema(coreSnapshot);
  ajv.addSchema({ ...coreEvent, $id: `${LIME_BASE}agentruntime-event.schema.json` });
  ajv.addSchema({ ...coreSnapshot, $id: `${LIME_BASE}agentruntime-snapshot.schema.json` });
  return {
    ajv,
    coreEvent: registered(ajv, coreEvent.$id),
    coreSnapshot: registered(ajv, coreSnapshot.$id),
    limeEvent: ajv.compile(limeEvent),
    limeSnapshot: ajv.compile(limeSnapshot),
    limeEventAs: ajv.compile(withVersion(limeEvent, version)),
    limeSnapshotAs: ajv.compile(withVersion(limeSnapshot, version)),
  };
}

// --- arbitraries from a JSON Schema ------------------------------------------------------------------------------

type Schema = Record<string, unknown> & {
  $ref?: string;
  const?: unknown;
  enum?: unknown[];
  oneOf?: Schema[];
  anyOf?: Schema[];
  type?: string;
  format?: string;
  pattern?: string;
  minLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  items?: Schema;
  minItems?: number;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
};

const key = fc.stringMatching(/^[a-z][a-zA-Z0-9]{0,6}$/);
const leaf = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.integer({ min: -1000, max: 1000 }),
  fc.boolean(),
  fc.constant(null),
);
const anyJson = fc.oneof(leaf, fc.array(leaf, { maxLength: 2 }), fc.dictionary(key, leaf, { maxKeys: 2 }));
const isoDate = fc
  .date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2099-12-31T23:59:59Z'), noInvalidDate: true })
  .map((date) => date.toISOString());
/** Vendor fields on open objects; named so they cannot collide with a property either schema defines. */
const extraFields = fc.dictionary(fc.constantFrom('xVendorNote', 'xVendorFlag'), leaf, { maxKeys: 1 });

function resolveRef(root: Schema, ref: string): Schema {
  if (!ref.startsWith('#/')) throw new Error(`unsupported $ref ${ref}`);
  let node: unknown = root;
  for (const part of ref.slice(2).split('/')) node = (node as Record<string, unknown>)[part];
  if (!node) throw new Error(`unresolved $ref ${ref}`);
  return node as Schema;
}

/**
 * A fast-check arbitrary producing values valid for `schema` (the subset of JSON Schema zod emits). Optional
 * properties appear or not at random; open objects sometimes get a vendor field, since the profiles allow them.
 */
export function arbitraryFromSchema(schema: Schema, root: Schema = schema): fc.Arbitrary<unknown> {
  if (schema.$ref) return arbitraryFromSchema(resolveRef(root, schema.$ref), root);
  if ('const' in schema) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const branches = schema.oneOf ?? schema.anyOf;
  if (branches) return fc.oneof(...branches.map((branch) => arbitraryFromSchema(branch, root)));
  switch (schema.type) {
    case 'string': {
      if (schema.format === 'date-time') return isoDate;
      if (schema.pattern) throw new Error(`no generator for pattern ${schema.pattern}`);
      const minLength = schema.minLength ?? 0;
      return fc.string({ minLength, maxLength: minLength + 8 });
    }
    case 'integer': {
      const min = schema.minimum ?? -1000;
      return fc.integer({ min, max: Math.min(schema.maximum ?? min + 1000, min + 1000) });
    }
    case 'number': {
      const min = schema.minimum ?? -1e6;
      const max = schema.maximum ?? 1e6;
      return fc.double({ min, max, noNaN: true, noDefaultInfinity: true });
    }
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const minLength = schema.minItems ?? 0;
      return fc.array(schema.items ? arbitraryFromSchema(schema.items, root) : anyJson, {
        minLength,
        maxLength: minLength + 2,
      });
    }
    case 'object': {
      const open = schema.additionalProperties !== false;
      if (!schema.properties) {
        // A record (`additionalProperties: {schema}`): its values follow that schema.
        const value =
          typeof schema.additionalProperties === 'object' && Object.keys(schema.additionalProperties).length > 0
            ? arbitraryFromSchema(schema.additionalProperties, root)
            : anyJson;
        return fc.dictionary(key, value, { maxKeys: 3, noNullPrototype: true });
      }
      const model: Record<string, fc.Arbitrary<unknown>> = {};
      for (const [name, property] of Object.entries(schema.properties))
        model[name] = arbitraryFromSchema(property, root);
      const record = fc.record(model, { requiredKeys: schema.required ?? [], noNullPrototype: true });
      if (!open) return record;
      return fc.tuple(record, extraFields).map(([known, extra]) => ({ ...extra, ...known }));
    }
    case undefined:
      return anyJson;
    default:
      throw new Error(`no generator for JSON Schema type ${schema.type}`);
  }
}
