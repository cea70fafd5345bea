import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import type { JobView } from '@oar/runtime';
import { describe, expect, it } from 'vitest';
import { ndjson, oarIn, outputOf, spawnOar, tempDir, writeJson } from './cli-helpers.js';

/**
 * `oar jobs` through the real binary (issue 30 §1, docs/jobs.md): the standard's acceptance scenario 17 (job item
 * retry) end to end, the job commands, and a job whose process is killed -9 half-way finished by `oar resume` with
 * every item done exactly once.
 */

const step = (fails: string[], delayMs?: number) => ({
  protocol: { kind: 'answer', message: 'handled' },
  ...(delayMs ? { delayMs } : {}),
  ...(fails.length
    ? {
        alternatives: fails.map((word) => ({
          ifPrompt: word,
          error: { message: `cannot handle ${word}`, statusCode: 400 },
        })),
      }
    : {}),
});

function project(steps: unknown[], items: unknown[]): string {
  const cwd = tempDir('oar-jobs-');
  writeJson(cwd, 'script.json', { steps });
  writeJson(cwd, 'oar.config.json', { model: 'script:script.json' });
  writeFileSync(join(cwd, 'items.jsonl'), `${items.map((item) => JSON.stringify(item)).join('\n')}\n`);
  return cwd;
}

const jsonOf = <T>(stdout: string) => JSON.parse(stdout) as T;

function events(cwd: string, sessionId: string): RuntimeEvent[] {
  const run = oarIn(cwd, ['events', sessionId, '--json']);
  expect(run.code, run.stderr).toBe(0);
  return ndjson(run.stdout) as unknown as RuntimeEvent[];
}

describe('oar jobs', () => {
  it('acceptance scenario 17: job item retry — a failed item is retried with its attempts visible, retry_job re-runs only the failed', () => {
    const cwd = project(
      [step(['BAD', 'FLAKY']), step(['BAD']), step(['BAD']), step(['BAD'])],
      [{ name: 'alpha' }, { name: 'FLAKY' }, { name: 'BAD' }, { name: 'delta' }],
    );
    const start = ['jobs', 'start', '--items', 'items.jsonl', '--prompt', 'Handle {{name}}', '--name', 'demo'];
    const run = oarIn(cwd, [...start, '--max-attempts', '2', '--backoff-ms', '50', '--concurrency', '2', '--json']);
    // A job with an item that failed every attempt ends failed: exit 1, the others' work kept.
    expect(run.code, run.stderr).toBe(1);
    const job = jsonOf<JobView>(run.stdout);
    expect(job).toMatchObject({ name: 'demo', status: 'failed', reason: 'items_failed' });
    expect(job.items.map((i) => [i.status, i.attempts])).toEqual([
      ['completed', 1],
      ['completed', 2],
      ['failed', 2],
      ['completed', 1],
    ]);
    // Each attempt is visible: a failed one says whether another follows; the retry's turn waited out its backoff.
    const log = events(cwd, job.sessionId);
    const attempts = log
      .filter((e) => e.type.startsWith('job.item.'))
      .map((e) => [e.type, (e.payload as { index: number }).index, (e.payload as { attempt: number }).attempt]);
    expect(attempts.filter(([, index]) => index === 1)).toEqual([
      ['job.item.started', 1, 1],
      ['job.item.failed', 1, 1],
      ['job.item.started', 1, 2],
      ['job.item.completed', 1, 2],
    ]);
    const retried = log.find(
      (e) =>
        e.type === 'job.item.started' &&
        (e.payload as { attempt: number; index: number }).index === 1 &&
        (e.payload as { attempt: number }).attempt === 2,
    ) as RuntimeEvent;
    expect((retried.payload as { notBefore?: string }).notBefore).toEqual(expect.any(String));

    // retry_job: only the failed item runs again, with a fresh round of attempts.
    const again = oarIn(cwd, ['jobs', 'retry', job.jobId, '--json']);
    expect(again.code, again.stderr).toBe(1);
    const second = jsonOf<JobView>(again.stdout);
    expect(second).toMatchObject({ round: 2, status: 'failed' });
    expect(second.items.map((i) => i.attempts)).toEqual([1, 2, 4, 1]);

    const listed = oarIn(cwd, ['jobs', 'list']);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(`${job.jobId} failed: 3 completed, 1 failed`);
    const shown = oarIn(cwd, ['jobs', 'get', job.jobId]);
    expect(shown.stdout).toContain('#2 failed after 4 attempt(s)');
    expect(shown.stdout).toContain('cannot handle BAD');
  });

  it('refuses bad input with a structured error and exit 2: a bad line, a missing field, an unknown job', () => {
    const cwd = project([step([])], [{ name: 'a' }]);
    writeFileSync(join(cwd, 'bad.jsonl'), '{"name": "a"}\n{not json}\n');
    const bad = oarIn(cwd, ['jobs', 'start', '--items', 'bad.jsonl', '--prompt', '{{name}}']);
    expect(bad.code).toBe(2);
    expect(JSON.parse(bad.stderr).error).toMatchObject({ code: 'invalid_json', details: { line: 2 } });
    const missing = oarIn(cwd, ['jobs', 'start', '--items', 'items.jsonl', '--prompt', '{{other}}']);
    expect(missing.code).toBe(2);
    expect(JSON.parse(missing.stderr).error).toMatchObject({ code: 'invalid_input', details: { field: 'other' } });
    const unknown = oarIn(cwd, ['jobs', 'get', 'job_nope']);
    expect(unknown.code).toBe(2);
    expect(JSON.parse(unknown.stderr).error.code).toBe('job_not_found');
    // Nothing was recorded for the refused jobs.
    expect(oarIn(cwd, ['jobs', 'list', '--json']).stdout).toContain('"jobs": []');
  });

  it('a job whose process is killed -9 half-way is finished by oar resume: every item done exactly once', async () => {
    const items = Array.from({ length: 8 }, (_, i) => ({ n: i }));
    const cwd = project([step([], 300)], items);
    const child = spawnOar(cwd, [
      'jobs',
      'start',
      '--items',
      'items.jsonl',
      '--prompt',
      'Item {{n}}',
      '--concurrency',
      '2',
    ]);
    const output = outputOf(child);
    // Killed once the first items completed and later ones are running.
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (/ [1-9] completed/.test(stdout)) child.kill('SIGKILL');
    });
    await output;
    const jobId = /job (job_\w+) started in session (\S+):/.exec(stdout)?.[1] as string;
    const sessionId = /started in session (\S+):/.exec(stdout)?.[1] as string;
    expect(jobId).toMatch(/^job_/);
    const before = jsonOf<JobView>(oarIn(cwd, ['jobs', 'get', jobId, '--json']).stdout);
    expect(before.status).toBe('running');
    expect(before.counts.completed).toBeLessThan(8);

    const resumed = oarIn(cwd, ['resume', sessionId]);
    expect(resumed.code, resumed.stderr).toBe(0);
    const after = jsonOf<JobView>(oarIn(cwd, ['jobs', 'get', jobId, '--json']).stdout);
    expect(after).toMatchObject({ status: 'completed', counts: { completed: 8, failed: 0, running: 0, pending: 0 } });
    const log = events(cwd, sessionId);
    const completions = log
      .filter((e) => e.type === 'job.item.completed')
      .map((e) => (e.payload as { index: number }).index);
    expect(completions.sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(log.filter((e) => e.type === 'job.completed')).toHaveLength(1);
  });

  it("a model's start_job action killed -9 mid-job is resumed: the action finds its job and waits, nothing starts twice", async () => {
    const cwd = tempDir('oar-jobs-');
    const fan = {
      id: 'fan',
      type: 'runtime',
      name: 'start_job',
      args: { items_file: 'items.jsonl', prompt: 'Item {{n}}', agent: 'worker', policy: { concurrency: 2 } },
    };
    writeJson(cwd, 'script.json', {
      steps: [
        { protocol: { kind: 'act', message: 'Fanning out.', calls: [fan] } },
        { protocol: { kind: 'answer', message: 'batch done' } },
      ],
      agents: { worker: { steps: [{ protocol: { kind: 'answer', message: 'item done' }, delayMs: 300 }] } },
    });
    writeJson(cwd, 'oar.config.json', {
      model: 'script:script.json',
      agents: [{ name: 'worker', description: 'one item', capabilities: [] }],
    });
    writeFileSync(
      join(cwd, 'items.jsonl'),
      `${Array.from({ length: 6 }, (_, n) => JSON.stringify({ n })).join('\n')}\n`,
    );
    const child = spawnOar(cwd, ['run', 'process the batch', '--json']);
    const output = outputOf(child);
    let stdout = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (stdout.includes('"job.item.completed"')) child.kill('SIGKILL');
    });
    // Killed with the job half-way (its first item done), before the turn could answer.
    expect((await output).code).toBeNull();
    const sessionId = (ndjson(stdout)[0] as { sessionId: string }).sessionId;
    const jobId = (events(cwd, sessionId).find((e) => e.type === 'job.created') as RuntimeEvent).jobId as string;
    expect(jsonOf<JobView>(oarIn(cwd, ['jobs', 'get', jobId, '--json']).stdout).status).toBe('running');
    const resumed = oarIn(cwd, ['resume', sessionId, '--json']);
    expect(resumed.code, resumed.stderr).toBe(0);
    const log = events(cwd, sessionId);
    expect(log.filter((e) => e.type === 'job.created')).toHaveLength(1);
    const completions = log
      .filter((e) => e.type === 'job.item.completed')
      .map((e) => (e.payload as { index: number }).index);
    expect(completions.sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);
    const answered = log.filter(
      (e) => e.type === 'turn.completed' && (e.payload as { answer?: string }).answer === 'batch done',
    );
    expect(answered).toHaveLength(1);
  });
});
