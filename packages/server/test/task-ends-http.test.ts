import type { RuntimeEvent, Task } from '@oar/protocol';
import { type AnyTool, defineTool, type ModelScript, ToolRegistry } from '@oar/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type TestServer, testServer, until } from './support.js';

/**
 * A task's cancel and archive over HTTP (docs/tasks.md), through a real server on a real socket: `cancelTask` asks
 * running work to stop (`cancelling`, then `cancelled` once it did) and reaches descendants with `propagate`;
 * `updateTask {archived: true}` files an ended task away — out of `listTasks`, whole through `getTask`.
 */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

const NO_RATE_LIMIT = { rateLimit: { perMinute: 60_000, burst: 1_000 } };
const tasksOf = (sessionId: string) => `/v1/sessions/${sessionId}/tasks`;

/** A tool that blocks interrupts (it finishes its work first) and finishes when the test releases it. */
function gate(): { tool: AnyTool; release: () => void } {
  let release: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    release = resolve;
  });
  const tool = defineTool<{ label: string }>({
    name: 'gate',
    description: 'Waits until the test opens it.',
    input: z.strictObject({ label: z.string() }),
    isReadOnly: false,
    isConcurrencySafe: false,
    isDestructive: false,
    isIdempotent: true,
    interruptBehavior: 'block',
    capabilities: ['write'],
    async execute(input) {
      await opened;
      return { text: `opened ${input.label}` };
    },
  });
  return { tool, release };
}

const SCRIPT = {
  steps: [
    { protocol: { kind: 'act', calls: [{ id: 'g', type: 'tool', name: 'gate', args: { label: 'g' } }] } },
    { protocol: { kind: 'answer', message: 'unused' } },
  ],
} as ModelScript;

interface ErrorBody {
  error: { code: string; message: string; retryable: boolean };
}

function expectError(response: { status: number; body: unknown }, status: number, code: string): void {
  const body = response.body as ErrorBody;
  expect([response.status, body.error?.code], JSON.stringify(body)).toEqual([status, code]);
  expect(body.error).toMatchObject({ code, message: expect.any(String), retryable: false });
}

describe('cancelTask and archiving over HTTP', () => {
  it('cancels a running task (cancelling, then cancelled) with its children, then archives it', async () => {
    const { tool, release } = gate();
    t = await testServer({
      serve: NO_RATE_LIMIT,
      script: SCRIPT,
      runtime: { tools: new ToolRegistry([tool]), permissions: { mode: 'bypass' } },
    });
    const server = t;
    const { sessionId } = (await server.json<{ sessionId: string }>('POST', '/v1/sessions', { body: {} })).body;
    const create = (body: object) => server.json('POST', tasksOf(sessionId), { body });
    const post = <T>(taskId: string, path: string, body?: object) =>
      server.json<T>('POST', `${tasksOf(sessionId)}/${taskId}/${path}`, body ? { body } : {});
    const get = (taskId: string) => server.json<Task>('GET', `${tasksOf(sessionId)}/${taskId}`);
    await create({ taskId: 'lead', objective: 'Lead the work' });
    await create({ taskId: 'help', objective: 'Help', parentTaskId: 'lead', assignee: { kind: 'external' } });
    expect((await post('help', 'start')).status).toBe(200);
    const lead = await post<{ threadId: string }>('lead', 'start');
    await until(async () => {
      const page = await server.json<{ events: RuntimeEvent[] }>(
        'GET',
        `/v1/sessions/${sessionId}/events?type=tool.started&threadId=${lead.body.threadId}`,
      );
      return page.body.events.length > 0;
    });

    // A task not ended cannot be archived.
    expectError(
      await server.json('PATCH', `${tasksOf(sessionId)}/lead`, { body: { archived: true } }),
      409,
      'task_not_ended',
    );
    const cancel = await post<Record<string, unknown>>('lead', 'cancel', { reason: 'scrapped', propagate: 'children' });
    expect(cancel.status).toBe(200);
    expect(cancel.body).toEqual({
      taskId: 'lead',
      status: 'cancelling',
      interrupted: true,
      tasks: [
        { taskId: 'lead', status: 'cancelling' },
        { taskId: 'help', status: 'cancelled' },
        expect.objectContaining({ status: 'cancelling' }),
      ],
    });
    expect((await get('lead')).body).toMatchObject({ status: 'cancelling', statusReason: 'scrapped' });
    expectError(await post('lead', 'pause'), 409, 'task_cancelling');

    // The work stops once the tool (which blocks interrupts) has finished: then the task is cancelled.
    release();
    await until(async () => (await get('lead')).body.status === 'cancelled', 15_000);
    const page = await server.json<{ events: RuntimeEvent[] }>('GET', `/v1/sessions/${sessionId}/events?limit=1000`);
    const leadFacts = page.body.events.filter((e) => e.taskId === 'lead').map((e) => e.type);
    expect(leadFacts.indexOf('task.cancel_requested')).toBeLessThan(leadFacts.indexOf('task.cancelled'));

    // Archived: out of the list, listed with archived=1, whole by id.
    const archived = await server.json('PATCH', `${tasksOf(sessionId)}/lead`, { body: { archived: true } });
    expect(archived.body).toEqual({ taskId: 'lead', changed: ['archived'] });
    expectError(
      await server.json('PATCH', `${tasksOf(sessionId)}/lead`, { body: { archived: true, title: 'x' } }),
      400,
      'invalid_input',
    );
    const listed = await server.json<{ tasks: Task[] }>('GET', tasksOf(sessionId));
    expect(listed.body.tasks.map((x) => x.taskId)).not.toContain('lead');
    const all = await server.json<{ tasks: Task[] }>('GET', `${tasksOf(sessionId)}?archived=1`);
    expect(all.body.tasks.find((x) => x.taskId === 'lead')).toMatchObject({
      status: 'archived',
      archivedFrom: 'cancelled',
    });
    expect((await get('lead')).body).toMatchObject({ status: 'archived', archivedFrom: 'cancelled' });
    expectError(await post('lead', 'retry'), 409, 'task_not_retryable');
    expectError(await post('nope', 'cancel'), 404, 'task_not_found');
  });
});
