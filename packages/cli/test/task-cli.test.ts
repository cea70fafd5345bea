import type { Task } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { type CliResult, oarIn, tempDir, writeJson } from './cli-helpers.js';

/**
 * `oar task …` end to end through the real binary (docs/tasks.md): tasks made with `create_task` in a session made
 * by `oar run` with a scripted model, started, reported on, linked and ended; exit codes and `--json` output.
 */

const answer = (message: string) => ({ protocol: { kind: 'answer', message } });

/**
 * The scripted model's cursor is per thread (each task's thread starts at the first step): the tasks are told apart
 * by the objective in their prompt; two steps, for a thread that runs a second attempt.
 */
const step = {
  ...answer('Done.'),
  alternatives: [
    { ifPrompt: 'Objective: Build A', ...answer('A built.') },
    { ifPrompt: 'Objective: Build B', ...answer('B built.') },
  ],
};

/** A folder with a store holding one session (made by `oar run` with the script); returns both. */
function sessionIn(): { cwd: string; sessionId: string } {
  const cwd = tempDir('oar-task-');
  writeJson(cwd, 'script.json', { steps: [step, step] });
  const run = oarIn(cwd, ['run', 'hello', '--model', 'script:script.json']);
  expect(run.code, run.stderr).toBe(0);
  const sessions = oarIn(cwd, ['sessions', '--json']);
  expect(sessions.code, sessions.stderr).toBe(0);
  const listed = JSON.parse(sessions.stdout) as { sessionId: string }[];
  expect(listed).toHaveLength(1);
  return { cwd, sessionId: (listed[0] as { sessionId: string }).sessionId };
}

/** `oar task ARGS` in `cwd`. */
const task = (cwd: string, ...args: string[]): CliResult => oarIn(cwd, ['task', ...args]);

/** `oar task ARGS --json`, which must succeed: its JSON. */
function taskJson<T = Record<string, unknown>>(cwd: string, ...args: string[]): T {
  const result = task(cwd, ...args, '--json');
  expect(result.code, `oar task ${args.join(' ')}: ${result.stderr}`).toBe(0);
  return JSON.parse(result.stdout) as T;
}

const show = (cwd: string, sessionId: string, taskId: string) => taskJson<Task>(cwd, 'show', sessionId, taskId);

/** The structured error a failed command printed: the last line of stderr, JSON (stderr is not a terminal). */
function errorOf(result: CliResult): {
  code: string;
  message: string;
  retryable: boolean;
  details?: Record<string, unknown>;
} {
  const line = result.stderr.trim().split('\n').at(-1) ?? '';
  return (JSON.parse(line) as { error: ReturnType<typeof errorOf> }).error;
}

const edgesOf = (t: Task) =>
  (t.relationships ?? []).map((r) => `${r.kind}:${r.targetId}${r.status ? `:${r.status}` : ''}`);

describe('oar task', { timeout: 300_000 }, () => {
  it('a dependency chain: B started first is blocked, starting A runs both; show has both edges and one attempt each', () => {
    const { cwd, sessionId } = sessionIn();
    expect(taskJson(cwd, 'create', sessionId, '--id', 'a', '--title', 'A', '--objective', 'Build A')).toEqual({
      sessionId,
      taskId: 'a',
      status: 'accepted',
      duplicate: false,
    });
    const b = task(cwd, 'create', sessionId, '--id', 'b', '--objective', 'Build B', '--depends-on', 'a');
    expect(b.code, b.stderr).toBe(0);
    expect(b.stdout).toBe('task b accepted\n');
    // The same id and definition again is the same task; another definition is refused.
    expect(taskJson(cwd, 'create', sessionId, '--id', 'a', '--title', 'A', '--objective', 'Build A')).toMatchObject({
      duplicate: true,
    });
    const clash = task(cwd, 'create', sessionId, '--id', 'a', '--objective', 'Something else');
    expect(clash.code).toBe(2);
    expect(errorOf(clash)).toMatchObject({ code: 'task_exists', retryable: false });

    // B first: held until A completes (the session settles with B blocked).
    const blocked = task(cwd, 'start', sessionId, 'b');
    expect(blocked.code, blocked.stderr).toBe(0);
    expect(blocked.stdout).toContain('blocked: waits for a');
    expect(blocked.stdout).toContain('task b: blocked');
    expect(show(cwd, sessionId, 'b').status).toBe('blocked');
    const twice = task(cwd, 'start', sessionId, 'b', '--json');
    expect(twice.code).toBe(2);
    expect(twice.stdout).toBe('');
    expect(errorOf(twice)).toMatchObject({ code: 'task_already_started', details: { taskId: 'b', status: 'blocked' } });

    // A: runs here until the session settles, and B with it once A completed.
    const started = taskJson<{ status: string; attempt: number; runId: string; threadId: string; task: Task }>(
      cwd,
      'start',
      sessionId,
      'a',
    );
    expect(started).toMatchObject({ taskId: 'a', status: 'queued', attempt: 1, waitsFor: [] });
    expect(started.task).toMatchObject({ taskId: 'a', status: 'completed' });

    const a = show(cwd, sessionId, 'a');
    expect(a).toMatchObject({ status: 'completed', taskKind: 'task', title: 'A', threadId: started.threadId });
    expect(edgesOf(a)).toEqual(['dependent:b']);
    expect(a.attempts).toHaveLength(1);
    expect(a.attempts?.[0]).toMatchObject({
      runId: started.runId,
      status: 'completed',
      attemptCount: 1,
      completionSummary: 'A built.',
    });
    const shownB = show(cwd, sessionId, 'b');
    expect(shownB.status).toBe('completed');
    expect(edgesOf(shownB)).toEqual(['dependency:a:completed']);
    expect(shownB.attempts).toHaveLength(1);
    // B ran on a thread of its own, with its own prompt.
    expect(shownB.attempts?.[0]).toMatchObject({ status: 'completed', attemptCount: 1, completionSummary: 'B built.' });
    expect(shownB.threadId).not.toBe(a.threadId);

    // The listing, as JSON and as text.
    const listed = taskJson<Task[]>(cwd, 'list', sessionId).filter((t) => t.taskKind === 'task');
    expect(listed.map((t) => [t.taskId, t.status])).toEqual([
      ['a', 'completed'],
      ['b', 'completed'],
    ]);
    const text = task(cwd, 'list', sessionId);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^a {2}completed {2}task {2}A {2}attempts 1 {2}edges 1$/m);
    expect(text.stdout).toMatch(/^b {2}completed {2}task {2}Build B {2}attempts 1 {2}edges 1$/m);
    const shown = task(cwd, 'show', sessionId, 'b');
    expect(shown.stdout).toContain('dependency → a (completed)');
    expect(shown.stdout).toMatch(/attempt 1: completed \(run run_\w+\)/);
  });

  it('an external task: started, reported on and completed through the commands', () => {
    const { cwd, sessionId } = sessionIn();
    expect(
      taskJson(cwd, 'create', sessionId, '--id', 'review', '--objective', 'Review it', '--external', 'ada'),
    ).toMatchObject({ taskId: 'review', status: 'accepted' });
    expect(show(cwd, sessionId, 'review')).toMatchObject({
      status: 'accepted',
      assignee: { kind: 'external', name: 'ada' },
    });

    // Nobody here does the work: the attempt starts at once, nothing runs.
    const started = taskJson<{ status: string; runId: string; task: Task }>(cwd, 'start', sessionId, 'review');
    expect(started).toMatchObject({ status: 'running', attempt: 1, waitsFor: [] });
    expect(started).not.toHaveProperty('threadId');
    expect(started.task).toMatchObject({ status: 'running', attempts: [{ runId: started.runId, status: 'running' }] });

    expect(
      taskJson(
        cwd,
        'progress',
        sessionId,
        'review',
        '--message',
        'half way',
        '--percent',
        '50',
        '--completed',
        '3',
        '--total',
        '6',
      ),
    ).toEqual({ taskId: 'review' });
    expect(show(cwd, sessionId, 'review').progress).toMatchObject({
      message: 'half way',
      percent: 50,
      completed: 3,
      total: 6,
    });
    const words = task(cwd, 'progress', sessionId, 'review', '--message', 'almost');
    expect([words.code, words.stdout]).toEqual([0, 'task review: progress recorded\n']);
    expect(show(cwd, sessionId, 'review').progress).toMatchObject({ message: 'almost' });
    const notANumber = task(cwd, 'progress', sessionId, 'review', '--percent', 'half');
    expect(notANumber.code).toBe(2);
    expect(errorOf(notANumber)).toMatchObject({ code: 'invalid_option' });
    const nothing = task(cwd, 'progress', sessionId, 'review');
    expect(nothing.code).toBe(2);
    expect(errorOf(nothing).code).toBe('invalid_input');

    expect(taskJson(cwd, 'complete', sessionId, 'review', '--summary', 'looks good')).toEqual({
      taskId: 'review',
      status: 'completed',
      interrupted: false,
    });
    const done = show(cwd, sessionId, 'review');
    expect(done.status).toBe('completed');
    expect(done.attempts).toMatchObject([
      { runId: started.runId, status: 'completed', attemptCount: 1, completionSummary: 'looks good' },
    ]);
    const again = task(cwd, 'complete', sessionId, 'review');
    expect(again.code).toBe(2);
    expect(errorOf(again)).toMatchObject({ code: 'task_not_active', details: { status: 'completed' } });
  });

  it('update, pause, resume, fail, retry, cancel, link and unlink', () => {
    const { cwd, sessionId } = sessionIn();
    taskJson(cwd, 'create', sessionId, '--id', 'lead', '--objective', 'Lead', '--external', 'ada');
    taskJson(cwd, 'create', sessionId, '--id', 'help', '--objective', 'Help', '--external', 'bob', '--parent', 'lead');
    expect(edgesOf(show(cwd, sessionId, 'lead'))).toEqual(['child:help']);

    const updated = task(cwd, 'update', sessionId, 'lead', '--title', 'Leader', '--priority', 'high');
    expect([updated.code, updated.stdout]).toEqual([0, 'task lead: changed title, priority\n']);
    expect(show(cwd, sessionId, 'lead')).toMatchObject({ title: 'Leader', priority: 'high', objective: 'Lead' });

    expect(taskJson(cwd, 'pause', sessionId, 'lead', '--children', '--reason', 'lunch')).toEqual({
      paused: ['lead', 'help'],
    });
    expect(show(cwd, sessionId, 'help')).toMatchObject({ status: 'paused', pausedFrom: 'accepted' });
    const whilePaused = task(cwd, 'start', sessionId, 'lead', '--detach');
    expect(whilePaused.code).toBe(2);
    expect(errorOf(whilePaused).code).toBe('task_paused');
    expect(taskJson(cwd, 'resume', sessionId, 'lead', '--children', '--detach')).toEqual({
      resumed: ['lead', 'help'],
    });
    expect(show(cwd, sessionId, 'lead').status).toBe('accepted');
    expect(show(cwd, sessionId, 'help').status).toBe('accepted');
    const notPaused = task(cwd, 'resume', sessionId, 'lead');
    expect(notPaused.code).toBe(2);
    expect(errorOf(notPaused).code).toBe('task_not_paused');

    // fail, then retry: a new attempt, the failed one kept.
    taskJson(cwd, 'start', sessionId, 'lead', '--detach');
    const failed = task(cwd, 'fail', sessionId, 'lead', '--message', 'the spec was wrong', '--code', 'bad_spec');
    expect([failed.code, failed.stdout]).toEqual([0, 'task lead: failed\n']);
    expect(show(cwd, sessionId, 'lead')).toMatchObject({
      status: 'failed',
      lastError: { code: 'bad_spec', message: 'the spec was wrong' },
    });
    const retry = taskJson<{ runId: string }>(cwd, 'retry', sessionId, 'lead', '--detach');
    expect(retry.runId).toMatch(/^run_/);
    const retried = show(cwd, sessionId, 'lead');
    expect(retried.status).toBe('running');
    expect(retried.attempts?.map((x) => [x.attemptCount, x.status])).toEqual([
      [1, 'failed'],
      [2, 'running'],
    ]);
    expect(retried.attempts?.[1]?.runId).toBe(retry.runId);

    // cancel
    const cancelled = task(cwd, 'cancel', sessionId, 'help', '--reason', 'not needed');
    expect([cancelled.code, cancelled.stdout]).toEqual([0, 'task help: cancelled\n']);
    expect(show(cwd, sessionId, 'help').status).toBe('cancelled');

    // link and unlink: both sides of an edge between tasks, one side of an edge to an artifact.
    taskJson(cwd, 'create', sessionId, '--id', 'next', '--objective', 'Next', '--external', 'ada');
    const linked = task(cwd, 'link', sessionId, 'next', 'source', 'lead', '--reason', 'follows on');
    expect([linked.code, linked.stdout]).toEqual([0, 'next source lead: linked\n']);
    expect(taskJson(cwd, 'link', sessionId, 'next', 'source', 'lead')).toEqual({ linked: false });
    expect(taskJson(cwd, 'link', sessionId, 'next', 'artifact', 'art_1')).toEqual({ linked: true });
    expect(edgesOf(show(cwd, sessionId, 'next'))).toEqual(['source:lead', 'artifact:art_1']);
    expect(edgesOf(show(cwd, sessionId, 'lead'))).toEqual(['child:help', 'derived:next']);
    expect(taskJson(cwd, 'unlink', sessionId, 'lead', 'derived', 'next')).toEqual({ unlinked: true });
    expect(edgesOf(show(cwd, sessionId, 'next'))).toEqual(['artifact:art_1']);
    expect(edgesOf(show(cwd, sessionId, 'lead'))).toEqual(['child:help']);
    const gone = task(cwd, 'unlink', sessionId, 'lead', 'derived', 'next');
    expect(gone.code).toBe(2);
    expect(errorOf(gone)).toMatchObject({ code: 'relationship_not_found' });
    // A dependency that would close a cycle.
    taskJson(cwd, 'create', sessionId, '--id', 'after', '--objective', 'After', '--depends-on', 'next');
    const cycle = task(cwd, 'link', sessionId, 'next', 'dependency', 'after');
    expect(cycle.code).toBe(2);
    expect(errorOf(cycle)).toMatchObject({ code: 'task_cycle', details: { taskId: 'next', targetId: 'after' } });
  });

  it('cancel --children reaches the descendants; archive files an ended task out of the list, still shown by id', () => {
    const { cwd, sessionId } = sessionIn();
    taskJson(cwd, 'create', sessionId, '--id', 'lead', '--objective', 'Lead', '--external', 'ada');
    taskJson(cwd, 'create', sessionId, '--id', 'help', '--objective', 'Help', '--external', 'bob', '--parent', 'lead');
    taskJson(cwd, 'create', sessionId, '--id', 'keep', '--objective', 'Keep', '--external', 'ada');
    expect(taskJson(cwd, 'start', sessionId, 'lead', '--detach')).toMatchObject({ status: 'running' });
    const notEnded = task(cwd, 'archive', sessionId, 'lead');
    expect(notEnded.code).toBe(2);
    expect(errorOf(notEnded)).toMatchObject({ code: 'task_not_ended', details: { status: 'running' } });

    // Nothing of them runs here (external work): both are cancelled at once, the open attempt with the lead.
    const cancelled = task(cwd, 'cancel', sessionId, 'lead', '--children', '--reason', 'scrapped');
    expect([cancelled.code, cancelled.stdout]).toEqual([0, 'task lead: cancelled\ntask help: cancelled\n']);
    expect(show(cwd, sessionId, 'lead')).toMatchObject({ status: 'cancelled', attempts: [{ status: 'failed' }] });
    expect(show(cwd, sessionId, 'help')).toMatchObject({ status: 'cancelled', statusReason: 'scrapped' });
    expect(show(cwd, sessionId, 'keep').status).toBe('accepted');

    const archived = task(cwd, 'archive', sessionId, 'lead');
    expect([archived.code, archived.stdout]).toEqual([0, 'task lead: archived\n']);
    expect(task(cwd, 'archive', sessionId, 'lead').stdout).toBe('task lead: already archived\n');
    const ids = (...args: string[]) =>
      taskJson<Task[]>(cwd, 'list', sessionId, ...args)
        .map((t) => t.taskId)
        .sort();
    expect(ids()).toEqual(['help', 'keep']);
    expect(ids('--archived')).toEqual(['help', 'keep', 'lead']);
    expect(task(cwd, 'list', sessionId, '--archived').stdout).toContain('lead  archived (ended cancelled)');
    expect(show(cwd, sessionId, 'lead')).toMatchObject({ status: 'archived', archivedFrom: 'cancelled' });
    const retry = task(cwd, 'retry', sessionId, 'lead', '--detach');
    expect(retry.code).toBe(2);
    expect(errorOf(retry).code).toBe('task_not_retryable');
  });

  it('refuses bad input: an unknown edge kind, an unknown task, a missing objective, exclusive options', () => {
    const { cwd, sessionId } = sessionIn();
    taskJson(cwd, 'create', sessionId, '--id', 'a', '--objective', 'Build A');
    taskJson(cwd, 'create', sessionId, '--id', 'b', '--objective', 'Build B');

    for (const json of [[], ['--json']]) {
      const link = task(cwd, 'link', sessionId, 'a', 'sibling', 'b', ...json);
      expect(link.code, link.stderr).toBe(2);
      expect(link.stdout).toBe('');
      expect(link.stderr.trim().split('\n')).toHaveLength(1);
      const error = errorOf(link);
      expect(error).toMatchObject({ code: 'invalid_input', retryable: false });
      expect(error.message).toContain('unknown edge kind "sibling"');
    }
    expect(edgesOf(show(cwd, sessionId, 'a'))).toEqual([]);

    for (const args of [
      ['show', sessionId, 'nope'],
      ['show', sessionId, 'nope', '--json'],
      ['start', sessionId, 'nope'],
      ['complete', sessionId, 'nope'],
      ['link', sessionId, 'a', 'dependency', 'nope'],
      ['create', sessionId, '--objective', 'x', '--depends-on', 'nope'],
    ]) {
      const result = task(cwd, ...args);
      expect(result.code, args.join(' ')).not.toBe(0);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stdout).toBe('');
      expect(errorOf(result), args.join(' ')).toMatchObject({
        code: 'task_not_found',
        retryable: false,
        details: { taskId: 'nope' },
      });
    }

    const noObjective = task(cwd, 'create', sessionId, '--id', 'x');
    expect(noObjective.code).toBe(2);
    expect(errorOf(noObjective).code).toBe('usage_error');
    const both = task(cwd, 'create', sessionId, '--objective', 'x', '--agent', 'main', '--external', 'ada');
    expect(both.code).toBe(2);
    expect(errorOf(both).code).toBe('invalid_option');
    const noSession = task(cwd, 'create', 'ses_nope', '--objective', 'x');
    expect(noSession.code).toBe(2);
    expect(errorOf(noSession)).toMatchObject({ code: 'session_not_found', details: { sessionId: 'ses_nope' } });
    // Nothing was made by any of them.
    expect(taskJson<Task[]>(cwd, 'list', sessionId).map((t) => t.taskId)).toEqual(['a', 'b']);
  });
});
