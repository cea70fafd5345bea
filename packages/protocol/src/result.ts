import { z } from 'zod';
import { DEFAULT_RESULT_POLICY, ExecutorTypeSchema, type IfTruncated, type ResultPolicy } from './declaration.js';
import { type OarError, OarErrorSchema, oarError } from './errors.js';

/**
 * What the runtime reports back about executed actions: the `agent.protocol.result` record (logs, UI, trace
 * export, recovery) and the model-visible observation shaped from a full output by the action's result policy.
 * Meaning of each policy, the budget rule and the aggregate status rule: docs/fragments/result-policies.md.
 */

export const ACTION_STATUSES = [
  'completed',
  'failed',
  'blocked',
  'skipped',
  'cancelled',
  'lost',
  'denied',
  'waiting',
  'running',
  'pending',
] as const;
export const ActionStatusSchema = z.enum(ACTION_STATUSES);
export type ActionStatus = z.infer<typeof ActionStatusSchema>;

/** The run-level status the transcript's `Status:` line shows; only these three per the spec. */
export const AGGREGATE_STATUSES = ['completed', 'blocked', 'failed'] as const;
export const AggregateStatusSchema = z.enum(AGGREGATE_STATUSES);
export type AggregateStatus = z.infer<typeof AggregateStatusSchema>;

/** Statuses that mean "the declared work did not happen and will not happen without a new decision". */
export const FAILURE_STATUSES: ReadonlySet<ActionStatus> = new Set(['failed', 'lost', 'denied', 'cancelled']);
/** Statuses that mean "not finished yet; progress needs a human, an external system, or more time". */
export const BLOCKING_STATUSES: ReadonlySet<ActionStatus> = new Set(['blocked', 'waiting', 'running', 'pending']);

export const ActionResultSchema = z.object({
  id: z.string().min(1),
  title: z.string().optional(),
  description: z.string().optional(),
  status: ActionStatusSchema,
  summary: z.string().optional(),
  structured: z.record(z.string(), z.unknown()).optional(),
  excerpt: z.string().optional(),
  /** The model-visible text the result policy chose (already bounded by the budget). */
  content: z.string().optional(),
  /** Where the full output lives (`artifact://…`, `runtime://…`). Defaults to [] because the spec's own example omits it. */
  artifacts: z.array(z.string()).default([]),
  error: OarErrorSchema.optional(),
  /** True when `content` is a preview of something larger; the full output is behind `artifacts`. */
  truncated: z.boolean().optional(),
});
export type ActionResult = z.infer<typeof ActionResultSchema>;
export type ActionResultInput = z.input<typeof ActionResultSchema>;

export const NEXT_STEPS = ['final_answer', 'continue', 'decide', 'wait'] as const;
/**
 * A hint for the model, never a command: final_answer = everything declared is done; continue = more work may be
 * declared; decide = a failure needs the model's decision; wait = blocked on a human or an external system.
 */
export const NextStepSchema = z.enum(NEXT_STEPS);
export type NextStep = z.infer<typeof NextStepSchema>;

/** The machine-readable `agent.protocol.result` record. Field names exactly as the spec writes them (`run_id`). */
export const ProtocolResultSchema = z.object({
  type: z.literal('agent.protocol.result'),
  version: z.literal('1'),
  run_id: z.string().min(1),
  status: AggregateStatusSchema,
  actions: z.array(ActionResultSchema),
  next: NextStepSchema.optional(),
});
export type ProtocolResult = z.infer<typeof ProtocolResultSchema>;

/**
 * The run's aggregate status, computed by the runtime (never taken from the model). Precedence:
 *   1. any failed | lost | denied | cancelled → `failed`: declared work did not happen; the model must decide,
 *      and that decision is actionable now even if other actions still wait (their own status stays visible);
 *   2. else any blocked | waiting | running | pending → `blocked`: progress needs a human, an external system or time;
 *   3. else (every action completed or skipped, or no actions) → `completed`.
 * `skipped` counts as done: a skip is either a decision already made or the consequence of a failure rule 1 reports.
 */
export function aggregateStatus(actions: ReadonlyArray<{ status: ActionStatus }>): AggregateStatus {
  if (actions.some((a) => FAILURE_STATUSES.has(a.status))) return 'failed';
  if (actions.some((a) => BLOCKING_STATUSES.has(a.status))) return 'blocked';
  return 'completed';
}

/** Build the result record with the aggregate computed here, so no caller can get it out of sync. */
export function protocolResult(runId: string, actions: ActionResult[], next?: NextStep): ProtocolResult {
  return {
    type: 'agent.protocol.result',
    version: '1',
    run_id: runId,
    status: aggregateStatus(actions),
    actions,
    ...(next ? { next } : {}),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Token estimator
// ---------------------------------------------------------------------------------------------------------------

/**
 * Code points counted as one token each: Hangul Jamo, CJK radicals through CJK Unified Ideographs (incl. CJK
 * punctuation, Hiragana, Katakana, Bopomofo, Extension A), Hangul syllables, compatibility ideographs, CJK
 * compatibility forms, halfwidth/fullwidth forms, and the supplementary ideographic planes (U+20000–U+3FFFF).
 */
const CJK_RANGES: ReadonlyArray<readonly [number, number]> = [
  [0x1100, 0x11ff],
  [0x2e80, 0x9fff],
  [0xa960, 0xa97f],
  [0xac00, 0xd7ff],
  [0xf900, 0xfaff],
  [0xfe30, 0xfe4f],
  [0xff00, 0xffef],
  [0x20000, 0x3ffff],
];

function isCjk(cp: number): boolean {
  for (const [lo, hi] of CJK_RANGES) if (cp >= lo && cp <= hi) return true;
  return false;
}

/**
 * Incremental form of {@link estimateTokens}: lets truncation find the longest prefix within a budget in one pass.
 * Other code points weigh in "units": ASCII = 1, any other non-CJK code point (accented Latin, Cyrillic, emoji…)
 * = 2 because such text tokenizes roughly twice as densely as English.
 */
class TokenCounter {
  private cjk = 0;
  private units = 0;
  add(cp: number): void {
    if (cp < 0x80) this.units += 1;
    else if (isCjk(cp)) this.cjk += 1;
    else this.units += 2;
  }
  get tokens(): number {
    return this.cjk + Math.ceil(this.units / 4);
  }
}

/** The additive parts of the estimate: a text's estimate is `cjk + ceil(units / 4)`, and parts of a concatenation add up. */
export interface TokenWeights {
  cjk: number;
  units: number;
}

export function tokenWeights(text: string): TokenWeights {
  let cjk = 0;
  let units = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0) ?? 0;
    if (cp < 0x80) units += 1;
    else if (isCjk(cp)) cjk += 1;
    else units += 2;
  }
  return { cjk, units };
}

export function tokensOf(weights: TokenWeights): number {
  return weights.cjk + Math.ceil(weights.units / 4);
}

/**
 * The documented, deterministic token estimate every budget in OAR uses:
 *   tokens = (number of CJK code points) + ceil((ASCII code points + 2 × other code points) / 4)
 * It is an estimate (no tokenizer dependency, same answer everywhere); budgets leave headroom for the error.
 */
export function estimateTokens(text: string): number {
  const counter = new TokenCounter();
  for (const ch of text) counter.add(ch.codePointAt(0) ?? 0);
  return counter.tokens;
}

/**
 * The longest prefix of `text` whose estimate fits `maxTokens`. When the cut falls mid-line and a line break sits
 * in the last quarter of the prefix, the prefix ends at that line break so previews end on whole lines.
 */
export function headWithinTokens(text: string, maxTokens: number): string {
  if (estimateTokens(text) <= maxTokens) return text;
  const counter = new TokenCounter();
  let end = 0;
  for (const ch of text) {
    counter.add(ch.codePointAt(0) ?? 0);
    if (counter.tokens > maxTokens) break;
    end += ch.length;
  }
  const prefix = text.slice(0, end);
  const lastBreak = prefix.lastIndexOf('\n');
  return lastBreak > 0 && lastBreak >= prefix.length * 0.75 ? prefix.slice(0, lastBreak) : prefix;
}

/** The longest suffix of `text` within `maxTokens`, starting after a line break when one is in its first quarter. */
export function tailWithinTokens(text: string, maxTokens: number): string {
  if (estimateTokens(text) <= maxTokens) return text;
  const chars = Array.from(text);
  const counter = new TokenCounter();
  let start = chars.length;
  for (let i = chars.length - 1; i >= 0; i--) {
    counter.add(chars[i]?.codePointAt(0) ?? 0);
    if (counter.tokens > maxTokens) break;
    start = i;
  }
  const suffix = chars.slice(start).join('');
  const firstBreak = suffix.indexOf('\n');
  return firstBreak >= 0 && firstBreak < suffix.length * 0.25 ? suffix.slice(firstBreak + 1) : suffix;
}

// ---------------------------------------------------------------------------------------------------------------
// Observation shaping
// ---------------------------------------------------------------------------------------------------------------

/** The call half of an observation: what the transcript shows of the Action that ran (no prompt, no policy). */
export const ObservedCallSchema = z.object({
  id: z.string().min(1),
  executor: z.object({ type: ExecutorTypeSchema, target: z.string().min(1) }),
  operation: z.string().optional(),
  input: z.record(z.string(), z.unknown()).default({}),
  dependsOn: z.array(z.string()).default([]),
  title: z.string().optional(),
  description: z.string().optional(),
  /** Why the model declared the action: shown with the result when the declaration is not in view. */
  reason: z.string().optional(),
});
export type ObservedCall = z.infer<typeof ObservedCallSchema>;

/** What the transcript renders for one action: its call immediately followed by its result. */
export const ObservationSchema = z.object({ call: ObservedCallSchema, result: ActionResultSchema });
export type Observation = z.infer<typeof ObservationSchema>;

/** Anything with an Action's identifying fields; the normalized `Action` satisfies it. */
export interface ObservableAction {
  id: string;
  title?: string;
  description?: string;
  reason?: string;
  operation?: string;
  executor: { type: ObservedCall['executor']['type']; target: string };
  input?: Record<string, unknown>;
  dependsOn?: string[];
}

/** Everything the executor produced. The full output is stored as an artifact before shaping; `artifacts` point at it. */
export interface FullOutput {
  /** Defaults to `failed` when `error` is set, else `completed`. */
  status?: ActionStatus;
  text?: string;
  structured?: unknown;
  error?: OarError;
  /** The executor's own summary (tool-native counts, an agent's final output…), preferred over a mechanical one. */
  summary?: string;
  /** An executor-selected excerpt (e.g. matching lines), preferred by the `excerpt` policy. */
  excerpt?: string;
  artifacts?: string[];
}

export interface ShapeOptions {
  /** Used for the fallback ref `runtime://runs/<runId>/actions/<id>/output` when no artifact ref is given. */
  runId?: string;
}

/** Upper bound of a mechanical summary, independent of (and additionally capped by) the budget. */
export const MECHANICAL_SUMMARY_TOKENS = 120;
const MECHANICAL_SUMMARY_LINES = 3;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function pretty(value: unknown): string {
  return typeof value === 'string' ? value : (JSON.stringify(value, null, 2) ?? String(value));
}

/**
 * The runtime's mechanical summary (spec "Summary", level 2): the first non-blank lines plus the size of what was
 * left out for text; the shape for structured output; the error for a failure with no output.
 */
export function mechanicalSummary(output: FullOutput): string {
  let summary: string;
  if (output.text !== undefined && output.text.trim() !== '') {
    const lines = output.text.split(/\r\n|\r|\n/);
    const shown = lines.filter((l) => l.trim() !== '').slice(0, MECHANICAL_SUMMARY_LINES);
    summary = shown.map((l) => l.trimEnd()).join('\n');
    if (summary.length < output.text.trim().length) {
      summary += `\n… (${lines.length} lines, ${output.text.length} chars in full output)`;
    }
  } else if (output.structured !== undefined) {
    const compact = JSON.stringify(output.structured) ?? String(output.structured);
    if (estimateTokens(compact) <= MECHANICAL_SUMMARY_TOKENS / 2) summary = compact;
    else if (Array.isArray(output.structured)) summary = `Structured result: ${output.structured.length} items`;
    else if (isPlainObject(output.structured))
      summary = `Structured result with fields: ${Object.keys(output.structured).join(', ')}`;
    else summary = compact;
  } else if (output.error) {
    summary = `${output.error.code}: ${output.error.message}`;
  } else {
    summary = '(no output)';
  }
  return headWithinTokens(summary, MECHANICAL_SUMMARY_TOKENS);
}

function expandNote(ref: string): string {
  return `request expand_ref on ${ref} to see more`;
}

/** The question `if_truncated: ask_model` puts to the model when what it sees is cut. */
export function askModelQuestion(ref: string): string {
  return `Decide before going on: request expand_ref on ${ref} with a range (start_line/end_line, pattern or max_tokens) for the part you need, or continue with this preview.`;
}

/**
 * The notes that mark a cut, by `if_truncated`: `truncated(total)` ends a preview of a text of `total` tokens,
 * `omitted(names)` ends an adaptive result whose named sections were left out. Both always carry the ref.
 */
interface CutNotes {
  truncated(total: number): string;
  omitted(names: string[]): string;
}

function cutNotes(mode: IfTruncated, ref: string, budget: number): CutNotes {
  if (mode === 'ask_model') {
    return {
      truncated: (total) =>
        `[output cut: ~${total} tokens in full, over the budget of ${budget} tokens. ${askModelQuestion(ref)}]`,
      omitted: (names) => `[omitted for budget: ${names.join(', ')}. ${askModelQuestion(ref)}]`,
    };
  }
  return {
    truncated: (total) => `[truncated: ~${total} tokens in full; ${expandNote(ref)}]`,
    omitted: (names) => `[omitted for budget: ${names.join(', ')}; ${expandNote(ref)}]`,
  };
}

interface Fitted {
  text: string;
  truncated: boolean;
  /** The estimate of what would have been shown whole (set when truncated). */
  fullTokens?: number;
}

/**
 * Bound `text` to `budget` tokens. Over budget it becomes a preview plus a note carrying the ref; the note always
 * survives, even when it alone exceeds a tiny budget, because a ref is the only way back to the full output.
 * `headTail` keeps the end as well (errors and final lines cluster there); otherwise the preview is the head.
 */
function fit(text: string, budget: number, notes: CutNotes, shape: 'head' | 'headTail'): Fitted {
  const total = estimateTokens(text);
  if (total <= budget) return { text, truncated: false };
  const note = notes.truncated(total);
  // Two separators ("\n…\n") and the note are paid from the same budget as the preview.
  const previewBudget = Math.max(0, budget - estimateTokens(note) - 2);
  let preview: string;
  if (shape === 'headTail' && previewBudget >= 8) {
    const head = headWithinTokens(text, Math.ceil((previewBudget * 2) / 3) - 1);
    const tail = tailWithinTokens(text, Math.floor(previewBudget / 3) - 1);
    preview = `${head}\n…\n${tail}`;
  } else {
    preview = previewBudget > 0 ? `${headWithinTokens(text, previewBudget)}\n…` : '';
  }
  return {
    text: preview.trim() === '…' || preview === '' ? note : `${preview}\n${note}`,
    truncated: true,
    fullTokens: total,
  };
}

function fullText(output: FullOutput): string | undefined {
  if (output.text !== undefined) return output.text;
  if (output.structured !== undefined) return pretty(output.structured);
  return undefined;
}

/**
 * adaptive: named sections (structured fields, then free text) kept strictly in the model's priority order within
 * the budget. Once one section does not fit, later ones are omitted even if smaller, so a low-priority section
 * never displaces a higher-priority one.
 */
function adaptiveContent(output: FullOutput, priority: string[], budget: number, notes: CutNotes): Fitted {
  const sections = new Map<string, string>();
  if (isPlainObject(output.structured)) {
    for (const [key, value] of Object.entries(output.structured)) sections.set(key, pretty(value));
  } else if (output.structured !== undefined) {
    sections.set('structured', pretty(output.structured));
  }
  if (output.text !== undefined && !sections.has('text')) sections.set('text', output.text);
  // Priorities the output does not have are ignored; unnamed sections follow in their natural order.
  const order = [
    ...priority.filter((p) => sections.has(p)),
    ...[...sections.keys()].filter((k) => !priority.includes(k)),
  ];
  const uniqueOrder = [...new Set(order)];
  const rendered = uniqueOrder.map((name) => `## ${name}\n\n${sections.get(name) ?? ''}`);
  const whole = rendered.join('\n\n');
  const wholeTokens = estimateTokens(whole);
  if (wholeTokens <= budget) return { text: whole, truncated: false };
  // Something will be omitted, so room for the omission note (with the ref) is reserved before any section.
  const reserve = estimateTokens(notes.omitted(uniqueOrder)) + 1;
  const room = budget - reserve;
  const parts: string[] = [];
  const omitted: string[] = [];
  let used = 0;
  for (const [i, section] of rendered.entries()) {
    const name = uniqueOrder[i] ?? '';
    const cost = estimateTokens(section) + 1;
    if (omitted.length === 0 && used + cost <= room) {
      parts.push(section);
      used += cost;
      continue;
    }
    // The first section that does not fit still contributes its head when a useful amount of room is left.
    const left = room - used;
    if (omitted.length === 0 && left >= 16) {
      parts.push(`${headWithinTokens(section, left - 3)}\n…`);
      used = room;
    }
    omitted.push(name);
  }
  const note = notes.omitted(omitted);
  // The first omitted section may be partly shown above; the note still names it so the model knows it is cut.
  return { text: [...parts, note].join('\n\n'), truncated: true, fullTokens: wholeTokens };
}

/** The code of an action failed by `if_truncated: fail`: its output did not fit the observation budget. */
export const OUTPUT_OVER_BUDGET = 'output_over_budget';

/** The note an observation carries when the model asked for `store_full: false` (docs/protocol.md, "store_full"). */
export function storeFullNote(ref: string): string {
  return `[store_full: false was not applied: the runtime keeps every full output in its audit record, so it stays stored at ${ref}]`;
}

/**
 * Apply a result policy to a full output: the pure function that decides what the model sees of one action.
 * The effective budget is the smaller of `budgetTokens` (the runtime's context budget — it always wins) and the
 * policy's `maxTokens`. The structured `error`, status and artifact refs are kept under every policy: they are
 * short runtime facts, not output, and a failure without its reason is not something a model can act on.
 *
 * Over the budget, `policy.ifTruncated` decides: `provide_ref_and_summary` (default) shows a preview and the ref;
 * `ask_model` shows the preview with a note asking the model to expand a range of the ref or continue; `fail`
 * turns a completed action into a failed one with the `output_over_budget` error (size, budget, ref) and no
 * content — an action that already failed keeps its own error and gets the preview. `storeFull: false` adds
 * {@link storeFullNote}, paid from the same budget.
 */
export function shapeObservation(
  action: ObservableAction,
  output: FullOutput,
  policy: ResultPolicy = DEFAULT_RESULT_POLICY,
  budgetTokens: number = Number.POSITIVE_INFINITY,
  options: ShapeOptions = {},
): Observation {
  const status: ActionStatus = output.status ?? (output.error ? 'failed' : 'completed');
  const artifacts = output.artifacts ?? [];
  const ref =
    artifacts[0] ??
    (options.runId
      ? `runtime://runs/${options.runId}/actions/${action.id}/output`
      : `runtime://actions/${action.id}/output`);
  const limit = Math.max(0, Math.floor(Math.min(budgetTokens, policy.maxTokens ?? Number.POSITIVE_INFINITY)));
  const ifTruncated = policy.ifTruncated ?? 'provide_ref_and_summary';
  // `fail` marks the cut the default way while shaping; the cut then becomes the failure below.
  const notes = cutNotes(ifTruncated, ref, limit);
  const storeNote = policy.storeFull === false ? storeFullNote(ref) : undefined;
  // The store note and its blank-line separator are paid from the budget first, so the content stays within it.
  const budget = storeNote ? Math.max(0, limit - estimateTokens(storeNote) - 1) : limit;

  const call: ObservedCall = {
    id: action.id,
    executor: { type: action.executor.type, target: action.executor.target },
    input: action.input ?? {},
    dependsOn: action.dependsOn ?? [],
    ...(action.operation !== undefined ? { operation: action.operation } : {}),
    ...(action.title !== undefined ? { title: action.title } : {}),
    ...(action.description !== undefined ? { description: action.description } : {}),
    ...(action.reason !== undefined ? { reason: action.reason } : {}),
  };
  const result: ActionResult = {
    id: action.id,
    ...(action.title !== undefined ? { title: action.title } : {}),
    ...(action.description !== undefined ? { description: action.description } : {}),
    status,
    artifacts,
    ...(output.error ? { error: output.error } : {}),
  };
  let fullTokens: number | undefined;
  const apply = (fitted: Fitted): void => {
    result.content = fitted.text;
    if (fitted.truncated) result.truncated = true;
    if (fitted.fullTokens !== undefined) fullTokens = fitted.fullTokens;
  };
  const summaryText = (): string => output.summary ?? mechanicalSummary(output);

  switch (policy.returnToModel) {
    case 'none':
      break;
    case 'summary': {
      const fitted = fit(summaryText(), budget, notes, 'head');
      result.summary = fitted.text;
      apply(fitted);
      break;
    }
    case 'structured': {
      if (output.structured === undefined) {
        // Nothing structured was produced: the closest honest answer is the summary, not an empty object.
        const fitted = fit(summaryText(), budget, notes, 'head');
        result.summary = fitted.text;
        apply(fitted);
        break;
      }
      const record = isPlainObject(output.structured) ? output.structured : { value: output.structured };
      const fitted = fit(JSON.stringify(record, null, 2), budget, notes, 'head');
      // The record carries the fields only when they were shown whole; a cut-off object is not structured data.
      if (!fitted.truncated) result.structured = record;
      apply(fitted);
      break;
    }
    case 'excerpt': {
      const source = output.excerpt ?? fullText(output);
      if (source === undefined) break;
      const fitted = fit(source, budget, notes, 'headTail');
      result.excerpt = fitted.text;
      apply(fitted);
      break;
    }
    case 'full': {
      const source = fullText(output);
      if (source !== undefined) apply(fit(source, budget, notes, 'head'));
      break;
    }
    case 'on_failure': {
      if (!FAILURE_STATUSES.has(status) && !output.error) break;
      const source = fullText(output) ?? (output.error ? `${output.error.code}: ${output.error.message}` : undefined);
      if (source !== undefined) apply(fit(source, budget, notes, 'headTail'));
      break;
    }
    case 'on_demand': {
      const pointer = `Full output: ${ref} — request expand_ref to see more.`;
      const fitted = fit(summaryText(), Math.max(0, budget - estimateTokens(pointer) - 1), notes, 'head');
      result.summary = fitted.text;
      apply(fitted);
      result.content = `${fitted.text}\n\n${pointer}`;
      break;
    }
    case 'adaptive':
      if (output.structured !== undefined || output.text !== undefined) {
        apply(adaptiveContent(output, policy.priority ?? [], budget, notes));
      }
      break;
  }
  if (ifTruncated === 'fail' && result.truncated && status === 'completed' && !output.error) {
    // The model asked for all or nothing: what it would see does not fit, so the action fails, naming the size,
    // the budget and where the full output is stored (it is kept like any other).
    const size = fullTokens ?? 0;
    const { content: _content, summary: _summary, excerpt: _excerpt, structured: _structured, ...kept } = result;
    const failed: ActionResult = {
      ...kept,
      status: 'failed',
      error: oarError(
        OUTPUT_OVER_BUDGET,
        `the output is ~${size} tokens, over the budget of ${limit} tokens (if_truncated: fail); the full output is stored at ${ref}`,
        { details: { outputTokens: size, budgetTokens: limit, ref, ifTruncated } },
      ),
    };
    delete failed.truncated;
    if (storeNote) failed.content = storeNote;
    return { call, result: failed };
  }
  if (storeNote) result.content = result.content === undefined ? storeNote : `${result.content}\n\n${storeNote}`;
  return { call, result };
}
