import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { connectTimeoutOf, type McpServerConfig, startsThroughPackageRunner } from '../../config/mcp.js';
import { ToolError } from '../../kernel/errors.js';
import { type McpSdk, mcpSdk } from './sdk.js';

/**
 * One MCP server as this process reaches it: connected on first use, its tools listed (every page), restarted
 * with backoff after it crashes, hangs or answers garbage. Every failure comes out as a structured `ToolError`:
 * `mcp_unavailable` (could not connect, crashed, waiting out a backoff: retryable), `mcp_timeout` (no answer in
 * time: the server is restarted before its next use), `mcp_protocol_error` (an answer that is not MCP).
 */

/** The first restart waits this long; each consecutive failure doubles it, up to MAX_BACKOFF_MS. */
const INITIAL_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 30_000;
/** A call finding the server in a backoff shorter than this waits it out (abortably) instead of failing at once. */
const WAIT_BACKOFF_MS = 5_000;
/** A call that reports progress may run this many times its `timeoutMs` in all. */
export const MAX_PROGRESS_EXTENSION = 10;
/** The server's stderr kept for diagnostics (the tail, redacted where it is recorded). */
const STDERR_TAIL = 4_000;

export interface McpToolList {
  tools: Tool[];
  /** Bumped by every successful listing: the inventory compares it to know it must refresh. */
  version: number;
}

export class McpConnection {
  /** Set by the first connection: a failure can only be the SDK's own error once the SDK is loaded. */
  #sdk: McpSdk | undefined;
  #client: Client | undefined;
  #connecting: Promise<Client> | undefined;
  #failures = 0;
  #retryAt = 0;
  #stderr = '';
  #closed = false;
  #refreshing: Promise<void> | undefined;
  #tools: McpToolList = { tools: [], version: 0 };
  readonly #listeners = new Set<(list: McpToolList) => void>();

  constructor(
    readonly config: McpServerConfig,
    private readonly options: { cwd: string; env: Record<string, string | undefined>; clientVersion: string },
  ) {}

  get tools(): McpToolList {
    return this.#tools;
  }

  /** Called after a `notifications/tools/list_changed` refresh (and a reconnect) with the new list. */
  onToolsChanged(listener: (list: McpToolList) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Connect if needed and list the tools: what a binding needs before it can offer them. */
  async start(signal?: AbortSignal): Promise<McpToolList> {
    await this.#ready(signal);
    return this.#tools;
  }

  /** `meta` rides in the request's `_meta` (the call's idempotency key: `MCP_IDEMPOTENCY_KEY`). */
  async callTool(
    name: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
    meta?: Record<string, unknown>,
  ): Promise<CallToolResult> {
    const client = await this.#ready(signal);
    try {
      const result = await client.callTool({ name, arguments: args, ...(meta ? { _meta: meta } : {}) }, undefined, {
        signal,
        timeout: this.config.timeoutMs,
        resetTimeoutOnProgress: true,
        maxTotalTimeout: this.config.timeoutMs * MAX_PROGRESS_EXTENSION,
      });
      this.#failures = 0;
      await this.#refreshing;
      return result as CallToolResult;
    } catch (error) {
      throw this.#failure(error, signal, { tool: name });
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#drop();
  }

  /** The connected client: connect now, or after a backoff short enough to wait out; else `mcp_unavailable`. */
  async #ready(signal?: AbortSignal): Promise<Client> {
    if (this.#closed) throw this.#unavailable('the runtime is closing');
    if (this.#client) return this.#client;
    if (this.#connecting) return this.#connecting;
    const wait = this.#retryAt - Date.now();
    if (wait > 0) {
      if (wait > WAIT_BACKOFF_MS) {
        throw this.#unavailable(`restarting after ${this.#failures} failure(s); next attempt in ${wait} ms`, wait);
      }
      await sleep(wait, signal);
    }
    this.#connecting = this.#connect().finally(() => {
      this.#connecting = undefined;
    });
    return this.#connecting;
  }

  async #connect(): Promise<Client> {
    const sdk = await mcpSdk();
    this.#sdk = sdk;
    const { ErrorCode, McpError } = sdk;
    const client = new sdk.Client({ name: 'oar', version: this.options.clientVersion }, { capabilities: {} });
    // `notifications/tools/list_changed`: re-list now. A server sends it before the answer to the call that changed
    // its tools, so the call awaits the refresh (`#refreshing`) and the very next step sees the new inventory.
    client.setNotificationHandler(sdk.ToolListChangedNotificationSchema, () => {
      if (client !== this.#client) return;
      this.#refreshing = this.#list(client)
        .then((tools) => this.#setTools(tools))
        .catch(() => undefined)
        .finally(() => {
          this.#refreshing = undefined;
        });
    });
    const transport = this.#transport(sdk);
    const connectTimeoutMs = connectTimeoutOf(this.config);
    const deadline = AbortSignal.timeout(connectTimeoutMs);
    try {
      await client.connect(transport, { timeout: connectTimeoutMs, signal: deadline });
      const tools = await this.#list(client, deadline);
      // A crash or a broken stream later: drop the client, so the next use reconnects (after a backoff).
      client.onclose = () => {
        if (this.#client === client) this.#markFailed();
      };
      this.#client = client;
      this.#setTools(tools);
      return client;
    } catch (error) {
      await client.close().catch(() => undefined);
      this.#markFailed();
      const retryInMs = this.#retryAt - Date.now();
      const timedOut = deadline.aborted || (error instanceof McpError && error.code === ErrorCode.RequestTimeout);
      if (timedOut) {
        // Name the setting that changes the limit: a slow first start (a package download) is the usual cause.
        throw this.#unavailable(`it did not connect and list its tools within ${connectTimeoutMs} ms`, retryInMs, {
          connectTimeoutMs,
          hint: `raise "connectTimeoutMs" of the server "${this.config.name}" in "mcp.servers" of oar.config.json${startsThroughPackageRunner(this.config) ? ` (its first start through ${this.config.command} downloads the package)` : ''}`,
        });
      }
      const reason = error instanceof Error ? error.message : String(error);
      const fields = this.config.url ? '"url" and "auth"' : '"command", "args" and "env"';
      throw this.#unavailable(`could not connect: ${reason}`, retryInMs, {
        hint: `check ${fields} of the server "${this.config.name}" in "mcp.servers" of oar.config.json`,
      });
    }
  }

  /** Every page of the server's tool list. */
  async #list(client: Client, signal?: AbortSignal): Promise<Tool[]> {
    const tools: Tool[] = [];
    let cursor: string | undefined;
    do {
      const page = await client.listTools(cursor ? { cursor } : {}, {
        timeout: connectTimeoutOf(this.config),
        ...(signal ? { signal } : {}),
      });
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    return tools;
  }

  #transport(sdk: McpSdk): Transport {
    const { config } = this;
    if (config.url) {
      const headers: Record<string, string> = {};
      if (config.auth) {
        const value = this.options.env[config.auth.env];
        if (value === undefined) {
          throw new ToolError('mcp_unavailable', `MCP server "${config.name}": ${config.auth.env} is not set`, {
            retryable: true,
            details: {
              server: config.name,
              env: config.auth.env,
              hint: `set ${config.auth.env} in the environment of the process that runs the session`,
            },
          });
        }
        headers[config.auth.header] = config.auth.scheme ? `${config.auth.scheme} ${value}` : value;
      }
      return new sdk.StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers } });
    }
    const env: Record<string, string> = {};
    for (const name of ['LANG', 'TZ', ...config.env]) {
      const value = this.options.env[name];
      if (value !== undefined) env[name] = value;
    }
    const transport = new sdk.StdioClientTransport({
      command: config.command as string,
      args: config.args,
      env,
      cwd: config.cwd ?? this.options.cwd,
      stderr: 'pipe',
    });
    this.#stderr = '';
    transport.stderr?.on('data', (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString('utf8')).slice(-STDERR_TAIL);
    });
    return transport;
  }

  #setTools(tools: Tool[]): void {
    const allowed = this.config.tools;
    this.#tools = {
      tools: allowed ? tools.filter((tool) => allowed.includes(tool.name)) : tools,
      version: this.#tools.version + 1,
    };
    for (const listener of this.#listeners) listener(this.#tools);
  }

  #markFailed(): void {
    const client = this.#client;
    this.#client = undefined;
    if (client) void client.close().catch(() => undefined);
    this.#failures++;
    this.#retryAt = Date.now() + Math.min(MAX_BACKOFF_MS, INITIAL_BACKOFF_MS * 2 ** (this.#failures - 1));
  }

  async #drop(): Promise<void> {
    const client = this.#client;
    this.#client = undefined;
    await client?.close().catch(() => undefined);
  }

  #unavailable(reason: string, retryInMs?: number, extra: Record<string, unknown> = {}): ToolError {
    return new ToolError('mcp_unavailable', `MCP server "${this.config.name}" is unavailable: ${reason}`, {
      retryable: true,
      details: {
        server: this.config.name,
        ...extra,
        failures: this.#failures,
        ...(retryInMs !== undefined && retryInMs > 0 ? { retryInMs } : {}),
        ...(this.#stderr ? { stderr: this.#stderr.slice(-2_000) } : {}),
      },
    });
  }

  /** A failed call as a structured error; a hang or garbage also restarts the server before its next use. */
  #failure(error: unknown, signal: AbortSignal, details: Record<string, unknown>): ToolError {
    const base = { server: this.config.name, ...details };
    if (signal.aborted) {
      return new ToolError('aborted', `the call to MCP server "${this.config.name}" was cancelled`, { details: base });
    }
    const sdk = this.#sdk;
    if (sdk && error instanceof sdk.McpError) {
      const { ErrorCode } = sdk;
      if (error.code === ErrorCode.RequestTimeout) {
        this.#markFailed();
        return new ToolError(
          'mcp_timeout',
          `MCP server "${this.config.name}" did not answer in time; it is restarted`,
          {
            retryable: true,
            details: { ...base, timeoutMs: this.config.timeoutMs },
          },
        );
      }
      if (error.code === ErrorCode.ConnectionClosed) {
        this.#markFailed();
        return this.#unavailable(`the connection closed during the call (${error.message})`);
      }
      // The server answered with a JSON-RPC error: its own failure, not a broken server.
      return new ToolError('mcp_tool_failed', `MCP server "${this.config.name}": ${error.message}`, {
        details: { ...base, mcpCode: error.code, ...(error.data !== undefined ? { data: error.data } : {}) },
      });
    }
    // Not an MCP error: the answer did not parse or did not match the protocol. The server is restarted.
    this.#markFailed();
    const message = error instanceof Error ? error.message : String(error);
    return new ToolError(
      'mcp_protocol_error',
      `MCP server "${this.config.name}" answered something that is not MCP: ${message.slice(0, 500)}`,
      {
        retryable: true,
        details: base,
      },
    );
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(new ToolError('aborted', 'the call was cancelled while the MCP server restarted'));
      },
      { once: true },
    );
  });
}
