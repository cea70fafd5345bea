// Regenerate schemas/oar.config.schema.json from the zod schema (the built package): `npm run schemas -w @oar/runtime`.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { configJsonSchema } from '../dist/index.js';

const dir = join(import.meta.dirname, '../schemas');
writeFileSync(join(dir, 'oar.config.schema.json'), `${JSON.stringify(configJsonSchema(), null, 2)}\n`);
// In the repository's format, so a regeneration is a clean diff.
spawnSync('npx', ['biome', 'format', '--write', dir], { stdio: 'inherit' });
