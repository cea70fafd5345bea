import type { DynamicFormItem } from '@oar/runner-sdk';
import { OarRuntimeError } from '../kernel/errors.js';

/**
 * A binding config checked against the runner's config_schema: every required field present, every value of its
 * field's type (a select's value among its options), no field the schema does not name (a typo must not be a
 * silent no-op). Defaults fill what is left out. The error names the field.
 */
export function checkRunnerConfig(
  runnerId: string,
  schema: readonly DynamicFormItem[],
  config: Record<string, unknown>,
): Record<string, unknown> {
  const fail = (field: string, reason: string): never => {
    throw new OarRuntimeError('runner_config_invalid', `runner ${runnerId}: config field "${field}" ${reason}`, {
      details: { runnerId, field, reason },
    });
  };
  const known = new Set(schema.map((item) => item.name));
  for (const field of Object.keys(config)) if (!known.has(field)) fail(field, "is not in the runner's config_schema");
  const out: Record<string, unknown> = {};
  for (const item of schema) {
    const value = config[item.name];
    if (value === undefined || value === null) {
      if (item.default !== undefined) out[item.name] = item.default;
      else if (item.required) fail(item.name, 'is required');
      continue;
    }
    if (!matchesType(item, value)) fail(item.name, `must be of type ${item.type}`);
    if (item.type === 'select' && item.options && !item.options.some((o) => o.name === value)) {
      fail(item.name, `must be one of ${item.options.map((o) => o.name).join(', ')}`);
    }
    out[item.name] = value;
  }
  return out;
}

function matchesType(item: DynamicFormItem, value: unknown): boolean {
  switch (item.type) {
    case 'string':
    case 'text':
    case 'select':
      return typeof value === 'string';
    case 'integer':
      return Number.isInteger(value);
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'boolean':
      return typeof value === 'boolean';
    case 'array':
      return Array.isArray(value);
    case 'object':
      return typeof value === 'object' && !Array.isArray(value);
  }
}
