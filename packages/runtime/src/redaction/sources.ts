import { constants, type Dirent } from 'node:fs';
import { type FileHandle, open, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { cliSecretEnv } from '../config/cli.js';
import { execSecretEnv } from '../config/exec.js';
import { type McpServersConfig, mcpSecretEnv } from '../config/mcp.js';
import { DEFAULT_API_KEY_ENV, type ModelsConfig } from '../config/models.js';
import { serviceSecretEnv } from '../config/pipelines.js';
import { dotenvSecretValues, isDotenvFileName } from './dotenv.js';
import type { LiteralSecret } from './literals.js';
import { Redactor } from './redactor.js';

/**
 * Where literal secrets come from: the environment variables a binding names as secrets, and the `.env*` files of
 * its workspace. The only module of `redaction/` that does I/O (reading `.env*` files), kept apart from the pure
 * matching code.
 */

/** What of a binding names secrets: its models (key env vars), its `secrets.env` list and its services' auth. */
export interface SecretBindingFields {
  models: ModelsConfig;
  secrets?: { env: readonly string[] };
  services?: readonly Parameters<typeof serviceSecretEnv>[0][];
  cli?: Parameters<typeof cliSecretEnv>[0];
  exec?: Parameters<typeof execSecretEnv>[0];
  mcpServers?: McpServersConfig;
}

/**
 * The environment variables whose values are secrets under a binding, sorted: the hosted providers' default key
 * variables (OPENAI_API_KEY, ANTHROPIC_API_KEY) ALWAYS — whether or not a model uses them, a process that has them
 * must not leak them — plus every model entry's `apiKeyEnv` and `headersEnv` variables, plus `secrets.env`, plus
 * every service's `auth` variable.
 */
export function secretEnvNames(binding: SecretBindingFields): string[] {
  const names = new Set<string>(Object.values(DEFAULT_API_KEY_ENV));
  for (const entry of Object.values(binding.models)) {
    if (entry.apiKeyEnv !== undefined) names.add(entry.apiKeyEnv);
    for (const name of Object.values(entry.headersEnv ?? {})) names.add(name);
  }
  for (const name of binding.secrets?.env ?? []) names.add(name);
  // A service's credential variable is a secret by construction: no need (and no way to forget) to list it again.
  for (const service of binding.services ?? []) for (const name of serviceSecretEnv(service)) names.add(name);
  // Likewise the business CLI's credential signing key.
  if (binding.cli) for (const name of cliSecretEnv(binding.cli)) names.add(name);
  // The variables `exec` passes to commands as secrets (docs/commands.md).
  if (binding.exec) for (const name of execSecretEnv(binding.exec)) names.add(name);
  // An MCP server's auth header value (docs/mcp.md).
  for (const name of mcpSecretEnv(binding.mcpServers)) names.add(name);
  return [...names].sort();
}

/**
 * The redactor of a process with no binding at hand (the CLI's own errors, a control-plane command): credential
 * shapes, and the values of the provider key variables (OPENAI_API_KEY, ANTHROPIC_API_KEY) in `env`.
 */
export function processRedactor(env: Record<string, string | undefined> = process.env): Redactor {
  return Redactor.create({ secrets: envSecrets(secretEnvNames({ models: {} }), env) });
}

/** The values of `names` in `env` (unset and empty variables skipped). */
export function envSecrets(names: readonly string[], env: Record<string, string | undefined>): LiteralSecret[] {
  const secrets: LiteralSecret[] = [];
  for (const name of names) {
    const value = env[name];
    if (value !== undefined && value.trim() !== '') secrets.push({ value, kind: 'env_secret' });
  }
  return secrets;
}

export interface DotenvSearchOptions {
  /** Directory levels below the root to look in (default 4: `apps/web/config/.env` is found). */
  maxDepth?: number;
  /** Directory entries to look at before giving up (default 20 000), so a huge tree costs bounded time. */
  maxEntries?: number;
  /** Larger files are skipped (default 256 KiB): a `.env` file is small. */
  maxFileBytes?: number;
}

/** Directories never searched: dependencies, VCS data, build output, OAR's own store. */
const SKIPPED_DIRECTORIES = new Set([
  'node_modules',
  '.git',
  '.hg',
  '.svn',
  '.oar',
  'dist',
  'build',
  'out',
  'target',
  'vendor',
  '.next',
  '.venv',
  'venv',
  '__pycache__',
  '.cache',
]);

/**
 * The `.env*` files (templates excluded, see `isDotenvFileName`) under `root`, as absolute paths, sorted.
 * Breadth-first, bounded in depth and entries; symbolic links to directories are not followed.
 */
export async function findDotenvFiles(root: string, options: DotenvSearchOptions = {}): Promise<string[]> {
  const maxDepth = options.maxDepth ?? 4;
  let budget = options.maxEntries ?? 20_000;
  const found: string[] = [];
  let level = [root];
  for (let depth = 0; depth <= maxDepth && level.length > 0 && budget > 0; depth++) {
    const next: string[] = [];
    for (const dir of level) {
      let entries: Dirent[];
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch {
        continue;
      }
      for (const entry of entries) {
        if (--budget < 0) break;
        const path = join(dir, entry.name);
        if (entry.isDirectory()) {
          if (!SKIPPED_DIRECTORIES.has(entry.name)) next.push(path);
        } else if ((entry.isFile() || entry.isSymbolicLink()) && isDotenvFileName(entry.name)) {
          found.push(path);
        }
      }
    }
    level = next;
  }
  return found.sort();
}

/**
 * Reads a small regular file, or nothing: a FIFO, a device or a link to one must not block the read, and a large
 * file is not a `.env` file.
 */
async function readSmallFile(path: string, maxBytes: number): Promise<string | undefined> {
  let handle: FileHandle | undefined;
  try {
    // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK).catch(() => undefined);
    if (!handle) return undefined;
    const stat = await handle.stat();
    if (!stat.isFile() || stat.size > maxBytes) return undefined;
    return await handle.readFile('utf8');
  } catch {
    return undefined;
  } finally {
    await handle?.close().catch(() => undefined);
  }
}

/** The secret values of every `.env*` file under `root` (see `isDotenvSecret` for which values count). */
export async function dotenvSecrets(root: string, options: DotenvSearchOptions = {}): Promise<LiteralSecret[]> {
  const maxBytes = options.maxFileBytes ?? 256 * 1024;
  const secrets: LiteralSecret[] = [];
  for (const file of await findDotenvFiles(root, options)) {
    const text = await readSmallFile(file, maxBytes);
    if (text === undefined) continue;
    for (const value of dotenvSecretValues(text)) secrets.push({ value, kind: 'dotenv' });
  }
  return secrets;
}

/** Every literal secret of a binding: its secret environment variables' values and its workspace's `.env*` values. */
/**
 * The redactor of a session's binding: credential shapes, the provider keys and the binding's secret variables, and
 * the values in its workspace's `.env*` files. Workers record with it, and so do commands about that session.
 */
export async function bindingRedactor(
  binding: SecretBindingFields & { workspaceRoot: string },
  env: Record<string, string | undefined> = process.env,
): Promise<Redactor> {
  return Redactor.create({ secrets: await bindingSecrets(binding, env) });
}

export async function bindingSecrets(
  binding: SecretBindingFields & { workspaceRoot: string },
  env: Record<string, string | undefined>,
  options: DotenvSearchOptions = {},
): Promise<LiteralSecret[]> {
  return [...envSecrets(secretEnvNames(binding), env), ...(await dotenvSecrets(binding.workspaceRoot, options))];
}
