import { z } from 'zod';

/**
 * AG-UI 1.0 `RunAgentInput` as the server validates it (the wire shape of `@ag-ui/core`'s type): `threadId`,
 * `runId` and `messages` are required, the rest optional. Objects are loose — a newer client's extra fields are
 * kept, not refused — but every field OAR reads is typed. The OpenAPI document is generated from this schema.
 */

const AguiId = z.string().min(1).max(256);

const ContentPart = z.looseObject({ type: z.string(), text: z.string().optional() });

export const AguiMessageSchema = z.looseObject({
  id: z.string().min(1).max(256),
  role: z.string().min(1).max(32),
  content: z.union([z.string(), z.array(ContentPart), z.record(z.string(), z.unknown())]).optional(),
});

export const AguiResumeEntrySchema = z.looseObject({
  interruptId: AguiId.describe('the id of the interrupt answered: the decision id (`actionId`)'),
  status: z.enum(['resolved', 'cancelled']).describe('`cancelled` is answered as deny'),
  payload: z
    .unknown()
    .optional()
    .describe(
      '`{"decision": "approve"|"deny"|"approve_for_session", "reason"?, "text"?}`; `text` answers an ask-user question; a lost action takes `"happened"|"not_happened"|"retry"`',
    ),
  metadata: z.record(z.string(), z.unknown()).optional(),
});

export const RunAgentInputSchema = z.looseObject({
  threadId: AguiId.describe(
    'the OAR session id (in a named workspace with its prefix, `WORKSPACE:THREAD`; `POST /v1/agui` creates the session when it does not exist)',
  ),
  runId: AguiId.describe('the client turn id: a retried POST with the same runId streams the same turn again'),
  protocolVersion: z.string().max(32).optional(),
  parentRunId: z.string().max(256).optional(),
  state: z.unknown().optional().describe('ignored: the state is the thread read model, owned by the server'),
  messages: z.array(AguiMessageSchema).max(10_000),
  tools: z.array(z.looseObject({ name: z.string() })).optional(),
  context: z.array(z.looseObject({ description: z.string(), value: z.string() })).optional(),
  forwardedProps: z.unknown().optional(),
  resume: z.array(AguiResumeEntrySchema).max(1_000).optional(),
});

export type RunAgentInputBody = z.infer<typeof RunAgentInputSchema>;
export type ResumeEntryBody = z.infer<typeof AguiResumeEntrySchema>;

/** The text of a message's content: a string as is, the text parts of a parts list joined. */
export function messageText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .flatMap((part) =>
      typeof part === 'object' && part !== null && (part as { type?: unknown }).type === 'text'
        ? [String((part as { text?: unknown }).text ?? '')]
        : [],
    )
    .join('');
}

/** The turn input of a run: the last user message's text (undefined when there is none, or it is empty). */
export function lastUserText(input: RunAgentInputBody): string | undefined {
  for (let i = input.messages.length - 1; i >= 0; i--) {
    const message = input.messages[i];
    if (message?.role !== 'user') continue;
    const text = messageText(message.content);
    return text.trim() === '' ? undefined : text;
  }
  return undefined;
}

/** `forwardedProps.oar.ifBusy`: what a submitted turn does when the session is running another one. */
export function ifBusyOf(input: RunAgentInputBody): 'enqueue' | 'reject' | 'interrupt' | undefined {
  const oar = (input.forwardedProps as { oar?: { ifBusy?: unknown } } | undefined)?.oar;
  const ifBusy = oar?.ifBusy;
  return ifBusy === 'enqueue' || ifBusy === 'reject' || ifBusy === 'interrupt' ? ifBusy : undefined;
}
