import type { McpServerConfig, McpServersConfig } from '../../config/mcp.js';
import { OarRuntimeError, runtimeClosing, toOarError } from '../../kernel/errors.js';
import type { ToolRegistry } from '../registry.js';
import { McpConnection, type McpToolList } from './connection.js';
import { mcpTool, mcpToolName } from './tools.js';

/** What a bound registry could not take from a server's list (a schema zod cannot express): left out, and why. */
export interface McpSkippedTool {
  name: string;
  reason: string;
}

/**
 * This process's MCP servers: one connection per distinct server configuration (and working directory), shared
 * by every binding that names it, closed with the runtime. `bind` puts a binding's servers' tools in its registry
 * and keeps them in step with the servers' `list_changed` notifications; a running step keeps the catalog it was
 * given, the next step sees the change (and records it: tools/mcp/inventory.ts).
 */
export class McpPool {
  readonly #connections = new Map<string, McpConnection>();
  #closed = false;

  constructor(private readonly env: Record<string, string | undefined> = process.env) {}

  connection(config: McpServerConfig, cwd: string): McpConnection {
    const key = JSON.stringify([config, cwd]);
    let connection = this.#connections.get(key);
    if (!connection) {
      connection = new McpConnection(config, { cwd, env: this.env, clientVersion: '0.1.0' });
      this.#connections.set(key, connection);
    }
    return connection;
  }

  /**
   * Connect the servers (in parallel) and register their tools. A server that cannot be reached makes the binding
   * unavailable here, as a tool module that cannot load does (retryable: it is tried again on the next use).
   */
  async bind(servers: McpServersConfig, registry: ToolRegistry, workspaceRoot: string): Promise<McpSkippedTool[]> {
    if (this.#closed) throw runtimeClosing();
    const skipped: McpSkippedTool[] = [];
    const lists = await Promise.all(
      servers.map(async (server) => {
        const connection = this.connection(server, workspaceRoot);
        try {
          return { server, connection, list: await connection.start() };
        } catch (error) {
          const cause = toOarError(error);
          throw new OarRuntimeError('binding_unavailable', `MCP server "${server.name}": ${cause.message}`, {
            retryable: true,
            details: { server: server.name, cause: cause.code, ...(cause.details ?? {}) },
          });
        }
      }),
    );
    for (const { server, connection, list } of lists) {
      const names = new Set<string>();
      // What the first listing could not offer is reported; a later listing's misses are simply left out.
      const apply = (next: McpToolList, into: ToolRegistry, missed?: McpSkippedTool[]) => {
        for (const name of names) into.unregister(name);
        names.clear();
        for (const tool of next.tools) {
          const name = mcpToolName(server.name, tool.name);
          try {
            into.register(mcpTool(server, connection, tool));
            names.add(name);
          } catch (error) {
            missed?.push({ name, reason: (error as Error).message });
          }
        }
      };
      apply(list, registry, skipped);
      // Held weakly: a bound configuration the runtime forgot (its LRU) stops listening instead of being kept alive.
      const ref = new WeakRef(registry);
      const stop = connection.onToolsChanged((next) => {
        const live = ref.deref();
        if (live) apply(next, live);
        else stop();
      });
    }
    return skipped;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#connections.values()].map((connection) => connection.close()));
    this.#connections.clear();
  }
}
