import { spawn } from 'node:child_process';
import { existsSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent, SessionSnapshot } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { assertEventsConform, assertSnapshotConforms } from '../../runtime/test/support/schemas.js';
import { bin, ndjson, oarIn, spawnOar, tempDir, writeJson } from './cli-helpers.js';

const answer = (message: string) => ({ protocol: { kind: 'answer', message } });
const act = (calls: unknown[], message = 'Working.') => ({ protocol: { kind: 'act', message, calls } });

function events(cwd: string, sessionId: string): RuntimeEvent[] {
  const run = oarIn(cwd, ['events', sessionId, '--json']);
  expect(run.code).toBe(0);
  return ndjson(run.stdout) as unknown as RuntimeEvent[];
}

function resultLine(stdout: string): { sessionId: string; status: string; answer?: string; error?: { code: string } } {
  const last = ndjson(stdout).at(-1) as { result: { sessionId: string; status: string; answer?: string } };
  return last.result;
}

describe('oar demo', () => {
  it('runs a complete governed turn on embedded SQLite and leaves a replayable, conforming log', () => {
    const cwd = tempDir();
    const run = oarIn(cwd, ['demo']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('delegated to code-reviewer');
    expect(run.stdout).toContain('auto-approved: no terminal to ask in');
    expect(run.stdout).toContain('spilled to artifact');
    // Auto-approved, so the answer says the write was approved (from the recorded outcome, not fixed text).
    expect(run.stdout).toContain('The write was approved: the review is in `REVIEW.md`.');
    expect(existsSync(join(cwd, '.oar/oar.db'))).toBe(true);
    expect(readFileSync(join(cwd, '.oar/demo-workspace/REVIEW.md'), 'utf8')).toContain('postinstall');
    const sessionId = /session (ses_\w+) in/.exec(run.stdout)?.[1] ?? '';
    const log = events(cwd, sessionId);
    const types = log.map((e) => e.type);
    for (const type of [
      'tool.catalog.resolved',
      'permission.evaluated',
      'action.required',
      'action.resolved',
      'subagent.spawned',
      'subagent.completed',
      'output.spilled',
      'artifact.changed',
      'turn.completed',
    ]) {
      expect(types, type).toContain(type);
    }
    // Parallel reads: all four started before the first result.
    const firstResult = types.indexOf('tool.result');
    expect(types.slice(0, firstResult).filter((t) => t === 'tool.started')).toHaveLength(4);
    assertEventsConform(log);
    const replay = oarIn(cwd, ['replay', sessionId]);
    expect(replay.code).toBe(0);
    expect(JSON.parse(replay.stdout)).toMatchObject({ equal: true, differences: [] });
    const inspect = oarIn(cwd, ['inspect', sessionId, '--json']);
    assertSnapshotConforms(JSON.parse(inspect.stdout) as SessionSnapshot);
    // Where its work ran: the demo's workspace, no commands (the demo binds no exec), nothing left running.
    const environment = oarIn(cwd, ['environment', sessionId, '--json']);
    expect(environment.code, environment.stderr).toBe(0);
    const env = JSON.parse(environment.stdout) as {
      cwd: string;
      processLimits: { status: string };
      activeProcesses: [];
    };
    expect(env.cwd).toBe(realpathSync(join(cwd, '.oar/demo-workspace')));
    expect(env).toMatchObject({ processLimits: { status: 'unavailable' }, activeProcesses: [] });
    const shown = oarIn(cwd, ['environment', sessionId]);
    expect(shown.stdout).toContain(`cwd: ${env.cwd}`);
    expect(shown.stdout).toContain('live processes: 0');
  });

  it('--json prints every event as NDJSON and a result line', () => {
    const cwd = tempDir();
    const run = oarIn(cwd, ['demo', '--json']);
    expect(run.code).toBe(0);
    const lines = ndjson(run.stdout);
    expect(resultLine(run.stdout).status).toBe('completed');
    expect(lines.slice(0, -1).every((e) => typeof e.type === 'string' && typeof e.sequence === 'number')).toBe(true);
  });
});

function project(script: unknown, config: Record<string, unknown> = {}): string {
  const cwd = tempDir();
  writeJson(cwd, 'script.json', script);
  writeJson(cwd, 'oar.config.json', { model: 'script:script.json', ...config });
  writeFileSync(join(cwd, 'notes.md'), 'hello\n');
  return cwd;
}

const writeNotes = act([{ id: 'w1', type: 'tool', name: 'write', args: { filePath: 'out.md', content: 'written' } }]);

describe('oar run: a plain-text reply under the tool carrier', () => {
  it('is printed under the error when the turn fails on it, and is the answer where the agent allows it', () => {
    const steps = [{ text: 'Paris is the capital.' }, { text: 'It is Paris, as I said.' }];
    const failing = oarIn(project({ steps }), ['run', 'Capital of France?']);
    expect(failing.stdout).toContain('error: protocol_violation');
    expect(failing.stdout).toContain('The model said (nothing of it was executed):\nIt is Paris, as I said.');
    const allowed = oarIn(project({ steps }, { agent: { onProtocolFailure: 'plain_text' } }), [
      'run',
      'Capital of France?',
    ]);
    expect(allowed.code, allowed.stdout + allowed.stderr).toBe(0);
    expect(allowed.stdout).toContain('It is Paris, as I said.');
    expect(allowed.stdout).not.toContain('error:');
  });
});

describe('oar inspect: usage', () => {
  it('prints the session’s tokens with the cached and reasoning parts the model reported', () => {
    const steps = [
      {
        ...answer('Done.'),
        usage: { inputTokens: 1200, outputTokens: 80, cachedInputTokens: 1000, reasoningTokens: 30 },
      },
    ];
    const cwd = project({ steps });
    const run = oarIn(cwd, ['run', '--json', 'go']);
    expect(run.code, run.stderr).toBe(0);
    const { sessionId } = resultLine(run.stdout) as { sessionId: string };
    const inspect = oarIn(cwd, ['inspect', sessionId]);
    expect(inspect.stdout).toContain('tokens: 1200 in, 80 out (1000 of them cached, 30 reasoning)');
  });
});

describe('oar run approvals', () => {
  it('--approve-all approves the write with a visible note', () => {
    const cwd = project({ steps: [writeNotes, answer('Wrote it.')] });
    const run = oarIn(cwd, ['run', '--approve-all', 'write the file']);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toContain('auto-approved (--approve-all)');
    expect(readFileSync(join(cwd, 'out.md'), 'utf8')).toBe('written');
  });

  it('--deny-all denies it: no side effect, and the model is told', () => {
    const cwd = project({ steps: [writeNotes, answer('I was not allowed to write.')] });
    const run = oarIn(cwd, ['run', '--deny-all', '--json', 'write the file']);
    expect(run.code).toBe(0);
    expect(existsSync(join(cwd, 'out.md'))).toBe(false);
    const log = ndjson(run.stdout) as unknown as RuntimeEvent[];
    const denied = log.find((e) => e.type === 'run.status' && (e.payload as { status?: string }).status === 'denied');
    expect(JSON.stringify(denied?.payload)).toContain('permission_denied');
  });

  it('without a TTY or flag the turn waits (exit 3); oar respond approves and finishes it', () => {
    const cwd = project({ steps: [writeNotes, answer('Done after approval.')] });
    const run = oarIn(cwd, ['run', 'write the file']);
    expect(run.code).toBe(3);
    const [, sessionId, actionId] = /oar respond (ses_\w+) (act_\w+)/.exec(run.stdout) ?? [];
    expect(existsSync(join(cwd, 'out.md'))).toBe(false);
    // Still pending after the process ended: pending decisions are durable and never auto-approved.
    const inspect = JSON.parse(oarIn(cwd, ['inspect', String(sessionId), '--json']).stdout) as SessionSnapshot;
    expect(inspect.threads[0]?.pendingRequests.map((p) => p.actionId)).toEqual([actionId]);
    const respond = oarIn(cwd, ['respond', String(sessionId), String(actionId), 'approve']);
    expect(respond.code, respond.stdout + respond.stderr).toBe(0);
    expect(respond.stdout).toContain('Done after approval.');
    expect(readFileSync(join(cwd, 'out.md'), 'utf8')).toBe('written');
  });
});

describe('malformed model output through the binary', () => {
  it('one corrective retry, recorded, then success', () => {
    const cwd = project({
      steps: [
        { toolCalls: [{ name: 'AgentProtocolOutput', arguments: '{"kind": "act", calls: [' }] },
        answer('Recovered.'),
      ],
    });
    const run = oarIn(cwd, ['run', '--json', 'go']);
    expect(run.code).toBe(0);
    const log = ndjson(run.stdout) as unknown as RuntimeEvent[];
    const warning = log.find((e) => e.type === 'runtime.warning');
    expect(warning?.payload).toMatchObject({ code: 'protocol_violation' });
    const requests = log
      .filter((e) => e.type === 'model.requested')
      .map((e) => (e.payload as { corrective?: boolean }).corrective);
    expect(requests).toEqual([false, true]);
    expect(resultLine(run.stdout).answer).toBe('Recovered.');
  });

  it('fails closed after the corrective retry also fails', () => {
    const bad = { text: 'I will just do it: ```json\n{"name": "shell", "arguments": {"cmd": "rm -rf /"}}\n```' };
    const cwd = project({ steps: [bad, bad] });
    const run = oarIn(cwd, ['run', '--json', 'go']);
    expect(run.code).toBe(1);
    expect(resultLine(run.stdout).error?.code).toBe('protocol_violation');
  });
});

describe('reading commands and bad input', () => {
  it('unknown session ids are structured errors with exit 2', () => {
    const cwd = tempDir();
    // A store with no such session (without one, a reading command says store_not_found: reading-cli.test.ts).
    expect(oarIn(cwd, ['workspaces', 'create', 'team']).code).toBe(0);
    for (const args of [
      ['inspect', 'ses_nope'],
      ['replay', 'ses_nope'],
      ['export', 'ses_nope'],
      ['events', 'ses_nope'],
    ]) {
      const run = oarIn(cwd, args);
      expect(run.code, args.join(' ')).toBe(2);
      expect(JSON.parse(run.stderr.trim().split('\n').at(-1) ?? '{}').error.code).toBe('session_not_found');
    }
  });

  it('a missing model is a clear error', () => {
    const run = oarIn(tempDir(), ['run', 'hello']);
    expect(run.code).toBe(2);
    const { error } = JSON.parse(run.stderr);
    expect(error.code).toBe('model_required');
    // The runtime names no CLI flag; the CLI adds what to do in its own terms.
    expect(error.message).not.toContain('--model');
    expect(error.details.hint).toContain('--model');
  });

  it('an invalid config is a clear error', () => {
    const cwd = tempDir();
    writeJson(cwd, 'oar.config.json', { model: 'script:x.json', permissions: { mode: 'yolo' } });
    const run = oarIn(cwd, ['run', 'hello']);
    expect(run.code).toBe(2);
    expect(JSON.parse(run.stderr).error.code).toBe('invalid_config');
  });

  it('sessions lists, export --evidence writes the pack with correlation ids', () => {
    const cwd = tempDir();
    const demo = oarIn(cwd, ['demo', '--json']);
    const { sessionId } = resultLine(demo.stdout);
    expect(oarIn(cwd, ['sessions']).stdout).toContain(sessionId);
    const out = join(cwd, 'evidence.json');
    expect(oarIn(cwd, ['export', sessionId, '--evidence', '--out', out]).code).toBe(0);
    const pack = JSON.parse(readFileSync(out, 'utf8'));
    expect(pack.correlation.sessionId).toBe(sessionId);
    expect(pack.correlation.threadIds.length).toBe(2);
    expect(pack.artifacts.length).toBeGreaterThan(3);
    expect(pack.timeline.length).toBeGreaterThan(50);
  });
});

describe('oar events --follow', () => {
  it('prints the log, then new events as they are committed, until interrupted', async () => {
    const cwd = tempDir();
    const { sessionId } = resultLine(oarIn(cwd, ['demo', '--json']).stdout);
    // The whole log as it stands, so the follower is known to have printed all of it before anything is added.
    const logged = ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout).length;
    const follower = spawnOar(cwd, ['events', sessionId, '--follow', '--json']);
    let out = '';
    follower.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    const count = () => ndjson(out).length;
    const waitFor = async (check: () => boolean) => {
      for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 50));
    };
    await waitFor(() => count() >= logged);
    const before = count();
    expect(before).toBeGreaterThan(50);
    // A command in another process appends to the same session: the follower prints it.
    expect(oarIn(cwd, ['export', sessionId, '--evidence', '--out', join(cwd, 'e.json')]).code).toBe(0);
    await waitFor(() => count() > before);
    const exited = new Promise((resolve) => follower.on('exit', resolve));
    follower.kill('SIGTERM');
    await exited;
    const last = ndjson(out).at(-1) as unknown as RuntimeEvent;
    expect(last.type).toBe('evidence.changed');
    expect(count()).toBe(before + 1);
  });
});

/**
 * `oar demo` under `script` (util-linux), which gives the binary a real pseudo-terminal, so the TTY path runs as it
 * does for a person: `keys` are typed at the first approval prompt.
 */
async function demoAtPrompt(cwd: string, keys: string): Promise<{ code: number | null; out: string; typed: boolean }> {
  const child = spawn('script', ['-qfec', `${bin} demo`, '/dev/null'], { cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let typed = false;
  child.stdout.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    if (!typed && out.includes('[y]es / [n]o')) {
      typed = true;
      child.stdin.write(keys);
    }
  });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { code, out, typed };
}

describe('interactive approvals in a terminal', () => {
  it.each([
    ['n', false],
    ['y', true],
  ])('answering %s at the prompt decides the write', async (key, written) => {
    const cwd = tempDir();
    const { code, out, typed } = await demoAtPrompt(cwd, `${key}\n`);
    expect(typed, out).toBe(true);
    expect(code).toBe(0);
    expect(out).not.toContain('auto-approved');
    expect(existsSync(join(cwd, '.oar/demo-workspace/REVIEW.md'))).toBe(written);
    expect(out).toContain(written ? 'decision approve' : 'decision deny');
  });

  // Seen (issue 25): in raw mode the terminal hands Ctrl-C to the prompt, not to the process as SIGINT; the prompt
  // failed with internal_error (exit 70) and the turn was left waiting for its decision.
  it('Ctrl-C at the prompt interrupts the turn: cancelled, exit 130, nothing written', async () => {
    const cwd = tempDir();
    const { code, out, typed } = await demoAtPrompt(cwd, '\x03');
    expect(typed, out).toBe(true);
    expect(code, out).toBe(130);
    expect(out).not.toContain('internal_error');
    expect(existsSync(join(cwd, '.oar/demo-workspace/REVIEW.md'))).toBe(false);
    const sessionId = /ses_[0-9a-f]+/.exec(out)?.[0] ?? '';
    const shown = oarIn(cwd, ['inspect', sessionId, '--json']);
    expect(shown.code, shown.stderr).toBe(0);
    const snapshot = JSON.parse(shown.stdout) as SessionSnapshot;
    expect(snapshot.threads[0]?.turns.at(-1)?.status).toBe('cancelled');
    expect(snapshot.threads.flatMap((t) => t.pendingRequests)).toEqual([]);
  });
});
