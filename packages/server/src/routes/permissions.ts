import { z } from 'zod';
import { Id, type Route, route, SessionParams } from '../route.js';

/**
 * The standard's permission commands (docs/permissions.md "Permission commands"): how the policy would judge a
 * call now (`evaluatePermission`), and the answer to a pending tool approval (`resolvePermission`).
 */

const Text = z.string();

export const permissionRoutes: Route[] = [
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/permissions/evaluate',
      operationId: 'evaluatePermission',
      summary: 'How the policy would judge a call of a bound tool now; recorded as permission.evaluated',
      description:
        'Judged as the executor would judge it (the session binding, its grants, the workspace); nothing runs and before-call hooks are not run. Recorded on the thread`s running turn, else its last one; a thread without a turn answers with `recorded.eventId: null`.',
      tag: 'decisions',
      scope: 'operator',
      params: SessionParams,
      body: z.strictObject({
        toolName: Id,
        input: z.record(z.string(), z.unknown()).optional(),
        threadId: Id.optional(),
        turnId: Id.optional(),
      }),
      response: z.object({
        sessionId: z.string(),
        threadId: z.string(),
        decision: z.enum(['allow', 'ask', 'deny']),
        evaluation: z.record(z.string(), z.unknown()),
        recorded: z.object({
          eventId: z.string().nullable(),
          turnId: z.string().optional(),
          reason: z.string().optional(),
        }),
      }),
    },
    async ({ deps, key, params, body }) =>
      deps.runtime.evaluatePermission({
        ...body,
        sessionId: params.sessionId,
        ...(key ? { requestedBy: `api_key:${key.keyId}` } : {}),
      }),
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/permissions/{actionId}/resolve',
      operationId: 'resolvePermission',
      summary: 'Answer a pending tool approval: allow (once or for the session) or deny',
      description:
        '`actionId` is the pending approval`s (its `permission.requested` / `action.required`). A question is answered with respondAction (`not_a_permission_request`, 409). Records `permission.resolved` and `action.resolved` with who resolved it.',
      tag: 'decisions',
      scope: 'operator',
      params: z.object({ sessionId: Id, actionId: Id }),
      body: z.strictObject({
        decision: z.enum(['allow', 'deny']),
        scope: z.enum(['once', 'session']).optional(),
        reason: Text.max(1_000).optional(),
      }),
      conflicts: true,
      response: z.object({
        sessionId: z.string(),
        threadId: z.string(),
        actionId: z.string(),
        decision: z.enum(['allow', 'deny']),
        scope: z.enum(['once', 'session']),
        toolName: z.string().optional(),
      }),
    },
    async ({ deps, key, params, body }) =>
      deps.runtime.resolvePermission({
        ...body,
        ...params,
        ...(key ? { resolvedBy: `api_key:${key.keyId}` } : {}),
      }),
  ),
];
