import { readFile, writeFile } from 'node:fs/promises';
import { isAbsolute, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Command } from 'commander';

/**
 * `oar init`: starts a project with OAR — an oar.config.json that names its JSON Schema (editors complete and check
 * it), an example agent, `.oar/` (the default store and the demo's folders) in .gitignore — and prints what to do
 * next. Nothing but node: modules at the top: the runtime is loaded when the command runs, not for `oar --help`.
 */

/** The example configuration: a model, the main agent's instructions and one sub-agent it may delegate to. */
const EXAMPLE = {
  store: '.oar/oar.db',
  model: 'openai:gpt-4.1',
  agent: {
    systemPrompt: 'You help the team with this project. Read the files a question is about before you answer.',
  },
  agents: [
    {
      name: 'reviewer',
      description: 'Reviews code and documents for correctness and risk, and says what to fix.',
      capabilities: ['code_review'],
      tools: ['read', 'glob', 'grep'],
    },
  ],
};

/** The `$schema` value: the shipped schema's path relative to the project, as editors resolve it. */
function schemaReference(cwd: string): string {
  const file = fileURLToPath(import.meta.resolve('@oar/runtime/schemas/oar.config.schema.json'));
  const path = relative(cwd, file).split(sep).join('/');
  if (isAbsolute(path)) return path; // another drive (Windows): no relative path exists
  return path.startsWith('../') ? path : `./${path}`;
}

/** `.oar/` appended to .gitignore (created when missing) unless a line already ignores it; whether it was added. */
async function ignoreStore(cwd: string): Promise<boolean> {
  const file = join(cwd, '.gitignore');
  let text = '';
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  const ignored = text.split(/\r?\n/).some((line) => /^\/?\.oar\/?$/.test(line.trim()));
  if (ignored) return false;
  const separator = text === '' || text.endsWith('\n') ? '' : '\n';
  await writeFile(file, `${text}${separator}.oar/\n`);
  return true;
}

async function init(options: { force?: boolean }): Promise<number> {
  const { CONFIG_FILE, OarConfigSchema, OarRuntimeError } = await import('@oar/runtime');
  const cwd = process.cwd();
  const schema = schemaReference(cwd);
  // Parsed as loadConfig will parse it, so `oar init` can never write a file that `oar run` refuses.
  const config = { $schema: schema, ...EXAMPLE };
  OarConfigSchema.parse(config);
  const file = join(cwd, CONFIG_FILE);
  try {
    // `wx` refuses an existing file in the same step that creates a new one: no race with another writer.
    await writeFile(file, `${JSON.stringify(config, null, 2)}\n`, { flag: options.force ? 'w' : 'wx' });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') {
      throw new OarRuntimeError('config_exists', `${file} exists; pass --force to overwrite it`, {
        details: { file },
      });
    }
    throw new OarRuntimeError('file_unwritable', `cannot write ${file}: ${(error as Error).message}`, {
      details: { file },
    });
  }
  const ignored = await ignoreStore(cwd);
  const lines = [
    `Wrote ${CONFIG_FILE}: the model, the main agent's instructions and an example sub-agent ("reviewer").`,
    `  $schema: ${schema}${schema.startsWith('./node_modules/') ? '' : '  (install @oar/runtime in this project for a path inside it)'}`,
    ignored ? '  .gitignore: added .oar/ (the local store)' : '  .gitignore: already ignores .oar/',
    '',
    'Next steps:',
    '  export OPENAI_API_KEY=…                  # or set "model" to anthropic:…, openai-compatible:…, script:FILE',
    '  npx oar run "What is in this project?"   # one governed turn with live progress',
    '  npx oar serve                            # the HTTP API and the web console',
    '  npx oar worker                           # runs the turns of a shared (PostgreSQL) store',
    '  npx oar demo                             # a scripted turn over a sample workspace: no key needed',
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
  return 0;
}

export function registerInitCommand(program: Command, setExit: (code: number) => void): void {
  program
    .command('init')
    .description('write oar.config.json (with its JSON Schema and an example agent) and ignore .oar/ in .gitignore')
    .option('--force', 'overwrite an existing oar.config.json')
    .action(async (options: { force?: boolean }) => setExit(await init(options)));
}
