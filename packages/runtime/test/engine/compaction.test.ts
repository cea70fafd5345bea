import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { LanguageModelV3, LanguageModelV3CallOptions } from '@ai-sdk/provider';
import { type RuntimeEvent, renderTranscript } from '@oar/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type AgentConfig,
  contextBudget,
  DEFAULT_CONTEXT_BUDGET_TOKENS,
  type ModelScript,
  OarConfigSchema,
  parseModelScript,
  Store,
} from '../../src/index.js';
import { compactionSummary } from '../../src/loop/context/compaction.js';
import { assembleContext } from '../../src/loop/context/context.js';
import type { ModelHandle } from '../../src/models/model-call.js';
import { createScriptedModel } from '../../src/models/testing.js';
import { replay, threadView } from '../../src/read-models/project.js';
import type { ThreadView } from '../../src/read-models/thread-state.js';
import { getArtifactText } from '../../src/store/artifacts.js';
import { assertEventsConform, assertSnapshotConforms, eventProblems } from '../support/schemas.js';
import { type Harness, harness } from './harness.js';
import { act, allEvents, answer, errorCode, ofType, payload } from './helpers.js';

/**
 * Context compaction (issue 16 §6; the standard's acceptance scenario 6, "Context compaction": a long thread that
 * needs compaction emits compaction start and completed events and keeps a boundary snapshot; unresolved requests
 * and evidence refs survive it). A scripted model with a small window (`contextWindow` on its handle) keeps working
 * across many turns; its summaries are scripted (`compaction.steps`) or, when the summary call fails, the runtime's
 * deterministic summary is used. Replay rebuilds the same read models, and another process the same context.
 */

const extra: Harness[] = [];
afterEach(async () => {
  for (const x of extra) {
    await x.runtime.close();
    await x.store.close();
  }
  extra.length = 0;
});

interface Recorded {
  agent: string;
  purpose?: string;
  text: string;
  maxOutputTokens?: number;
}

/** A scripted model per agent with a small window, recording what each call was sent. */
function smallWindowModel(script: ModelScript, size: { contextWindow?: number; maxOutputTokens?: number } = {}) {
  const calls: Recorded[] = [];
  const models = new Map<string, LanguageModelV3>();
  const model = (agent: AgentConfig): ModelHandle => {
    let wrapped = models.get(agent.name);
    if (!wrapped) {
      const inner = createScriptedModel(script, agent.name === 'main' ? {} : { agent: agent.name });
      const record = (options: LanguageModelV3CallOptions) => {
        const purpose = options.providerOptions?.oar?.purpose;
        calls.push({
          agent: agent.name,
          ...(typeof purpose === 'string' ? { purpose } : {}),
          text: JSON.stringify(options.prompt),
          ...(options.maxOutputTokens !== undefined ? { maxOutputTokens: options.maxOutputTokens } : {}),
        });
      };
      wrapped = {
        specificationVersion: inner.specificationVersion,
        provider: inner.provider,
        modelId: inner.modelId,
        supportedUrls: inner.supportedUrls,
        doGenerate: (options) => {
          record(options);
          return inner.doGenerate(options);
        },
        doStream: (options) => {
          record(options);
          return inner.doStream(options);
        },
      };
      models.set(agent.name, wrapped);
    }
    return {
      model: wrapped,
      provider: 'oar-script',
      modelId: wrapped.modelId,
      supportsForcedToolChoice: true,
      contextWindow: size.contextWindow ?? 4_000,
      maxOutputTokens: size.maxOutputTokens ?? 300,
    };
  };
  return { model, calls };
}

const read = (id: string) => ({ id, type: 'tool', name: 'read', args: { filePath: 'README.md' } });
const writeCall = (id: string) => ({ id, type: 'tool', name: 'write', args: { filePath: 'out.txt', content: 'hi\n' } });
/** A request long enough that a few turns of it overflow a 4,000-token window. */
const request = (n: number) => `Request ${n}: ${'please look at the sample workspace again and report. '.repeat(16)}`;

async function events(x: Harness, sessionId: string): Promise<RuntimeEvent[]> {
  return allEvents(x, sessionId);
}

describe('docs/models.md "Context budget and compaction"', () => {
  it('its configuration example and its script example are valid', () => {
    const doc = readFileSync(fileURLToPath(new URL('../../../../docs/models.md', import.meta.url)), 'utf8');
    const section = doc.slice(doc.indexOf('## Context budget and compaction'));
    const config = OarConfigSchema.parse(JSON.parse(/```json\n([\s\S]*?)\n```/.exec(section)?.[1] ?? ''));
    expect(config.agent.compaction).toEqual({ threshold: 0.75, keepTurns: 2, summaryTokens: 1500 });
    expect(config.models.local).toMatchObject({ contextWindow: 32768, maxOutputTokens: 2048 });
    const scripts = doc.slice(doc.indexOf('### Compaction summaries'));
    const script = parseModelScript(JSON.parse(/```json\n([\s\S]*?)\n```/.exec(scripts)?.[1] ?? ''));
    expect(script.compaction?.steps).toHaveLength(1);
  });
});

describe('the transcript of a compacted thread', () => {
  it('shows the summary in place of the turns it covers; the budget never shortens or drops it', () => {
    const summary = `The user wants a report. ${'Fact. '.repeat(60)}`;
    const rendered = renderTranscript(
      [
        { kind: 'summary', text: summary, ref: 'artifact://art_1', turns: 4 },
        { kind: 'user', text: `old request ${'x '.repeat(400)}` },
        { kind: 'answer', text: `old answer ${'y '.repeat(400)}` },
        { kind: 'user', text: 'the current request' },
      ],
      { mode: 'compressed', budgetTokens: 200 },
    );
    expect(rendered.text).toContain('## Summary of earlier turns (4 turns)');
    expect(rendered.text).toContain('Full summary: artifact://art_1');
    expect(rendered.text).toContain(summary.trim());
    expect(rendered.text).toContain('the current request');
    expect(rendered.omitted.map((o) => o.kind)).not.toContain('summary');
    expect(rendered.omitted.length).toBeGreaterThan(0);
  });
});

describe('context budget', () => {
  it('comes from the model window minus the output reserve; limits.contextBudgetTokens is an explicit cap', () => {
    const agent = { compaction: { threshold: 0.5 } };
    const gpt4o = contextBudget({}, agent, { provider: 'openai', modelId: 'gpt-4o' });
    expect(gpt4o).toMatchObject({ source: 'model', contextWindow: 128_000, maxOutputTokens: 4_096 });
    expect(gpt4o.budgetTokens).toBe(128_000 - 4_096);
    expect(gpt4o.triggerTokens).toBe(Math.floor((128_000 - 4_096) * 0.5));
    const configured = contextBudget(
      {},
      {},
      { provider: 'x', modelId: 'y', contextWindow: 8_000, maxOutputTokens: 1_000 },
    );
    expect(configured).toMatchObject({ budgetTokens: 7_000, maxOutputTokens: 1_000, threshold: 0.8, source: 'model' });
    const explicit = contextBudget({ contextBudgetTokens: 5_000 }, {}, { provider: 'openai', modelId: 'gpt-4o' });
    expect(explicit).toMatchObject({ budgetTokens: 5_000, source: 'limits' });
    const unknown = contextBudget({}, {}, { provider: 'local', modelId: 'llama' });
    expect(unknown).toMatchObject({ budgetTokens: DEFAULT_CONTEXT_BUDGET_TOKENS, source: 'default' });
    expect(unknown.maxOutputTokens).toBeUndefined();
  });
});

describe('compaction (acceptance scenario 6)', () => {
  it('a thread longer than a small window keeps working; the summary is a recorded, costed model call', async () => {
    const turns = 8;
    const steps = Array.from({ length: turns }, (_, i) => [
      act([read(`read_${i + 1}`)]),
      answer(`Answer ${i + 1}.`),
    ]).flat();
    const summaries = Array.from({ length: turns }, (_, i) => ({
      text: `Summary ${i + 1}: the user asked for reports; each read README.md.`,
    }));
    const recorder = smallWindowModel({ steps, compaction: { steps: summaries } });
    const h = await harness({ steps: [] }, { model: recorder.model });
    extra.push(h);
    const { sessionId, threadId } = await h.runtime.createSession();
    for (let i = 1; i <= turns; i++) {
      await h.runtime.submitTurn({ sessionId, input: request(i) });
      await h.runtime.settled(sessionId);
    }
    const thread = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(thread.turns.map((t) => t.status)).toEqual(Array(turns).fill('completed'));
    expect(thread.lastOutcome).toMatchObject({ status: 'completed', answer: `Answer ${turns}.` });

    const log = await events(h, sessionId);
    const completed = ofType(log, 'context.compaction.completed');
    expect(completed.length).toBeGreaterThanOrEqual(1);
    expect(ofType(log, 'context.compaction.started')).toHaveLength(completed.length);
    for (const event of completed) {
      const p = payload(event);
      expect(p).toMatchObject({ trigger: 'threshold', summarySource: 'model' });
      expect(p.tokensAfter as number).toBeLessThan(p.tokensBefore as number);
      expect(String(p.summaryRef)).toMatch(/^artifact:\/\//);
      expect((p.affectedTurns as string[]).length).toBeGreaterThan(0);
    }
    // The summary call: model.requested … model.completed with purpose compaction, and its own cursor.
    const summaryCalls = ofType(log, 'model.completed').filter((e) => payload(e).purpose === 'compaction');
    expect(summaryCalls).toHaveLength(completed.length);
    expect(ofType(log, 'model.requested').filter((e) => payload(e).purpose === 'compaction')).toHaveLength(
      completed.length,
    );
    // Every protocol call fits the budget: the context shrank instead of losing turns to the budget.
    const budget = contextBudget(
      {},
      {},
      { provider: 'oar-script', modelId: 'x', contextWindow: 4_000, maxOutputTokens: 300 },
    );
    for (const resolved of ofType(log, 'context.resolved')) {
      expect(payload(resolved).tokenEstimate as number).toBeLessThanOrEqual(budget.budgetTokens);
    }
    // What the model saw after the first compaction: the summary in place of the first turn, maxOutputTokens sent.
    const protocolCalls = recorder.calls.filter((c) => c.purpose === undefined);
    const last = protocolCalls.at(-1) as Recorded;
    expect(last.text).toContain('Summary of earlier turns');
    expect(last.text).not.toContain('Request 1:');
    expect(last.text).toContain(`Request ${turns}:`);
    expect(protocolCalls.every((c) => c.maxOutputTokens === 300)).toBe(true);
    const summaryRequest = recorder.calls.find((c) => c.purpose === 'compaction') as Recorded;
    expect(summaryRequest.text).toContain('Request 1:');

    assertEventsConform(log);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
    const { snapshot } = await h.runtime.getSession({ sessionId });
    assertSnapshotConforms(snapshot);
    const history = snapshot.threads[0]?.history as Record<string, unknown>;
    expect(history.compactions).toBe(completed.length);
    expect(history.contextBoundary).toMatchObject({
      compactionId: payload(completed.at(-1)).compactionId,
      summaryRef: payload(completed.at(-1)).summaryRef,
      summarySource: 'model',
    });

    // The log alone (a replay) and the stored summary rebuild the summary the model was shown, to the character.
    const replayed = threadView(replay(log), threadId) as ThreadView;
    const stored = {
      artifacts: { text: (session: string, id: string) => getArtifactText(h.store.db, session, id) },
    };
    const summary = await compactionSummary(stored, replayed);
    expect(summary?.ref).toBe(payload(completed.at(-1)).summaryRef);
    const rebuilt = assembleContext(
      replayed,
      { name: 'main', carrier: 'tool' },
      { tools: [], agents: [] },
      {
        budgetTokens: budget.budgetTokens,
        ...(summary ? { summary } : {}),
      },
    );
    const block = /<turn index="1">[\s\S]*?<\/turn>/.exec(rebuilt.transcript.text)?.[0] as string;
    expect(block).toContain('Summary of earlier turns');
    expect(last.text).toContain(JSON.stringify(block).slice(1, -1));

    // Another process on the same store builds the same context from the log and the stored summary.
    const dbFile = `${h.dir}/oar.db`;
    await h.runtime.close();
    await h.store.close();
    extra.splice(extra.indexOf(h), 1);
    const again = smallWindowModel({
      steps: [...steps, answer('After the restart.')],
      compaction: { steps: summaries },
    });
    const second = await harness({ steps: [] }, { model: again.model, store: await Store.open(dbFile) });
    extra.push(second);
    await second.runtime.submitTurn({ sessionId, input: 'one more' });
    await second.runtime.settled(sessionId);
    const boundaryText = String(payload(completed.at(-1)).summaryPreview).slice(0, 40);
    const resumed = again.calls.filter((c) => c.purpose === undefined).at(0) as Recorded;
    expect(resumed.text).toContain('Summary of earlier turns');
    expect(resumed.text).toContain(boundaryText);
    expect((await second.runtime.getThreadRead({ sessionId, threadId })).lastOutcome).toMatchObject({
      answer: 'After the restart.',
    });
    expect((await second.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('an approval pending across a compaction survives and is still answerable; a failed summary falls back', async () => {
    // No compaction steps in the script: the summary call fails and the deterministic summary is used.
    const recorder = smallWindowModel(
      {
        steps: [
          answer('First answer.'),
          answer('Second answer.'),
          act([read('read_3')]),
          answer('Third answer.'),
          act([writeCall('w1')]),
          answer('Written.'),
        ],
      },
      { contextWindow: 50_000 },
    );
    const h = await harness({ steps: [] }, { model: recorder.model });
    extra.push(h);
    const { sessionId, threadId } = await h.runtime.createSession();
    for (const n of [1, 2, 3]) {
      await h.runtime.submitTurn({ sessionId, input: request(n) });
      await h.runtime.settled(sessionId);
    }
    await h.runtime.submitTurn({ sessionId, input: 'write out.txt' });
    await h.runtime.settled(sessionId);
    const waiting = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(waiting.pendingRequests).toHaveLength(1);
    const actionId = waiting.pendingRequests[0]?.actionId as string;

    const result = await h.runtime.compact({ sessionId, reason: 'test' });
    expect(result).toMatchObject({ status: 'completed', summarySource: 'extractive', threadId });
    // Asked for: every finished turn is compacted; the active turn (with its pending approval) stays whole.
    expect(result.affectedTurns).toHaveLength(3);
    const log = await events(h, sessionId);
    const failedSummary = ofType(log, 'model.failed').find((e) => payload(e).purpose === 'compaction');
    expect(payload(failedSummary)).toMatchObject({ purpose: 'compaction' });
    const done = payload(ofType(log, 'context.compaction.completed')[0]);
    expect(done).toMatchObject({ trigger: 'manual', summarySource: 'extractive', requestId: result.requestId });
    const preserved = done.preserved as { kind: string; ref: string }[];
    expect(preserved).toContainEqual(
      expect.objectContaining({ kind: 'pending_action', ref: `runtime://actions/${actionId}` }),
    );
    expect(preserved.some((p) => p.kind === 'current_request')).toBe(true);
    expect(preserved.some((p) => p.kind === 'current_declaration')).toBe(true);
    // The approval is still pending, and answerable.
    const still = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(still.pendingRequests.map((p) => p.actionId)).toEqual([actionId]);
    expect(still.history).toMatchObject({ contextBoundary: { summarySource: 'extractive', compactedTurns: 3 } });
    await h.runtime.respondAction({ sessionId, actionId, decision: 'approve' });
    await h.runtime.settled(sessionId);
    const after = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(after.lastOutcome).toMatchObject({ status: 'completed', answer: 'Written.' });
    // The call after the approval: the deterministic summary (each request, each answer) and the active turn whole.
    const lastCall = recorder.calls.filter((c) => c.purpose === undefined).at(-1) as Recorded;
    expect(lastCall.text).toContain('Summary of earlier turns');
    expect(lastCall.text).toContain('- Answer: Third answer.');
    // The first request is in the summary as its first line, shortened: never whole again.
    expect(lastCall.text).toContain('- Request: Request 1:');
    expect(lastCall.text).not.toContain(request(1).trim());
    // Its action ids and artifact refs are kept after the summary, whatever the summary says.
    expect(lastCall.text).toContain('Preserved references');
    expect(lastCall.text).toContain('action `read_3` (tool:read) completed — artifact://');
    expect(lastCall.text).toContain('write out.txt');
    expect(lastCall.text).toContain('### Result for w1');
    const all = await events(h, sessionId);
    assertEventsConform(all);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('a provider context_overflow compacts once and retries; a second overflow fails the turn', async () => {
    const overflow = {
      error: {
        message: 'maximum context length',
        statusCode: 400,
        body: '{"error":{"code":"context_length_exceeded"}}',
      },
    };
    const recorder = smallWindowModel(
      {
        steps: [answer('One.'), answer('Two.'), overflow, answer('Three.'), answer('Four.'), overflow, overflow],
        compaction: { steps: [{ text: 'Summary: turns one and two were answered.' }, { text: 'Summary 2.' }] },
      },
      { contextWindow: 200_000 },
    );
    const h = await harness({ steps: [] }, { model: recorder.model });
    extra.push(h);
    const { sessionId, threadId } = await h.runtime.createSession();
    for (const input of ['one', 'two', 'three']) {
      await h.runtime.submitTurn({ sessionId, input });
      await h.runtime.settled(sessionId);
    }
    let read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Three.' });
    let log = await events(h, sessionId);
    const overflowed = ofType(log, 'model.failed').find((e) => payload(e).failureClass === 'context_overflow');
    expect(payload(overflowed)).toMatchObject({ retryInMs: 0, compacting: true, attempt: 1 });
    expect(payload(ofType(log, 'context.compaction.started')[0])).toMatchObject({ trigger: 'context_overflow' });
    expect(
      ofType(log, 'model.requested')
        .map((e) => payload(e))
        .filter((p) => p.retryOf === 'context_overflow'),
    ).toEqual([expect.objectContaining({ attempt: 2 })]);
    // The overflowing attempt, the compaction (its own summary call), then the same step again, smaller.
    const from = log.indexOf(overflowed as RuntimeEvent);
    const after = log
      .slice(from)
      .filter((e) => e.type.startsWith('model.') || e.type.startsWith('context.compaction'))
      .map((e) => (payload(e).purpose === 'compaction' ? `${e.type} (summary)` : e.type));
    expect(after.slice(0, 7)).toEqual([
      'model.failed',
      'context.compaction.started',
      'model.requested (summary)',
      'model.completed (summary)',
      'context.compaction.completed',
      'model.requested',
      'model.completed',
    ]);
    const retried = recorder.calls.filter((c) => c.purpose === undefined).at(-1) as Recorded;
    expect(retried.text).toContain('turns one and two were answered');

    // Turn four, then turn five overflows twice: one compaction, then the failure ends the turn.
    for (const input of ['four', 'five']) {
      await h.runtime.submitTurn({ sessionId, input });
      await h.runtime.settled(sessionId);
    }
    read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({ status: 'failed', error: { code: 'model_context_overflow' } });
    log = await events(h, sessionId);
    expect(ofType(log, 'context.compaction.completed')).toHaveLength(2);
    assertEventsConform(log);
    expect((await h.runtime.replaySession(sessionId)).differences).toEqual([]);
  });

  it('compact refuses bad input with structured errors', async () => {
    const h = await harness({ steps: [answer('Hello.')] });
    extra.push(h);
    expect(await errorCode(h.runtime.compact({ sessionId: 'ses_missing' }))).toBe('session_not_found');
    const { sessionId } = await h.runtime.createSession();
    expect(await errorCode(h.runtime.compact({ sessionId }))).toBe('nothing_to_compact');
    expect(await errorCode(h.runtime.compact({ sessionId, threadId: 'thr_missing' }))).toBe('thread_not_found');
    expect(await errorCode(h.runtime.compact({ sessionId: 42 } as never))).toBe('invalid_input');
    await h.runtime.submitTurn({ sessionId, input: 'hi' });
    await h.runtime.settled(sessionId);
    const done = await h.runtime.compact({ sessionId });
    expect(done.status).toBe('completed');
    // The failure fact's shape (recorded when a summary cannot be stored, or a request finds nothing left).
    const started = ofType(await allEvents(h, sessionId), 'context.compaction.started')[0] as RuntimeEvent;
    const failed = {
      ...started,
      type: 'context.compaction.failed',
      payload: {
        compactionId: 'cmp_1',
        trigger: 'manual',
        requestId: 'cmp_1_req',
        error: { code: 'compaction_failed', message: 'the compaction summary could not be stored', retryable: false },
      },
    };
    expect(eventProblems(failed)).toEqual([]);
    // Compacted through its last turn: nothing left until another turn ends.
    expect(await errorCode(h.runtime.compact({ sessionId }))).toBe('nothing_to_compact');
  });
});
