import { join } from 'node:path';
import type { AgentRunResult, Runner } from '@oar/runner-sdk';
import { afterEach, describe, expect, it } from 'vitest';
import { packageProcess, readRunnerPackage, runnerEnv } from '../../src/agent-runners/packages.js';
import {
  inProcessTransport,
  processTransport,
  type RunnerConnection,
  type RunnerTransport,
} from '../../src/agent-runners/transport.js';

/**
 * One protocol suite, three runners: the SDK runner as a child process on stdio and in-process over the same framed
 * wire, and the Python runner (stdlib only, examples/runners/python-echo) as a child process. Streams arrive in order and end once; frames larger than the line limit travel in parts;
 * at most 128 requests are in flight each way while 300 are asked (backpressure, none refused); a cancel reaches
 * the runner.
 */

const SUITE = join(import.meta.dirname, '../fixtures/runners/suite');
const { runner } = (await import(join(SUITE, 'runner.mjs'))) as { runner: Runner };

const PYTHON = join(import.meta.dirname, '../../../../examples/runners/python-echo');

async function packageTransport(dir: string): Promise<RunnerTransport> {
  const pkg = await readRunnerPackage(dir);
  if ('reason' in pkg) throw new Error(pkg.reason);
  return processTransport(packageProcess(pkg, runnerEnv([], process.env)));
}

/** Each transport with the runner it carries: the SDK runner as a process and in-process, the Python runner. */
const transports: [string, () => Promise<RunnerTransport>, string][] = [
  ['process', () => packageTransport(SUITE), 'plugin:test/suite/echo'],
  ['in-process', async () => inProcessTransport(runner), 'plugin:test/suite/echo'],
  ['python process', () => packageTransport(PYTHON), 'plugin:oar/python-echo/echo'],
];

const open: RunnerConnection[] = [];
afterEach(async () => {
  for (const c of open.splice(0)) await c.close(100);
});

function context(mode: string) {
  return {
    run_id: 'run_suite',
    trigger: { type: 'message.received', source: 'api' },
    event: { event_id: 'e1', event_type: 'message.received', source: 'test' },
    input: { text: 'hi' },
    delivery: { surface: 'test' },
    resources: {},
    context: { inline_policy: { mode: 'none' }, available_apis: {} },
    state: {},
    runtime: { trace_id: 't1', deadline_at: Date.now() / 1000 + 60 },
    config: { mode },
  };
}

describe.each(transports)('the runner transport (%s)', (_name, make, runnerId) => {
  let inFlight = 0;
  let maxInFlight = 0;
  async function connect(): Promise<RunnerConnection> {
    const connection = await (await make()).connect(async (_method, params) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise((resolve) => setTimeout(resolve, 2));
      inFlight--;
      return (params as { payload: unknown }).payload;
    });
    open.push(connection);
    return connection;
  }
  const run = async (connection: RunnerConnection, mode: string) => {
    const results: AgentRunResult[] = [];
    await connection.peer.request(
      'RUN_AGENT',
      { runner_id: runnerId, runner_name: 'echo', context: context(mode) },
      { onChunk: (chunk) => results.push(chunk as AgentRunResult) },
    );
    return results;
  };

  it('lists the runners', async () => {
    const answer = (await (await connect()).peer.request('LIST_AGENT_RUNNERS', {})) as { runners: { id: string }[] };
    expect(answer.runners.map((r) => r.id)).toEqual([runnerId]);
  });

  it('streams results in order, then ends once', async () => {
    const results = await run(await connect(), 'stream');
    expect(results.map((r) => r.sequence)).toEqual(results.map((_, i) => i));
    expect(results.at(-1)?.type).toBe('run.completed');
    expect(
      results
        .slice(0, -1)
        .map((r) => (r.data.chunk as { content: string }).content)
        .join(''),
    ).toBe(Array.from({ length: 50 }, (_, i) => `${i},`).join(''));
  });

  it('carries frames larger than the line limit in parts, both ways', async () => {
    const results = await run(await connect(), 'big');
    expect(((results[0]?.data.message ?? {}) as { content: string }).content).toBe('1200000');
  });

  it('keeps at most 128 requests in flight and answers all 300', async () => {
    maxInFlight = 0;
    const results = await run(await connect(), 'parallel');
    expect(((results[0]?.data.message ?? {}) as { content: string }).content).toBe('300');
    expect(maxInFlight).toBeLessThanOrEqual(128);
    expect(maxInFlight).toBeGreaterThan(1);
  });

  it('delivers a cancel to the run', async () => {
    const connection = await connect();
    const results = run(connection, 'wait_cancel');
    await new Promise((resolve) => setTimeout(resolve, 200));
    await connection.peer.request('CANCEL_AGENT_RUN', { run_id: 'run_suite' });
    const ended = await results;
    expect(ended.at(-1)).toMatchObject({ type: 'run.failed', data: { code: 'cancelled' } });
  });
});
