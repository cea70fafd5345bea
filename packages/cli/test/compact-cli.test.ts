import type { RuntimeEvent } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { ndjson, oarIn, tempDir, writeJson } from './cli-helpers.js';

/**
 * Context compaction through the real `oar` binary (issue 16 §6, acceptance scenario 6): a small-window scripted
 * model (`contextWindow` in its model entry) compacts a long session on its own; `oar compact SESSION` compacts on
 * request; `oar inspect` shows the boundary; `oar replay` finds no difference; bad input is a structured error.
 */

const answer = (message: string) => ({ protocol: { kind: 'answer', message } });
const request = (n: number) => `Request ${n}: ${'please look at the sample workspace again and report. '.repeat(16)}`;

function project(turns: number): string {
  const cwd = tempDir('oar-compact-');
  writeJson(cwd, 'script.json', {
    steps: Array.from({ length: turns }, (_, i) => answer(`Answer ${i + 1}.`)),
    compaction: { steps: Array.from({ length: turns }, (_, i) => ({ text: `Summary ${i + 1} of the session.` })) },
  });
  writeJson(cwd, 'oar.config.json', {
    model: 'small',
    models: { small: { provider: 'script', file: 'script.json', contextWindow: 3_500, maxOutputTokens: 300 } },
  });
  return cwd;
}

function run(cwd: string, prompt: string, session?: string) {
  const result = oarIn(cwd, ['run', ...(session ? ['--session', session] : []), '--json', prompt]);
  const lines = ndjson(result.stdout);
  const last = lines.at(-1) as { result?: { sessionId: string; status: string; answer?: string } };
  return { ...result, result: last.result };
}

function events(cwd: string, session: string): RuntimeEvent[] {
  return ndjson(oarIn(cwd, ['events', session, '--json']).stdout) as unknown as RuntimeEvent[];
}

const payloadOf = (e: RuntimeEvent | undefined) => (e?.payload ?? {}) as Record<string, unknown>;

describe('oar compact', () => {
  it('a long session compacts itself; `oar compact` compacts on request; inspect shows the boundary', () => {
    const turns = 6;
    const cwd = project(turns + 1);
    const first = run(cwd, request(1));
    expect(first.code).toBe(0);
    const session = first.result?.sessionId as string;
    for (let n = 2; n <= turns; n++) {
      const next = run(cwd, request(n), session);
      expect(next.code).toBe(0);
      expect(next.result?.answer).toBe(`Answer ${n}.`);
    }
    let log = events(cwd, session);
    const automatic = log.filter((e) => e.type === 'context.compaction.completed');
    expect(automatic.length).toBeGreaterThanOrEqual(1);
    expect(payloadOf(automatic[0])).toMatchObject({ trigger: 'threshold', summarySource: 'model' });

    const compacted = oarIn(cwd, ['compact', session, '--reason', 'before a long task', '--json']);
    expect(compacted.code).toBe(0);
    const result = JSON.parse(compacted.stdout) as Record<string, unknown>;
    expect(result).toMatchObject({ status: 'completed', summarySource: 'model' });
    expect(result.summaryRef).toMatch(/^artifact:\/\//);
    log = events(cwd, session);
    const manual = log.filter((e) => e.type === 'context.compaction.completed').at(-1);
    expect(payloadOf(manual)).toMatchObject({ trigger: 'manual', requestId: result.requestId });

    const inspect = oarIn(cwd, ['inspect', session, '--json']);
    expect(inspect.code).toBe(0);
    const snapshot = JSON.parse(inspect.stdout) as { threads: { history?: Record<string, unknown> }[] };
    expect(snapshot.threads[0]?.history).toMatchObject({
      contextBoundary: { compactionId: result.compactionId, summaryRef: result.summaryRef, trigger: 'manual' },
    });
    expect(oarIn(cwd, ['inspect', session]).stdout).toContain(`context compacted through turn`);
    expect(oarIn(cwd, ['replay', session]).code).toBe(0);

    // Compacted through its last turn: nothing left to compact (a usage error, exit 2, one structured error).
    const again = oarIn(cwd, ['compact', session]);
    expect(again.code).toBe(2);
    expect(JSON.parse(again.stderr.trim())).toMatchObject({ error: { code: 'nothing_to_compact', retryable: false } });
    // The session works on after it, from the summary.
    const after = run(cwd, 'and now?', session);
    expect(after.code).toBe(0);
    expect(after.result?.answer).toBe(`Answer ${turns + 1}.`);
  });

  it('an unknown session is a structured error', () => {
    const cwd = project(1);
    // A store with no such session (without one, it is store_not_found: reading-cli.test.ts).
    expect(oarIn(cwd, ['workspaces', 'create', 'team']).code).toBe(0);
    const missing = oarIn(cwd, ['compact', 'ses_nope']);
    expect(missing.code).toBe(2);
    expect(JSON.parse(missing.stderr.trim())).toMatchObject({ error: { code: 'session_not_found' } });
  });
});
