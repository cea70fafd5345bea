import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AgentRunContextSchema, type AgentRunnerManifest, AgentRunnerManifestSchema } from '@oar/runner-sdk';
import { describe, expect, it } from 'vitest';
import { computeAccess } from '../../src/agent-runners/access.js';
import { checkRunnerConfig } from '../../src/agent-runners/config-check.js';
import { buildRunContext, type RunContextInput } from '../../src/agent-runners/run-context.js';
import { OarConfigSchema } from '../../src/config/oar-config.js';
import type { ThreadView, TurnState } from '../../src/read-models/thread-state.js';

/** The event-first run context, the effective access and the binding-config check (docs/runners.md). */

function manifest(context: Record<string, unknown> = {}, extra: Record<string, unknown> = {}): AgentRunnerManifest {
  return AgentRunnerManifestSchema.parse({
    id: 'plugin:test/ctx/r',
    name: 'r',
    label: { en_US: 'R' },
    capabilities: {},
    permissions: { models: ['invoke'], tools: ['call'], history: ['page', 'search'], artifacts: ['read'] },
    context,
    ...extra,
  });
}

function turn(i: number, status: TurnState['status'] = 'completed'): TurnState {
  return {
    turnId: `turn_${i}`,
    status,
    input: `question ${i} ${'x'.repeat(i * 10)}`,
    submittedAt: new Date(2026, 0, 1, 0, i).toISOString(),
    ...(status === 'completed' ? { answer: `answer ${i}` } : {}),
    modelSteps: 0,
    correctiveRetries: 0,
    runIds: [],
  };
}

/** A thread of ten finished turns and the running eleventh. */
const thread = {
  threadId: 'thr_1',
  sessionId: 'ses_1',
  agent: 'main',
  depth: 0,
  status: 'running',
  createdAt: '',
  updatedAt: '',
  activeTurnId: 'turn_10',
  turns: [...Array.from({ length: 10 }, (_, i) => turn(i)), turn(10, 'running')],
  queue: [],
  pending: [],
  modelCalls: 0,
  state: { 'runner:conversation:external.session_id': 'abc', other: 1 },
  incidents: [],
  subagents: [],
  lastSequence: 99,
  runs: new Map(),
} as unknown as ThreadView;

function contextFor(m: AgentRunnerManifest, extra: Partial<RunContextInput> = {}) {
  const access = computeAccess(m, undefined, { models: ['default'], tools: ['read'], knowledgeBases: [] });
  const ctx = buildRunContext({
    thread,
    turn: thread.turns[10] as TurnState,
    runId: 'run_1',
    manifest: m,
    access,
    config: { a: 1 },
    deadlineAt: Date.parse('2026-01-01T01:00:00Z'),
    traceId: 'trace',
    tools: [{ name: 'read', description: 'reads', inputSchema: { type: 'object' } }],
    workspaceId: 'default',
    ...extra,
  });
  return AgentRunContextSchema.parse(ctx);
}

describe('the run context of a ten-turn thread', () => {
  it('inlines no history by default and says so truthfully', () => {
    const ctx = contextFor(manifest());
    expect(ctx.bootstrap ?? null).toBeNull();
    expect(ctx.context.inline_policy).toMatchObject({
      mode: 'current_event',
      delivered_count: 0,
      source_total_count: 20,
      messages_complete: false,
    });
    expect(ctx.input.text).toBe(thread.turns[10]?.input);
    expect(ctx.event).toMatchObject({ event_id: 'turn_10', event_type: 'message.received' });
    expect(ctx.context.has_history_before).toBe(true);
    expect(ctx.state.conversation).toEqual({ 'external.session_id': 'abc' });
    expect(ctx.runtime.deadline_at).toBe(Date.parse('2026-01-01T01:00:00Z') / 1000);
    expect(ctx.config).toEqual({ a: 1 });
    // available_apis match the grant and what the host implements.
    expect(ctx.context.available_apis).toMatchObject({
      history_page: true,
      history_search: true,
      artifact_read: true,
    });
    expect(ctx.resources.tools.map((t) => t.tool_name)).toEqual(['read']);
  });

  it('honours recent_tail within max_inline_events', () => {
    const ctx = contextFor(manifest({ bootstrap: 'recent_tail', max_inline_events: 4, max_inline_bytes: 100_000 }));
    expect(ctx.bootstrap?.messages.map((m) => m.content)).toEqual([
      `question 8 ${'x'.repeat(80)}`,
      'answer 8',
      `question 9 ${'x'.repeat(90)}`,
      'answer 9',
    ]);
    expect(ctx.context.inline_policy).toMatchObject({
      delivered_count: 4,
      source_total_count: 20,
      messages_complete: false,
      reason: 'max_inline_events',
    });
  });

  it('honours max_inline_bytes, and says when everything fit', () => {
    const small = contextFor(manifest({ bootstrap: 'recent_tail', max_inline_events: 100, max_inline_bytes: 200 }));
    expect(small.context.inline_policy.reason).toBe('max_inline_bytes');
    const bytes = JSON.stringify(small.bootstrap?.messages ?? []).length;
    expect(bytes).toBeLessThanOrEqual(200 + (small.bootstrap?.messages.length ?? 0));
    expect(small.context.inline_policy.delivered_count).toBe(small.bootstrap?.messages.length);
    const all = contextFor(manifest({ bootstrap: 'recent_tail', max_inline_events: 100, max_inline_bytes: 1_000_000 }));
    expect(all.context.inline_policy).toMatchObject({ delivered_count: 20, messages_complete: true, reason: null });
  });
});

describe('who the turn acts for, and what came with it', () => {
  it('names the session actor: its kind, its whole id and its name', () => {
    expect(contextFor(manifest(), { actor: 'user:ada' }).actor).toMatchObject({
      actor_type: 'user',
      actor_id: 'user:ada',
      actor_name: 'ada',
    });
    // Behind the server a session acts for the API key that created it.
    expect(contextFor(manifest(), { actor: 'api_key:key_1' }).actor).toMatchObject({
      actor_type: 'api_key',
      actor_id: 'api_key:key_1',
      actor_name: 'key_1',
    });
    // A session recorded before actors: an honest unknown, not an invented id.
    expect(contextFor(manifest()).actor).toMatchObject({ actor_type: 'user', actor_id: null, actor_name: null });
  });

  it("hands a turn's files over as artifact refs (none when the turn has none)", () => {
    expect(contextFor(manifest()).input.attachments).toEqual([]);
    const attachments = [
      { artifactId: 'art_1', name: 'report.pdf', mimeType: 'application/pdf', size: 2048, uri: 'artifact://art_1' },
      { artifactId: 'art_2', name: 'notes.txt', mimeType: 'text/plain', size: 5, uri: 'artifact://art_2' },
    ];
    const ctx = contextFor(manifest(), { turn: { ...(thread.turns[10] as TurnState), attachments } });
    expect(ctx.input.attachments).toEqual([
      { artifact_id: 'art_1', name: 'report.pdf', mime_type: 'application/pdf', size: 2048 },
      { artifact_id: 'art_2', name: 'notes.txt', mime_type: 'text/plain', size: 5 },
    ]);
    // Refs only: the text stays the input, no file content is inlined.
    expect(ctx.input.contents).toEqual([{ type: 'text', text: thread.turns[10]?.input }]);
  });
});

describe('effective access', () => {
  it('is the manifest ∩ the binding policy ∩ the run scope', () => {
    const m = manifest();
    const access = computeAccess(
      m,
      { tools: ['read', 'write'], history: ['page'], models: ['default', 'big'] },
      {
        models: ['default'],
        tools: ['read', 'grep'],
        knowledgeBases: [],
      },
    );
    expect(access).toMatchObject({
      models: ['default'],
      modelOps: ['invoke'],
      tools: ['read'],
      history: ['page'],
      artifacts: ['read'],
      storage: [],
    });
    // A policy cannot widen: a manifest without tool permissions gets no tools whatever the policy says.
    const none = computeAccess(
      manifest({}, { permissions: {} }),
      { tools: ['read'] },
      { models: ['default'], tools: ['read'], knowledgeBases: [] },
    );
    expect(none.tools).toEqual([]);
    expect(none.models).toEqual([]);
  });
});

describe('binding config against config_schema', () => {
  const schema = AgentRunnerManifestSchema.parse({
    id: 'plugin:test/ctx/r',
    name: 'r',
    label: {},
    capabilities: {},
    permissions: {},
    context: {},
    config_schema: [
      { name: 'model', type: 'string', required: true },
      { name: 'steps', type: 'integer', default: 8 },
      { name: 'mode', type: 'select', options: [{ name: 'fast' }, { name: 'slow' }] },
    ],
  }).config_schema;

  it('fills defaults and keeps valid values', () => {
    expect(checkRunnerConfig('r', schema, { model: 'default', mode: 'fast' })).toEqual({
      model: 'default',
      steps: 8,
      mode: 'fast',
    });
  });

  it.each([
    [{}, 'model', 'is required'],
    [{ model: 1 }, 'model', 'type string'],
    [{ model: 'm', steps: 1.5 }, 'steps', 'type integer'],
    [{ model: 'm', mode: 'medium' }, 'mode', 'one of fast, slow'],
    [{ model: 'm', modle: 'typo' }, 'modle', 'not in'],
  ])('%j is refused naming %s', (config, field, reason) => {
    try {
      checkRunnerConfig('r', schema, config);
      expect.unreachable();
    } catch (error) {
      const e = error as { code: string; message: string; error: { details: { field: string } } };
      expect(e.code).toBe('runner_config_invalid');
      expect(e.error.details.field).toBe(field);
      expect(e.message).toContain(reason);
    }
  });
});

describe('docs/runners.md', () => {
  it('shows configurations that parse', () => {
    const doc = readFileSync(join(import.meta.dirname, '../../../../docs/runners.md'), 'utf8');
    const blocks = [...doc.matchAll(/```json\n([\s\S]*?)```/g)].map((m) => m[1] as string);
    const configs = blocks.filter((b) => b.includes('"runners"'));
    expect(configs.length).toBeGreaterThanOrEqual(2);
    for (const block of configs) expect(() => OarConfigSchema.parse(JSON.parse(block)), block).not.toThrow();
  });
});
