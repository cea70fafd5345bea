import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuntimeEvent } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { FIXTURES, ndjson, oarIn, repoRoot, spawnOar, tempDir, writeJson } from './cli-helpers.js';

/** End-to-end scenarios through the real `oar` binary: spill + expand_ref, interrupt, queue, malformed outputs. */

const answer = (message: string) => ({ protocol: { kind: 'answer', message } });
const act = (calls: unknown[]) => ({ protocol: { kind: 'act', message: 'Working.', calls } });
const read = (id: string, filePath: string, extra: Record<string, unknown> = {}) => ({
  id,
  type: 'tool',
  name: 'read',
  args: { filePath },
  ...extra,
});

function project(steps: unknown[], config: Record<string, unknown> = {}): string {
  const cwd = tempDir('oar-scenario-');
  writeJson(cwd, 'script.json', { steps });
  writeJson(cwd, 'oar.config.json', { model: 'script:script.json', ...config });
  writeFileSync(join(cwd, 'notes.md'), 'hello\n');
  return cwd;
}

function runJson(cwd: string, args: string[]) {
  const run = oarIn(cwd, [...args, '--json']);
  const lines = ndjson(run.stdout);
  const result = (
    lines.at(-1) as { result?: { sessionId: string; status: string; answer?: string; error?: { code: string } } }
  ).result;
  return { ...run, events: lines.slice(0, -1) as unknown as RuntimeEvent[], result };
}

const payloadOf = (e: RuntimeEvent | undefined) => (e?.payload ?? {}) as Record<string, unknown>;

describe('spill and expand_ref', () => {
  it('a big output spills to an artifact; expand_ref returns the exact lines asked for', () => {
    const big = Array.from({ length: 3000 }, (_, i) => `line ${i + 1}: ${'x'.repeat(40)}`).join('\n');
    const expand = {
      text: [
        '```json agent-protocol',
        JSON.stringify({
          type: 'agent.protocol',
          version: '1',
          intent: 'expand_ref',
          payload: {
            type: 'expand_ref',
            refs: [{ ref: 'action:read_big.output', range: { start_line: 1500, end_line: 1502 } }],
          },
        }),
        '```',
      ].join('\n'),
    };
    const cwd = project([act([read('read_big', 'big.txt', { result: 'full' })]), expand, answer('Found it.')], {
      limits: { observationTokens: 500 },
    });
    writeFileSync(join(cwd, 'big.txt'), `${big}\n`);
    const { code, events, result } = runJson(cwd, ['run', 'read big.txt']);
    expect(code).toBe(0);
    expect(result?.answer).toBe('Found it.');
    const spilled = events.find((e) => e.type === 'output.spilled');
    expect(payloadOf(spilled).uri).toMatch(/^artifact:\/\//);
    const bigResult = events.find((e) => e.type === 'tool.result');
    expect(payloadOf(bigResult).truncated).toBe(true);
    const expanded = events.find(
      (e) =>
        e.type === 'run.status' && payloadOf(e).graphActionId === 'expand_1' && payloadOf(e).status === 'completed',
    );
    const content = (payloadOf(expanded).observation as { content: string }).content;
    // The read tool numbers its lines (`cat -n` style); the artifact holds exactly that output.
    expect(content.split('\n').map((l) => l.split('\t')[1]?.split(':')[0])).toEqual([
      'line 1500',
      'line 1501',
      'line 1502',
    ]);
  });
});

describe('interrupt', () => {
  it('Ctrl-C cancels the running tool, records the cancellation, exits 130; the session stays usable', {
    timeout: 60_000,
  }, async () => {
    const cwd = project(
      [
        act([{ id: 'slow', type: 'tool', name: 'count', args: { label: 'slow', delayMs: 30_000 } }]),
        answer('Fresh turn works.'),
      ],
      { tools: { modules: [join(FIXTURES, 'count-tools.mjs')] }, permissions: { mode: 'bypass' } },
    );
    const child = spawnOar(cwd, ['run', '--json', 'count slowly']);
    let out = '';
    const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`never started:\n${out}`)), 30_000);
      let sent = false;
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        // One Ctrl-C: a second one would force-quit, as in any terminal program.
        if (!sent && out.includes('"type":"tool.started"')) {
          sent = true;
          clearTimeout(timer);
          child.kill('SIGINT');
          resolve();
        }
      });
    });
    expect(await exit).toBe(130);
    const events = ndjson(out) as unknown as RuntimeEvent[];
    const sessionId = events[0]?.sessionId ?? '';
    const log = ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout) as unknown as RuntimeEvent[];
    expect(log.find((e) => e.type === 'tool.failed')?.status).toBe('cancelled');
    const failed = log.find((e) => e.type === 'turn.failed');
    expect(failed?.status).toBe('cancelled');
    expect(payloadOf(failed).error).toMatchObject({ code: 'interrupted' });
    expect(log.some((e) => e.type === 'task.cancelled')).toBe(true);
    expect(readFileSync(join(cwd, 'counts.txt'), 'utf8')).toBe('slow\n');
    const again = runJson(cwd, ['run', '--session', sessionId, 'try again']);
    expect(again.code).toBe(0);
    expect(again.result?.answer).toBe('Fresh turn works.');
  });
});

describe('queue', () => {
  it('a turn submitted while another waits for approval is queued and runs after it', () => {
    const write = { id: 'w1', type: 'tool', name: 'write', args: { filePath: 'out.md', content: 'first' } };
    const cwd = project([act([write]), answer('First done.'), answer('Second done.')]);
    const first = runJson(cwd, ['run', 'write it']);
    expect(first.code).toBe(3);
    const sessionId = first.result?.sessionId ?? '';
    const actionId = first.events.find((e) => e.type === 'action.required')?.actionId ?? '';
    const second = runJson(cwd, ['run', '--session', sessionId, 'and then this']);
    expect(second.code).toBe(3);
    expect(second.events.find((e) => e.type === 'turn.submitted')?.status).toBe('queued');
    expect(payloadOf(second.events.find((e) => e.type === 'queue.changed')).change).toBe('enqueued');
    const respond = oarIn(cwd, ['respond', sessionId, actionId, 'approve']);
    expect(respond.code, respond.stdout + respond.stderr).toBe(0);
    const log = ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout) as unknown as RuntimeEvent[];
    const answers = log.filter((e) => e.type === 'turn.completed').map((e) => payloadOf(e).answer);
    expect(answers).toEqual(['First done.', 'Second done.']);
    expect(log.some((e) => e.type === 'queue.changed' && payloadOf(e).change === 'dequeued')).toBe(true);
  });
});

describe('malformed model output, each class, through the binary', () => {
  const good = answer('Recovered after one corrective retry.');
  const readCall = read('r1', 'notes.md');
  const classes: [string, unknown][] = [
    [
      'invalid JSON arguments',
      { toolCalls: [{ name: 'AgentProtocolOutput', arguments: '{"kind": "act", "calls": [}' }] },
    ],
    [
      'a pseudo tool call in text naming an unknown tool',
      { text: '<tool_call>{"name": "shell", "arguments": {"cmd": "ls"}}</tool_call>' },
    ],
    [
      'cut-off output',
      {
        toolCalls: [{ name: 'AgentProtocolOutput', arguments: '{"kind": "act", "calls": [{"id": "r1", "type": "to' }],
        finishReason: 'length',
      },
    ],
    [
      'two declarations',
      {
        toolCalls: [
          { name: 'AgentProtocolOutput', arguments: { kind: 'done' } },
          { name: 'AgentProtocolOutput', arguments: { kind: 'done' } },
        ],
      },
    ],
    ['an unknown tool', act([{ id: 'x', type: 'tool', name: 'rm_rf', args: {} }])],
    ['bad arguments', act([{ ...readCall, args: { path: 'notes.md' } }])],
    [
      'a dependency cycle',
      act([
        { ...readCall, id: 'a', depends: 'b' },
        { ...readCall, id: 'b', depends: 'a' },
      ]),
    ],
  ];
  it.each(classes)('%s: one recorded corrective retry, then success', (_name, bad) => {
    const cwd = project([bad, good]);
    const { code, events, result } = runJson(cwd, ['run', 'go']);
    expect(code).toBe(0);
    expect(result?.answer).toBe('Recovered after one corrective retry.');
    const warnings = events.filter((e) => e.type === 'runtime.warning');
    expect(warnings.map((e) => payloadOf(e).code)).toEqual(['protocol_violation']);
    const requested = events.filter((e) => e.type === 'model.requested').map((e) => payloadOf(e).corrective);
    expect(requested).toEqual([false, true]);
    expect(events.filter((e) => e.type === 'tool.started')).toEqual([]);
  });

  it('a recoverable pseudo tool call in text is executed and flagged recovered', () => {
    const cwd = project([
      { text: '<tool_call>{"name": "read", "arguments": {"filePath": "notes.md"}}</tool_call>' },
      answer('Read it.'),
    ]);
    const { code, events } = runJson(cwd, ['run', 'go']);
    expect(code).toBe(0);
    const declared = events.find((e) => e.type === 'run.status' && payloadOf(e).phase === 'declared');
    expect(payloadOf(declared)).toMatchObject({ recovered: true, form: 'text_tool_call' });
    expect(events.some((e) => e.type === 'tool.result')).toBe(true);
  });
});

describe("the specification's canonical DSL example, through the binary", () => {
  it('a tool worker inspects with the capability-matched tools; the review agent gets its summary', () => {
    const canonical = readFileSync(join(repoRoot, 'examples/dsl-canonical.md'), 'utf8');
    const cwd = tempDir('oar-scenario-');
    writeJson(cwd, 'script.json', {
      steps: [{ text: canonical }, { text: 'Undo/redo is not wired through (high).' }],
      agents: {
        'main.tool_worker': {
          steps: [
            {
              text: [
                '```json agent-protocol',
                JSON.stringify({
                  type: 'agent.protocol',
                  version: '1',
                  intent: 'execute',
                  payload: {
                    type: 'action_graph',
                    actions: [
                      {
                        type: 'action',
                        id: 'find',
                        executor: { type: 'tool', target: 'glob' },
                        input: { pattern: '*.vue' },
                      },
                    ],
                  },
                }),
                '```',
              ].join('\n'),
            },
            { text: 'Found Toolbar.vue and ToolbarButton.vue.' },
          ],
        },
        'frontend-reviewer': { steps: [answer('Undo/redo state is not wired through.')] },
      },
    });
    writeJson(cwd, 'oar.config.json', {
      model: 'script:script.json',
      agent: { carrier: 'text' },
      agents: [
        { name: 'frontend-reviewer', description: 'Frontend review', capabilities: ['code_review', 'frontend'] },
      ],
    });
    writeFileSync(join(cwd, 'Toolbar.vue'), '<template><ToolbarButton /></template>\n');
    writeFileSync(join(cwd, 'ToolbarButton.vue'), '<template><button /></template>\n');

    const run = runJson(cwd, ['run', 'Review the toolbar buttons.']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.result).toMatchObject({ status: 'completed', answer: 'Undo/redo is not wired through (high).' });
    const log = ndjson(
      oarIn(cwd, ['events', run.result?.sessionId ?? '', '--json']).stdout,
    ) as unknown as RuntimeEvent[];
    const spawned = log.filter((e) => e.type === 'subagent.spawned').map((e) => payloadOf(e));
    expect(spawned.map((p) => [p.graphActionId, p.role ?? 'agent'])).toEqual([
      ['inspect_code', 'tool_worker'],
      ['review_toolbar', 'agent'],
    ]);
    expect(spawned[0]?.tools).toEqual(['glob', 'grep']);
    const reviewerTurn = log.find((e) => e.type === 'turn.submitted' && e.threadId === spawned[1]?.childThreadId);
    const input = String(payloadOf(reviewerTurn).input);
    expect(input).toContain('<item source="action:inspect_code.summary">');
    expect(input).toContain('Found Toolbar.vue and ToolbarButton.vue.');
    expect(input).toContain('Review each toolbar button.');
    const inspect = oarIn(cwd, ['inspect', run.result?.sessionId ?? '']);
    expect(inspect.code).toBe(0);
    expect(oarIn(cwd, ['replay', run.result?.sessionId ?? '']).stdout).toContain('"equal": true');
  });
});

describe('model chains, through the binary', () => {
  it('a chain falls back when the primary gives up; events and inspect show it', () => {
    const cwd = tempDir('oar-scenario-');
    writeJson(cwd, 'primary.json', {
      steps: [{ error: { message: 'slow down', statusCode: 429, headers: { 'retry-after': '600' } } }],
    });
    writeJson(cwd, 'fallback.json', { steps: [answer('unused'), answer('Answered by the fallback.')] });
    writeJson(cwd, 'oar.config.json', {
      model: { chain: ['script:primary.json', 'script:fallback.json'], fallbackOn: ['rate_limited'] },
    });
    const run = runJson(cwd, ['run', 'hello']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.result).toMatchObject({ status: 'completed', answer: 'Answered by the fallback.' });
    const applied = run.events.find((e) => e.type === 'routing.fallback.applied');
    expect(payloadOf(applied)).toMatchObject({ from: 'primary', to: 'fallback', trigger: 'rate_limited' });
    const inspect = oarIn(cwd, ['inspect', run.result?.sessionId ?? '']);
    expect(inspect.stdout).toContain('model: fallback (fell back from primary on rate_limited after 1 attempt(s))');
  });
});
