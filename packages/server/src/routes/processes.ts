import { z } from 'zod';
import { Id, type Route, route } from '../route.js';

/**
 * The standard's process commands for people and clients (docs/commands.md "Feeding and stopping a process by
 * hand"): a request recorded on the process's thread, carried out by the runtime process that runs it.
 */

const Text = z.string();
const ProcessParams = z.object({ sessionId: Id, processId: Id });
const WaitMs = z
  .number()
  .int()
  .min(0)
  .max(600_000)
  .optional()
  .describe('how long to wait for the runtime running the process to act (default 10000; 0: do not wait)');

const Answer = z.object({
  sessionId: z.string(),
  threadId: z.string(),
  processId: z.string(),
  requestId: z.string(),
  status: z.enum(['written', 'terminated', 'ended', 'refused', 'requested']),
  eventId: z.string().optional(),
  bytes: z.number().optional(),
  exitCode: z.number().nullable().optional(),
  signal: z.string().nullable().optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
});

const DESCRIPTION =
  'The answer says what the runtime running the process did: `written`, `terminated`, `ended` (it ended otherwise first), `refused` (its input is closed), or `requested` (nobody acted within waitMs: the request stays on record until the process`s runtime acts, or the process is recorded as ended or lost). An unknown process, or one whose end is recorded, is `process_not_found` (404).';

export const processRoutes: Route[] = [
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/processes/{processId}/stdin',
      operationId: 'writeProcessStdin',
      summary: "Write to a running background process's standard input (and optionally close it)",
      description: DESCRIPTION,
      tag: 'sessions',
      scope: 'operator',
      params: ProcessParams,
      body: z.strictObject({
        input: Text.max(100_000).optional(),
        closeStdin: z.boolean().optional(),
        reason: Text.max(1_000).optional(),
        waitMs: WaitMs,
      }),
      conflicts: true,
      response: Answer,
    },
    async ({ c, deps, key, params, body }) =>
      deps.runtime.writeProcessStdin(
        { ...body, ...params, ...(key ? { requestedBy: `api_key:${key.keyId}` } : {}) },
        { signal: c.req.raw.signal },
      ),
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/processes/{processId}/terminate',
      operationId: 'terminateProcess',
      summary: 'Stop a running process (its whole group: SIGTERM, grace, SIGKILL)',
      description: `${DESCRIPTION} A foreground command's tool call then fails with \`process_terminated\`.`,
      tag: 'sessions',
      scope: 'operator',
      params: ProcessParams,
      body: z.strictObject({ reason: Text.max(1_000).optional(), waitMs: WaitMs }),
      response: Answer,
    },
    async ({ c, deps, key, params, body }) =>
      deps.runtime.terminateProcess(
        { ...body, ...params, ...(key ? { requestedBy: `api_key:${key.keyId}` } : {}) },
        { signal: c.req.raw.signal },
      ),
  ),
];
