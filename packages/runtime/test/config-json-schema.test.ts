import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { configJsonSchema, OarConfigSchema } from '../src/index.js';

/**
 * schemas/oar.config.schema.json ships in @oar/runtime; `oar init` names it in `$schema` so that editors complete
 * and check oar.config.json. It is generated from OarConfigSchema (the one source). Regenerate after a change:
 *   npx tsc -b packages/runtime && npm run schemas -w @oar/runtime — this test says when the file is stale.
 */
const FILE = join(import.meta.dirname, '../schemas/oar.config.schema.json');
const shipped = JSON.parse(readFileSync(FILE, 'utf8')) as Record<string, unknown>;
// Formats (`uri`, zod's `starts_with`) are left to the loader, as most editors leave them.
const validate = new Ajv2020({ strict: false, allErrors: true, validateFormats: false }).compile(shipped);

/** The full example of docs/configuration.md: every field a user is shown. */
function documentedExample(): unknown {
  const page = readFileSync(join(import.meta.dirname, '../../../docs/configuration.md'), 'utf8');
  const block = /```json\n([\s\S]*?)```/.exec(page)?.[1];
  if (!block) throw new Error('docs/configuration.md has no json block');
  return JSON.parse(block);
}

describe('the configuration JSON Schema', () => {
  it('is the zod schema, as generated', () => {
    expect(shipped).toEqual(configJsonSchema());
  });

  it('accepts the documented example, as the config loader does', () => {
    const example = documentedExample();
    expect(OarConfigSchema.safeParse(example).success).toBe(true);
    expect(validate(example), JSON.stringify(validate.errors)).toBe(true);
  });

  it('rejects what the loader rejects: an unknown field, a wrong type, an unknown enum value', () => {
    for (const bad of [
      { modle: 'openai:gpt-4.1' },
      { limits: { maxSteps: 'many' } },
      { permissions: { mode: 'everything' } },
      { agents: [{ description: 'no name' }] },
    ]) {
      expect(OarConfigSchema.safeParse(bad).success, JSON.stringify(bad)).toBe(false);
      expect(validate(bad), JSON.stringify(bad)).toBe(false);
    }
  });
});
