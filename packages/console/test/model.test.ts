import { describe, expect, it } from 'vitest';
import { highlightJson, renderMarkdown } from '../src/markdown.js';
import { actionStatus, eventSummary, foldEvents } from '../src/model.js';
import type { OarEvent } from '../src/types.js';

/** The console's pure parts, in Node: the event fold behind the DAG and time travel, and safe text rendering. */

const T = '2026-11-25T10:00:00.000Z';

/** A session of `blocks` action graphs of three actions (c depends on a and b): 10 events per graph. */
function session(blocks: number): OarEvent[] {
  const events: OarEvent[] = [];
  let sequence = 0;
  const push = (e: Omit<OarEvent, 'sequence' | 'timestamp' | 'sessionId'>) =>
    events.push({ sequence: ++sequence, timestamp: T, sessionId: 'ses_1', ...e } as OarEvent);
  push({ type: 'thread.started', threadId: 'thr_1', payload: { agent: 'main' } });
  push({ type: 'turn.submitted', threadId: 'thr_1', turnId: 'turn_1', payload: { input: 'go', source: 'user' } });
  for (let i = 0; i < blocks; i++) {
    const runId = `run_${i}`;
    const base = { threadId: 'thr_1', turnId: 'turn_1', runId };
    const actions = ['a', 'b', 'c'].map((id) => ({
      id,
      executor: { type: 'tool', target: 'read' },
      input: { filePath: `${id}.md` },
      dependsOn: id === 'c' ? ['a', 'b'] : [],
    }));
    push({ ...base, type: 'run.status', status: 'running', payload: { phase: 'declared', declaration: { actions } } });
    for (const id of ['a', 'b', 'c']) {
      push({ ...base, type: 'tool.started', toolCallId: `${runId}.${id}`, payload: { graphActionId: id, attempt: 1 } });
      push({
        ...base,
        type: 'tool.result',
        toolCallId: `${runId}.${id}`,
        payload: { graphActionId: id, summary: 'ok', artifactIds: [`art_${i}_${id}`] },
      });
    }
    push({ ...base, type: 'run.status', status: 'completed', payload: { phase: 'observed', result: { actions: [] } } });
    push({ ...base, type: 'task.completed', payload: {} });
    push({ ...base, type: 'context.resolved', payload: {} });
  }
  push({
    type: 'turn.completed',
    threadId: 'thr_1',
    turnId: 'turn_1',
    status: 'completed',
    payload: { answer: '**done**' },
  });
  return events;
}

describe('the event fold', () => {
  it('builds each action graph with its dependencies, statuses and artifacts, and folds any prefix', () => {
    const events = session(3);
    const model = foldEvents(events);
    const turn = model.threads.get('thr_1')?.turns[0];
    expect(turn?.input).toBe('go');
    expect(turn?.answer).toBe('**done**');
    expect(turn?.runs.map((r) => r.runId)).toEqual(['run_0', 'run_1', 'run_2']);
    const c = turn?.runs[0]?.actions.find((a) => a.id === 'c');
    expect(c?.dependsOn).toEqual(['a', 'b']);
    expect(c?.status).toBe('completed');
    expect(c?.artifacts).toEqual(['art_0_c']);
    // As of the first tool.started of the first graph: a runs, b and c have not started, no answer yet.
    const at = events.find((e) => e.type === 'tool.started')?.sequence as number;
    const early = foldEvents(events, at).threads.get('thr_1')?.turns[0];
    expect(early?.runs).toHaveLength(1);
    expect(early?.runs[0]?.actions.map((a) => a.status)).toEqual(['running', 'pending', 'pending']);
    expect(early?.answer).toBeUndefined();
  });

  it('prefers the read model’s status when it has the action', () => {
    const model = foldEvents(session(1));
    const a = model.threads.get('thr_1')?.turns[0]?.runs[0]?.actions[0];
    if (!a) throw new Error('no action');
    expect(actionStatus(a, undefined)).toBe('completed');
    const rm = {
      threadId: 'thr_1',
      status: 'running',
      turns: [],
      pendingRequests: [],
      queuedTurns: [],
      incidents: [],
      actions: [{ runId: 'run_0', actionId: 'a', status: 'failed' }],
    };
    expect(actionStatus(a, rm)).toBe('failed');
  });

  it('folds a lost call as lost, and its reconcile question as open on the node without making it wait', () => {
    const base = { threadId: 'thr_1', turnId: 'turn_1', runId: 'run_1', sessionId: 'ses_1', timestamp: T };
    const send = { id: 'send', executor: { type: 'tool', target: 'send_invoice' }, input: {}, dependsOn: [] };
    const events: OarEvent[] = [
      { ...base, sequence: 1, type: 'turn.submitted', payload: { input: 'go' } },
      {
        ...base,
        sequence: 2,
        type: 'run.status',
        status: 'running',
        payload: { phase: 'declared', declaration: { actions: [send] } },
      },
      { ...base, sequence: 3, type: 'tool.started', payload: { graphActionId: 'send', attempt: 1 } },
      {
        ...base,
        sequence: 4,
        type: 'tool.failed',
        status: 'lost',
        payload: { graphActionId: 'send', error: { code: 'lost', message: 'the process stopped' } },
      },
      {
        ...base,
        sequence: 5,
        type: 'action.required',
        actionId: 'act_1',
        payload: { actionType: 'reconcile', graphActionId: 'send', decisions: ['happened', 'not_happened', 'retry'] },
      },
      {
        ...base,
        sequence: 6,
        type: 'action.resolved',
        actionId: 'act_1',
        payload: { actionType: 'reconcile', graphActionId: 'send', decision: 'happened', reason: 'in the outbox' },
      },
    ];
    const node = (upTo: number) => foldEvents(events, upTo).threads.get('thr_1')?.turns[0]?.runs[0]?.actions[0];
    expect(node(4)?.status).toBe('lost');
    expect(node(4)?.attempts.map((at) => at.status)).toEqual(['lost']);
    expect(node(5)).toMatchObject({ status: 'lost', reconcileActionId: 'act_1' });
    expect(node(5)?.pendingActionId).toBeUndefined();
    expect(node(6)?.reconcileActionId).toBeUndefined();
    expect(node(6)?.decision).toMatchObject({ decision: 'happened', reason: 'in the outbox' });
  });

  it('folds a rollback: its turns leave the thread once completed, and the note says what it removed and restored', () => {
    const at = { sessionId: 'ses_1', timestamp: T, threadId: 'thr_1' };
    const turnEvents = (n: number, first: number): OarEvent[] => [
      { ...at, sequence: first, type: 'turn.submitted', turnId: `turn_${n}`, payload: { input: `turn ${n}` } },
      { ...at, sequence: first + 1, type: 'turn.completed', turnId: `turn_${n}`, status: 'completed', payload: {} },
    ];
    const facts = {
      rollbackId: 'rbk_1',
      targetTurnId: 'turn_2',
      keptThroughTurnId: 'turn_1',
      removedTurns: ['turn_2'],
    };
    const events: OarEvent[] = [
      ...turnEvents(1, 1),
      ...turnEvents(2, 3),
      {
        ...at,
        sequence: 5,
        type: 'history.rollback.started',
        payload: { ...facts, files: [{ path: 'a.txt', action: 'restore' }], requestedBy: 'api_key:key_1' },
      },
      {
        ...at,
        sequence: 6,
        type: 'history.rollback.completed',
        payload: {
          ...facts,
          files: [{ path: 'a.txt', action: 'restore', fromVersion: 2, throughVersion: 2 }],
          affected: { commands: 1, fileCalls: 1, subagentThreads: [], runningProcesses: [] },
        },
      },
      ...turnEvents(3, 7),
    ];
    const thread = (upTo: number) => foldEvents(events, upTo).threads.get('thr_1');
    // Under way: the thread still has both turns; the note says what is being removed.
    expect(thread(5)?.turns.map((u) => u.turnId)).toEqual(['turn_1', 'turn_2']);
    expect(thread(5)?.rollbacks[0]).toMatchObject({ status: 'started', requestedBy: 'api_key:key_1' });
    // Completed: turn 2 is gone, remembered by its input; a later turn follows the note.
    const after = thread(8);
    expect(after?.turns.map((u) => u.turnId)).toEqual(['turn_1', 'turn_3']);
    expect(after?.rollbacks).toHaveLength(1);
    expect(after?.rollbacks[0]).toMatchObject({
      status: 'completed',
      sequence: 5,
      removedTurns: ['turn_2'],
      removedInputs: { turn_2: 'turn 2' },
      files: [{ path: 'a.txt', action: 'restore' }],
      affected: { commands: 1 },
    });
    expect(after?.turns.map((u) => u.firstSeq)).toEqual([1, 7]);
    expect(eventSummary(events[4] as OarEvent)).toBe('rolling back 1 turn (turn_2) · files: a.txt to restore');
    expect(eventSummary(events[5] as OarEvent)).toBe(
      'rolled back 1 turn (turn_2) · files: a.txt restored · not undone: the effects of 1 command',
    );
    expect(eventSummary(events[0] as OarEvent)).toBeUndefined();
  });

  it('folds a 10,000-event session at any position: each position holds exactly the graphs declared by then', () => {
    // How fast this is belongs to a benchmark, never to a test assertion; here, that every position is right.
    const events = session(1000);
    expect(events.length).toBeGreaterThanOrEqual(10_000);
    for (const at of [2_500, 5_000, 7_500, events.length]) {
      const runs = foldEvents(events, at).threads.get('thr_1')?.turns[0]?.runs ?? [];
      const declared = events.filter(
        (e) => e.sequence <= at && e.type === 'run.status' && (e.payload as { phase?: string }).phase === 'declared',
      );
      expect(runs.length, `at ${at}`).toBe(declared.length);
    }
  });
});

describe('text rendering', () => {
  it('renders Markdown but never raw HTML or script links', () => {
    const html = renderMarkdown(
      '**bold** <img src=x onerror=alert(1)> <script>alert(2)</script> [x](javascript:alert(3)) [ok](https://example.com)',
    );
    expect(html).toContain('<strong>bold</strong>');
    expect(html).not.toMatch(/<img|<script|javascript:/i);
    expect(html).toContain('&lt;img');
    expect(html).toContain('href="https://example.com"');
  });

  it('highlights JSON after escaping it', () => {
    const html = highlightJson(JSON.stringify({ a: '<b>', n: 1, t: true }));
    expect(html).toContain('<span class="j-key">&quot;a&quot;</span>');
    expect(html).toContain('&lt;b&gt;');
    expect(html).toContain('<span class="j-num">1</span>');
    expect(html).toContain('<span class="j-lit">true</span>');
  });
});
