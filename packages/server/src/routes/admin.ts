import {
  ApiKeyRecordSchema,
  ApiKeyScopeSchema,
  DEFAULT_WORKSPACE,
  notFound,
  WorkspaceIdSchema,
  WorkspaceSchema,
} from '@oar/runtime';
import { z } from 'zod';
import { managesWorkspace } from '../auth.js';
import { httpError } from '../errors.js';
import { Id, type Route, route } from '../route.js';

/**
 * Workspaces and API keys, for admin keys. An admin key of the default workspace manages every workspace; an
 * admin key of another workspace manages that workspace's keys only (another workspace is 404 to it). A key is in
 * the response of its creation and nowhere else, ever.
 */

const KeyCreated = z.object({
  key: z.string().describe('the API key: shown once, store it now'),
  record: ApiKeyRecordSchema,
});

export const adminRoutes: Route[] = [
  route(
    {
      method: 'get',
      path: '/v1/workspaces',
      operationId: 'listWorkspaces',
      summary: 'The workspaces this admin key manages',
      tag: 'admin',
      scope: 'admin',
      response: z.object({ workspaces: z.array(WorkspaceSchema) }),
    },
    async ({ deps, key }) => ({
      workspaces: (await deps.workspaces.list()).filter((w) => managesWorkspace(key, w.workspaceId)),
    }),
  ),
  route(
    {
      method: 'post',
      path: '/v1/workspaces',
      operationId: 'createWorkspace',
      summary: 'Create a workspace (admin keys of the default workspace)',
      tag: 'admin',
      scope: 'admin',
      body: z.strictObject({ name: z.string().min(1).max(200), workspaceId: WorkspaceIdSchema.optional() }),
      status: 201,
      conflicts: true,
      response: WorkspaceSchema,
    },
    async ({ deps, key, body }) => {
      if (key?.workspaceId !== DEFAULT_WORKSPACE) {
        throw httpError('forbidden', 'only admin keys of the default workspace create workspaces');
      }
      return deps.workspaces.create(body);
    },
  ),
  route(
    {
      method: 'get',
      path: '/v1/keys',
      operationId: 'listKeys',
      summary: "API keys (never the keys themselves): the key's workspace, or `workspaceId` for another",
      tag: 'admin',
      scope: 'admin',
      query: z.object({ workspaceId: Id.optional() }),
      response: z.object({ keys: z.array(ApiKeyRecordSchema) }),
    },
    async ({ deps, key, query }) => {
      const workspaceId = query.workspaceId ?? key?.workspaceId ?? DEFAULT_WORKSPACE;
      if (!managesWorkspace(key, workspaceId)) throw notFound('workspace', workspaceId);
      return { keys: await deps.workspaces.listKeys(workspaceId) };
    },
  ),
  route(
    {
      method: 'post',
      path: '/v1/keys',
      operationId: 'createKey',
      summary: 'Create an API key; the response is the only time the key is shown',
      tag: 'admin',
      scope: 'admin',
      body: z.strictObject({
        name: z.string().min(1).max(200),
        scope: ApiKeyScopeSchema,
        workspaceId: Id.optional(),
        expiresAt: z.iso.datetime({ offset: true }).optional(),
      }),
      status: 201,
      response: KeyCreated,
    },
    async ({ deps, key, body }) => {
      const workspaceId = body.workspaceId ?? key?.workspaceId ?? DEFAULT_WORKSPACE;
      if (!managesWorkspace(key, workspaceId)) throw notFound('workspace', workspaceId);
      return deps.workspaces.createKey({ ...body, workspaceId });
    },
  ),
  route(
    {
      method: 'delete',
      path: '/v1/keys/{keyId}',
      operationId: 'revokeKey',
      summary: 'Revoke an API key: it stops working at once',
      tag: 'admin',
      scope: 'admin',
      params: z.object({ keyId: Id }),
      response: ApiKeyRecordSchema,
    },
    async ({ deps, key, params }) => {
      // An admin of the default workspace revokes any key; another admin only its workspace's (else 404).
      const scope = key?.workspaceId === DEFAULT_WORKSPACE ? undefined : key?.workspaceId;
      return deps.workspaces.revokeKey(params.keyId, scope);
    },
  ),
];
