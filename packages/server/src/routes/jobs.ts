import { JobCountsSchema, JobPolicySchema } from '@oar/protocol';
import { JobStateSchema, StartJobInputSchema } from '@oar/runtime';
import { z } from 'zod';
import { ownSession } from '../auth.js';
import { httpError } from '../errors.js';
import { Id, NoQuery, type Route, route } from '../route.js';

/**
 * The job routes (docs/jobs.md): the standard's `list_jobs`, `get_job` and `cancel_job`, and OAR's `startJob` and
 * `retryJob`, under `/v1/jobs`. A key reaches its own workspace's jobs only: another workspace's job is 404.
 */

const JobParams = z.object({ jobId: Id });
const Job = JobStateSchema.extend({ counts: JobCountsSchema });
const JobSummary = Job.omit({ items: true });

const StartJobBody = StartJobInputSchema.omit({ requestedBy: true, workspaceId: true }).extend({
  items: z.array(z.unknown()).describe('the items: JSON objects (their fields fill the prompt) or strings'),
  prompt: z.string().describe('`{{field}}` is the item`s field, `{{item}}` the whole item, `{{index}}` its number'),
  policy: JobPolicySchema.partial().strict().optional(),
});

export const jobRoutes: Route[] = [
  route(
    {
      method: 'post',
      path: '/v1/jobs',
      operationId: 'startJob',
      summary: 'Start a job: a batch of items, one prompt template, a policy',
      description:
        'Each item runs as turns of a thread of its own in the job`s session (`sessionId`, or a new session of the key`s workspace with `binding` as its changes — an admin key`s only: the job`s own budgets and permission policy), at most `policy.concurrency` at once; a failed item is tried again after its backoff up to `policy.maxAttempts`. Answers the job as it started (`getJob` follows it).',
      tag: 'jobs',
      scope: 'operator',
      body: StartJobBody,
      status: 201,
      response: Job,
    },
    async ({ deps, key, body }) => {
      // As for a new session (`createSession`): its own binding — a permission policy, budgets — is an admin's call.
      if (body.binding && key?.scope !== 'admin') {
        throw httpError('forbidden', 'only an admin key may give a job`s new session its own binding', {
          details: { required: 'admin', scope: key?.scope },
        });
      }
      if (body.sessionId) await ownSession(deps, key, body.sessionId);
      return deps.runtime.jobs.start({
        ...body,
        ...(key ? { workspaceId: key.workspaceId, requestedBy: `api_key:${key.keyId}` } : {}),
      } as Parameters<typeof deps.runtime.jobs.start>[0]);
    },
  ),
  route(
    {
      method: 'get',
      path: '/v1/jobs',
      operationId: 'listJobs',
      summary: 'The jobs, newest first, with their counts (without their items)',
      tag: 'jobs',
      scope: 'viewer',
      query: z.object({
        sessionId: Id.optional(),
        status: z.enum(['running', 'completed', 'failed', 'cancelled']).optional(),
        limit: z.coerce.number().int().min(1).max(1_000).optional(),
      }),
      response: z.object({ jobs: z.array(JobSummary) }),
    },
    async ({ deps, key, query }) =>
      deps.runtime.jobs.list({ ...query, ...(key ? { workspaceId: key.workspaceId } : {}) }),
  ),
  route(
    {
      method: 'get',
      path: '/v1/jobs/{jobId}',
      operationId: 'getJob',
      summary: 'A job: its policy, counts and every item with its thread, attempts and outcome',
      tag: 'jobs',
      scope: 'viewer',
      params: JobParams,
      query: NoQuery,
      response: Job,
    },
    async ({ deps, key, params }) =>
      deps.runtime.jobs.get({ jobId: params.jobId, ...(key ? { workspaceId: key.workspaceId } : {}) }),
  ),
  route(
    {
      method: 'post',
      path: '/v1/jobs/{jobId}/cancel',
      operationId: 'cancelJob',
      summary: 'Cancel a job: its running items stop as an interrupt stops them, the rest never start',
      description: 'A job already over is answered as it is.',
      tag: 'jobs',
      scope: 'operator',
      params: JobParams,
      body: z.strictObject({ reason: z.string().max(1_000).optional() }).default({}),
      response: Job,
    },
    async ({ deps, key, params, body }) =>
      deps.runtime.jobs.cancel({
        jobId: params.jobId,
        ...body,
        ...(key ? { workspaceId: key.workspaceId } : {}),
      }),
  ),
  route(
    {
      method: 'post',
      path: '/v1/jobs/{jobId}/retry',
      operationId: 'retryJob',
      summary: 'Run a finished job`s failed and cancelled items again, each with a fresh round of attempts',
      description: 'A running job is 409 `job_running`; one with nothing to run again 409 `job_nothing_to_retry`.',
      tag: 'jobs',
      scope: 'operator',
      params: JobParams,
      conflicts: true,
      response: Job,
    },
    async ({ deps, key, params }) =>
      deps.runtime.jobs.retry({ jobId: params.jobId, ...(key ? { workspaceId: key.workspaceId } : {}) }),
  ),
];
