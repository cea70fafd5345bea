import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { McpServerConfig } from '../../config/mcp.js';
import { ToolError } from '../../kernel/errors.js';
import type { AnyTool, ToolContext, ToolFacts, ToolOutput } from '../tool.js';
import { MAX_PROGRESS_EXTENSION, type McpConnection } from './connection.js';

/**
 * The `_meta` key of an MCP tool call's idempotency key (the same for the same attempt of one call): a server that
 * must not act twice can deduplicate by it (docs/mcp.md).
 */
export const MCP_IDEMPOTENCY_KEY = 'oar/idempotencyKey';

/**
 * An MCP server's tools as OAR tools: named `server.tool`, their input validated against the server's JSON Schema
 * (converted once to zod, so a call is checked like any tool's before it is gated), their annotations turned
 * into the facts the scheduler and the permission policy use, and every content type of a result kept.
 */

/** The name a server's tool has in the inventory. */
export function mcpToolName(server: string, tool: string): string {
  return `${server}.${tool}`;
}

/**
 * The facts of a tool from its annotations, as the MCP spec defines their defaults: not read-only, destructive
 * unless it says otherwise, not idempotent. A server whose annotations are not trusted gets the cautious facts.
 * Whether the server deduplicates by key is the config's word (`idempotentByKey`), not an annotation's.
 */
export function mcpFacts(tool: Tool, config: Pick<McpServerConfig, 'trustAnnotations' | 'idempotentByKey'>): ToolFacts {
  const hints = config.trustAnnotations ? (tool.annotations ?? {}) : {};
  const isReadOnly = hints.readOnlyHint === true;
  const isIdempotent = isReadOnly || hints.idempotentHint === true;
  const byKey =
    config.idempotentByKey === true ||
    (Array.isArray(config.idempotentByKey) && config.idempotentByKey.includes(tool.name));
  return {
    isReadOnly,
    // A read-only tool may run beside other reads; anything else takes the write lock.
    isConcurrencySafe: isReadOnly,
    isDestructive: !isReadOnly && hints.destructiveHint !== false,
    isIdempotent,
    ...(byKey && !isIdempotent ? { isIdempotentByKey: true } : {}),
    interruptBehavior: 'cancel',
  };
}

/** The zod form of a tool's input schema; a schema zod cannot express is refused (the tool is not offered). */
export function mcpInputSchema(server: string, tool: Tool): z.ZodType<Record<string, unknown>> {
  try {
    return z.fromJSONSchema(tool.inputSchema as Parameters<typeof z.fromJSONSchema>[0]) as z.ZodType<
      Record<string, unknown>
    >;
  } catch (error) {
    throw new ToolError(
      'invalid_tool_schema',
      `The input schema of MCP tool "${mcpToolName(server, tool.name)}" cannot be used: ${(error as Error).message}`,
      { details: { server, tool: tool.name } },
    );
  }
}

export function mcpTool(config: McpServerConfig, connection: McpConnection, tool: Tool): AnyTool {
  const name = mcpToolName(config.name, tool.name);
  const facts = mcpFacts(tool, config);
  const description = [tool.title && tool.title !== tool.name ? tool.title : undefined, tool.description]
    .filter(Boolean)
    .join(': ');
  return {
    name,
    description: `${description || `MCP tool ${tool.name}`} (MCP server "${config.name}")`,
    input: mcpInputSchema(config.name, tool),
    ...facts,
    capabilities: ['mcp', `mcp:${config.name}`, ...(facts.isReadOnly ? ['read'] : ['write'])],
    // The server's limits apply inside the call (timeoutMs, extended by progress up to MAX_PROGRESS_EXTENSION times);
    // this is the runtime's bracket around them, a little longer, so the call's own timeout is what is reported.
    timeoutMs: config.timeoutMs * MAX_PROGRESS_EXTENSION + 1_000,
    // The facts of the tool as the server describes it now: a `list_changed` that changes its annotations applies
    // to the next call even of a tool object already in a running step's hands.
    factsOf: () => {
      const current = connection.tools.tools.find((t) => t.name === tool.name);
      return current ? mcpFacts(current, config) : facts;
    },
    async execute(input, context) {
      const meta = context.idempotencyKey ? { [MCP_IDEMPOTENCY_KEY]: context.idempotencyKey } : undefined;
      const result = await connection.callTool(tool.name, input, context.signal, meta);
      return mcpOutput(config.name, tool.name, result, context.recorder);
    },
  };
}

/**
 * A call's result as a tool output: the text parts are the text (what the result policy shapes for the model);
 * every other part — an image, audio, an embedded resource, a resource link — and `structuredContent` become
 * artifacts with their MIME types, each named in the text so the model can ask for it. `isError` is the tool's
 * own failure: `mcp_tool_error` with its text.
 */
export async function mcpOutput(
  server: string,
  tool: string,
  result: CallToolResult,
  recorder: ToolContext['recorder'],
): Promise<ToolOutput> {
  const texts: string[] = [];
  const artifacts: McpArtifact[] = [];
  const content = Array.isArray(result.content) ? result.content : [];
  for (const [i, part] of content.entries()) {
    const base = `${server}.${tool}/${i}`;
    switch (part.type) {
      case 'text':
        texts.push(part.text);
        break;
      case 'image':
      case 'audio':
        artifacts.push({ name: `${base}.${part.type}`, mime: part.mimeType, bytes: Buffer.from(part.data, 'base64') });
        break;
      case 'resource': {
        const resource = part.resource;
        const mime = resource.mimeType ?? ('text' in resource ? 'text/plain' : 'application/octet-stream');
        artifacts.push(
          'text' in resource && typeof resource.text === 'string'
            ? { name: `${base}.resource`, mime, text: resource.text, uri: resource.uri }
            : {
                name: `${base}.resource`,
                mime,
                bytes: Buffer.from('blob' in resource ? String(resource.blob) : '', 'base64'),
                uri: resource.uri,
              },
        );
        break;
      }
      case 'resource_link':
        artifacts.push({
          name: `${base}.link`,
          mime: 'application/json',
          text: JSON.stringify({
            uri: part.uri,
            name: part.name,
            ...(part.mimeType ? { mimeType: part.mimeType } : {}),
            ...(part.description ? { description: part.description } : {}),
          }),
          uri: part.uri,
        });
        break;
      default:
        texts.push(`[unsupported MCP content: ${JSON.stringify(part).slice(0, 200)}]`);
    }
  }
  const structured =
    result.structuredContent && typeof result.structuredContent === 'object'
      ? (result.structuredContent as Record<string, unknown>)
      : undefined;
  if (structured) {
    artifacts.push({
      name: `${server}.${tool}/structured.json`,
      mime: 'application/json',
      text: JSON.stringify(structured),
    });
  }
  // Each stored whole, with its MIME type; the text names it (so the model can expand it) and says what it is.
  for (const artifact of artifacts) {
    const { uri, ...content } = artifact;
    const size = content.bytes?.length ?? Buffer.byteLength(content.text ?? '');
    const from = uri ? ` from ${uri}` : '';
    if (!recorder) {
      texts.push(`[${content.mime}${from}, ${size} bytes: not stored (this call has no artifact store)]`);
      continue;
    }
    const stored = await recorder.artifact(content);
    texts.push(`[${content.mime}${from}, ${stored.size} bytes: ${stored.uri}]`);
  }
  const text = texts.join('\n');
  if (result.isError) {
    throw new ToolError('mcp_tool_error', text || `MCP tool "${server}.${tool}" reported an error`, {
      details: { server, tool },
    });
  }
  return { text, ...(structured ? { structured } : {}) };
}

/** A part of a result kept as an artifact. */
interface McpArtifact {
  name: string;
  mime: string;
  text?: string;
  bytes?: Uint8Array;
  uri?: string;
}
