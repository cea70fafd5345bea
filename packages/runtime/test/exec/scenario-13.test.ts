import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, harness } from '../engine/harness.js';
import { act, allEvents, answer, ofType, payload } from '../engine/helpers.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { fields, sandboxUnavailable } from './support.js';

/**
 * Acceptance scenario 13 of the Agent Runtime standard (issue 13 §5): process stdin and output spill. A command
 * run by `exec` under the sandbox reads its standard input and writes far more than the model should see: the
 * record says the profile before the start, the input given, the start and the end with the exit code; the output
 * is stored whole as an artifact and spilled (`output.spilled` with the ref); the model sees the head and the tail
 * with the exit code, and nothing of the middle. Every event conforms to the published schema, the snapshot too,
 * and a replay of the log rebuilds the same read models.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

let skip: string | undefined;
beforeAll(async () => {
  skip = await sandboxUnavailable();
});

// Reads every line of stdin, then prints 3,000 numbered lines echoing the input, and exits 7.
const PROGRAM = `let input = ''; process.stdin.on('data', d => { input += d }); process.stdin.on('end', () => {
  const seed = input.trim(); const out = [];
  for (let i = 1; i <= 3000; i++) out.push('row ' + i + ' of ' + seed);
  process.stdout.write(out.join('\\n') + '\\n'); process.exitCode = 7; })`;

describe('acceptance scenario 13: process stdin and output spill', () => {
  it('records stdin, spills the large output to an artifact, and shows the model head, tail and exit code', async (t) => {
    if (skip) t.skip();
    h = await harness(
      {
        steps: [
          act([
            { id: 'gen', type: 'tool', name: 'exec', args: { command: ['node', '-e', PROGRAM], stdin: 'seed-42\n' } },
          ]),
          answer('generated'),
        ],
      },
      { exec: {}, permissions: { mode: 'default', rules: [{ decision: 'allow', tool: 'exec', command: 'node' }] } },
    );
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'generate rows' });
    await h.runtime.settled(sessionId);
    const events = await allEvents(h, sessionId);
    const order = (type: string) => events.findIndex((e) => e.type === type);
    expect(order('sandbox.applied')).toBeGreaterThan(order('tool.started'));
    expect(order('sandbox.applied')).toBeLessThan(order('process.started'));
    expect(order('process.started')).toBeLessThan(order('process.input'));
    expect(order('process.input')).toBeLessThan(order('process.completed'));
    expect(order('process.completed')).toBeLessThan(order('output.spilled'));
    expect(order('output.spilled')).toBeLessThan(order('tool.result'));

    const processId = fields(ofType(events, 'process.started')[0]).processId;
    expect(fields(ofType(events, 'process.input')[0])).toMatchObject({ processId, bytes: 8, closed: true });
    const completed = fields(ofType(events, 'process.completed')[0]);
    expect(completed).toMatchObject({ processId, exitCode: 7 });
    expect(completed.outputBytes).toBeGreaterThan(50_000);

    // Stored whole: every row is in the artifact the spill names.
    const spilled = fields(ofType(events, 'output.spilled')[0]);
    const result = payload(ofType(events, 'tool.result')[0]);
    expect(spilled.uri).toBe(result.outputRef);
    expect(spilled.sizeBytes).toBe(completed.outputBytes);
    const artifact = await h.runtime.getArtifact({ sessionId, artifactId: String(spilled.artifactId) });
    const stored = new TextDecoder().decode(artifact.bytes);
    expect(stored.split('\n')).toHaveLength(3001);
    expect(stored).toContain('row 1500 of seed-42');

    // The model's view: exit code, head and tail, the ref — not the middle.
    const observation = result.observation as { summary: string; artifacts: string[] };
    expect(observation.summary.startsWith('exit 7,')).toBe(true);
    expect(observation.summary).toContain('row 1 of seed-42');
    expect(observation.summary).toContain('row 3000 of seed-42');
    expect(observation.summary).not.toContain('row 1500 of');
    expect(observation.artifacts).toContain(spilled.uri);

    assertEventsConform(events);
    const snapshot = await h.runtime.getSession({ sessionId });
    assertSnapshotConforms(snapshot.snapshot);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'generated' });
  });

  it('a long-running process that needs stdin gets it from a client: write_process_stdin emits process.input', async (t) => {
    if (skip) t.skip();
    h = await harness(
      {
        steps: [
          act([
            {
              id: 'gen',
              type: 'tool',
              name: 'exec',
              args: { command: ['node', '-e', PROGRAM], background: true },
            },
          ]),
          answer('started; it waits for its seed'),
        ],
      },
      { exec: {}, permissions: { mode: 'default', rules: [{ decision: 'allow', tool: 'exec', command: 'node' }] } },
    );
    const { sessionId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'start the generator' });
    await h.runtime.settled(sessionId);
    const started = fields(ofType(await allEvents(h, sessionId), 'process.started')[0]);
    const processId = started.processId as string;
    const fed = await h.runtime.writeProcessStdin({ sessionId, processId, input: 'seed-7\n', closeStdin: true });
    expect(fed).toMatchObject({ status: 'written', bytes: 7 });
    const input = (await allEvents(h, sessionId)).find((e) => e.eventId === fed.eventId);
    expect(input?.type).toBe('process.input');
    expect(fields(input)).toMatchObject({ processId, bytes: 7, closed: true, requestId: fed.requestId });
    // It runs to its end on that input (its OS process is gone then); asked to stop, it answers with the end it had,
    // its whole output kept.
    const gone = () => {
      try {
        process.kill(started.pid as number, 0);
        return false;
      } catch {
        return true;
      }
    };
    for (let i = 0; i < 200 && !gone(); i++) await new Promise((resolve) => setTimeout(resolve, 50));
    // …and this runtime has read the rest of its output (its pipes close after it exits).
    await new Promise((resolve) => setTimeout(resolve, 300));
    const ended = await h.runtime.terminateProcess({ sessionId, processId, waitMs: 5_000 });
    expect(ended).toMatchObject({ status: 'ended', exitCode: 7 });
    const end = fields((await allEvents(h, sessionId)).find((e) => e.eventId === ended.eventId));
    const artifact = await h.runtime.getArtifact({
      sessionId,
      artifactId: String(end.outputRef).replace('artifact://', ''),
    });
    expect(new TextDecoder().decode(artifact.bytes).split('\n')).toHaveLength(3001);
    assertEventsConform(await allEvents(h, sessionId));
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });
});
