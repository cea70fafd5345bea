import { isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { EnvVarNameSchema } from './models.js';

/**
 * `mcp.servers` (docs/mcp.md): MCP servers whose tools join a session's inventory as `server.tool`. A server runs
 * as a subprocess (stdio: `command` + `args`, the environment variables it may see by NAME) or is reached over
 * Streamable HTTP (`url`, and an auth header whose value is read from an environment variable — never written in
 * the config). The config file's form and the binding's are the same; the binding's paths are absolute.
 */

/** A server's name is the namespace of its tools: lowercase, so `docs.search` reads the same everywhere. */
export const MCP_SERVER_NAME = /^[a-z][a-z0-9_-]{0,31}$/;

export const McpAuthSchema = z.strictObject({
  /** The header sent with every request (default `Authorization`). */
  header: z
    .string()
    .regex(/^[A-Za-z0-9-]+$/, 'an HTTP header name')
    .default('Authorization'),
  /** The variable holding the header's value (or the token, with `scheme`). Redacted wherever output is recorded. */
  env: EnvVarNameSchema,
  /** A scheme written before the value (`Bearer` → `Authorization: Bearer <value>`). */
  scheme: z
    .string()
    .regex(/^[A-Za-z]+$/)
    .optional(),
});

export const McpServerConfigSchema = z
  .strictObject({
    name: z.string().regex(MCP_SERVER_NAME, 'server names are lowercase: letters, digits, "_" and "-", at most 32'),
    /** stdio: the executable (never a shell) and its arguments. */
    command: z.string().min(1).optional(),
    args: z.array(z.string()).default([]),
    /** stdio: variables passed to the server beyond PATH, LANG, TZ and HOME; nothing else is inherited. */
    env: z.array(EnvVarNameSchema).default([]),
    /** stdio: the server's working directory (default: the session's workspace). */
    cwd: z.string().optional(),
    /** Streamable HTTP: the server's endpoint (http or https). */
    url: z.url({ protocol: /^https?$/ }).optional(),
    auth: McpAuthSchema.optional(),
    /** Only these of the server's tools join the inventory (their names on the server); every one when left out. */
    tools: z.array(z.string().min(1)).min(1).optional(),
    /** One call's time limit (the runtime's tool timeout applies on top of it). */
    timeoutMs: z.number().int().min(100).max(3_600_000).default(60_000),
    /**
     * How long connecting and listing the tools may take. Left out: 20 s, or 120 s for a server started through a
     * package runner (`npx`, `npm exec`, …), whose first start downloads the package (`connectTimeoutOf`).
     */
    connectTimeoutMs: z.number().int().min(100).max(600_000).optional(),
    /**
     * Whether a tool's `readOnlyHint` / `destructiveHint` annotations are believed. `true` (default): a read-only
     * tool may run concurrently and is allowed like a read; `false`: every tool of the server is treated as a write.
     */
    trustAnnotations: z.boolean().default(true),
    /**
     * The server deduplicates calls by `_meta["oar/idempotencyKey"]` (the same for every retry of one call): `true`
     * for all its tools, or the names of those that do. A call of one left in flight by a crash is then retried under
     * the same key instead of becoming `lost` (docs/reliability.md "Idempotency keys").
     */
    idempotentByKey: z.union([z.boolean(), z.array(z.string().min(1)).min(1)]).default(false),
  })
  .superRefine((server, ctx) => {
    if ((server.command === undefined) === (server.url === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['command'], message: 'a server has exactly one of "command" and "url"' });
    }
    if (server.url !== undefined && (server.args.length > 0 || server.env.length > 0 || server.cwd !== undefined)) {
      ctx.addIssue({ code: 'custom', path: ['url'], message: '"args", "env" and "cwd" are for a stdio server' });
    }
    if (server.command !== undefined && server.auth !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['auth'],
        message: '"auth" is for an HTTP server (pass a stdio one "env")',
      });
    }
  });
export type McpServerConfig = z.infer<typeof McpServerConfigSchema>;

export const McpServersSchema = z.array(McpServerConfigSchema).superRefine((servers, ctx) => {
  const seen = new Set<string>();
  for (const [i, server] of servers.entries()) {
    if (seen.has(server.name)) {
      ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `two MCP servers are named "${server.name}"` });
    }
    seen.add(server.name);
  }
});
export type McpServersConfig = z.infer<typeof McpServersSchema>;

/** The connect limit of a server that names none. */
export const DEFAULT_CONNECT_TIMEOUT_MS = 20_000;
/** The connect limit of a server started through a package runner: its first start installs the package. */
export const PACKAGE_RUNNER_CONNECT_TIMEOUT_MS = 120_000;
/** Commands that fetch the server's package before starting it (a download on a fresh machine takes tens of seconds). */
const PACKAGE_RUNNERS = new Set(['npx', 'npm', 'pnpm', 'pnpx', 'yarn', 'bunx', 'uvx']);

/** Whether `server` is started through a package runner (`npx …`), which may download it first. */
export function startsThroughPackageRunner(server: McpServerConfig): boolean {
  const program = server.command
    ?.split(/[\\/]/)
    .pop()
    ?.replace(/\.(cmd|exe)$/i, '');
  return program !== undefined && PACKAGE_RUNNERS.has(program);
}

/** How long connecting to `server` and listing its tools may take (docs/mcp.md, `connectTimeoutMs`). */
export function connectTimeoutOf(server: McpServerConfig): number {
  if (server.connectTimeoutMs !== undefined) return server.connectTimeoutMs;
  return startsThroughPackageRunner(server) ? PACKAGE_RUNNER_CONNECT_TIMEOUT_MS : DEFAULT_CONNECT_TIMEOUT_MS;
}

/** The binding's form: a path-like command or argument (`./server.js`) and the cwd made absolute. */
export function absoluteMcpServers(servers: McpServersConfig, baseDir: string): McpServersConfig {
  const pathLike = (arg: string) => arg.startsWith('./') || arg.startsWith('../');
  const abs = (arg: string) => (pathLike(arg) ? resolve(baseDir, arg) : arg);
  return servers.map((server) => ({
    ...server,
    ...(server.command ? { command: abs(server.command), args: server.args.map(abs) } : {}),
    ...(server.cwd ? { cwd: isAbsolute(server.cwd) ? server.cwd : resolve(baseDir, server.cwd) } : {}),
  }));
}

/** The variables whose values are secret: every HTTP server's auth variable (redacted wherever recorded). */
export function mcpSecretEnv(servers: McpServersConfig | undefined): string[] {
  return (servers ?? []).flatMap((server) => (server.auth ? [server.auth.env] : []));
}
