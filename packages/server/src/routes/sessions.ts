import {
  ACTION_DECISIONS,
  ExecutionEnvironmentSchema,
  SessionSnapshotSchema,
  ThreadReadModelSchema,
} from '@oar/protocol';
import { BindingUpdateSchema, MAX_TURN_ATTACHMENTS, TurnAttachmentInputSchema } from '@oar/runtime';
import { z } from 'zod';
import { httpError } from '../errors.js';
import { Accepted, Cursor, Id, type Route, route, SessionParams, SessionSummary } from '../route.js';
import { ToolMessageSchema, toolMessagesUpTo } from '../tool-messages.js';

/**
 * The session routes: the runtime's control-plane commands and queries as resources under
 * `/v1/sessions/{sessionId}`. Each handler checks that the key's workspace owns the session, then calls the one
 * runtime method that does the work; the runtime validates again and records the facts.
 */

const Text = z.string();

const CreateSessionBody = z
  .strictObject({
    title: Text.max(1_000).optional(),
    sessionId: Id.optional().describe(
      'the id to give the session; in a named workspace it gets the prefix `WORKSPACE:` unless it has it already',
    ),
    agent: Id.optional(),
    /** Admin keys only: a binding can widen what the session may touch (its workspace root, its tools). */
    binding: BindingUpdateSchema.optional(),
  })
  .default({});

const SubmitTurnBody = z.strictObject({
  input: Text.min(1),
  threadId: Id.optional(),
  /** A client turn id: submitting the same id again returns the first submission (`duplicate: true`). */
  turnId: Id.optional(),
  ifBusy: z.enum(['enqueue', 'reject', 'interrupt']).optional(),
  source: Text.max(64).optional(),
  /** Files for the turn ({name, mimeType?, text | base64}); the body limit (`maxBodyBytes`) bounds them all. */
  attachments: z.array(TurnAttachmentInputSchema).max(MAX_TURN_ATTACHMENTS).optional(),
});

const SubmitTurnResult = z.object({
  sessionId: z.string(),
  threadId: z.string(),
  turnId: z.string(),
  status: z.enum(['accepted', 'queued']),
  duplicate: z.boolean(),
});

export const sessionRoutes: Route[] = [
  route(
    {
      method: 'get',
      path: '/v1/sessions',
      operationId: 'listSessions',
      summary: "The workspace's sessions, newest first",
      tag: 'sessions',
      scope: 'viewer',
      query: z.object({
        q: Text.max(200).optional().describe('only sessions whose title or id contains this text (any case)'),
        limit: z.coerce.number().int().min(1).max(1000).default(100),
      }),
      response: z.object({ sessions: z.array(SessionSummary) }),
    },
    async ({ deps, key, query }) => {
      const all = await deps.runtime.listSessions({ workspaceId: key?.workspaceId });
      const needle = query.q?.toLowerCase();
      const sessions = needle
        ? all.filter((s) => s.sessionId.toLowerCase().includes(needle) || s.title?.toLowerCase().includes(needle))
        : all;
      return { sessions: sessions.slice(0, query.limit) };
    },
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions',
      operationId: 'createSession',
      summary: 'Create a session (and its main thread) in the key’s workspace',
      tag: 'sessions',
      scope: 'operator',
      body: CreateSessionBody,
      status: 201,
      conflicts: true,
      response: z.object({
        sessionId: z.string(),
        threadId: z.string(),
        bindingHash: z.string(),
        workspaceId: z.string(),
      }),
    },
    async ({ deps, key, body }) => {
      if (body.binding && key?.scope !== 'admin') {
        throw httpError('forbidden', 'only an admin key may give a new session its own binding', {
          details: { required: 'admin', scope: key?.scope },
        });
      }
      // The key that creates a session is the authority it acts for (a business tool's credential names it).
      return deps.runtime.createSession({
        ...body,
        ...(key ? { workspaceId: key.workspaceId, actor: `api_key:${key.keyId}` } : {}),
      });
    },
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}',
      operationId: 'getSession',
      summary: 'The durable session snapshot and a window of its history, recent first',
      description:
        '`snapshot` is the session as of event `sequence`, with `historySummary` (how many events there are). `events` is a window of at most `limit`: the most recent events by default; with `before`, the events just before that sequence (pass `previousCursor` back as `before` for the next older page: null at the first event), and `window`, that page as a `history.window.loaded` event — live-only: a read appends nothing; with `cursor`, the events after it (forward, `nextCursor` continues).',
      tag: 'sessions',
      scope: 'viewer',
      params: SessionParams,
      query: z.object({
        cursor: Cursor.optional(),
        before: Cursor.optional(),
        limit: z.coerce.number().int().min(0).max(1000).default(100),
      }),
      response: z.object({
        snapshot: SessionSnapshotSchema,
        sequence: z.number(),
        events: z.array(z.looseObject({ type: z.string(), sequence: z.number() })),
        nextCursor: z.number(),
        previousCursor: z.number().nullable(),
        window: z
          .looseObject({ type: z.literal('history.window.loaded'), sequence: z.number() })
          .optional()
          .describe('with `before`: the page as a live-only `history.window.loaded` event (never in the log)'),
      }),
    },
    async ({ deps, params, query }) => {
      return deps.runtime.getSession({
        sessionId: params.sessionId,
        ...(query.cursor !== undefined ? { cursor: query.cursor } : {}),
        ...(query.before !== undefined ? { before: query.before } : {}),
        limit: query.limit,
      });
    },
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/history',
      operationId: 'getSessionAt',
      summary: 'The session snapshot as it was right after event `at` (time travel), with its tool messages',
      description:
        'Rebuilt from the log’s first `at` events by the same reducers that build the stored read models. `messages` are the tool messages (`role: "tool"`) of the business-tool calls that ended by event `at` (a `tool.result` / `tool.failed` that recorded a ToolAgentOutput), oldest first: `content` is the string the model saw (the JSON text projection of the call’s result or error) and `ui_schema` (ui_schema v1, `oar schema ui`) is the call’s tool UI, compiled from its stored UI hints when the history is read — so a newer codec re-renders old messages. UI hints themselves are internal and never returned.',
      tag: 'sessions',
      scope: 'viewer',
      params: SessionParams,
      query: z.object({ at: Cursor }),
      response: z.object({
        snapshot: SessionSnapshotSchema,
        sequence: z.number(),
        messages: z.array(ToolMessageSchema),
      }),
    },
    async ({ deps, params, query }) => {
      const [snapshot, messages] = await Promise.all([
        deps.runtime.snapshotAt({ sessionId: params.sessionId, at: query.at }),
        toolMessagesUpTo((page) => deps.runtime.queries.readEvents(params.sessionId, page), query.at),
      ]);
      return { ...snapshot, messages };
    },
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/fork',
      operationId: 'forkSession',
      summary: "A new session whose history is this one's up to event `at` (default: its last)",
      description:
        "The fork has its own id (in the same workspace), the binding in force at that event, and the artifacts the copied history refers to (under new ids). What was in progress there goes on in the fork alone: a question waits for its answer, a call that was running is re-run if idempotent and `lost` otherwise. The source is not touched. Its last event is `session.updated` with `forkedFrom`. Thread and process ids are the fork's own (`threads` maps the source's to the fork's).",
      tag: 'sessions',
      scope: 'operator',
      params: SessionParams,
      body: z.strictObject({
        at: z.number().int().min(1).optional(),
        forkId: Id.optional(),
        title: Text.max(500).optional(),
      }),
      status: 201,
      conflicts: true,
      response: z.object({
        sessionId: z.string(),
        forkedFrom: z.object({ sessionId: z.string(), sequence: z.number(), eventId: z.string() }),
        events: z.number(),
        artifacts: z.number(),
        threads: z.record(z.string(), z.string()).describe("the fork's thread for each thread of the source"),
      }),
    },
    async ({ deps, params, body }) => deps.runtime.forkSession({ ...body, sessionId: params.sessionId }),
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/binding',
      operationId: 'getBinding',
      summary: "The session's recorded binding and its hash",
      tag: 'sessions',
      scope: 'viewer',
      params: SessionParams,
      response: z.looseObject({ bindingHash: z.string().optional() }),
    },
    async ({ deps, params }) => {
      return (await deps.runtime.getBinding(params.sessionId)) ?? {};
    },
  ),
  route(
    {
      method: 'patch',
      path: '/v1/sessions/{sessionId}/binding',
      operationId: 'updateBinding',
      summary: "Change the session's binding (effective from its next turn)",
      tag: 'sessions',
      scope: 'admin',
      params: SessionParams,
      body: BindingUpdateSchema,
      conflicts: true,
      response: z.object({ bindingHash: z.string(), changed: z.array(z.string()) }),
    },
    async ({ deps, params, body }) => {
      return deps.runtime.updateBinding({ sessionId: params.sessionId, update: body });
    },
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/turns',
      operationId: 'submitTurn',
      summary: 'Submit a turn (idempotent with a client turnId)',
      description:
        'When the thread is running another turn, `ifBusy` decides: `enqueue` (default: the turn waits in the queue), `reject` (409 `thread_busy` naming the running turn) or `interrupt` (the new turn goes first and the running one is cancelled). The turn runs on the server’s worker; follow it on the event stream.',
      tag: 'turns',
      scope: 'operator',
      params: SessionParams,
      body: SubmitTurnBody,
      status: 202,
      conflicts: true,
      response: SubmitTurnResult,
    },
    async ({ deps, params, body }) => {
      return deps.runtime.submitTurn({ sessionId: params.sessionId, ...body });
    },
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/interrupt',
      operationId: 'interruptTurn',
      summary: 'Interrupt the running turn of a thread (default: the main thread)',
      tag: 'turns',
      scope: 'operator',
      params: SessionParams,
      body: z
        .strictObject({
          threadId: Id.optional(),
          reason: Text.max(1_000).optional(),
          waitMs: z.number().int().min(0).max(30_000).optional(),
        })
        .default({}),
      response: z.object({
        interrupted: z.boolean(),
        turnId: z.string().optional(),
        status: z.enum(['cancelled', 'requested', 'ended']).optional(),
      }),
    },
    async ({ deps, params, body }) => {
      return deps.runtime.interruptTurn({ sessionId: params.sessionId, ...body });
    },
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/resume',
      operationId: 'resumeSession',
      summary: 'Resume unfinished work after a restart (completed actions never run again)',
      tag: 'turns',
      scope: 'operator',
      params: SessionParams,
      response: z.object({ sessionId: z.string(), driven: z.boolean() }),
    },
    async ({ deps, params }) => {
      return deps.runtime.resume(params.sessionId);
    },
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/threads/{threadId}/resume',
      operationId: 'resumeThread',
      summary: 'Resume a thread: a worker looks at it now; where it stands, and what happened since a resume token',
      description:
        'Give back the `resumeToken` of an earlier answer: `since` and `missedEvents` say how much of the thread happened after it (read them with `GET …/events?after={since}&threadId=`). `heldBy` names the worker driving it now.',
      tag: 'turns',
      scope: 'operator',
      params: z.object({ sessionId: Id, threadId: Id }),
      body: z.strictObject({ resumeToken: Text.max(64).optional() }).default({}),
      response: z.object({
        sessionId: z.string(),
        threadId: z.string(),
        status: z.string(),
        activeTurnId: z.string().optional(),
        heldBy: z.object({ owner: z.string(), expiresAt: z.string() }).optional(),
        resumeToken: z.string(),
        since: z.number().int().optional(),
        missedEvents: z.number().int().optional(),
        driven: z.boolean(),
      }),
    },
    async ({ deps, params, body }) => deps.runtime.resumeThread({ ...params, ...body }),
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/actions/{actionId}/decision',
      operationId: 'respondAction',
      summary:
        'Answer a pending decision (approve, deny, approve_for_session) or a lost action (happened, not_happened, retry)',
      description:
        "`actionId` is the id of the decision (the `actionId` of its `action.required` event). An ask-user question takes its answer as `payload.text`. A lost action (`unreconciledActions` of its thread, `GET /v1/decisions` `unreconciled`) takes `happened`, `not_happened` or `retry`; `payload` is then recorded as the evidence, and `retry` answers the new turn's `turnId` and `runId`.",
      tag: 'decisions',
      scope: 'operator',
      params: z.object({ sessionId: Id, actionId: Id }),
      body: z.strictObject({
        decision: z.enum(ACTION_DECISIONS),
        reason: Text.max(2_000).optional(),
        payload: z.record(z.string(), z.unknown()).optional(),
      }),
      conflicts: true,
      response: z.object({
        threadId: z.string(),
        decision: z.enum(ACTION_DECISIONS),
        turnId: z.string().optional(),
        runId: z.string().optional(),
      }),
    },
    async ({ deps, key, params, body }) => {
      return deps.runtime.respondAction({
        sessionId: params.sessionId,
        actionId: params.actionId,
        ...body,
        // Who decided, as the log should say it: the key, by id (never the key itself).
        ...(key ? { resolvedBy: `api_key:${key.keyId}` } : {}),
      });
    },
  ),
  route(
    {
      method: 'delete',
      path: '/v1/sessions/{sessionId}/threads/{threadId}/queue/{turnId}',
      operationId: 'removeQueuedTurn',
      summary: 'Remove a queued turn',
      tag: 'turns',
      scope: 'operator',
      params: z.object({ sessionId: Id, threadId: Id, turnId: Id }),
      conflicts: true,
      response: Accepted,
    },
    async ({ deps, params }) => {
      await deps.runtime.removeQueuedTurn(params);
      return { removed: params.turnId };
    },
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/threads/{threadId}/queue/{turnId}/promote',
      operationId: 'promoteQueuedTurn',
      summary: 'Move a queued turn to the front of its queue',
      tag: 'turns',
      scope: 'operator',
      params: z.object({ sessionId: Id, threadId: Id, turnId: Id }),
      conflicts: true,
      response: Accepted,
    },
    async ({ deps, params }) => {
      await deps.runtime.promoteQueuedTurn(params);
      return { promoted: params.turnId };
    },
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/threads/{threadId}',
      operationId: 'getThreadRead',
      summary: "A thread's read model: status, turns, pending decisions, queue, incidents",
      tag: 'sessions',
      scope: 'viewer',
      params: z.object({ sessionId: Id, threadId: Id }),
      response: ThreadReadModelSchema,
    },
    async ({ deps, params }) => {
      return deps.runtime.getThreadRead(params);
    },
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/tools',
      operationId: 'getToolInventory',
      summary: 'The tools and agents the session may use, and the permission mode',
      tag: 'sessions',
      scope: 'viewer',
      params: SessionParams,
      query: z.object({ threadId: Id.optional() }),
      response: z.looseObject({ mode: z.string(), tools: z.array(z.looseObject({ name: z.string() })) }),
    },
    async ({ deps, params, query }) => {
      return deps.runtime.getToolInventory({ sessionId: params.sessionId, ...query });
    },
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/environment',
      operationId: 'getExecutionEnvironment',
      summary: "Where the session's work runs: workspace, variables by name, process limits, live processes",
      description:
        'The standard’s execution environment snapshot. Environment variables are listed by name only, never a value; the processes are those the session’s commands started and are not known to have ended (of one thread with `threadId`).',
      tag: 'sessions',
      scope: 'viewer',
      params: SessionParams,
      query: z.object({ threadId: Id.optional() }),
      response: ExecutionEnvironmentSchema,
    },
    async ({ deps, params, query }) => {
      return deps.runtime.getExecutionEnvironment({ sessionId: params.sessionId, ...query });
    },
  ),
];
