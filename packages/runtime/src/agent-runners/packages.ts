import { existsSync, realpathSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { pointer } from '@oar/protocol';
import { type AgentRunnerManifest, AgentRunnerManifestSchema, ListAgentRunnersResponseSchema } from '@oar/runner-sdk';
import { z } from 'zod';
import { NPM_ENTRY_PREFIX, NPM_PACKAGE_NAME, type RunnerBinding } from '../config/runner-binding.js';
import { OarRuntimeError } from '../kernel/errors.js';
import { Redactor } from '../redaction/redactor.js';
import { readLangbotPlugin } from './langbot/discovery.js';
import { langbotTransport } from './langbot/transport.js';
import { type ProcessSpec, processTransport, type RunnerConnection, type RunnerTransport } from './transport.js';

/** The file that makes a directory a runner package. */
export const RUNNER_PACKAGE_FILE = 'oar-runner.json';

/** The `package.json` field that makes a directory (typically an installed npm package) a runner package. */
export const RUNNER_PACKAGE_FIELD = 'oarRunner';

/**
 * A runner package: a directory with `oar-runner.json` (or these fields under package.json's `oarRunner`) naming its
 * plugin (`author/name`, the middle of every runner id it may claim) and how to start it. `node` as the command is
 * this host's own Node binary.
 */
export const RunnerPackageSchema = z.strictObject({
  plugin: z.string().regex(/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/, 'plugins are named author/name'),
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  description: z.string().optional(),
  /** The wire the package speaks: OAR's NDJSON runner wire (`oar`, when absent), or LangBot's plugin wire. */
  wire: z.enum(['oar', 'langbot']).optional(),
});
export type RunnerPackage = z.infer<typeof RunnerPackageSchema> & { dir: string };

/** A runner found by discovery: its manifest as parsed, and the package that provides it. */
export interface DiscoveredRunner {
  id: string;
  package: string;
  manifest: AgentRunnerManifest;
}

/**
 * Why a package or one of its runners was skipped: where (package, runner, JSON pointer) and why. With severity
 * `note`, nothing was skipped: the manifest was read differently from how it is written (LangBot's, read liberally).
 */
export interface RunnerDiagnostic {
  package: string;
  runner?: string;
  pointer: string;
  reason: string;
  severity?: 'note';
}

/**
 * Where a `runners.packages` entry lives: a directory (relative to `baseDir`, the config file's directory), or for
 * `npm:<name>` the installed package's directory, found with Node's own resolution from `baseDir`
 * (`<baseDir>/node_modules`, then each parent's). Nothing is installed and the network is never used: a package
 * that is not there is a diagnostic naming it.
 */
export function resolveRunnerPackageEntry(entry: string, baseDir: string): { dir: string } | RunnerDiagnostic {
  if (!entry.startsWith(NPM_ENTRY_PREFIX)) return { dir: resolve(baseDir, entry) };
  const name = entry.slice(NPM_ENTRY_PREFIX.length);
  if (!NPM_PACKAGE_NAME.test(name)) {
    return { package: entry, pointer: '', reason: `"${name}" is not an npm package name` };
  }
  // createRequire wants a file name; it need not exist (the project may have no package.json).
  const require = createRequire(join(resolve(baseDir), 'package.json'));
  try {
    return { dir: dirname(require.resolve(`${name}/package.json`)) };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // A package whose `exports` hides its package.json is still installed: find its directory on the same paths.
    if (code === 'ERR_PACKAGE_PATH_NOT_EXPORTED') {
      for (const modules of require.resolve.paths(name) ?? []) {
        if (existsSync(join(modules, name, 'package.json'))) return { dir: realpathSync(join(modules, name)) };
      }
    }
    const reason =
      code === 'MODULE_NOT_FOUND'
        ? `npm package ${name} is not installed in ${join(resolve(baseDir), 'node_modules')} or a parent's node_modules`
        : `cannot resolve npm package ${name} from ${resolve(baseDir)}: ${(error as Error).message}`;
    return { package: entry, pointer: '', reason };
  }
}

/**
 * Read a runner package: its `oar-runner.json`, or else the `oarRunner` field of its `package.json` (so an npm
 * package needs no extra file). `entry` is a directory or an `npm:` entry, resolved from `baseDir`. A missing or bad
 * manifest is a diagnostic, not an exception.
 */
export async function readRunnerPackage(
  entry: string,
  baseDir = process.cwd(),
): Promise<RunnerPackage | RunnerDiagnostic> {
  const where = resolveRunnerPackageEntry(entry, baseDir);
  if ('reason' in where) return where;
  const abs = where.dir;
  // Diagnostics name the package as configured when it is an npm one (its directory is an install detail).
  const name = entry.startsWith(NPM_ENTRY_PREFIX) ? entry : abs;
  let json: unknown;
  let source = RUNNER_PACKAGE_FILE;
  // The pointer is into the file that held the manifest: package.json's is under its oarRunner field.
  let at: string[] = [];
  try {
    json = JSON.parse(await readFile(join(abs, RUNNER_PACKAGE_FILE), 'utf8'));
  } catch (error) {
    // Only a missing file falls back to package.json: a broken oar-runner.json is an error, never silently replaced.
    const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
    const field = missing ? await packageJsonField(abs) : undefined;
    // A LangBot plugin folder (its manifest.yaml) is a package too, started as LangBot's plugin runtime starts it.
    const langbot = missing && field === undefined ? await readLangbotPlugin(abs) : undefined;
    if (langbot && 'reason' in langbot) return { package: name, pointer: '', reason: langbot.reason };
    if (langbot) return { ...langbot, dir: abs };
    if (field === undefined) {
      const reason = `cannot read ${RUNNER_PACKAGE_FILE}: ${(error as Error).message}; and package.json has no "${RUNNER_PACKAGE_FIELD}" field${missing ? ', and there is no LangBot manifest.yaml' : ''}`;
      return { package: name, pointer: '', reason };
    }
    json = field;
    source = `package.json "${RUNNER_PACKAGE_FIELD}"`;
    at = [RUNNER_PACKAGE_FIELD];
  }
  const parsed = RunnerPackageSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return {
      package: name,
      pointer: pointer([...at, ...((issue?.path ?? []) as (string | number)[])]),
      reason: `${source}: ${issue?.message ?? 'invalid'}`,
    };
  }
  return { ...parsed.data, dir: abs };
}

/** The `oarRunner` field of a directory's package.json; undefined when there is no such file or field. */
async function packageJsonField(dir: string): Promise<unknown> {
  try {
    const json = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')) as Record<string, unknown> | null;
    return json && typeof json === 'object' ? json[RUNNER_PACKAGE_FIELD] : undefined;
  } catch {
    return undefined;
  }
}

/** The child process of a package, with exactly `env` as its environment. */
export function packageProcess(pkg: RunnerPackage, env: Record<string, string>): ProcessSpec {
  return { command: pkg.command === 'node' ? process.execPath : pkg.command, args: pkg.args, cwd: pkg.dir, env };
}

/** How the host reaches a package's process: over the wire it says it speaks. */
export function packageTransport(pkg: RunnerPackage, env: Record<string, string>): RunnerTransport {
  const spec = packageProcess(pkg, env);
  return pkg.wire === 'langbot' ? langbotTransport(spec) : processTransport(spec);
}

/**
 * The environment of a runner process: PATH (to find its own helpers) and the variables the binding names, if set.
 * Nothing else of the host's environment — provider keys, tokens — reaches it.
 */
export function runnerEnv(
  allowed: readonly string[],
  source: Record<string, string | undefined>,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of ['PATH', ...allowed]) {
    const value = source[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

/** What a runner's stderr says went wrong: its last line naming an error (else its last lines), ≤ 500 characters. */
function lastLines(text: string): string {
  const lines = text
    .trim()
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const error = lines.filter((line) => /error/i.test(line) && !/^code:/.test(line)).at(-1);
  return (error ?? lines.slice(-3).join(' | ')).slice(0, 500);
}

/** How long discovery waits for a package to answer LIST_AGENT_RUNNERS. */
const LIST_TIMEOUT_MS = 15_000;

/** Ask one connected package for its runners and check each manifest on its own. */
export async function listPackageRunners(
  pkg: RunnerPackage,
  connection: RunnerConnection,
): Promise<{ runners: DiscoveredRunner[]; diagnostics: RunnerDiagnostic[] }> {
  const diagnostics: RunnerDiagnostic[] = [];
  let answer: unknown;
  try {
    answer = await connection.peer.request('LIST_AGENT_RUNNERS', {}, { signal: AbortSignal.timeout(LIST_TIMEOUT_MS) });
  } catch (error) {
    // What the runner said on stderr is usually why (a missing dependency, a syntax error): its last line, redacted.
    await Promise.race([connection.exited, new Promise((resolve) => setTimeout(resolve, 200))]);
    const said = Redactor.patternsOnly().redactText(lastLines(connection.stderr()));
    const reason = `LIST_AGENT_RUNNERS failed: ${(error as Error).message}${said ? `; stderr: ${said}` : ''}`;
    return { runners: [], diagnostics: [{ package: pkg.dir, pointer: '', reason }] };
  }
  const list = ListAgentRunnersResponseSchema.safeParse(answer);
  if (!list.success) {
    return {
      runners: [],
      diagnostics: [{ package: pkg.dir, pointer: '/runners', reason: 'the answer has no runners list' }],
    };
  }
  const runners: DiscoveredRunner[] = [];
  // What the transport read liberally (a LangBot manifest) is said, not skipped.
  for (const note of connection.notes?.() ?? []) diagnostics.push({ package: pkg.dir, ...note, severity: 'note' });
  list.data.runners.forEach((raw, index) => {
    const id = typeof (raw as { id?: unknown })?.id === 'string' ? (raw as { id: string }).id : undefined;
    const parsed = AgentRunnerManifestSchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      diagnostics.push({
        package: pkg.dir,
        ...(id ? { runner: id } : {}),
        pointer: `/runners/${index}${pointer((issue?.path ?? []) as (string | number)[])}`,
        reason: issue?.message ?? 'invalid manifest',
      });
      return;
    }
    // A package may only claim ids under its own plugin name: no runner can pose as another package's.
    if (!parsed.data.id.startsWith(`plugin:${pkg.plugin}/`)) {
      diagnostics.push({
        package: pkg.dir,
        runner: parsed.data.id,
        pointer: `/runners/${index}/id`,
        reason: `the id is not under this package's plugin "${pkg.plugin}" (plugin:${pkg.plugin}/<runner>)`,
      });
      return;
    }
    runners.push({ id: parsed.data.id, package: pkg.dir, manifest: parsed.data });
  });
  return { runners, diagnostics };
}

/**
 * Discovery: start every configured package, ask it for its runners, keep the valid ones. A bad package or manifest
 * is skipped with a diagnostic; an id claimed twice keeps its first claim (in configuration order) and skips the
 * others. The processes are closed again; a run starts its own.
 */
export async function discoverRunners(
  entries: readonly string[],
  env: Record<string, string | undefined>,
  options: {
    /** What relative directories and npm packages are resolved from: the config file's directory. */
    baseDir?: string;
    transportOf?: (pkg: RunnerPackage) => RunnerTransport;
  } = {},
): Promise<{ runners: DiscoveredRunner[]; diagnostics: RunnerDiagnostic[] }> {
  const transportOf = options.transportOf ?? ((pkg: RunnerPackage) => packageTransport(pkg, runnerEnv([], env)));
  const runners: DiscoveredRunner[] = [];
  const diagnostics: RunnerDiagnostic[] = [];
  for (const entry of entries) {
    const pkg = await readRunnerPackage(entry, options.baseDir);
    if ('reason' in pkg) {
      diagnostics.push(pkg);
      continue;
    }
    let connection: RunnerConnection;
    try {
      connection = await transportOf(pkg).connect(async () => {
        throw new Error('discovery answers no runner requests');
      });
    } catch (error) {
      diagnostics.push({ package: pkg.dir, pointer: '', reason: `cannot start: ${(error as Error).message}` });
      continue;
    }
    try {
      const found = await listPackageRunners(pkg, connection);
      diagnostics.push(...found.diagnostics);
      for (const runner of found.runners) {
        const first = runners.find((r) => r.id === runner.id);
        if (first) {
          diagnostics.push({
            package: pkg.dir,
            runner: runner.id,
            pointer: '/id',
            reason: `the id is already provided by ${first.package}`,
          });
        } else runners.push(runner);
      }
    } finally {
      await connection.close(500);
    }
  }
  return { runners, diagnostics };
}

/** The package of a runner id among the configured ones, by its plugin name (no process is started). */
export async function packageOfRunner(
  entries: readonly string[],
  runnerId: string,
  baseDir?: string,
): Promise<RunnerPackage | undefined> {
  for (const entry of entries) {
    const pkg = await readRunnerPackage(entry, baseDir);
    if (!('reason' in pkg) && runnerId.startsWith(`plugin:${pkg.plugin}/`)) return pkg;
  }
  return undefined;
}

/**
 * A runner binding as a session records it: its package resolved to an absolute directory (given — a directory or
 * an `npm:` entry —, or found among the configured packages by the id's plugin), so any worker starts the same code
 * without resolving again. An id no configured package can provide is `unknown_runner`.
 */
export async function boundRunner(
  runner: RunnerBinding,
  packages: readonly string[],
  baseDir: string,
): Promise<RunnerBinding> {
  if (runner.package) {
    if (runner.package.startsWith('inprocess:')) return runner;
    const where = resolveRunnerPackageEntry(runner.package, baseDir);
    if ('reason' in where) {
      throw new OarRuntimeError('unknown_runner', `${runner.id}: ${where.reason}`, {
        details: { runnerId: runner.id, package: runner.package },
      });
    }
    return { ...runner, package: where.dir };
  }
  const pkg = await packageOfRunner(packages, runner.id, baseDir);
  if (!pkg) {
    throw new OarRuntimeError('unknown_runner', `no configured runner package provides ${runner.id}`, {
      details: {
        runnerId: runner.id,
        packages: [...packages],
        hint: 'add its directory (or npm:<package>) to runners.packages',
      },
    });
  }
  return { ...runner, package: pkg.dir };
}
