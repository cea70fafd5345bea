// Regenerate schemas/*.schema.json from the zod schemas (the built package): `npm run schemas -w @oar/runner-sdk`.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runnerJsonSchemas } from '../dist/index.js';

const dir = join(import.meta.dirname, '../schemas');
for (const [name, schema] of Object.entries(runnerJsonSchemas())) {
  writeFileSync(join(dir, `${name}.schema.json`), `${JSON.stringify(schema, null, 2)}\n`);
}
// In the repository's format, so a regeneration is a clean diff.
spawnSync('npx', ['biome', 'format', '--write', dir], { stdio: 'inherit' });
