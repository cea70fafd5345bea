import { z } from 'zod';
import { Accepted, Id, type Route, route, SessionParams } from '../route.js';

/**
 * The sub-agent routes (docs/engine.md "Sub-agents"): the standard's sub-agent commands under
 * `/v1/sessions/{sessionId}/subagents`, each operation named after its command (`spawn_subagent` → `spawnSubagent`).
 */

const Text = z.string();
const SubagentParams = z.object({ sessionId: Id, subagentId: Id });
const IfBusy = z.enum(['enqueue', 'reject', 'interrupt']);

const Subagent = z.looseObject({
  subagentId: z.string(),
  agent: z.string(),
  childThreadId: z.string(),
  parentThreadId: z.string(),
  status: z.string(),
});

export const subagentRoutes: Route[] = [
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/subagents',
      operationId: 'listSubagents',
      summary: 'The sub-agents (child threads) of the session, with their parent thread and status',
      tag: 'tasks',
      scope: 'viewer',
      params: SessionParams,
      query: z.object({ threadId: Id.optional() }),
      response: z.object({ subagents: z.array(Subagent) }),
    },
    async ({ deps, params, query }) => {
      return { subagents: await deps.runtime.listSubagents({ sessionId: params.sessionId, ...query }) };
    },
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/subagents',
      operationId: 'spawnSubagent',
      summary: 'Start a sub-agent: a child thread of an agent under a parent thread, with its first turn',
      tag: 'tasks',
      scope: 'operator',
      params: SessionParams,
      body: z.strictObject({
        agent: Id,
        input: Text.min(1).max(100_000),
        threadId: Id.optional().describe('the parent thread (default: the main thread)'),
        title: Text.max(500).optional(),
        subagentId: Id.optional().describe('the same id on the same parent again returns the first (`duplicate`)'),
      }),
      status: 201,
      conflicts: true,
      response: z.object({
        subagentId: z.string(),
        childThreadId: z.string(),
        turnId: z.string(),
        duplicate: z.boolean(),
      }),
    },
    async ({ deps, params, body }) => deps.runtime.spawnSubagent({ ...body, sessionId: params.sessionId }),
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/subagents/wait',
      operationId: 'waitSubagents',
      summary: 'Wait until the sub-agents stopped working (or the timeout passed); their status then',
      description:
        'Without `subagentIds` (comma-separated): those working when the wait began (of `threadId`, else of the session). `timedOut` says whether the wait ran out first; the request holds the connection up to `timeoutMs` (default 30 s, at most 600 s); a client that hangs up ends the wait.',
      tag: 'tasks',
      scope: 'viewer',
      params: SessionParams,
      query: z.object({
        subagentIds: z.string().max(10_000).optional(),
        threadId: Id.optional(),
        timeoutMs: z.coerce.number().int().min(0).max(600_000).optional(),
      }),
      response: z.object({ subagents: z.array(Subagent), timedOut: z.boolean() }),
    },
    async ({ c, deps, params, query }) =>
      deps.runtime.waitSubagents(
        {
          sessionId: params.sessionId,
          ...(query.subagentIds ? { subagentIds: query.subagentIds.split(',').filter(Boolean) } : {}),
          ...(query.threadId ? { threadId: query.threadId } : {}),
          ...(query.timeoutMs !== undefined ? { timeoutMs: query.timeoutMs } : {}),
        },
        // A client that hangs up ends the wait (nothing holds a listener for it until the timeout).
        { signal: c.req.raw.signal },
      ),
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/subagents/{subagentId}/input',
      operationId: 'sendSubagentInput',
      summary: 'Give a sub-agent another turn (recorded on its parent as subagent.input)',
      tag: 'tasks',
      scope: 'operator',
      params: SubagentParams,
      body: z.strictObject({ input: Text.min(1).max(100_000), ifBusy: IfBusy.optional() }),
      status: 202,
      conflicts: true,
      response: Accepted,
    },
    async ({ deps, params, body }) => deps.runtime.sendSubagentInput({ ...params, ...body }),
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/subagents/{subagentId}/close',
      operationId: 'closeSubagent',
      summary: 'Close a sub-agent (its running turn is interrupted; its child thread takes no more turns)',
      tag: 'tasks',
      scope: 'operator',
      params: SubagentParams,
      body: z.strictObject({ reason: Text.max(1_000).optional() }).default({}),
      conflicts: true,
      response: Accepted,
    },
    async ({ deps, params, body }) => (await deps.runtime.closeSubagent({ ...params, ...body })) ?? {},
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/subagents/{subagentId}/resume',
      operationId: 'resumeSubagent',
      summary: 'Reopen a closed sub-agent, optionally with a turn to work on',
      tag: 'tasks',
      scope: 'operator',
      params: SubagentParams,
      body: z
        .strictObject({ input: Text.min(1).max(100_000).optional(), reason: Text.max(1_000).optional() })
        .default({}),
      conflicts: true,
      response: z.object({ subagentId: z.string(), childThreadId: z.string(), turnId: z.string().optional() }),
    },
    async ({ deps, params, body }) => deps.runtime.resumeSubagent({ ...params, ...body }),
  ),
];
