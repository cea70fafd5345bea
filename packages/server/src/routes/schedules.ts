import { CATCH_UP_POLICIES, OVERLAP_POLICIES } from '@oar/runtime';
import { z } from 'zod';
import { ownSession } from '../auth.js';
import { httpError } from '../errors.js';
import { NoQuery, type Route, route } from '../route.js';

/**
 * The schedule routes (docs/schedules.md): agents on a timetable, under `/v1/schedules`. A key reaches its own
 * workspace's schedules only (another workspace's is 404), and the sessions its firings create belong to it.
 * Bodies are checked whole by the runtime (config/schedules.ts), which names the field of a bad cron, time zone or
 * binding; the schemas here document them.
 */

const ScheduleParams = z.object({ scheduleId: z.string().min(1).max(64) });

const Start = z
  .looseObject({
    kind: z.enum(['turn', 'session', 'job']),
    sessionId: z.string().optional().describe('kind turn: the session the turn runs in'),
    input: z.string().optional().describe('kind turn and session: the turn`s text'),
    title: z.string().optional(),
    agent: z.string().optional(),
    items: z.array(z.unknown()).optional().describe('kind job: the items'),
    prompt: z.string().optional().describe('kind job: the prompt template'),
    name: z.string().optional(),
    policy: z.record(z.string(), z.unknown()).optional(),
  })
  .describe('what a firing starts: a turn in a session, a new session, or a job');

const CreateScheduleBody = z.strictObject({
  scheduleId: z.string().optional().describe('1-64 letters, digits, `_`, `.`, `:` or `-`; generated when absent'),
  cron: z.string().describe('five fields (minute first) or six (second first)'),
  timezone: z.string().optional().describe('an IANA time zone; default UTC'),
  start: Start,
  binding: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('changes to the binding of the sessions firings create: permissions, agents, limits'),
  budget: z.record(z.string(), z.unknown()).optional().describe('the budgets of each firing`s session'),
  catchUp: z.enum(CATCH_UP_POLICIES).optional(),
  overlap: z.enum(OVERLAP_POLICIES).optional(),
  paused: z.boolean().optional(),
});

const Firing = z.looseObject({
  scheduleId: z.string(),
  fireAt: z.string(),
  status: z.enum(['claimed', 'started', 'queued', 'skipped', 'failed']),
  started: z
    .looseObject({ sessionId: z.string(), threadId: z.string().optional(), turnId: z.string().optional() })
    .optional(),
  reason: z.string().optional(),
});

const Schedule = z.looseObject({
  scheduleId: z.string(),
  cron: z.string(),
  timezone: z.string().optional(),
  start: Start,
  catchUp: z.enum(CATCH_UP_POLICIES),
  overlap: z.enum(OVERLAP_POLICIES),
  paused: z.boolean(),
  source: z.enum(['config', 'api']),
  nextFirings: z.array(z.string()),
  lastFirings: z.array(Firing),
});

const scoped = (key: { workspaceId: string } | undefined) => (key ? { workspaceId: key.workspaceId } : {});

export const scheduleRoutes: Route[] = [
  route(
    {
      method: 'post',
      path: '/v1/schedules',
      operationId: 'createSchedule',
      summary: 'Add a schedule: a cron expression, what each firing starts, and the binding its sessions run under',
      description:
        'Each firing happens once, whatever the number of workers. `binding` and `budget` need an admin key (as a new session`s binding does). A bad cron or time zone is 400 `invalid_input` naming the field; a taken id is 409 `schedule_exists`.',
      tag: 'schedules',
      scope: 'operator',
      body: CreateScheduleBody,
      status: 201,
      conflicts: true,
      response: Schedule,
    },
    async ({ deps, key, body }) => {
      // As for a new session (`createSession`): its own binding — a permission policy, budgets — is an admin's call.
      if ((body.binding || body.budget) && key?.scope !== 'admin') {
        throw httpError('forbidden', 'only an admin key may give a schedule`s sessions their own binding or budget', {
          details: { required: 'admin', scope: key?.scope },
        });
      }
      if (body.start.kind === 'turn' && typeof body.start.sessionId === 'string') {
        await ownSession(deps, key, body.start.sessionId);
      }
      return deps.runtime.schedules.add({ ...body, ...scoped(key) } as Parameters<
        typeof deps.runtime.schedules.add
      >[0]);
    },
  ),
  route(
    {
      method: 'get',
      path: '/v1/schedules',
      operationId: 'listSchedules',
      summary: 'The schedules, with their next cron times and last firing',
      tag: 'schedules',
      scope: 'viewer',
      query: NoQuery,
      response: z.object({ schedules: z.array(Schedule) }),
    },
    async ({ deps, key }) => ({ schedules: await deps.runtime.schedules.list(scoped(key)) }),
  ),
  route(
    {
      method: 'get',
      path: '/v1/schedules/{scheduleId}',
      operationId: 'getSchedule',
      summary: 'A schedule with its next cron times and last firings (what each started, or why it was skipped)',
      tag: 'schedules',
      scope: 'viewer',
      params: ScheduleParams,
      query: NoQuery,
      response: Schedule,
    },
    async ({ deps, key, params }) => deps.runtime.schedules.get({ scheduleId: params.scheduleId, ...scoped(key) }),
  ),
  route(
    {
      method: 'post',
      path: '/v1/schedules/{scheduleId}/pause',
      operationId: 'pauseSchedule',
      summary: 'Pause a schedule: no firing until it is resumed (work already started goes on)',
      tag: 'schedules',
      scope: 'operator',
      params: ScheduleParams,
      response: Schedule,
    },
    async ({ deps, key, params }) => deps.runtime.schedules.pause({ scheduleId: params.scheduleId, ...scoped(key) }),
  ),
  route(
    {
      method: 'post',
      path: '/v1/schedules/{scheduleId}/resume',
      operationId: 'resumeSchedule',
      summary: 'Resume a paused schedule: its next firing is its first cron time from now',
      tag: 'schedules',
      scope: 'operator',
      params: ScheduleParams,
      response: Schedule,
    },
    async ({ deps, key, params }) => deps.runtime.schedules.resume({ scheduleId: params.scheduleId, ...scoped(key) }),
  ),
  route(
    {
      method: 'delete',
      path: '/v1/schedules/{scheduleId}',
      operationId: 'deleteSchedule',
      summary: 'Remove a schedule and its firing records (what its firings started stays)',
      tag: 'schedules',
      scope: 'operator',
      params: ScheduleParams,
      response: z.object({ scheduleId: z.string(), removed: z.literal(true) }),
    },
    async ({ deps, key, params }) => deps.runtime.schedules.remove({ scheduleId: params.scheduleId, ...scoped(key) }),
  ),
];
