import {
  type RuntimeEvent,
  TOOL_CALL_STATUSES,
  ToolAgentOutputSchema,
  toolAgentProjection,
  UiSchemaSchema,
  uiSchemaOfToolAgentOutput,
} from '@oar/protocol';
import { z } from 'zod';

/**
 * The tool messages of a session's history (Agent Tool Protocol §9): one per business-tool call whose ending event
 * (`tool.result` / `tool.failed`) recorded a `ToolAgentOutput` at `payload.toolAgentOutput`. `content` is the
 * string the model saw — the JSON text projection of the record's `result` (or its structured error) — and
 * `ui_schema` is compiled from the record's stored `ui_hints` when the history is read, never stored: a newer codec
 * re-renders old messages. The hints themselves are internal and never returned.
 */
export const ToolMessageSchema = z.object({
  role: z.literal('tool'),
  /** The same id as the AG-UI tool message of this call (`<toolCallId>.result`). */
  messageId: z.string(),
  /** The call (`ToolAgentOutput.tool_call_id`, the ending event's `toolCallId`). */
  toolCallId: z.string(),
  /** The tool (`ToolAgentOutput.tool_name`, e.g. `project_cli`). */
  toolName: z.string(),
  status: z.enum(TOOL_CALL_STATUSES),
  /** What the model saw, as a string (never the structured record). */
  content: z.string(),
  /** The compiled tool UI (ui_schema v1, `oar schema ui`); absent when the call has no UI hints. */
  ui_schema: UiSchemaSchema.optional(),
  /** The ending event. */
  sequence: z.number(),
  timestamp: z.string().optional(),
  threadId: z.string().optional(),
  turnId: z.string().optional(),
  runId: z.string().optional(),
  /** The graph action the call ran for. */
  graphActionId: z.string().optional(),
});
export type ToolMessage = z.infer<typeof ToolMessageSchema>;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

/** The tool message of one event, or undefined when the event is not the end of a call with a ToolAgentOutput. */
export function toolMessageOf(event: RuntimeEvent): ToolMessage | undefined {
  if (event.type !== 'tool.result' && event.type !== 'tool.failed') return undefined;
  const payload: Record<string, unknown> = isRecord(event.payload) ? event.payload : {};
  const record = payload.toolAgentOutput;
  if (!isRecord(record)) return undefined;
  const toolCallId = str(record.tool_call_id) ?? str(event.toolCallId);
  if (!toolCallId) return undefined;
  const parsed = ToolAgentOutputSchema.safeParse(record);
  const status =
    TOOL_CALL_STATUSES.find((s) => s === record.status) ?? (event.type === 'tool.failed' ? 'failure' : 'success');
  const observation = isRecord(payload.observation) ? payload.observation : {};
  const content = parsed.success
    ? toolAgentProjection(parsed.data)
    : (str(observation.content) ?? str(payload.summary) ?? JSON.stringify({ status }));
  const uiSchema = uiSchemaOfToolAgentOutput({ ...record, tool_call_id: toolCallId, status });
  return {
    role: 'tool',
    messageId: `${toolCallId}.result`,
    toolCallId,
    toolName: str(record.tool_name) ?? str(payload.toolName) ?? 'tool',
    status,
    content,
    ...(uiSchema ? { ui_schema: uiSchema } : {}),
    sequence: event.sequence,
    ...(str(event.timestamp) ? { timestamp: event.timestamp } : {}),
    ...(str(event.threadId) ? { threadId: event.threadId } : {}),
    ...(str(event.turnId) ? { turnId: event.turnId } : {}),
    ...(str(event.runId) ? { runId: event.runId } : {}),
    ...(str(payload.graphActionId) ? { graphActionId: str(payload.graphActionId) } : {}),
  };
}

const PAGE = 1000;

/** The tool messages of a session up to event `at` (inclusive), oldest first, read from the log a page at a time. */
export async function toolMessagesUpTo(
  read: (options: { after: number; limit: number }) => Promise<RuntimeEvent[]>,
  at: number,
): Promise<ToolMessage[]> {
  const messages: ToolMessage[] = [];
  let after = 0;
  while (after < at) {
    const page = await read({ after, limit: PAGE });
    for (const event of page) {
      if (event.sequence > at) return messages;
      const message = toolMessageOf(event);
      if (message) messages.push(message);
    }
    const last = page.at(-1);
    if (!last || page.length < PAGE) break;
    after = last.sequence;
  }
  return messages;
}
