import { existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, symlinkSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { RuntimeEvent, SessionSnapshot } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { type CliResult, FIXTURES, ndjson, oarIn, tempDir, writeJson } from './cli-helpers.js';

/**
 * A session owns its binding: every later step (respond, resume, the next turn) runs with the configuration the
 * session was created with (or explicitly updated to), from any directory, with no flags. SQLite, one explicit
 * store file shared by all the directories involved.
 */

const answer = (message: string) => ({ protocol: { kind: 'answer', message } });
const act = (calls: unknown[], message = 'Working.') => ({ protocol: { kind: 'act', message, calls } });
const write = (content: string, id = 'w1', filePath = 'out.md') => ({
  id,
  type: 'tool',
  name: 'write',
  args: { filePath, content },
});
/** A human `ask_user` action: the compact carrier only declares tool/agent calls, so the full DSL in text. */
const askUser = (question: string) => {
  const block = {
    type: 'agent.protocol',
    version: '1',
    intent: 'execute',
    payload: {
      type: 'action_graph',
      actions: [{ type: 'action', id: 'ask', executor: { type: 'human', target: 'ask_user' }, input: { question } }],
    },
  };
  return { text: `Asking.\n\n\`\`\`json agent-protocol\n${JSON.stringify(block, null, 2)}\n\`\`\`\n` };
};
/** Answers labelled by model and step index, so any answer tells which script and which step produced it. */
const labelled = (label: string, from: number, to: number) =>
  Array.from({ length: to - from }, (_, i) => answer(`${label} step ${from + i}`));

const real = (dir: string) => realpathSync(dir);
const payloadOf = (e: RuntimeEvent | undefined) => (e?.payload ?? {}) as Record<string, unknown>;

function ok(run: CliResult, what: string, code = 0): CliResult {
  expect(run.code, `${what}\nstdout:\n${run.stdout}\nstderr:\n${run.stderr}`).toBe(code);
  return run;
}

function events(store: string, sessionId: string, cwd = tempDir('oar-bind-read-')): RuntimeEvent[] {
  const run = ok(oarIn(cwd, ['events', sessionId, '--json', '--store', store]), `events ${sessionId}`);
  return ndjson(run.stdout) as unknown as RuntimeEvent[];
}

function snapshot(store: string, sessionId: string): SessionSnapshot {
  const run = ok(oarIn(tempDir('oar-bind-read-'), ['inspect', sessionId, '--json', '--store', store]), 'inspect');
  return JSON.parse(run.stdout) as SessionSnapshot;
}

interface Bound {
  binding: {
    model?: string;
    mainAgent: { name: string; model?: string };
    agents: { name: string; model?: string }[];
    models: Record<string, Record<string, unknown>>;
    workspaceRoot: string;
    toolModules: string[];
    permissions: { mode: string; rules: unknown[] };
    limits: Record<string, number>;
  };
  bindingHash: string;
}

function show(store: string, sessionId: string, cwd = tempDir('oar-bind-show-')): Bound {
  const run = ok(oarIn(cwd, ['session', 'show', sessionId, '--store', store]), 'session show');
  return JSON.parse(run.stdout) as Bound;
}

/** The session id printed by a non-json `oar run` (its last line). */
function sessionOf(stdout: string): string {
  const id = /session (ses_\w+) — log in/.exec(stdout)?.[1];
  expect(id, stdout).toBeDefined();
  return id as string;
}

/** The `→ oar respond …` follow-up lines printed by a waiting `oar run`. */
function followUps(stdout: string): string[] {
  return stdout
    .split('\n')
    .map((line) => /→ (oar respond .*)$/.exec(line)?.[1])
    .filter((line): line is string => line !== undefined);
}

/** Split a command line as a POSIX shell would for the quoting `oar` prints: '…' literal, "…", backslash. */
function shellSplit(line: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i] as string;
    if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new Error(`unterminated single quote in: ${line}`);
      word += line.slice(i + 1, end);
      i = end;
      inWord = true;
    } else if (c === '"') {
      i++;
      while (i < line.length && line[i] !== '"') {
        if (line[i] === '\\' && i + 1 < line.length) i++;
        word += line[i];
        i++;
      }
      if (i >= line.length) throw new Error(`unterminated double quote in: ${line}`);
      inWord = true;
    } else if (c === '\\' && i + 1 < line.length) {
      word += line[++i];
      inWord = true;
    } else if (c === ' ' || c === '\t') {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  return words;
}

/** A directory holding scripts (and optionally a config); returns the real path. */
function projectDir(files: Record<string, unknown>, prefix = 'oar-bind-proj-'): string {
  const dir = real(tempDir(prefix));
  for (const [name, value] of Object.entries(files)) writeJson(dir, name, value);
  return dir;
}

function storeFile(prefix = 'oar-bind-store-'): string {
  return join(real(tempDir(prefix)), 'oar.db');
}

describe('respond from another directory runs with the session binding', { timeout: 180_000 }, () => {
  it('the approved write lands in the bound workspace, not the respond directory; the turn completes', () => {
    const store = storeFile();
    const ws1 = real(tempDir('oar-bind-ws1-'));
    const proj = projectDir({ 'a.json': { steps: [act([write('from A')]), answer('A finished the write.')] } });
    const run = oarIn(proj, ['run', '--workspace', ws1, '--model', 'script:a.json', '--store', store, 'write it']);
    ok(run, 'run waits for the write approval', 3);
    const sessionId = sessionOf(run.stdout);
    const [, actionId] = /oar respond ses_\w+ (act_\w+)/.exec(run.stdout) ?? [];
    expect(actionId, run.stdout).toBeDefined();
    expect(existsSync(join(ws1, 'out.md'))).toBe(false);

    // The binding is a durable fact of session.created: absolute script path, the real workspace path.
    const created = events(store, sessionId)[0];
    expect(created?.type).toBe('session.created');
    const createdBinding = payloadOf(created).binding as Bound['binding'];
    expect(createdBinding.model).toBe(`script:${join(proj, 'a.json')}`);
    expect(createdBinding.workspaceRoot).toBe(ws1);
    expect(payloadOf(created).bindingHash).toMatch(/^sha256:[0-9a-f]{64}$/);

    // A fresh directory: no config, no scripts, no flags but the store.
    const elsewhere = real(tempDir('oar-bind-elsewhere-'));
    const respond = ok(
      oarIn(elsewhere, ['respond', sessionId, String(actionId), 'approve', '--store', store]),
      'respond from another directory',
    );
    expect(respond.stdout).toContain('A finished the write.');
    expect(readFileSync(join(ws1, 'out.md'), 'utf8')).toBe('from A');
    expect(existsSync(join(elsewhere, 'out.md'))).toBe(false);
    expect(existsSync(join(proj, 'out.md'))).toBe(false);
    expect(readdirSync(elsewhere)).toEqual([]);

    const log = events(store, sessionId);
    const completed = log.filter((e) => e.type === 'turn.completed');
    expect(completed.map((e) => payloadOf(e).answer)).toEqual(['A finished the write.']);
    expect(log.some((e) => e.type === 'session.updated')).toBe(false);
  });
});

describe('resume drives exactly the named sessions, each with its own binding', { timeout: 180_000 }, () => {
  it('resume S1 --approve-all approves only S1 (ws1, model A); S2 keeps waiting; resume without ids changes nothing', () => {
    const store = storeFile();
    const ws1 = real(tempDir('oar-bind-ws1-'));
    const ws2 = real(tempDir('oar-bind-ws2-'));
    const proj1 = projectDir({ 'a.json': { steps: [act([write('from A')]), answer('A done.')] } });
    const proj2 = projectDir({
      'b.json': { steps: [act([write('from B')]), answer('B done.')] },
      'oar.config.json': {
        model: 'script:b.json',
        workspace: ws2,
        permissions: { mode: 'default', rules: [{ decision: 'ask', tool: 'write', reason: 'B reviews writes' }] },
        limits: { maxSteps: 7 },
      },
    });
    const run1 = oarIn(proj1, ['run', '--workspace', ws1, '--model', 'script:a.json', '--store', store, 'write A']);
    ok(run1, 'S1 waits', 3);
    const s1 = sessionOf(run1.stdout);
    const run2 = oarIn(proj2, ['run', '--store', store, 'write B']);
    ok(run2, 'S2 waits', 3);
    const s2 = sessionOf(run2.stdout);
    expect(run2.stdout).toContain('B reviews writes');
    expect(show(store, s2).binding).toMatchObject({
      model: `script:${join(proj2, 'b.json')}`,
      workspaceRoot: ws2,
      limits: { maxSteps: 7 },
    });

    // The resume directory has a config of its own that says something else entirely: it must not matter.
    const resumeDir = projectDir(
      {
        'decoy.json': { steps: labelled('DECOY', 0, 4) },
        'oar.config.json': { model: 'script:decoy.json', permissions: { mode: 'bypass' } },
      },
      'oar-bind-resume-',
    );
    const before1 = events(store, s1).length;
    const before2 = events(store, s2).length;

    const list = ok(oarIn(resumeDir, ['resume', '--store', store]), 'resume with no session lists');
    expect(list.stdout).toContain(s1);
    expect(list.stdout).toContain(s2);
    expect(events(store, s1)).toHaveLength(before1);
    expect(events(store, s2)).toHaveLength(before2);
    expect(existsSync(join(ws1, 'out.md'))).toBe(false);
    expect(existsSync(join(ws2, 'out.md'))).toBe(false);

    const resumed = ok(oarIn(resumeDir, ['resume', s1, '--approve-all', '--store', store]), 'resume S1 --approve-all');
    expect(resumed.stdout).toContain('0 session(s) still waiting');
    expect(readFileSync(join(ws1, 'out.md'), 'utf8')).toBe('from A');
    expect(existsSync(join(ws2, 'out.md'))).toBe(false);
    expect(existsSync(join(resumeDir, 'out.md'))).toBe(false);
    const log1 = events(store, s1);
    expect(log1.filter((e) => e.type === 'turn.completed').map((e) => payloadOf(e).answer)).toEqual(['A done.']);
    expect(JSON.stringify(log1)).not.toContain('DECOY');

    // S2 untouched: same log, still one pending write approval, nothing written.
    expect(events(store, s2)).toHaveLength(before2);
    const s2Main = snapshot(store, s2).threads[0];
    expect(s2Main?.pendingRequests.map((p) => p.actionType)).toEqual(['tool_approval']);

    // And S2 is still resumable on its own, later, with its own binding (model B into ws2).
    const resumed2 = ok(oarIn(resumeDir, ['resume', s2, '--approve-all', '--store', store]), 'resume S2');
    expect(resumed2.stdout).toContain('0 session(s) still waiting');
    expect(readFileSync(join(ws2, 'out.md'), 'utf8')).toBe('from B');
    expect(
      events(store, s2)
        .filter((e) => e.type === 'turn.completed')
        .map((e) => payloadOf(e).answer),
    ).toEqual(['B done.']);
    expect(readFileSync(join(ws1, 'out.md'), 'utf8')).toBe('from A');
  });
});

describe('the follow-up printed by oar run works exactly as printed', { timeout: 180_000 }, () => {
  it('a tool approval: the printed respond line (approve) run from another directory finishes the turn', () => {
    // A store path with a space, relative to the run directory: the printed --store must still work elsewhere.
    const proj = projectDir({
      'a.json': { steps: [act([write('as printed')]), answer('Printed follow-up worked.')] },
      'oar.config.json': { model: 'script:a.json' },
    });
    mkdirSync(join(proj, 'my store'));
    const run = oarIn(proj, ['run', '--store', 'my store/oar.db', 'write it']);
    ok(run, 'run waits', 3);
    const lines = followUps(run.stdout);
    expect(lines, run.stdout).toHaveLength(1);
    const line = lines[0] as string;
    expect(line).toContain('approve|deny');
    expect(line).toContain(`--store '${join(proj, 'my store/oar.db')}'`);
    const argv = shellSplit(line.replace('approve|deny', 'approve'));
    expect(argv.slice(0, 2)).toEqual(['oar', 'respond']);
    const elsewhere = real(tempDir('oar-bind-elsewhere-'));
    const respond = ok(oarIn(elsewhere, argv.slice(1)), `printed follow-up: ${line}`);
    expect(respond.stdout).toContain('Printed follow-up worked.');
    expect(readFileSync(join(proj, 'out.md'), 'utf8')).toBe('as printed');
    expect(existsSync(join(elsewhere, 'out.md'))).toBe(false);
    const store = join(proj, 'my store/oar.db');
    const sessionId = sessionOf(run.stdout);
    const turns = events(store, sessionId).filter((e) => e.type === 'turn.completed');
    expect(turns.map((e) => payloadOf(e).answer)).toEqual(['Printed follow-up worked.']);
  });

  it('an ask_user question: the printed line with the answer filled in delivers the text and finishes the turn', () => {
    const store = join(real(tempDir('oar bind store with spaces-')), 'oar.db');
    const proj = projectDir({
      'q.json': { steps: [askUser('Which colour should the logo be?'), answer('Logo colour noted.')] },
    });
    const run = oarIn(proj, ['run', '--model', 'script:q.json', '--store', store, 'ask me']);
    ok(run, 'run waits for the answer', 3);
    expect(run.stdout).toContain('Which colour should the logo be?');
    const lines = followUps(run.stdout);
    expect(lines, run.stdout).toHaveLength(1);
    const line = lines[0] as string;
    expect(line).toContain("approve --text '<your answer>'");
    expect(line).toContain(`--store '${store}'`);
    const argv = shellSplit(line.replace('<your answer>', 'deep teal, please'));
    expect(argv).toContain('deep teal, please');
    const elsewhere = real(tempDir('oar-bind-elsewhere-'));
    const respond = ok(oarIn(elsewhere, argv.slice(1)), `printed follow-up: ${line}`);
    expect(respond.stdout).toContain('Logo colour noted.');
    const sessionId = sessionOf(run.stdout);
    const log = events(store, sessionId);
    const resolved = log.find((e) => e.type === 'action.resolved');
    expect(JSON.stringify(payloadOf(resolved))).toContain('deep teal, please');
    expect(log.filter((e) => e.type === 'turn.completed').map((e) => payloadOf(e).answer)).toEqual([
      'Logo colour noted.',
    ]);
  });
});

describe('the follow-up printed for a sub-agent decision', { timeout: 180_000 }, () => {
  it('a child agent (own bound model, a tool from a bound module) continues from another directory and the turn completes', () => {
    const store = storeFile();
    const ws = real(tempDir('oar-bind-ws-'));
    const proj = projectDir({
      'main.json': {
        steps: [
          act([{ id: 'd1', type: 'agent', name: 'helper', args: { task: 'count once' } }], 'Delegating.'),
          answer('MAIN done after the helper.'),
        ],
      },
    });
    mkdirSync(join(proj, 'agents'));
    writeJson(proj, 'agents/helper.json', {
      steps: [],
      agents: {
        helper: {
          steps: [
            act([{ id: 'c1', type: 'tool', name: 'count', args: { label: 'helper-count' } }], 'Counting.'),
            answer('HELPER counted.'),
          ],
        },
      },
    });
    const moduleFile = join(FIXTURES, 'count-tools.mjs');
    writeJson(proj, 'oar.config.json', {
      model: 'script:main.json',
      workspace: ws,
      tools: { modules: [relative(proj, moduleFile)] },
      agents: [{ name: 'helper', description: 'counts', model: 'script:agents/helper.json' }],
    });
    const run = oarIn(proj, ['run', '--store', store, 'delegate the count']);
    ok(run, 'run waits for the helper tool approval', 3);
    const sessionId = sessionOf(run.stdout);
    const bound = show(store, sessionId).binding;
    expect(bound.toolModules).toEqual([moduleFile]);
    expect(bound.agents.map((a) => a.model)).toEqual([`script:${join(proj, 'agents/helper.json')}`]);
    const lines = followUps(run.stdout);
    expect(lines, run.stdout).toHaveLength(1);
    const argv = shellSplit((lines[0] as string).replace('approve|deny', 'approve'));
    const elsewhere = real(tempDir('oar-bind-elsewhere-'));
    const respond = oarIn(elsewhere, argv.slice(1));

    // The bound module's tool ran in the bound workspace, the helper continued with its own bound model, and the
    // main agent's turn completed with its answer.
    expect(readFileSync(join(ws, 'counts.txt'), 'utf8')).toBe('helper-count\n');
    expect(readdirSync(elsewhere)).toEqual([]);
    const log = events(store, sessionId);
    expect(log.filter((e) => e.type === 'turn.completed').map((e) => payloadOf(e).answer)).toEqual([
      'HELPER counted.',
      'MAIN done after the helper.',
    ]);
    // So the command, as printed, succeeds and reports the session's answer.
    ok(respond, `printed follow-up for the sub-agent decision: ${lines[0]}`);
    expect(respond.stdout).toContain('MAIN done after the helper.');
  });
});

describe('run --session refuses flags that contradict the binding', { timeout: 180_000 }, () => {
  function conflict(run: CliResult, sessionId: string, flag: string): void {
    ok(run, `run --session with a contradicting ${flag}`, 2);
    const last = run.stderr.trim().split('\n').at(-1) ?? '';
    const error = (JSON.parse(last) as { error: { code: string; message: string } }).error;
    expect(error.code).toBe('binding_conflict');
    expect(error.message).toContain(`oar session update ${sessionId}`);
    expect(error.message).toContain(flag);
  }

  it('--model, --workspace or --agent other than bound: exit 2, binding_conflict, nothing appended', () => {
    const store = storeFile();
    const ws1 = real(tempDir('oar-bind-ws1-'));
    const wsOther = real(tempDir('oar-bind-wsother-'));
    const proj = projectDir({
      'a.json': { steps: labelled('A', 0, 6) },
      'other.json': { steps: labelled('OTHER', 0, 6) },
    });
    const first = oarIn(proj, ['run', '--workspace', ws1, '--model', 'script:a.json', '--store', store, 'hello']);
    ok(first, 'first turn');
    expect(first.stdout).toContain('A step 0');
    const sessionId = sessionOf(first.stdout);
    const count = events(store, sessionId).length;
    const hash = show(store, sessionId).bindingHash;

    const base = ['run', '--session', sessionId, '--store', store];
    conflict(oarIn(proj, [...base, '--model', 'script:other.json', 'again']), sessionId, '--model');
    conflict(oarIn(proj, [...base, '--workspace', wsOther, 'again']), sessionId, '--workspace');
    conflict(oarIn(proj, [...base, '--agent', 'reviewer', 'again']), sessionId, '--agent');
    expect(events(store, sessionId)).toHaveLength(count);
    expect(show(store, sessionId).bindingHash).toBe(hash);
    expect(readdirSync(wsOther)).toEqual([]);

    // Flags that agree with the binding (spelt relative to this directory) are no conflict: the turn runs.
    const same = oarIn(proj, [...base, '--model', 'script:a.json', '--workspace', ws1, 'agreeing flags']);
    ok(same, 'run --session with flags equal to the binding');
    expect(same.stdout).toContain('A step 1');
    expect(show(store, sessionId).bindingHash).toBe(hash);
  });
});

describe('oar session update', { timeout: 180_000 }, () => {
  it('--model changes the model from the next turn, recorded as session.updated', () => {
    const store = storeFile();
    const proj = projectDir({ 'a.json': { steps: labelled('A', 0, 6) } });
    const other = projectDir({ 'other.json': { steps: labelled('OTHER', 0, 6) } });
    const first = ok(oarIn(proj, ['run', '--model', 'script:a.json', '--store', store, 'one']), 'first turn');
    expect(first.stdout).toContain('A step 0');
    const sessionId = sessionOf(first.stdout);
    const before = show(store, sessionId);
    expect(before.binding.model).toBe(`script:${join(proj, 'a.json')}`);

    const otherSpec = `script:${join(other, 'other.json')}`;
    ok(
      oarIn(tempDir('oar-bind-update-'), ['session', 'update', sessionId, '--model', otherSpec, '--store', store]),
      'session update --model',
    );
    const after = show(store, sessionId);
    expect(after.binding.model).toBe(otherSpec);
    expect(after.binding.mainAgent.model).toBeUndefined();
    expect(after.bindingHash).not.toBe(before.bindingHash);
    // Only the model changed.
    expect({ ...after.binding, model: undefined }).toEqual({ ...before.binding, model: undefined });

    const next = ok(oarIn(tempDir('oar-bind-next-'), ['run', '--session', sessionId, '--store', store, 'two']), 'next');
    expect(next.stdout).toContain('OTHER step 1');
    expect(next.stdout).not.toContain('A step 1');

    const log = events(store, sessionId);
    const updated = log.filter((e) => e.type === 'session.updated');
    expect(updated).toHaveLength(1);
    expect(payloadOf(updated[0]).bindingHash).toBe(after.bindingHash);
    expect((payloadOf(updated[0]).binding as Bound['binding']).model).toBe(otherSpec);
    const started = log.filter((e) => e.type === 'turn.started').map((e) => payloadOf(e).bindingHash);
    expect(started).toEqual([before.bindingHash, after.bindingHash]);
  });

  it('an update while a turn waits for approval leaves that turn on the old model; the next turn uses the new one', () => {
    const store = storeFile();
    const ws = real(tempDir('oar-bind-ws-'));
    const proj = projectDir({ 'a.json': { steps: [act([write('old model')]), ...labelled('A', 1, 6)] } });
    const newDir = projectDir({ 'new.json': { steps: labelled('NEW', 0, 6) } });
    const run = oarIn(proj, ['run', '--workspace', ws, '--model', 'script:a.json', '--store', store, 'write']);
    ok(run, 'run waits', 3);
    const sessionId = sessionOf(run.stdout);
    const [, actionId] = /oar respond ses_\w+ (act_\w+)/.exec(run.stdout) ?? [];
    const old = show(store, sessionId);

    // A relative script spec is made absolute against the directory update runs in.
    const update = oarIn(newDir, ['session', 'update', sessionId, '--model', 'script:new.json', '--store', store]);
    ok(update, 'session update while waiting');
    const updated = show(store, sessionId);
    expect(updated.binding.model).toBe(`script:${join(newDir, 'new.json')}`);
    expect(updated.bindingHash).not.toBe(old.bindingHash);

    const respond = oarIn(tempDir('oar-bind-elsewhere-'), [
      'respond',
      sessionId,
      String(actionId),
      'approve',
      '--store',
      store,
    ]);
    ok(respond, 'respond after the update');
    expect(respond.stdout).toContain('A step 1');
    expect(respond.stdout).not.toContain('NEW');
    expect(readFileSync(join(ws, 'out.md'), 'utf8')).toBe('old model');

    const next = ok(
      oarIn(tempDir('oar-bind-next-'), ['run', '--session', sessionId, '--store', store, 'next']),
      'next',
    );
    expect(next.stdout).toContain('NEW step 2');

    const log = events(store, sessionId);
    expect(log.filter((e) => e.type === 'turn.completed').map((e) => payloadOf(e).answer)).toEqual([
      'A step 1',
      'NEW step 2',
    ]);
    const started = log.filter((e) => e.type === 'turn.started').map((e) => payloadOf(e).bindingHash);
    expect(started).toEqual([old.bindingHash, updated.bindingHash]);
    // Each model request names the script it went to (model id = the script's file name).
    const requested = log.filter((e) => e.type === 'model.requested').map((e) => payloadOf(e).modelId);
    expect(requested).toEqual(['a', 'a', 'new']);
  });
});

describe('oar session update: workspace, permission mode, refused updates', { timeout: 180_000 }, () => {
  it('--workspace (through a symlink) and --permission-mode while waiting: the waiting turn keeps both', () => {
    const store = storeFile();
    const ws = real(tempDir('oar-bind-ws-'));
    const ws2 = real(tempDir('oar-bind-ws2-'));
    const links = real(tempDir('oar-bind-links-'));
    symlinkSync(ws2, join(links, 'ws2-link'));
    const proj = projectDir({
      'a.json': {
        steps: [
          act([write('first', 'w1', 'one.md')]),
          answer('A step 1'),
          act([write('second', 'w2', 'two.md')]),
          answer('A step 3'),
        ],
      },
    });
    const run = oarIn(proj, ['run', '--workspace', ws, '--model', 'script:a.json', '--store', store, 'write one']);
    ok(run, 'run waits', 3);
    const sessionId = sessionOf(run.stdout);
    const [, actionId] = /oar respond ses_\w+ (act_\w+)/.exec(run.stdout) ?? [];

    ok(
      oarIn(links, [
        'session',
        'update',
        sessionId,
        '--workspace',
        'ws2-link',
        '--permission-mode',
        'bypass',
        '--store',
        store,
      ]),
      'session update --workspace --permission-mode',
    );
    const updated = show(store, sessionId).binding;
    expect(updated.workspaceRoot).toBe(ws2);
    expect(updated.permissions.mode).toBe('bypass');
    // A later mode never decides a pending approval.
    expect(snapshot(store, sessionId).threads[0]?.pendingRequests.map((p) => p.actionId)).toEqual([actionId]);
    expect(existsSync(join(ws, 'one.md'))).toBe(false);

    const respond = oarIn(tempDir('oar-bind-elsewhere-'), [
      'respond',
      sessionId,
      String(actionId),
      'approve',
      '--store',
      store,
    ]);
    ok(respond, 'respond');
    expect(readFileSync(join(ws, 'one.md'), 'utf8')).toBe('first');
    expect(existsSync(join(ws2, 'one.md'))).toBe(false);

    // The next turn: new workspace, and bypass writes without asking.
    const next = oarIn(tempDir('oar-bind-next-'), ['run', '--session', sessionId, '--store', store, 'write two']);
    ok(next, 'next turn writes without asking');
    expect(readFileSync(join(ws2, 'two.md'), 'utf8')).toBe('second');
    expect(existsSync(join(ws, 'two.md'))).toBe(false);
    const log = events(store, sessionId);
    expect(log.filter((e) => e.type === 'action.required')).toHaveLength(1);

    const bad = oarIn(links, ['session', 'update', sessionId, '--permission-mode', 'yolo', '--store', store]);
    ok(bad, 'an unknown permission mode', 2);
    expect(events(store, sessionId)).toHaveLength(log.length);
  });

  it('an update whose model cannot be resolved is refused and records nothing', () => {
    const store = storeFile();
    const proj = projectDir({ 'a.json': { steps: labelled('A', 0, 4) } });
    const first = ok(oarIn(proj, ['run', '--model', 'script:a.json', '--store', store, 'one']), 'first turn');
    const sessionId = sessionOf(first.stdout);
    const before = show(store, sessionId);
    const count = events(store, sessionId).length;

    const missing = join(proj, 'does-not-exist.json');
    const update = oarIn(proj, ['session', 'update', sessionId, '--model', `script:${missing}`, '--store', store]);
    ok(update, 'session update to a missing script', 2);
    expect(update.stderr).toContain('invalid_model_script');
    // A failed command changes nothing: same binding, no session.updated, and the session still runs.
    expect(events(store, sessionId).filter((e) => e.type === 'session.updated')).toEqual([]);
    expect(show(store, sessionId).bindingHash).toBe(before.bindingHash);
    expect(events(store, sessionId)).toHaveLength(count);
    const next = ok(oarIn(proj, ['run', '--session', sessionId, '--store', store, 'two']), 'the session still runs');
    expect(next.stdout).toContain('A step 1');
  });

  it('--model NAME of a model configured where the update runs: the session ends up runnable, or nothing changes', () => {
    const store = storeFile();
    const proj = projectDir({ 'a.json': { steps: labelled('A', 0, 4) } });
    const first = ok(oarIn(proj, ['run', '--model', 'script:a.json', '--store', store, 'one']), 'first turn');
    const sessionId = sessionOf(first.stdout);
    const before = show(store, sessionId);
    const cfg = projectDir({
      'alt.json': { steps: labelled('ALT', 0, 4) },
      'oar.config.json': { models: { alt: { provider: 'script', file: 'alt.json' } } },
    });
    const update = oarIn(cfg, ['session', 'update', sessionId, '--model', 'alt', '--store', store]);
    const next = oarIn(tempDir('oar-bind-next-'), ['run', '--session', sessionId, '--store', store, 'two']);
    const detail = `update exit ${update.code}: ${update.stdout}${update.stderr}\nnext turn exit ${next.code}: ${next.stdout}`;
    if (update.code === 0) {
      // Accepted: the session runs on the named model.
      expect(next.code, detail).toBe(0);
      expect(next.stdout, detail).toContain('ALT step 1');
    } else {
      // Refused: the binding is what it was, and the session still runs on it.
      expect(show(store, sessionId).bindingHash, detail).toBe(before.bindingHash);
      expect(next.code, detail).toBe(0);
      expect(next.stdout, detail).toContain('A step 1');
    }
  });
});

describe('a bound session does not depend on the configuration of the directory it is continued from', {
  timeout: 180_000,
}, () => {
  it.each([
    ['a workspace that does not exist there', { workspace: './not-built-yet' }],
    ['a tool module that does not exist there', { tools: { modules: ['./tools/not-written-yet.mjs'] } }],
  ])('respond from a directory whose oar.config.json names %s', (_what, config) => {
    const store = storeFile();
    const ws1 = real(tempDir('oar-bind-ws1-'));
    const proj = projectDir({ 'a.json': { steps: [act([write('bound')]), answer('Bound binding used.')] } });
    const run = oarIn(proj, ['run', '--workspace', ws1, '--model', 'script:a.json', '--store', store, 'write it']);
    ok(run, 'run waits', 3);
    const sessionId = sessionOf(run.stdout);
    const [, actionId] = /oar respond ses_\w+ (act_\w+)/.exec(run.stdout) ?? [];
    const other = projectDir({ 'oar.config.json': config }, 'oar-bind-otherproject-');
    const respond = oarIn(other, ['respond', sessionId, String(actionId), 'approve', '--store', store]);
    ok(respond, 'respond from a directory with an unrelated config');
    expect(respond.stdout).toContain('Bound binding used.');
    expect(readFileSync(join(ws1, 'out.md'), 'utf8')).toBe('bound');
  });
});

describe('the binding never holds secret values', { timeout: 180_000 }, () => {
  it('a configured model names MY_KEY; the key value is nowhere in show, events, export or the store file', () => {
    const secret = 'sk-secret-value-123';
    const headerSecret = 'hdr-secret-value-456';
    const store = storeFile();
    const proj = projectDir({
      'a.json': { steps: [answer('No network needed.')] },
      'oar.config.json': {
        model: 'script:a.json',
        models: {
          remote: {
            provider: 'openai-compatible',
            model: 'some-model',
            baseURL: 'http://127.0.0.1:9/v1',
            apiKeyEnv: 'MY_KEY',
            headersEnv: { 'x-api-key': 'MY_HEADER_KEY' },
          },
        },
        // A sub-agent bound to the remote model, never delegated to: its model is part of the binding.
        agents: [{ name: 'helper', description: 'never used', model: 'remote' }],
      },
    });
    const env = { MY_KEY: secret, MY_HEADER_KEY: headerSecret };
    const run = oarIn(proj, ['run', '--store', store, '--approve-all', 'hello'], undefined, env);
    ok(run, 'run with a configured-but-unused remote model');
    expect(run.stdout).toContain('No network needed.');
    const sessionId = sessionOf(run.stdout);

    const shown = oarIn(proj, ['session', 'show', sessionId, '--store', store], undefined, env);
    ok(shown, 'session show');
    expect(shown.stdout).toContain('MY_KEY');
    expect(shown.stdout).toContain('MY_HEADER_KEY');
    const bound = JSON.parse(shown.stdout) as Bound;
    expect(bound.binding.models.remote).toMatchObject({ apiKeyEnv: 'MY_KEY' });
    expect(bound.binding.agents.map((a) => a.model)).toEqual(['remote']);

    const log = oarIn(proj, ['events', sessionId, '--json', '--store', store], undefined, env);
    ok(log, 'events --json');
    expect(log.stdout).toContain('MY_KEY');
    const exported = ok(oarIn(proj, ['export', sessionId, '--store', store], undefined, env), 'export');
    const evidence = ok(oarIn(proj, ['export', sessionId, '--evidence', '--store', store], undefined, env), 'evidence');

    for (const [what, text] of [
      ['run', run.stdout + run.stderr],
      ['session show', shown.stdout],
      ['events', log.stdout],
      ['export', exported.stdout],
      ['evidence', evidence.stdout],
    ] as const) {
      expect(text, what).not.toContain(secret);
      expect(text, what).not.toContain(headerSecret);
    }
    // Nor in the store's files (the database and any write-ahead log next to it).
    const dir = join(store, '..');
    for (const file of readdirSync(dir)) {
      const bytes = readFileSync(join(dir, file)).toString('latin1');
      expect(bytes.includes(secret), file).toBe(false);
      expect(bytes.includes(headerSecret), file).toBe(false);
    }
  });
});

describe('oar session update --from-config and secrets.env', { timeout: 180_000 }, () => {
  it('an explicit empty list clears the names; a config without secrets leaves them as they are', () => {
    const store = storeFile();
    const script = { steps: labelled('S', 0, 4) };
    const proj = projectDir({
      'a.json': script,
      'oar.config.json': { model: 'script:a.json', secrets: { env: ['MY_TOKEN', 'OTHER_TOKEN'] } },
    });
    const secretsOf = (sessionId: string) =>
      (show(store, sessionId) as Bound & { binding: { secrets?: { env: string[] } } }).binding.secrets;
    const update = () => ok(oarIn(proj, ['session', 'update', sessionId, '--from-config', '--store', store]), 'update');
    const run = ok(oarIn(proj, ['run', '--store', store, 'hello']), 'run');
    const sessionId = sessionOf(run.stdout);
    expect(secretsOf(sessionId)).toEqual({ env: ['MY_TOKEN', 'OTHER_TOKEN'] });

    writeJson(proj, 'oar.config.json', { model: 'script:a.json', secrets: { env: ['MY_TOKEN'] } });
    expect(update().stdout, 'one name fewer').toContain('secrets changed');
    expect(secretsOf(sessionId)).toEqual({ env: ['MY_TOKEN'] });

    // Saying nothing about secrets is not asking for none: the session keeps what it redacts.
    writeJson(proj, 'oar.config.json', { model: 'script:a.json' });
    expect(update().stdout).toContain('binding unchanged');
    expect(secretsOf(sessionId)).toEqual({ env: ['MY_TOKEN'] });

    // An explicit empty list clears it (the binding then reads as one created without any: no `secrets` field).
    writeJson(proj, 'oar.config.json', { model: 'script:a.json', secrets: { env: [] } });
    expect(update().stdout, 'an empty list').toContain('secrets changed');
    expect(secretsOf(sessionId)).toBeUndefined();
    const updated = events(store, sessionId).filter((e) => e.type === 'session.updated');
    expect(payloadOf(updated.at(-1)).changed).toEqual(['binding.secrets']);
    expect(JSON.stringify(payloadOf(updated.at(-1)).binding)).not.toContain('"secrets"');
    // The same binding as a session created from that config: same hash.
    const fresh = sessionOf(ok(oarIn(proj, ['run', '--store', store, 'hello again']), 'second run').stdout);
    expect(show(store, sessionId).bindingHash).toBe(show(store, fresh).bindingHash);
    // The record replays to the same read models, and the next turn runs with the cleared binding.
    ok(oarIn(proj, ['replay', sessionId, '--store', store]), 'replay');
    ok(oarIn(proj, ['run', '--session', sessionId, '--store', store, 'next']), 'next turn');
  });
});
