import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, Store } from '../../src/index.js';
import { assertEventsConform, assertSnapshotConforms } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import {
  act,
  allEvents,
  answer,
  ofType,
  payload,
  READ_ONLY_TEST_TOOL,
  recordingModel,
  registryWith,
} from './helpers.js';

/**
 * Acceptance scenario 3 of the Agent Runtime standard, tool call with large result: "Given a tool returns a large
 * payload, the event stream includes a safe preview and output ref. The final answer does not become the only
 * storage location for the result." A tool returns about 1 MB of rows (the first line carrying a token), called
 * twice in one graph: under the default result policy (the model sees a summary) and asked for in full (over the
 * observation budget: `output.spilled`). Each call's `tool.result` names its output ref, the stored artifact of
 * that call, whose `artifact.changed` preview is short and redacted (the spill repeats ref and preview); no event
 * carries the rows; the model is shown a bounded observation with the ref; the whole result is readable by its ref
 * after the turn answered and after a restart, and listed in the evidence export — while the final answer is a
 * sentence that holds none of it.
 */
let h: Harness | undefined;
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
});

const TOKEN = `ghp_${'A1b2C3d4E5'.repeat(4)}`;
const ROWS = 12_000;
const row = (i: number) => `{"row":${i},"region":"eu-${i % 7}","total":${(i * 37) % 1000},"note":"${'x'.repeat(40)}"}`;
const report = [`# token ${TOKEN}`, ...Array.from({ length: ROWS }, (_, i) => row(i + 1))].join('\n');

const reportTool = defineTool<{ month: string }>({
  name: 'fetch_report',
  description: 'Returns the sales report of a month, one JSON row per line.',
  input: z.strictObject({ month: z.string() }),
  ...READ_ONLY_TEST_TOOL,
  async execute() {
    return { text: report, mime: 'application/x-ndjson', summary: `${ROWS} rows` };
  },
});

describe('acceptance scenario 3: tool call with large result', () => {
  it('streams a safe preview and the output ref; the full result is stored apart from the answer', async () => {
    // The same large result twice: once under the default result policy (a summary), once asked for in full.
    const recorder = recordingModel({
      steps: [
        act([
          { id: 'rep', type: 'tool', name: 'fetch_report', args: { month: '2026-04' } },
          { id: 'rep_full', type: 'tool', name: 'fetch_report', args: { month: '2026-04' }, result: 'full' },
        ]),
        answer('The April report has 12,000 rows; it is stored in full.'),
      ],
    });
    h = await harness({ steps: [] }, { model: recorder.model, tools: registryWith(reportTool) });
    const { sessionId, threadId } = await h.runtime.createSession();
    const { turnId } = await h.runtime.submitTurn({ sessionId, input: 'fetch the April report' });
    await h.runtime.settled(sessionId);
    expect(report.length).toBeGreaterThan(900_000);

    const events = await allEvents(h, sessionId);
    const results = ofType(events, 'tool.result');
    expect(results.map((e) => payload(e).graphActionId)).toEqual(['rep', 'rep_full']);
    const refs: string[] = [];
    for (const result of results) {
      expect(result).toMatchObject({ threadId, turnId });
      // Each result names its output ref: the stored artifact of the same call, the whole result.
      const ref = payload(result).outputRef as string;
      expect(ref).toMatch(/^artifact:\/\//);
      refs.push(ref);
      const artifact = ofType(events, 'artifact.changed').find((e) => payload(e).uri === ref);
      expect(artifact).toMatchObject({ runId: result.runId, turnId });
      expect(payload(artifact).name).toBe(`${result.runId}/${payload(result).graphActionId}`);
      expect(payload(result).artifactIds).toEqual([artifact?.artifactId]);
      expect(payload(artifact)).toMatchObject({ mime: 'application/x-ndjson' });
      expect(payload(artifact).size).toBeGreaterThan(900_000);
      // A safe preview on the stream: short, the start of the result, the token redacted.
      const preview = payload(artifact).preview as string;
      expect(preview.length).toBeLessThan(1_000);
      expect(preview.startsWith('# token [REDACTED:github_token]\n{"row":1,')).toBe(true);
      expect(String(payload(result).summary).length).toBeLessThan(1_000);
      // What the model is shown is bounded and names the ref (it can expand it), not the rows.
      const observation = payload(result).observation as { artifacts: string[]; content: string };
      expect(observation.artifacts).toEqual([ref]);
      expect(observation.content.length).toBeLessThan(20_000);
    }
    expect(new Set(refs).size).toBe(2);
    // Asked for in full, the result is over the observation budget: spilled, with the preview and the same ref.
    const full = results[1];
    const spilled = ofType(events, 'output.spilled');
    expect(spilled).toHaveLength(1);
    expect(spilled[0]?.toolCallId).toBe(full?.toolCallId);
    expect(payload(spilled[0])).toMatchObject({ uri: refs[1], artifactId: (payload(full).artifactIds as string[])[0] });
    expect(payload(spilled[0]).sizeBytes).toBeGreaterThan(900_000);
    expect(String(payload(spilled[0]).preview)).toContain('[REDACTED:github_token]');
    expect(payload(full)).toMatchObject({ truncated: true, observation: { truncated: true } });
    // No event carries the rows (or the token): the stream stays small.
    for (const event of events) {
      const text = JSON.stringify(event);
      expect(text).not.toContain(TOKEN);
      expect(text.length, event.type).toBeLessThan(100_000);
    }
    expect(JSON.stringify(events)).not.toContain(row(ROWS / 2));
    expect(recorder.prompts).toHaveLength(2);
    for (const ref of refs) expect(recorder.prompts[1]?.text).toContain(ref);
    expect(recorder.prompts[1]?.text).not.toContain(row(ROWS / 2));
    expect(recorder.prompts[1]?.text.length).toBeLessThan(100_000);

    // The final answer is not where the result lives: it holds none of it, the artifacts hold all of it.
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ turnId, status: 'completed' });
    expect(String(read.lastOutcome?.answer)).not.toContain('"row"');
    const whole = report.replace(TOKEN, '[REDACTED:github_token]');
    const stored = async (x: Harness, ref: string) =>
      new TextDecoder().decode(
        (await x.runtime.getArtifact({ sessionId, artifactId: ref.replace('artifact://', '') })).bytes,
      );
    for (const ref of refs) expect(await stored(h, ref)).toBe(whole);

    // The evidence export lists the stored results by their refs.
    const pack = await h.runtime.exportEvidence(sessionId);
    for (const ref of refs) expect(pack.artifacts.map((a) => a.uri)).toContain(ref);

    // …and they outlive the process: a new runtime on the same file reads the same bytes by the same refs.
    const { dir, workspace } = h;
    await h.runtime.close();
    await h.store.close();
    h = await harness(
      { steps: [] },
      {
        model: recorder.model,
        tools: registryWith(reportTool),
        store: await Store.open(join(dir, 'oar.db')),
        workspaceRoot: workspace,
      },
    );
    for (const ref of refs) expect(await stored(h, ref)).toBe(whole);

    assertEventsConform(await allEvents(h, sessionId));
    assertSnapshotConforms((await h.runtime.getSession({ sessionId })).snapshot);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });
});
