import { z } from 'zod';
import { aguiCapabilities } from '../agui/capabilities.js';
import { RunAgentInputSchema } from '../agui/input.js';
import { type AguiStreamOptions, aguiStream, prepareAguiRun } from '../agui/stream.js';
import { type Route, route, SessionParams } from '../route.js';

/**
 * AG-UI 1.0 (https://docs.ag-ui.com): an AG-UI client's `HttpAgent` pointed at `/v1/agui` runs OAR turns. The body
 * is a `RunAgentInput`; the answer is an SSE stream of AG-UI events projected from the turn's runtime events (see
 * agui/projector.ts for the mapping, docs/http-api.md "AG-UI" for the contract). Errors found before the stream
 * starts are JSON errors like any route's; later ones are RUN_ERROR events with an OAR error code.
 */

const Capabilities = z.looseObject({}).describe('AG-UI 1.0 AgentCapabilities');

const RUN_DESCRIPTION =
  'Answers `text/event-stream`: RUN_STARTED, STATE_SNAPSHOT, then the turn as AG-UI 1.0 events (TEXT_MESSAGE_*, TOOL_CALL_*, TOOL_CALL_RESULT, STEP_*, SUBAGENT_*, STATE_DELTA), and RUN_FINISHED with `outcome` success, cancelled or interrupt (one interrupt per pending decision) — or RUN_ERROR with an OAR error code. Without `resume`, the last user message is submitted as a turn whose id is `runId` (a retried POST streams the same turn again); with `resume`, the entries answer the pending decisions (`payload`: `{decision, reason?, text?}`, `cancelled` = deny) and the stream follows the turn that waited.';

export function aguiRoutes(options: AguiStreamOptions): Route[] {
  return [
    route(
      {
        method: 'post',
        path: '/v1/agui',
        operationId: 'aguiRun',
        summary: 'Run an AG-UI 1.0 agent: RunAgentInput in, AG-UI events out (SSE); threadId is the session id',
        description: `${RUN_DESCRIPTION} The session \`threadId\` is created in the key’s workspace when it does not exist; another workspace’s session is 404.`,
        tag: 'agui',
        scope: 'operator',
        body: RunAgentInputSchema,
        produces: 'sse',
        conflicts: true,
      },
      async ({ c, deps, key, body }) => {
        const target = await prepareAguiRun(deps, key, body);
        return aguiStream(c, deps, key, body, target, options);
      },
    ),
    route(
      {
        method: 'post',
        path: '/v1/sessions/{sessionId}/agui',
        operationId: 'aguiRunSession',
        summary: 'Run an AG-UI 1.0 agent on this session (the input’s threadId is only echoed)',
        description: RUN_DESCRIPTION,
        tag: 'agui',
        scope: 'operator',
        params: SessionParams,
        body: RunAgentInputSchema,
        produces: 'sse',
        conflicts: true,
      },
      async ({ c, deps, key, params, body }) => {
        const target = await prepareAguiRun(deps, key, body, params.sessionId);
        return aguiStream(c, deps, key, body, target, options);
      },
    ),
    route(
      {
        method: 'get',
        path: '/v1/agui/capabilities',
        operationId: 'aguiCapabilities',
        summary: 'The agent’s AG-UI 1.0 capabilities (what `getCapabilities()` returns)',
        tag: 'agui',
        scope: 'viewer',
        response: Capabilities,
      },
      async ({ deps }) => aguiCapabilities(deps),
    ),
    route(
      {
        method: 'get',
        path: '/v1/sessions/{sessionId}/agui/capabilities',
        operationId: 'aguiSessionCapabilities',
        summary: 'The AG-UI 1.0 capabilities of this session’s binding (its tools and sub-agents)',
        tag: 'agui',
        scope: 'viewer',
        params: SessionParams,
        response: Capabilities,
      },
      async ({ deps, params }) => aguiCapabilities(deps, params.sessionId),
    ),
  ];
}
