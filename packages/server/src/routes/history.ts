import { z } from 'zod';
import { Id, type Route, route, SessionParams } from '../route.js';

/**
 * A thread's history rolled back to a turn boundary (`rollbackThread`, docs/engine.md "Rolling back a thread") and
 * the versions OAR's file tools kept (`getArtifactCheckpoints`, the standard's artifact_checkpoint_summary).
 */

const Bag = z.record(z.string(), z.unknown());
const Version = z.object({ sha256: z.string(), size: z.number() }).passthrough();

export const historyRoutes: Route[] = [
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/rollback',
      operationId: 'rollbackThread',
      summary: 'Return a thread to the boundary before one of its turns, with the files OAR wrote',
      description:
        'The turns from `turnId` on leave the transcript and the read models (the log keeps them; `history.rollback.started` / `.completed` record what was removed). Files OAR`s write and edit changed in them go back to their content before (`files: keep` leaves them). A file changed outside OAR since is a conflict (409 `rollback_conflict`, its details list the files): nothing is changed. `dryRun` answers the plan without recording or writing anything. The thread must be idle (409 `thread_busy`).',
      tag: 'sessions',
      scope: 'operator',
      params: SessionParams,
      body: z.strictObject({
        turnId: Id,
        threadId: Id.optional(),
        files: z.enum(['restore', 'keep']).optional(),
        dryRun: z.boolean().optional(),
      }),
      conflicts: true,
      response: z.object({
        status: z.enum(['completed', 'planned']),
        sessionId: z.string(),
        threadId: z.string(),
        rollbackId: z.string().optional(),
        targetTurnId: z.string(),
        keptThroughTurnId: z.string().nullable(),
        removedTurns: z.array(z.string()),
        files: z.array(
          z.object({
            path: z.string(),
            action: z.enum(['restore', 'delete', 'unchanged', 'keep']),
            fromVersion: z.number(),
            throughVersion: z.number(),
            beforeRef: z.string().optional(),
          }),
        ),
        conflicts: z.array(Bag),
        affected: Bag,
        compactionCleared: z.string().optional(),
        sequence: z.number().optional(),
      }),
    },
    async ({ deps, key, params, body }) =>
      deps.runtime.rollbackThread({
        ...body,
        sessionId: params.sessionId,
        ...(key ? { requestedBy: `api_key:${key.keyId}` } : {}),
      }),
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/artifact-checkpoints',
      operationId: 'getArtifactCheckpoints',
      summary: 'The files OAR`s write and edit changed, each with its versions',
      description:
        'Per file: every version with the call that made it (thread, turn, tool call), the ref of the content before it (an artifact: read it with getArtifact) and the digests before and after. `before` is absent where the call created the file; `before.restorable: false` where it could not be kept exactly (redacted, too large).',
      tag: 'artifacts',
      scope: 'viewer',
      params: SessionParams,
      query: z.object({ threadId: Id.optional() }),
      response: z.object({
        sessionId: z.string(),
        threadId: z.string().optional(),
        sequence: z.number(),
        versionCount: z.number(),
        files: z.array(z.object({ path: z.string(), versions: z.array(Bag), latest: Version.nullable() })),
      }),
    },
    async ({ deps, params, query }) =>
      deps.runtime.getArtifactCheckpoints({
        sessionId: params.sessionId,
        ...(query.threadId ? { threadId: query.threadId } : {}),
      }),
  ),
];
