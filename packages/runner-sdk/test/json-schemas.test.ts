import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runnerJsonSchemas } from '../src/json-schemas.js';

/**
 * The JSON Schemas in packages/runner-sdk/schemas are generated from the zod schemas (the one source): a runner in
 * another language is written from them. Regenerate after a schema change:
 *   npm run build && npm run schemas -w @oar/runner-sdk — this test says which file is stale.
 */
const DIR = join(import.meta.dirname, '../schemas');

describe('the generated JSON Schemas', () => {
  it('are the zod schemas, file for file', () => {
    const generated = runnerJsonSchemas();
    const files = readdirSync(DIR).filter((f) => f.endsWith('.schema.json'));
    expect(files.map((f) => f.replace('.schema.json', '')).sort()).toEqual(Object.keys(generated).sort());
    for (const file of files) {
      const name = file.replace('.schema.json', '');
      expect(JSON.parse(readFileSync(join(DIR, file), 'utf8')), file).toEqual(generated[name]);
    }
  });
});
