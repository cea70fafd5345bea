import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { getArtifact, Store } from '@oar/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { type CliResult, ndjson, oarIn, tempDir, writeJson } from './cli-helpers.js';
import { describeProc, exitOf, killAll, type Proc, start, until } from './processes.js';

/**
 * `oar permission evaluate|resolve` and `oar process write|terminate` through the real binary (docs/permissions.md
 * "Permission commands", docs/commands.md "Feeding and stopping a process by hand"): sessions made by `oar run`
 * with a scripted model; the process commands against a background process that a running `oar serve` started,
 * which carries the recorded requests out (the CLI runs no worker of its own).
 */

interface LoggedEvent {
  type: string;
  eventId: string;
  turnId?: string;
  actionId?: string;
  processId?: string;
  payload: Record<string, unknown>;
}

/** The structured error a failed command printed: the last line of stderr, JSON (stderr is not a terminal). */
function errorOf(result: CliResult): { code: string; message: string; details?: Record<string, unknown> } {
  const line = result.stderr.trim().split('\n').at(-1) ?? '';
  return (JSON.parse(line) as { error: ReturnType<typeof errorOf> }).error;
}

function ok(result: CliResult, what: string, code = 0): CliResult {
  expect(result.code, `${what}\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`).toBe(code);
  return result;
}

const eventsOf = (cwd: string, sessionId: string) =>
  ndjson(ok(oarIn(cwd, ['events', sessionId, '--json']), 'oar events').stdout) as unknown as LoggedEvent[];

const ofType = (events: LoggedEvent[], type: string) => events.filter((e) => e.type === type);

/** The session and the pending decision `oar run` printed when its turn waits (exit 3). */
function waiting(run: CliResult): { sessionId: string; actionId: string } {
  ok(run, 'oar run waits for a decision', 3);
  const [, sessionId, actionId] = /oar respond (ses_\w+) (act_\w+)/.exec(run.stdout) ?? [];
  expect(sessionId, run.stdout).toBeDefined();
  return { sessionId: sessionId as string, actionId: actionId as string };
}

const sessionOf = (stdout: string) => (/session (ses_\w+)/.exec(stdout) as RegExpExecArray)[1] as string;

const answer = (message: string) => ({ protocol: { kind: 'answer', message } });

/** A folder whose scripted model writes out.txt (which default mode asks about), then answers. */
function writingProject(): string {
  const cwd = tempDir('oar-control-');
  writeJson(cwd, 'write.json', {
    steps: [
      {
        protocol: {
          kind: 'act',
          message: 'Writing.',
          calls: [{ id: 'w1', type: 'tool', name: 'write', args: { filePath: 'out.txt', content: 'hello\n' } }],
        },
      },
      answer('Written.'),
    ],
  });
  writeJson(cwd, 'hello.json', { steps: [answer('Hello there.')] });
  writeJson(cwd, 'oar.config.json', { model: 'script:write.json' });
  return cwd;
}

describe('oar permission evaluate', { timeout: 120_000 }, () => {
  it('judges a call now (ask for write, allow for read), records it for the client, runs nothing', () => {
    const cwd = writingProject();
    const run = ok(oarIn(cwd, ['run', '--model', 'script:hello.json', 'hello']), 'oar run');
    const sessionId = sessionOf(run.stdout);
    const [turn] = ofType(eventsOf(cwd, sessionId), 'turn.started');
    const turnId = turn?.turnId as string;
    expect(turnId).toMatch(/^turn_/);

    const write = ok(
      oarIn(cwd, ['permission', 'evaluate', sessionId, 'write', '--input', '{"filePath":"notes.txt","content":"x"}']),
      'evaluate write',
    );
    expect(write.stdout).toMatch(/^ask: default mode asks before tools that write/);
    expect(write.stdout).toContain('  mode default, source default\n');
    expect(write.stdout).toContain('  paths: notes.txt\n');
    expect(write.stdout).toContain('  a person would be offered: approve, deny, approve_for_session\n');
    const [, writeEventId, recordedTurn] = /recorded: (\S+) \(turn (turn_\w+)\)/.exec(write.stdout) ?? [];
    expect(recordedTurn).toBe(turnId);
    // Only judged: nothing was written.
    expect(existsSync(join(cwd, 'notes.txt'))).toBe(false);

    const read = ok(
      oarIn(cwd, ['permission', 'evaluate', sessionId, 'read', '--input', '{"filePath":"hello.json"}', '--json']),
      'evaluate read --json',
    );
    const judged = JSON.parse(read.stdout) as {
      sessionId: string;
      threadId: string;
      decision: string;
      evaluation: Record<string, unknown>;
      recorded: { eventId: string; turnId: string };
    };
    expect(judged).toMatchObject({
      sessionId,
      decision: 'allow',
      evaluation: {
        decision: 'allow',
        toolName: 'read',
        mode: 'default',
        paths: ['hello.json'],
        evaluatedFor: 'client',
        requestedBy: 'cli',
      },
      recorded: { turnId },
    });
    expect(judged.threadId).toMatch(/^thr_/);

    // Both are on the log, on the session's last turn, as the client's evaluations.
    const evaluated = ofType(eventsOf(cwd, sessionId), 'permission.evaluated').filter(
      (e) => e.payload.evaluatedFor === 'client',
    );
    expect(evaluated.map((e) => [e.eventId, e.turnId, e.payload.toolName, e.payload.decision])).toEqual([
      [writeEventId, turnId, 'write', 'ask'],
      [judged.recorded.eventId, turnId, 'read', 'allow'],
    ]);
    expect(evaluated.every((e) => e.payload.requestedBy === 'cli')).toBe(true);

    // The turn named with --turn (and the thread with --thread); an unknown turn or thread is refused.
    const readInput = ['--input', '{"filePath":"hello.json"}'];
    const onTurn = ok(
      oarIn(cwd, [
        'permission',
        'evaluate',
        sessionId,
        'read',
        ...readInput,
        '--turn',
        turnId,
        '--thread',
        judged.threadId,
        '--json',
      ]),
      '--turn --thread',
    );
    expect(JSON.parse(onTurn.stdout)).toMatchObject({ threadId: judged.threadId, recorded: { turnId } });
    const noTurn = ok(
      oarIn(cwd, ['permission', 'evaluate', sessionId, 'read', ...readInput, '--turn', 'turn_nope']),
      'unknown turn',
      2,
    );
    expect(errorOf(noTurn).code).toBe('turn_not_found');
    const noThread = ok(
      oarIn(cwd, ['permission', 'evaluate', sessionId, 'read', ...readInput, '--thread', 'thr_nope']),
      'unknown thread',
      2,
    );
    expect(errorOf(noThread).code).toBe('thread_not_found');

    // An input the tool's schema refuses (read without filePath): exit 1, invalid_tool_input with its issues.
    const invalid = ok(oarIn(cwd, ['permission', 'evaluate', sessionId, 'read']), 'read without input', 1);
    expect(errorOf(invalid)).toMatchObject({
      code: 'invalid_tool_input',
      details: { issues: [expect.objectContaining({ path: '/filePath' })] },
    });

    // A tool the session does not have: exit 1, one structured error naming the tools it has.
    const unknown = ok(oarIn(cwd, ['permission', 'evaluate', sessionId, 'launch_rockets']), 'unknown tool', 1);
    expect(unknown.stdout).toBe('');
    const error = errorOf(unknown);
    expect(error.code).toBe('unknown_tool');
    expect(error.details?.available).toEqual(expect.arrayContaining(['read', 'write']));

    // --input that is not a JSON object is a usage error.
    for (const input of ['{bad', '[1]', '"text"']) {
      const bad = ok(oarIn(cwd, ['permission', 'evaluate', sessionId, 'read', '--input', input]), input, 2);
      expect(errorOf(bad).code).toBe('invalid_option');
      expect(errorOf(bad).message).toContain('--input');
    }
    // None of the refused ones was recorded; no turn was started by any of it.
    const after = eventsOf(cwd, sessionId);
    expect(ofType(after, 'permission.evaluated').filter((e) => e.payload.evaluatedFor === 'client')).toHaveLength(3);
    expect(ofType(after, 'turn.started')).toHaveLength(1);
  });
});

describe('oar permission resolve', { timeout: 180_000 }, () => {
  it('allow --for-session: the waiting write runs, the turn completes here, the grant covers the same call later', () => {
    const cwd = writingProject();
    const { sessionId, actionId } = waiting(oarIn(cwd, ['run', 'write it']));
    expect(existsSync(join(cwd, 'out.txt'))).toBe(false);

    // Refused before anything changes: not allow/deny, or --for-session with deny.
    const maybe = ok(oarIn(cwd, ['permission', 'resolve', sessionId, actionId, 'maybe']), 'maybe', 2);
    expect(errorOf(maybe).code).toBe('invalid_option');
    const denyForSession = ok(
      oarIn(cwd, ['permission', 'resolve', sessionId, actionId, 'deny', '--for-session']),
      'deny --for-session',
      2,
    );
    expect(errorOf(denyForSession).code).toBe('invalid_option');
    expect(ofType(eventsOf(cwd, sessionId), 'permission.resolved')).toEqual([]);

    const resolved = ok(
      oarIn(cwd, ['permission', 'resolve', sessionId, actionId, 'allow', '--for-session', '--reason', 'looks fine']),
      'resolve allow --for-session',
    );
    expect(resolved.stdout).toContain('approve_for_session');
    expect(resolved.stdout).toContain('Written.');
    expect(readFileSync(join(cwd, 'out.txt'), 'utf8')).toBe('hello\n');
    const events = eventsOf(cwd, sessionId);
    const [fact] = ofType(events, 'permission.resolved');
    expect(fact).toMatchObject({
      actionId,
      payload: { decision: 'allow', toolName: 'write', grantScope: 'session', reason: 'looks fine' },
    });
    expect(ofType(events, 'turn.completed').map((e) => e.payload.answer)).toEqual(['Written.']);

    // The grant reaches the same call for the rest of the session, and only that call.
    const same = JSON.parse(
      ok(
        oarIn(cwd, [
          'permission',
          'evaluate',
          sessionId,
          'write',
          '--input',
          '{"filePath":"out.txt","content":"x"}',
          '--json',
        ]),
        'evaluate granted',
      ).stdout,
    ) as { decision: string };
    expect(same.decision).toBe('allow');
    const other = JSON.parse(
      ok(
        oarIn(cwd, [
          'permission',
          'evaluate',
          sessionId,
          'write',
          '--input',
          '{"filePath":"other.txt","content":"x"}',
          '--json',
        ]),
        'evaluate other',
      ).stdout,
    ) as { decision: string };
    expect(other.decision).toBe('ask');

    // Answered: a second answer finds no pending approval.
    const again = ok(oarIn(cwd, ['permission', 'resolve', sessionId, actionId, 'allow']), 'again', 2);
    expect(errorOf(again)).toMatchObject({ code: 'action_not_found', details: { actionId } });
    expect(ofType(eventsOf(cwd, sessionId), 'permission.resolved')).toHaveLength(1);
  });

  it('deny --json: nothing is written, the turn goes on to its answer, the result line reports it', () => {
    const cwd = writingProject();
    const run = oarIn(cwd, ['run', '--json', 'write it']);
    ok(run, 'oar run --json waits', 3);
    const lines = ndjson(run.stdout) as unknown as LoggedEvent[];
    const required = lines.find((e) => e.type === 'action.required') as LoggedEvent & { sessionId: string };
    const denied = ok(
      oarIn(cwd, ['permission', 'resolve', required.sessionId, required.actionId as string, 'deny', '--json']),
      'resolve deny --json',
    );
    expect(existsSync(join(cwd, 'out.txt'))).toBe(false);
    const printed = ndjson(denied.stdout) as unknown as LoggedEvent[];
    expect(printed.find((e) => e.type === 'permission.resolved')?.payload).toMatchObject({
      decision: 'deny',
      grantScope: 'once',
    });
    const result = JSON.parse(denied.stdout.trim().split('\n').at(-1) ?? '') as { result: Record<string, unknown> };
    expect(result.result).toMatchObject({ sessionId: required.sessionId, status: 'completed', answer: 'Written.' });
  });

  it('a question (ask_user) is not a permission request: refused, and it stays pending for oar respond', () => {
    const cwd = writingProject();
    const block = {
      type: 'agent.protocol',
      version: '1',
      intent: 'execute',
      payload: {
        type: 'action_graph',
        actions: [
          {
            type: 'action',
            id: 'ask',
            executor: { type: 'human', target: 'ask_user' },
            input: { question: 'Colour?' },
          },
        ],
      },
    };
    writeJson(cwd, 'ask.json', {
      steps: [
        { text: `Asking.\n\n\`\`\`json agent-protocol\n${JSON.stringify(block, null, 2)}\n\`\`\`\n` },
        answer('Colour noted.'),
      ],
    });
    rmSync(join(cwd, 'oar.config.json'));
    const { sessionId, actionId } = waiting(oarIn(cwd, ['run', '--model', 'script:ask.json', 'ask me']));
    const refused = ok(oarIn(cwd, ['permission', 'resolve', sessionId, actionId, 'allow']), 'resolve a question', 2);
    expect(errorOf(refused)).toMatchObject({
      code: 'not_a_permission_request',
      details: { actionId, actionType: 'user_input' },
    });
    const respond = ok(oarIn(cwd, ['respond', sessionId, actionId, 'approve', '--text', 'teal']), 'oar respond');
    expect(respond.stdout).toContain('Colour noted.');
    expect(ofType(eventsOf(cwd, sessionId), 'permission.resolved')).toEqual([]);
  });
});

// ----- processes, through a running `oar serve` ---------------------------------------------------------------

/** Background processes the scripted model started (through `oar serve`): killed by pid should a test fail. */
const started: number[] = [];

afterEach(async () => {
  await killAll();
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone, as it should be.
    }
  }
});

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Reads its standard input and echoes it in upper case; never exits by itself. */
const ECHO_UPPER =
  "process.stdin.on('data', (d) => process.stdout.write(String(d).toUpperCase())); setInterval(() => {}, 1000);";

function processProject(): string {
  const cwd = tempDir('oar-control-proc-');
  writeJson(cwd, 'script.json', {
    steps: [
      {
        protocol: {
          kind: 'act',
          message: 'Starting the echo.',
          calls: [
            { id: 'p', type: 'tool', name: 'exec', args: { command: ['node', '-e', ECHO_UPPER], background: true } },
          ],
        },
      },
      answer('The echo runs.'),
      answer('Next turn.'),
    ],
  });
  writeJson(cwd, 'oar.config.json', {
    model: 'script:script.json',
    tools: { exec: { env: ['PATH'], sandbox: { profile: 'none', unsandboxed: 'allow' } } },
    permissions: { rules: [{ decision: 'allow', tool: 'exec', command: 'node' }] },
  });
  return cwd;
}

async function serve(cwd: string): Promise<Proc> {
  const served = start(cwd, ['serve', '--port', '0'], { OAR_ADMIN_KEY: `oar_${'A1b2C3d4E5'.repeat(4)}` });
  await until(
    () => /serving at http/.test(served.out) || served.exited,
    () => `oar serve to start: ${describeProc(served)}`,
  );
  expect(served.exited, describeProc(served)).toBe(false);
  return served;
}

describe('oar process write / terminate', { timeout: 180_000 }, () => {
  it('feeds and stops a background process that oar serve runs; a request nobody acts on yet is left on record', async () => {
    const cwd = processProject();
    const served = await serve(cwd);

    // The turn is recorded here and run by oar serve's worker, which starts the process and keeps it.
    const submitted = ok(oarIn(cwd, ['run', '--detach', 'start the echo']), 'oar run --detach');
    const sessionId = /session (ses_\w+)/.exec(submitted.stdout)?.[1] as string;
    expect(ok(oarIn(cwd, ['wait', sessionId]), 'oar wait').stdout).toContain('The echo runs.');
    const env = JSON.parse(ok(oarIn(cwd, ['environment', sessionId, '--json']), 'environment').stdout) as {
      activeProcesses: { processId: string; background: boolean }[];
    };
    expect(env.activeProcesses).toHaveLength(1);
    const processId = env.activeProcesses[0]?.processId as string;
    expect(env.activeProcesses[0]?.background).toBe(true);
    const pid = ofType(eventsOf(cwd, sessionId), 'process.started')[0]?.payload.pid as number;
    started.push(pid);
    expect(alive(pid)).toBe(true);

    // The policy as it stands for this session's commands.
    const evaluate = (command: string[]) =>
      (
        JSON.parse(
          ok(
            oarIn(cwd, ['permission', 'evaluate', sessionId, 'exec', '--input', JSON.stringify({ command }), '--json']),
            'evaluate exec',
          ).stdout,
        ) as { decision: string }
      ).decision;
    expect(evaluate(['node', '-v'])).toBe('allow');
    expect(evaluate(['rm', '-rf', 'build'])).toBe('ask');

    const wrote = ok(oarIn(cwd, ['process', 'write', sessionId, processId, 'abc\n', '--wait', '20']), 'write');
    expect(wrote.stdout).toBe(`wrote 4 bytes to ${processId}\n`);
    const json = JSON.parse(
      ok(oarIn(cwd, ['process', 'write', sessionId, processId, 'déf\n', '--wait', '20', '--json']), 'write --json')
        .stdout,
    ) as Record<string, unknown>;
    expect(json).toMatchObject({ sessionId, processId, status: 'written', bytes: 5 });

    // With oar serve stopped (SIGSTOP), nobody acts: exit 75 and `requested`; once it runs again, it carries out
    // the request left on record.
    served.child.kill('SIGSTOP');
    let pending: Record<string, unknown>;
    try {
      const later = ok(
        oarIn(cwd, ['process', 'write', sessionId, processId, 'ghi\n', '--wait', '1', '--json']),
        'write to a stopped runtime',
        75,
      );
      pending = JSON.parse(later.stdout) as Record<string, unknown>;
      expect(pending).toMatchObject({ processId, status: 'requested' });
      expect(pending.requestId).toMatch(/^preq_/);
      expect(pending.eventId).toBeUndefined();
    } finally {
      served.child.kill('SIGCONT');
    }
    await until(
      () => ofType(eventsOf(cwd, sessionId), 'process.input').some((e) => e.payload.requestId === pending.requestId),
      () => `oar serve to write the request left on record: ${describeProc(served)}`,
    );

    // Closing its input: written (0 bytes); more text is then refused by the runtime running it (exit 1).
    const closed = ok(oarIn(cwd, ['process', 'write', sessionId, processId, '--close', '--wait', '20']), '--close');
    expect(closed.stdout).toBe(`wrote 0 bytes to ${processId}\n`);
    const refused = ok(oarIn(cwd, ['process', 'write', sessionId, processId, 'late', '--wait', '20']), 'late', 1);
    expect(refused.stdout).toMatch(/^refused: .*closed its input/);
    const warning = ofType(eventsOf(cwd, sessionId), 'runtime.warning').at(-1);
    expect(warning?.payload).toMatchObject({ code: 'process_input_closed', details: { processId } });

    const terminated = ok(
      oarIn(cwd, ['process', 'terminate', sessionId, processId, '--reason', 'done with it', '--wait', '20']),
      'terminate',
    );
    expect(terminated.stdout).toMatch(new RegExp(`^${processId} terminated \\((signal SIG\\w+|exit \\d+)\\)\\n$`));
    expect(alive(pid)).toBe(false);
    const events = eventsOf(cwd, sessionId);
    const request = ofType(events, 'thread.updated')
      .map((e) => e.payload.processRequest as Record<string, unknown> | undefined)
      .find((r) => r?.action === 'terminate');
    expect(request).toMatchObject({ processId, reason: 'done with it', requestedBy: 'cli' });
    const [end] = ofType(events, 'process.terminated');
    expect(end?.payload).toMatchObject({
      processId,
      reason: 'terminated',
      requestedBy: 'cli',
      requestId: request?.requestId,
    });
    expect(ofType(events, 'process.input').map((e) => [e.payload.bytes, e.payload.requestedBy])).toEqual([
      [4, 'cli'],
      [5, 'cli'],
      [4, 'cli'],
      [0, 'cli'],
    ]);
    const active = JSON.parse(ok(oarIn(cwd, ['environment', sessionId, '--json']), 'environment').stdout) as {
      activeProcesses: unknown[];
    };
    expect(active.activeProcesses).toEqual([]);

    // Its end is on record: neither command finds it any more.
    for (const args of [
      ['terminate', sessionId, processId],
      ['write', sessionId, processId, 'x'],
    ]) {
      const gone = ok(oarIn(cwd, ['process', ...args]), `process ${args[0]} after the end`, 2);
      expect(errorOf(gone)).toMatchObject({ code: 'process_not_found', details: { processId } });
    }
    served.child.kill('SIGTERM');
    expect((await exitOf(served, 'oar serve')).code, describeProc(served)).toBe(0);

    // The process's output, stored whole: what it was fed, in upper case, in order.
    const store = await Store.open(join(cwd, '.oar', 'oar.db'));
    try {
      const ref = String(end?.payload.outputRef).replace('artifact://', '');
      const artifact = await getArtifact(store.db, sessionId, ref);
      expect(new TextDecoder().decode(artifact?.bytes)).toBe('ABC\nDÉF\nGHI\n');
    } finally {
      await store.close();
    }
  });

  it('oar serve stopping records the end of the processes it ran (runtime_closing): nothing is left to ask for', async () => {
    const cwd = processProject();
    const served = await serve(cwd);
    const submitted = ok(oarIn(cwd, ['run', '--detach', 'start the echo']), 'oar run --detach');
    const sessionId = /session (ses_\w+)/.exec(submitted.stdout)?.[1] as string;
    ok(oarIn(cwd, ['wait', sessionId]), 'oar wait');
    const startedEvent = ofType(eventsOf(cwd, sessionId), 'process.started')[0];
    const processId = startedEvent?.processId as string;
    const pid = startedEvent?.payload.pid as number;
    started.push(pid);
    served.child.kill('SIGTERM');
    expect((await exitOf(served, 'oar serve')).code, describeProc(served)).toBe(0);
    expect(alive(pid)).toBe(false);
    expect(ofType(eventsOf(cwd, sessionId), 'process.terminated').map((e) => e.payload)).toEqual([
      expect.objectContaining({ processId, reason: 'runtime_closing' }),
    ]);
    const gone = ok(oarIn(cwd, ['process', 'terminate', sessionId, processId]), 'after the stop', 2);
    expect(errorOf(gone).code).toBe('process_not_found');
  });

  it('after oar serve was killed, a request waits on record until the thread is claimed again, which finds the process lost', async () => {
    const cwd = processProject();
    const served = await serve(cwd);
    const submitted = ok(oarIn(cwd, ['run', '--detach', 'start the echo']), 'oar run --detach');
    const sessionId = /session (ses_\w+)/.exec(submitted.stdout)?.[1] as string;
    ok(oarIn(cwd, ['wait', sessionId]), 'oar wait');
    const startedEvent = ofType(eventsOf(cwd, sessionId), 'process.started')[0];
    const processId = startedEvent?.processId as string;
    started.push(startedEvent?.payload.pid as number);
    // No chance to record anything: the process's end is not on record (unsandboxed, its group may even outlive
    // the runtime; it is unreachable all the same).
    served.child.kill('SIGKILL');
    await exitOf(served, 'oar serve');

    const later = ok(oarIn(cwd, ['process', 'terminate', sessionId, processId, '--wait', '0']), 'nobody to act', 75);
    expect(later.stdout).toMatch(new RegExp(`^requested \\(preq_\\w+\\): no runtime running ${processId} acted yet`));

    // The next claim of the thread (a turn here) finds the process lost; then there is nothing to ask about.
    ok(oarIn(cwd, ['run', '--session', sessionId, 'next']), 'the next turn');
    expect(ofType(eventsOf(cwd, sessionId), 'process.failed').map((e) => e.payload)).toEqual([
      expect.objectContaining({ processId, reason: 'lost' }),
    ]);
    const gone = ok(oarIn(cwd, ['process', 'terminate', sessionId, processId]), 'after the loss', 2);
    expect(errorOf(gone).code).toBe('process_not_found');
  });

  it('refuses what it cannot ask for: an unknown process, no text without --close, a bad --wait', () => {
    const cwd = writingProject();
    const sessionId = sessionOf(ok(oarIn(cwd, ['run', '--model', 'script:hello.json', 'hello']), 'oar run').stdout);
    for (const args of [
      ['write', sessionId, 'proc_nope', 'x'],
      ['terminate', sessionId, 'proc_nope'],
    ]) {
      const result = ok(oarIn(cwd, ['process', ...args]), `process ${args[0]}`, 2);
      expect(errorOf(result)).toMatchObject({ code: 'process_not_found', details: { processId: 'proc_nope' } });
    }
    const noText = ok(oarIn(cwd, ['process', 'write', sessionId, 'proc_nope']), 'no text', 2);
    expect(errorOf(noText).code).toBe('invalid_option');
    for (const wait of ['-1', 'soon', '601']) {
      const badWait = ok(oarIn(cwd, ['process', 'terminate', sessionId, 'proc_nope', '--wait', wait]), wait, 2);
      expect(errorOf(badWait)).toMatchObject({ code: 'invalid_option', message: expect.stringContaining('--wait') });
    }
    const noSession = ok(oarIn(cwd, ['process', 'terminate', 'ses_nope', 'proc_nope']), 'no session', 2);
    expect(errorOf(noSession).code).toBe('session_not_found');
    // Nothing was requested.
    expect(
      ofType(eventsOf(cwd, sessionId), 'thread.updated').filter((e) => e.payload.processRequest !== undefined),
    ).toEqual([]);
  });
});

describe('oar fork', { timeout: 120_000 }, () => {
  it('forks a waiting session at its last event: the fork waits alone, answered there; --at and errors', () => {
    const cwd = writingProject();
    const { sessionId, actionId } = waiting(oarIn(cwd, ['run', 'write it']));
    const source = eventsOf(cwd, sessionId);

    const forked = JSON.parse(ok(oarIn(cwd, ['fork', sessionId, '--json']), 'oar fork').stdout) as {
      sessionId: string;
      events: number;
      unfinished: boolean;
      forkedFrom: { sequence: number };
    };
    expect(forked).toMatchObject({ events: source.length, unfinished: true, forkedFrom: { sequence: source.length } });
    // The same question waits in the fork; answered there, the fork's turn completes and the source still waits.
    ok(oarIn(cwd, ['respond', forked.sessionId, actionId, 'approve']), 'answered in the fork');
    expect(readFileSync(join(cwd, 'out.txt'), 'utf8')).toBe('hello\n');
    expect(ofType(eventsOf(cwd, forked.sessionId), 'turn.completed')).toHaveLength(1);
    expect(eventsOf(cwd, sessionId)).toHaveLength(source.length);

    // Forked before the turn: nothing in progress there; the text output says how to go on.
    const submitted = source.findIndex((e) => e.type === 'turn.submitted');
    const early = ok(oarIn(cwd, ['fork', sessionId, '--at', String(submitted), '--id', 'ses_early']), 'fork --at');
    expect(early.stdout).toContain(`ses_early: ${submitted} events of ${sessionId}`);
    expect(early.stdout).toContain('oar run --session ses_early');
    expect(eventsOf(cwd, 'ses_early').map((e) => e.type)).toEqual([
      ...source.slice(0, submitted).map((e) => e.type),
      'session.updated',
    ]);

    expect(errorOf(ok(oarIn(cwd, ['fork', sessionId, '--id', 'ses_early']), 'taken', 2)).code).toBe('session_exists');
    expect(errorOf(ok(oarIn(cwd, ['fork', sessionId, '--at', '100000']), 'past the end', 2)).code).toBe(
      'invalid_input',
    );
    expect(errorOf(ok(oarIn(cwd, ['fork', sessionId, '--at', 'soon']), 'not a number', 2)).code).toBe('invalid_option');
    expect(errorOf(ok(oarIn(cwd, ['fork', 'ses_nope']), 'unknown', 2)).code).toBe('session_not_found');
  });
});
