import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ApiKeyScope, Workspaces } from '@oar/runtime';
import { CONFIG_FILE, DEFAULT_WORKSPACE } from '@oar/runtime/constants';
import type { Command } from 'commander';
import { DEMO_PROMPT, prepareDemo } from './demo.js';
import { stopSignal } from './stop-signal.js';

/**
 * `oar serve` (the HTTP API and, unless `--no-worker`, a worker for every session of the store) and the commands
 * that manage who may call it: `oar keys` and `oar workspaces`, which work on the store directly.
 */

interface ServeOptions {
  port?: string;
  host?: string;
  store?: string;
  config?: string;
  model?: string;
  workspace?: string;
  worker?: boolean;
  demo?: boolean;
  maxBody?: string;
  storeWaitSeconds?: string;
}

/**
 * The web console's built files, shipped inside @oar/server (its console/ folder, copied from the private @oar/console
 * package by `npm run build` and before packing); none: the API only.
 */
export function consoleDirectory(): string | undefined {
  try {
    const dir = join(dirname(fileURLToPath(import.meta.resolve('@oar/server/package.json'))), 'console');
    return existsSync(join(dir, 'index.html')) ? dir : undefined;
  } catch {
    return undefined;
  }
}

/** What the commands below need when they run (`serve` the server too); imported then, not for `oar --help`. */
async function load() {
  const [{ oarError }, runtime, io, storeWait] = await Promise.all([
    import('@oar/protocol'),
    import('@oar/runtime'),
    import('./io.js'),
    import('./store-wait.js'),
  ]);
  return { oarError, ...runtime, ...io, ...storeWait };
}

async function portOf(text: string | undefined): Promise<number> {
  if (text === undefined) return 8787;
  const { oarError, UsageError } = await load();
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new UsageError(oarError('invalid_option', `--port must be 0-65535 (0: any free port), not "${text}"`));
  }
  return port;
}

async function serve(options: ServeOptions): Promise<number> {
  const [{ buildRuntime, loadConfig, positiveOption, STORE_WAIT, whenStoreReachable }, { createLogger, startServer }] =
    await Promise.all([load(), import('@oar/server')]);
  const cwd = process.cwd();
  const port = await portOf(options.port);
  const maxBodyBytes = positiveOption('--max-body', options.maxBody, undefined);
  const storeWaitSeconds = positiveOption('--store-wait-seconds', options.storeWaitSeconds, STORE_WAIT.defaultSeconds);
  // No configuration and no model: the local demo mode, so a fresh clone shows something real at once.
  const noConfig = options.config === undefined && !existsSync(resolve(cwd, CONFIG_FILE));
  const demo = options.demo === true || (noConfig && options.model === undefined);
  const setup = demo
    ? await prepareDemo(cwd)
    : { ...(await loadConfig(options.config, cwd)), workspace: options.workspace };
  const store = options.store ?? process.env.OAR_STORE;
  const consoleDir = consoleDirectory();
  const stopped = stopSignal();
  const started = await whenStoreReachable(
    async () => {
      const { runtime } = await buildRuntime(setup.config, setup.baseDir, {
        cwd,
        env: process.env,
        // A store that goes away later is ridden out as long as one that is not there yet.
        worker:
          options.worker === false
            ? false
            : {
                sessions: 'all',
                storeGiveUpMs: storeWaitSeconds * 1000,
                // A long-lived worker sweeps artifacts by the configured retention policy (docs/reliability.md).
                ...(setup.config.retention.artifacts ? { artifactRetention: setup.config.retention.artifacts } : {}),
              },
        ...(store ? { store } : {}),
        ...(options.model ? { model: options.model } : {}),
        ...(setup.workspace ? { workspace: setup.workspace } : {}),
      });
      try {
        const server = await startServer({
          runtime,
          port,
          ...(consoleDir ? { consoleDir } : {}),
          host: options.host ?? '127.0.0.1',
          logger: createLogger(),
          ...(process.env.OAR_ADMIN_KEY ? { adminKey: process.env.OAR_ADMIN_KEY } : {}),
          ...(maxBodyBytes ? { maxBodyBytes } : {}),
        });
        return { runtime, server };
      } catch (error) {
        // The server's start reads the store too (API keys): a runtime left behind would drive threads unseen.
        await runtime.close();
        await runtime.store.close();
        throw error;
      }
    },
    { giveUpMs: storeWaitSeconds * 1000, stopped, log: (line) => process.stderr.write(`${line}\n`) },
  );
  // Asked to stop before the store could be reached: nothing was started.
  if (!started) return 0;
  const { runtime, server } = started;
  const lines = [
    `OAR is serving at ${server.url}`,
    consoleDir ? `  console: ${server.url}/` : '  console: not built (npm run build:console): API only',
    `  API:     ${server.url}/v1   (OpenAPI: ${server.url}/v1/openapi.json)`,
  ];
  lines.push(`  store:   ${runtime.store.location}`);
  if (options.worker === false) lines.push('  worker:  none (--no-worker): turns run on workers elsewhere');
  const retention = options.worker === false ? undefined : setup.config.retention.artifacts;
  if (retention) {
    lines.push(
      `  retention: artifacts older than ${retention.maxAgeDays} d expire (swept every ${retention.sweepEveryMinutes} min)`,
    );
  }
  if (demo) {
    lines.push(
      `  mode:    demo (no ${CONFIG_FILE}): new sessions use the bundled scripted model over ${setup.workspace}`,
      `           try the demo prompt: "${DEMO_PROMPT}"`,
    );
  }
  if (server.createdAdminKey) {
    lines.push(
      '',
      'Admin API key (shown once, stored only as a hash; `oar keys create` makes more):',
      `  ${server.createdAdminKey}`,
    );
  } else if (process.env.OAR_ADMIN_KEY) {
    lines.push('  admin key: OAR_ADMIN_KEY');
  }
  process.stdout.write(`${lines.join('\n')}\n`);
  await stopped;
  await server.close();
  await runtime.store.close();
  return 0;
}

/** `create`: whether a store that does not exist yet is made (creating a key or a workspace), or reported (the rest). */
async function withWorkspaces<T>(
  options: { store?: string; config?: string },
  create: boolean,
  fn: (w: Workspaces) => Promise<T>,
) {
  const { loadConfig, Store, Workspaces } = await load();
  const cwd = process.cwd();
  const { config } = await loadConfig(options.config, cwd);
  const store = await Store.open(options.store ?? process.env.OAR_STORE ?? config.store, { cwd, create });
  try {
    return await fn(new Workspaces(store));
  } finally {
    await store.close();
  }
}

async function scopeOf(text: string): Promise<ApiKeyScope> {
  const { ApiKeyScopeSchema, oarError, UsageError } = await load();
  const parsed = ApiKeyScopeSchema.safeParse(text);
  if (!parsed.success) {
    throw new UsageError(oarError('invalid_option', `--scope must be admin, operator or viewer, not "${text}"`));
  }
  return parsed.data;
}

export function registerServeCommands(program: Command, setExit: (code: number) => void): void {
  program
    .command('serve')
    .description('serve the HTTP API and live event streams; runs every session’s turns unless --no-worker')
    .option('--port <port>', 'port to listen on (default 8787; 0: any free port)')
    .option('--host <host>', 'address to bind (default 127.0.0.1: this machine only)')
    .option('--store <url>', 'SQLite path or postgres:// URL (default .oar/oar.db)')
    .option('--config <file>', `configuration file (default ./${CONFIG_FILE})`)
    .option('--model <spec>', 'default model of new sessions (overrides the config)')
    .option('--workspace <dir>', 'workspace root of new sessions (overrides the config)')
    .option('--demo', 'new sessions use the bundled scripted model over a copy of the sample workspace')
    .option('--no-worker', 'an API node only: accept commands and serve streams, execute nothing')
    .option('--max-body <bytes>', 'largest request body accepted (default 1048576)')
    .option(
      '--store-wait-seconds <s>',
      'how long to keep trying a store that cannot be reached at start before exiting 74 (default 300)',
    )
    .action(async (options: ServeOptions) => setExit(await serve(options)));

  const keys = program.command('keys').description('manage API keys of `oar serve` (stored hashed; shown once)');
  keys
    .command('create')
    .description('create an API key and print it (the only time it is shown)')
    .option('--scope <scope>', 'admin | operator | viewer', 'operator')
    .option('--name <name>', 'what the key is for', 'cli')
    .option('--workspace-id <id>', 'the workspace it belongs to', DEFAULT_WORKSPACE)
    .option('--expires <iso>', 'expiry date-time (default: never)')
    .option('--store <url>', 'SQLite path or postgres:// URL')
    .option('--config <file>', 'configuration file')
    .option('--json', 'print JSON')
    .action(
      async (o: {
        scope: string;
        name: string;
        workspaceId: string;
        expires?: string;
        store?: string;
        config?: string;
        json?: boolean;
      }) => {
        const { printJson } = await load();
        const scope = await scopeOf(o.scope);
        const created = await withWorkspaces(o, true, (w) =>
          w.createKey({
            workspaceId: o.workspaceId,
            scope,
            name: o.name,
            ...(o.expires ? { expiresAt: o.expires } : {}),
          }),
        );
        if (o.json) printJson(created);
        else {
          process.stdout.write(
            `${created.key}\n(key ${created.record.keyId}, scope ${created.record.scope}, workspace ${created.record.workspaceId}; shown once)\n`,
          );
        }
        setExit(0);
      },
    );
  keys
    .command('list')
    .description('list API keys (never the keys themselves)')
    .option('--workspace-id <id>', 'only this workspace')
    .option('--store <url>', 'SQLite path or postgres:// URL')
    .option('--config <file>', 'configuration file')
    .option('--json', 'print JSON')
    .action(async (o: { workspaceId?: string; store?: string; config?: string; json?: boolean }) => {
      const { printJson } = await load();
      const list = await withWorkspaces(o, false, (w) => w.listKeys(o.workspaceId));
      if (o.json) printJson(list);
      else if (list.length === 0) process.stdout.write('no API keys\n');
      else {
        for (const k of list) {
          const state = k.revokedAt ? `revoked ${k.revokedAt}` : k.expiresAt ? `expires ${k.expiresAt}` : 'active';
          process.stdout.write(
            `${k.keyId}  ${k.prefix}…  ${k.scope.padEnd(8)}  ${k.workspaceId}  ${k.name}  (${state})\n`,
          );
        }
      }
      setExit(0);
    });
  keys
    .command('revoke')
    .description('revoke an API key: it stops working at once')
    .argument('<keyId>', 'the key id (key_…), as `oar keys list` shows it')
    .option('--store <url>', 'SQLite path or postgres:// URL')
    .option('--config <file>', 'configuration file')
    .option('--json', 'print JSON')
    .action(async (keyId: string, o: { store?: string; config?: string; json?: boolean }) => {
      const { printJson } = await load();
      const record = await withWorkspaces(o, false, (w) => w.revokeKey(keyId));
      if (o.json) printJson(record);
      else process.stdout.write(`revoked ${record.keyId} (${record.prefix}…)\n`);
      setExit(0);
    });

  const workspaces = program.command('workspaces').description('manage workspaces of `oar serve`');
  workspaces
    .command('create')
    .description('create a workspace (it owns sessions, artifacts and keys)')
    .argument('<name>', 'a display name')
    .option('--id <id>', 'the workspace id (lowercase letters, digits, "_", "-")')
    .option('--store <url>', 'SQLite path or postgres:// URL')
    .option('--config <file>', 'configuration file')
    .option('--json', 'print JSON')
    .action(async (name: string, o: { id?: string; store?: string; config?: string; json?: boolean }) => {
      const { printJson } = await load();
      const created = await withWorkspaces(o, true, (w) => w.create({ name, ...(o.id ? { workspaceId: o.id } : {}) }));
      if (o.json) printJson(created);
      else process.stdout.write(`${created.workspaceId}  ${created.name}\n`);
      setExit(0);
    });
  workspaces
    .command('list')
    .description('list workspaces')
    .option('--store <url>', 'SQLite path or postgres:// URL')
    .option('--config <file>', 'configuration file')
    .option('--json', 'print JSON')
    .action(async (o: { store?: string; config?: string; json?: boolean }) => {
      const { printJson } = await load();
      const list = await withWorkspaces(o, false, (w) => w.list());
      if (o.json) printJson(list);
      else for (const w of list) process.stdout.write(`${w.workspaceId}  ${w.name}\n`);
      setExit(0);
    });
}
