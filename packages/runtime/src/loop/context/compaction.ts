import {
  type ActionResult,
  estimateTokens,
  headWithinTokens,
  type OarError,
  oarError,
  renderTranscript,
  type TranscriptTurnInput,
} from '@oar/protocol';
import {
  type AgentConfig,
  DEFAULT_CONTEXT_BUDGET_TOKENS,
  MODEL_CALL_DEFAULTS,
  type RuntimeLimits,
} from '../../config/binding.js';
import { artifactCreated } from '../../facts/action.js';
import { isClosing } from '../../kernel/errors.js';
import { newId } from '../../kernel/ids.js';
import { setRecent } from '../../kernel/lru.js';
import type { EventDraft } from '../../log/draft.js';
import { costEstimated, modelCompleted } from '../../models/cost.js';
import { callModel, type ModelHandle } from '../../models/model-call.js';
import type { ModelDeltaSink } from '../../models/model-deltas.js';
import { contextWindowOf, outputReserveOf } from '../../models/windows.js';
import { compactionRange, type ThreadView, type TurnState } from '../../read-models/thread-state.js';
import type { Engine } from '../../scheduler/engine.js';
import { isArtifactExpired } from '../../store/artifacts.js';
import { type CompactionSummary, threadTranscript } from './context.js';

/**
 * Context compaction (docs/models.md "Context budget and compaction"). Each agent's context budget comes from its
 * model's window minus the output reserve (or `limits.contextBudgetTokens`, an explicit override); past
 * `compaction.threshold` of it, the thread's older finished turns are summarised by the agent's own model — a
 * recorded, costed call with `purpose: "compaction"` — or, when that call fails, by a deterministic extractive
 * summary. The summary is stored as an artifact and `context.compaction.completed` moves the thread's context
 * boundary; from then on the transcript shows the summary in place of those turns. Everything the context is built
 * from is in the log and the artifact store, so a replay or another process rebuilds the same context: a summary is
 * never recomputed.
 *
 * Never compacted: the active turn (its request, its declarations, its pending actions and approvals), queued
 * turns. Never lost: the artifact refs, incidents and action ids of compacted turns are listed after the summary
 * (whatever the model wrote), and named as preserved items in the completion fact.
 */

export const COMPACTION_DEFAULTS = { threshold: 0.8, keepTurns: 1, maxSummaryTokens: 2_000 } as const;
export type CompactionTrigger = 'threshold' | 'context_overflow' | 'manual';

/** What a model handle tells about its size (ModelHandle, narrowed). */
type SizedModel = Pick<ModelHandle, 'provider' | 'modelId' | 'contextWindow' | 'maxOutputTokens'>;

export interface ContextBudget {
  /** Tokens the context (system prompt + transcript) may use. */
  budgetTokens: number;
  /** Past this estimate the context is compacted (when compaction is enabled). */
  triggerTokens: number;
  threshold: number;
  /** The answer's limit, sent to the provider; unset when nothing is known of the model (provider default). */
  maxOutputTokens?: number;
  contextWindow?: number;
  /** Where the budget comes from: `limits.contextBudgetTokens`, the model's window, or the default. */
  source: 'limits' | 'model' | 'default';
}

/**
 * An agent's context budget with a model: its window minus the output reserve (the model's `maxOutputTokens`, else
 * models/windows.ts), capped by `limits.contextBudgetTokens` when that is set; DEFAULT_CONTEXT_BUDGET_TOKENS for a
 * model whose window is unknown.
 */
export function contextBudget(
  limits: Pick<RuntimeLimits, 'contextBudgetTokens'>,
  agent: Pick<AgentConfig, 'compaction'>,
  model: SizedModel,
): ContextBudget {
  const window = contextWindowOf(model);
  const reserve = model.maxOutputTokens ?? outputReserveOf(model);
  const known = window !== undefined || model.maxOutputTokens !== undefined;
  const fromWindow = window !== undefined ? Math.max(512, window - reserve) : undefined;
  const explicit = limits.contextBudgetTokens;
  const budgetTokens =
    explicit !== undefined ? Math.min(explicit, fromWindow ?? explicit) : (fromWindow ?? DEFAULT_CONTEXT_BUDGET_TOKENS);
  const threshold = agent.compaction?.threshold ?? COMPACTION_DEFAULTS.threshold;
  return {
    budgetTokens,
    triggerTokens: Math.floor(budgetTokens * threshold),
    threshold,
    ...(known ? { maxOutputTokens: reserve } : {}),
    ...(window !== undefined ? { contextWindow: window } : {}),
    source: explicit !== undefined ? 'limits' : fromWindow !== undefined ? 'model' : 'default',
  };
}

/** Whether an assembled context calls for compaction: over the trigger, or shortened by the renderer for budget. */
export function overTrigger(
  context: { tokenEstimate: number; transcript: { omitted: { reason: string }[] } },
  budget: ContextBudget,
): boolean {
  return context.tokenEstimate > budget.triggerTokens || context.transcript.omitted.some((o) => o.reason === 'budget');
}

/** The summaries' texts by ref (artifacts never change): read once per process. */
const summaryTexts = new Map<string, string>();
const MAX_SUMMARY_TEXTS = 256;

/** The stored summary of a compacted thread, for its context; undefined for a thread never compacted. */
export async function compactionSummary(
  engine: { artifacts: Pick<Engine['artifacts'], 'text'> },
  thread: ThreadView,
): Promise<CompactionSummary | undefined> {
  const boundary = thread.compaction;
  if (!boundary) return undefined;
  const ref = boundary.summaryRef;
  let text = summaryTexts.get(ref);
  if (text === undefined) {
    const id = /^artifact:\/\/([A-Za-z0-9_]+)/.exec(ref)?.[1];
    // Retention never expires a thread's current summary; a fork made back when an older summary was current may
    // hold that one as a tombstone (artifact_expired), which is then as unreadable as a lost one.
    const stored = id
      ? await engine.artifacts.text(thread.sessionId, id).catch((error: unknown) => {
          if (isArtifactExpired(error)) return undefined;
          throw error;
        })
      : undefined;
    // A summary that cannot be read (a store that lost it) still leaves its recorded preview, marked as such.
    if (stored === undefined) return { ref, text: `${boundary.summaryPreview}\n\n[the full summary is unavailable]` };
    text = stored;
    setRecent(summaryTexts, ref, text, MAX_SUMMARY_TEXTS);
  }
  return { ref, text };
}

// ---------------------------------------------------------------------------------------------------------------
// Preserved items and the deterministic summary
// ---------------------------------------------------------------------------------------------------------------

export type PreservedItem = {
  kind: 'pending_action' | 'incident' | 'artifact_ref' | 'current_request' | 'current_declaration';
  ref: string;
  turnId?: string;
  title?: string;
};

const MAX_PRESERVED = 200;
const LINE_CHARS = 200;

function firstLine(text: string, max = LINE_CHARS): string {
  const line =
    text
      .trim()
      .split('\n')
      .find((l) => l.trim() !== '') ?? '';
  const flat = line.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

interface RangeAction {
  turnId: string;
  runId: string;
  id: string;
  executor: string;
  result: ActionResult | undefined;
  status: string;
}

function rangeActions(thread: ThreadView, range: TurnState[]): RangeAction[] {
  const actions: RangeAction[] = [];
  for (const turn of range) {
    for (const runId of turn.runIds) {
      const run = thread.runs.get(runId);
      if (!run) continue;
      for (const id of run.order) {
        const action = run.declaration.actions.find((a) => a.id === id);
        const state = run.actions[id];
        actions.push({
          turnId: turn.turnId,
          runId,
          id,
          executor: action ? `${action.executor.type}:${action.executor.target}` : 'unknown',
          result: state?.result,
          status: state?.status ?? 'unknown',
        });
      }
    }
  }
  return actions;
}

/**
 * What a compaction keeps in view whatever the summary says: the pending decisions and the active turn (never
 * compacted), the incidents and artifact refs of the compacted turns (listed after the summary).
 */
export function preservedItems(thread: ThreadView, range: TurnState[]): PreservedItem[] {
  const items: PreservedItem[] = [];
  for (const p of thread.pending) {
    items.push({ kind: 'pending_action', ref: `runtime://actions/${p.actionId}`, turnId: p.turnId, title: p.prompt });
  }
  const active = thread.turns.find((t) => t.turnId === thread.activeTurnId);
  if (active) {
    items.push({
      kind: 'current_request',
      ref: `runtime://threads/${thread.threadId}/turns/${active.turnId}`,
      turnId: active.turnId,
    });
    for (const runId of active.runIds) {
      items.push({ kind: 'current_declaration', ref: `runtime://runs/${runId}/declaration`, turnId: active.turnId });
    }
  }
  const ids = new Set(range.map((t) => t.turnId));
  for (const incident of thread.incidents) {
    if (incident.turnId && !ids.has(incident.turnId)) continue;
    items.push({
      kind: 'incident',
      ref: `runtime://events/${incident.eventId}`,
      ...(incident.turnId ? { turnId: incident.turnId } : {}),
      title: `${incident.code}: ${firstLine(incident.message, 120)}`,
    });
  }
  for (const action of rangeActions(thread, range)) {
    for (const artifact of action.result?.artifacts ?? []) {
      items.push({ kind: 'artifact_ref', ref: artifact, turnId: action.turnId, title: `action ${action.id}` });
    }
  }
  return items.slice(-MAX_PRESERVED);
}

/** The references section every summary ends with: what the compacted turns produced, by id and ref. */
function referencesSection(thread: ThreadView, range: TurnState[], preserved: PreservedItem[]): string {
  const lines: string[] = [];
  for (const action of rangeActions(thread, range).slice(-60)) {
    const refs = action.result?.artifacts.length ? ` — ${action.result.artifacts.join(', ')}` : '';
    const error = action.result?.error ? ` (${action.result.error.code})` : '';
    lines.push(`- action \`${action.id}\` (${action.executor}) ${action.status}${error}${refs}`);
  }
  for (const item of preserved.filter((p) => p.kind === 'incident').slice(-20)) {
    lines.push(`- incident ${item.title ?? ''} (${item.ref})`);
  }
  if (lines.length === 0) return '';
  return [
    '### Preserved references',
    'Earlier results stay available: ask for them with a runtime expand_ref action (action:<id>.output or the artifact ref).',
    ...lines,
  ].join('\n');
}

/**
 * The deterministic summary (no model): per compacted turn its request, the first line of its answer or its
 * error; the summary before it (an earlier compaction) first. Bounded by `maxTokens`.
 */
export function extractiveSummary(
  thread: ThreadView,
  range: TurnState[],
  previous: CompactionSummary | undefined,
  maxTokens: number,
): string {
  const lines: string[] = [];
  const offset = thread.compaction?.turnCount ?? 0;
  for (const [i, turn] of range.entries()) {
    lines.push(`Turn ${offset + i + 1} (${turn.status}):`);
    lines.push(`- Request: ${firstLine(turn.input)}`);
    const actions = turn.runIds.flatMap((runId) => thread.runs.get(runId)?.order ?? []);
    if (actions.length > 0)
      lines.push(
        `- Actions: ${actions
          .slice(0, 12)
          .map((id) => `\`${id}\``)
          .join(', ')}${actions.length > 12 ? ` and ${actions.length - 12} more` : ''}`,
      );
    if (turn.answer !== undefined) lines.push(`- Answer: ${firstLine(turn.answer)}`);
    if (turn.error) lines.push(`- Error: ${turn.error.code} ${firstLine(turn.error.message)}`);
  }
  const recent = lines.join('\n');
  const before = previous ? previousSummary(previous.text, Math.floor(maxTokens / 2)) : '';
  const text = [before ? `Earlier:\n${before}` : '', recent].filter((part) => part !== '').join('\n\n');
  return within(text, maxTokens);
}

/** An earlier summary without its references section (the new one lists every reference again), bounded. */
function previousSummary(text: string, maxTokens: number): string {
  const cut = text.indexOf('\n### Preserved references');
  return within((cut >= 0 ? text.slice(0, cut) : text).trim(), maxTokens);
}

function within(text: string, maxTokens: number): string {
  if (estimateTokens(text) <= maxTokens) return text;
  return `${headWithinTokens(text, maxTokens)}\n…`;
}

// ---------------------------------------------------------------------------------------------------------------
// The compaction itself
// ---------------------------------------------------------------------------------------------------------------

export const COMPACTION_SYSTEM_PROMPT = [
  'You compact the history of a conversation between a user and an agent that runs inside OAR, the Open Agent',
  'Runtime. The turns below will be replaced by your summary in every later request, so the agent must be able to',
  'continue from it alone. Write a concise Markdown summary: what the user asked for and still wants, what was',
  'decided and answered, what each action did and found (keep action ids, file names and artifact refs exactly),',
  'what failed, and what is still open. Do not invent anything. Reply with the summary only.',
].join('\n');

/** A sink that drops the deltas: a summary is not the agent speaking, so nothing is streamed to the user. */
const SILENT: ModelDeltaSink = { delta: () => undefined, end: () => undefined };

export interface CompactionInput {
  trigger: CompactionTrigger;
  agent: AgentConfig;
  model: ModelHandle;
  budget: ContextBudget;
  /** Measures the context the thread would have (its estimate in tokens), with or without a summary. */
  measure: (thread: ThreadView, summary: CompactionSummary | undefined) => number;
  requestId?: string;
  /** Overrides the agent's `compaction.keepTurns` (an overflowing request compacts everything finished). */
  keepTurns?: number;
}

export type CompactionOutcome =
  | { status: 'completed'; compactionId: string; tokensBefore: number; tokensAfter: number; summaryRef: string }
  | { status: 'failed'; compactionId: string; error: OarError }
  | { status: 'nothing_to_compact' }
  | { status: 'interrupted' };

function summaryTokensOf(agent: AgentConfig, budget: ContextBudget): number {
  return (
    agent.compaction?.summaryTokens ??
    Math.max(64, Math.min(COMPACTION_DEFAULTS.maxSummaryTokens, Math.floor(budget.budgetTokens / 5)))
  );
}

/**
 * Compact the thread's context: summarise the range (the agent's model, else the extractive fallback), store the
 * summary, and record the new boundary. Runs under the thread's lease (the worker driving it); the facts about it
 * are `context.compaction.started`, the summary call (`model.requested` … `model.completed` / `model.failed`, with
 * `purpose: "compaction"`, and its cost facts), `artifact.changed`, then `context.compaction.completed` — or
 * `context.compaction.failed` when the summary could not be stored.
 */
export async function compactThread(
  engine: Engine,
  thread: ThreadView,
  input: CompactionInput,
): Promise<CompactionOutcome> {
  const range = compactionRange(
    thread,
    input.keepTurns ?? input.agent.compaction?.keepTurns ?? COMPACTION_DEFAULTS.keepTurns,
  );
  const first = range[0];
  const last = range.at(-1);
  if (!first || !last) return { status: 'nothing_to_compact' };
  const compactionId = newId('cmp');
  // Context facts need a turn: the active one, else the last turn compacted (a manual compaction between turns).
  const ids = { threadId: thread.threadId, turnId: thread.activeTurnId ?? last.turnId };
  const affectedTurns = range.map((t) => t.turnId);
  const previous = await compactionSummary(engine, thread);
  const tokensBefore = input.measure(thread, previous);
  const common = {
    compactionId,
    trigger: input.trigger,
    affectedTurns,
    ...(input.requestId ? { requestId: input.requestId } : {}),
  };
  const rangeFacts = {
    fromTurnId: first.turnId,
    toTurnId: last.turnId,
    turnCount: range.length,
    toSequence: thread.lastSequence,
  };
  const summaryTokens = summaryTokensOf(input.agent, input.budget);
  // What the model is asked to summarise: the summary before (if any) and the range, within the model's budget.
  const turns: TranscriptTurnInput[] = threadTranscript(
    { ...thread, turns: thread.turns.slice(0, thread.turns.indexOf(last) + 1) },
    'compressed',
    previous,
  );
  const transcript = renderTranscript(
    { turns },
    {
      mode: 'compressed',
      budgetTokens: Math.max(256, input.budget.budgetTokens - summaryTokens - estimateTokens(COMPACTION_SYSTEM_PROMPT)),
      closingInstruction: `Summarise the turns above now, in at most ${summaryTokens} tokens.`,
    },
  );
  const inputTokenEstimate = estimateTokens(COMPACTION_SYSTEM_PROMPT) + transcript.tokens;
  const model = input.model;
  await engine.append(
    thread.sessionId,
    [
      {
        type: 'context.compaction.started',
        ...ids,
        payload: {
          ...common,
          range: rangeFacts,
          tokensBefore,
          tokenBudget: input.budget.budgetTokens,
          threshold: input.budget.threshold,
        },
      },
      {
        type: 'model.requested',
        ...ids,
        payload: {
          modelId: model.modelId,
          provider: model.provider,
          attempt: 1,
          purpose: 'compaction',
          compactionId,
          messageCount: 2,
          toolCount: 0,
          inputTokenEstimate,
        },
      },
      ...costEstimated(ids, model, inputTokenEstimate),
    ],
    { durable: true },
  );
  const signal = engine.signal(thread.threadId);
  const call = await callModel(model, {
    system: COMPACTION_SYSTEM_PROMPT,
    transcript: transcript.text,
    carrier: 'text',
    signal,
    modelCall: thread.compactionCalls ?? 0,
    purpose: 'compaction',
    maxOutputTokens: summaryTokens,
    timeoutMs: model.timeoutMs ?? engine.limits.modelTimeoutMs ?? MODEL_CALL_DEFAULTS.timeoutMs,
    deltas: SILENT,
  });
  const modelFacts = { modelId: model.modelId, provider: model.provider, purpose: 'compaction', compactionId };
  let written: string | undefined;
  if (call.ok) {
    written = call.output.text.trim();
    await engine.append(
      thread.sessionId,
      modelCompleted(ids, model, call.output, { lead: { purpose: 'compaction', compactionId } }),
    );
  } else {
    const failed: EventDraft = {
      type: 'model.failed',
      ...ids,
      payload: {
        ...modelFacts,
        error: call.failure.error,
        durationMs: call.durationMs,
        failureClass: call.failure.failureClass,
        attempt: 1,
        ...(call.failure.statusCode !== undefined ? { statusCode: call.failure.statusCode } : {}),
      },
    };
    if (signal.aborted) {
      // Interrupted (or closing): the interrupt records the turn's end; a closing runtime records nothing.
      if (!isClosing(signal)) {
        await engine.append(thread.sessionId, [
          failed,
          {
            type: 'context.compaction.failed',
            ...ids,
            payload: { ...common, error: oarError('interrupted', 'the compaction was interrupted') },
          },
        ]);
      }
      return { status: 'interrupted' };
    }
    await engine.append(thread.sessionId, [failed]);
  }
  const source = written ? 'model' : 'extractive';
  const preserved = preservedItems(thread, range);
  const body = written ? within(written, summaryTokens) : extractiveSummary(thread, range, previous, summaryTokens);
  const references = referencesSection(thread, range, preserved);
  const text = references ? `${body}\n\n${references}` : body;
  let artifact: Awaited<ReturnType<Engine['artifacts']['put']>>;
  try {
    artifact = await engine.artifacts.put(
      thread.sessionId,
      { text, mime: 'text/markdown', name: `compactions/${compactionId}/summary.md` },
      engine.limits.maxArtifactBytes,
    );
  } catch (error) {
    const cause = error instanceof Error ? error.message : String(error);
    const failure = oarError('compaction_failed', `the compaction summary could not be stored: ${cause}`);
    await engine.append(thread.sessionId, [
      { type: 'context.compaction.failed', ...ids, payload: { ...common, error: failure } },
    ]);
    return { status: 'failed', compactionId, error: failure };
  }
  // The summary as stored (redacted like every output): what every later context, in any process, is built from.
  const storedText = (await engine.artifacts.text(thread.sessionId, artifact.artifactId)) ?? text;
  setRecent(summaryTexts, artifact.uri, storedText, MAX_SUMMARY_TEXTS);
  const compacted: ThreadView = {
    ...thread,
    compaction: {
      compactionId,
      trigger: input.trigger,
      throughTurnId: last.turnId,
      turnCount: thread.turns.indexOf(last) + 1,
      summaryRef: artifact.uri,
      summaryPreview: artifact.preview,
      summarySource: source,
      tokensBefore,
      tokensAfter: 0,
      at: new Date().toISOString(),
    },
  };
  const tokensAfter = input.measure(compacted, { ref: artifact.uri, text: storedText });
  await engine.append(
    thread.sessionId,
    [
      artifactCreated(ids, artifact),
      {
        type: 'context.compaction.completed',
        ...ids,
        payload: {
          ...common,
          range: rangeFacts,
          tokensBefore,
          tokensAfter,
          tokenBudget: input.budget.budgetTokens,
          summaryRef: artifact.uri,
          summaryPreview: artifact.preview,
          summarySource: source,
          continuationRef: `runtime://threads/${thread.threadId}/transcript`,
          preserved,
          ...(written ? {} : { fallbackReason: call.ok ? 'empty summary' : call.failure.failureClass }),
        },
      },
    ],
    { durable: true },
  );
  return { status: 'completed', compactionId, tokensBefore, tokensAfter, summaryRef: artifact.uri };
}
