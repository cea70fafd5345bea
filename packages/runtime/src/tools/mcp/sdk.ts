/**
 * The MCP SDK, loaded on the first connection to an MCP server rather than with the runtime: it and what it pulls in
 * (ajv, jose, zod-to-json-schema) are about a fifth of the runtime's import, which every `oar` process that never
 * talks to an MCP server would otherwise pay.
 */
async function load() {
  const [client, stdio, http, types] = await Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]);
  return {
    Client: client.Client,
    StdioClientTransport: stdio.StdioClientTransport,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
    McpError: types.McpError,
    ErrorCode: types.ErrorCode,
    ToolListChangedNotificationSchema: types.ToolListChangedNotificationSchema,
  };
}

export type McpSdk = Awaited<ReturnType<typeof load>>;

let loading: Promise<McpSdk> | undefined;

export function mcpSdk(): Promise<McpSdk> {
  loading ??= load();
  return loading;
}
