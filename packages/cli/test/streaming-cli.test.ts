import type { RuntimeEvent } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { eventProblems } from '../../runtime/test/support/schemas.js';
import { ndjson, oarIn, spawnOar, tempDir, writeJson } from './cli-helpers.js';

/**
 * `oar run` prints the model's output as it arrives (issue: models as a governed resource, section 4): the text,
 * and the `message` of the streamed `AgentProtocolOutput` arguments. Without a terminal it is asked for with
 * `--stream`; without it, the output stays what it was.
 */
const MESSAGE = 'Streamed hello, word by word, from the model.';

function project(step: Record<string, unknown>): string {
  const cwd = tempDir();
  writeJson(cwd, 'script.json', { steps: [step] });
  return cwd;
}

describe('oar run --stream', () => {
  it('prints the message as it is streamed, before the turn ends', async () => {
    const cwd = project({ protocol: { kind: 'answer', message: MESSAGE }, chunks: 12, chunkDelayMs: 80 });
    const child = spawnOar(cwd, ['run', '--model', 'script:script.json', '--stream', 'hi']);
    let stdout = '';
    let partialAt: number | undefined;
    let wholeAt: number | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      const now = Date.now();
      if (partialAt === undefined && stdout.includes('Streamed')) partialAt = now;
      if (wholeAt === undefined && stdout.includes(MESSAGE)) wholeAt = now;
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(0);
    // The beginning was on screen before the end had been written.
    expect(partialAt).toBeDefined();
    expect(wholeAt).toBeDefined();
    expect(partialAt as number).toBeLessThan(wholeAt as number);
    const lines = stdout.split('\n');
    const streamed = lines.indexOf(MESSAGE);
    expect(streamed).toBeGreaterThan(0);
    expect(lines.findIndex((line) => line.includes('turn completed'))).toBeGreaterThan(streamed);
  });

  it('without --stream and without a terminal the output is unchanged; --json --stream adds NDJSON deltas', () => {
    const cwd = project({ text: 'Some text. ', protocol: { kind: 'act', message: MESSAGE, calls: [] }, chunks: 5 });
    const plain = oarIn(cwd, ['run', '--model', 'script:script.json', 'hi']);
    expect(plain.stdout).not.toContain('Some text.');
    const json = oarIn(cwd, ['run', '--model', 'script:script.json', '--json', 'hi']);
    expect(ndjson(json.stdout).filter((e) => e.type === 'model.delta')).toEqual([]);
    const streamed = oarIn(cwd, ['run', '--model', 'script:script.json', '--json', '--stream', 'hi']);
    const events = ndjson(streamed.stdout);
    const deltas = events.filter((e) => e.type === 'model.delta') as unknown as RuntimeEvent[];
    expect(deltas.length).toBeGreaterThan(2);
    for (const delta of deltas) expect(eventProblems(delta)).toEqual([]);
    const text = deltas.filter((d) => (d.payload as { channel?: string }).channel === 'text');
    expect(text.map((d) => (d.payload as { delta: string }).delta).join('')).toBe('Some text. ');
    // The tool call's arguments as they stream (`tool.args`), the last one whole: NDJSON too, never a cursor.
    const args = events.filter((e) => e.type === 'tool.args') as unknown as RuntimeEvent[];
    expect(args.length).toBeGreaterThan(1);
    for (const piece of args) expect(eventProblems(piece)).toEqual([]);
    expect(args.at(-1)?.payload).toMatchObject({ complete: true, input: { kind: 'act', message: MESSAGE } });
    // Never stored: the log has no deltas.
    const sessionId = (events.at(-1) as { result: { sessionId: string } }).result.sessionId;
    const log = ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout);
    expect(log.filter((e) => e.type === 'model.delta' || e.type === 'tool.args')).toEqual([]);
    expect(log.some((e) => e.type === 'model.completed')).toBe(true);
  });

  it('Ctrl-C stops a streaming answer at once and records the partial text', async () => {
    const message = 'word '.repeat(300);
    const cwd = project({ protocol: { kind: 'answer', message }, chunks: 300, chunkDelayMs: 100 });
    const child = spawnOar(cwd, ['run', '--model', 'script:script.json', '--stream', 'hi']);
    let stdout = '';
    let interruptedAt: number | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (interruptedAt === undefined && stdout.includes('word word word')) {
        interruptedAt = Date.now();
        child.kill('SIGINT');
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    const took = Date.now() - (interruptedAt ?? 0);
    expect(code).toBe(130);
    // A 30 s stream; generous for a loaded machine (the stream itself stops at the abort).
    expect(took).toBeLessThan(10_000);
    const sessionId = /(ses_\w+)/.exec(stdout)?.[1] ?? '';
    const log = ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout);
    const failed = log.find((e) => e.type === 'model.failed') as { payload: Record<string, unknown> } | undefined;
    expect(failed?.payload).toMatchObject({ failureClass: 'cancelled' });
    const partial = failed?.payload.partialToolCalls as { arguments: string }[];
    expect(partial[0]?.arguments).toContain('word word');
    expect(JSON.stringify({ kind: 'answer', message }).startsWith(partial[0]?.arguments ?? 'x')).toBe(true);
  });
});
