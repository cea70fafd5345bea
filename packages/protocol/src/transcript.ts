import { z } from 'zod';
import { EXECUTOR_TYPES, type ExecutorType, ExecutorTypeSchema } from './declaration.js';
import { type OarError, oarError } from './errors.js';
import {
  type ActionResult,
  ActionResultSchema,
  AggregateStatusSchema,
  aggregateStatus,
  estimateTokens,
  headWithinTokens,
  type Observation,
  type ObservedCall,
  type TokenWeights,
  tokensOf,
  tokenWeights,
} from './result.js';
import { schemaIssues } from './schema-issues.js';

/**
 * The Markdown transcript: the only runtime → model request format under the compatibility carrier (spec
 * "Runtime 到模型:Request Transcript"). Each call is immediately followed by its result so the model never has to
 * pair them up; private reasoning is never rendered because no input type here has a field for it (unknown keys,
 * `reasoning` included, are stripped by the schemas). Format and input file: docs/fragments/transcript.md.
 */

export const TRANSCRIPT_CLOSING_INSTRUCTION =
  'Based on all turns above, decide the next step.\nStrictly follow the Agent Protocol output requirements for this request.';

// ---------------------------------------------------------------------------------------------------------------
// Input schema (the JSON file `oar protocol transcript FILE` renders; also what the engine builds)
// ---------------------------------------------------------------------------------------------------------------

const EXECUTOR_TYPE_SET: ReadonlySet<string> = new Set(EXECUTOR_TYPES);

/**
 * `"agent:auto"` / `"tool:read"` shorthand or `{type, target}` (extra keys such as capabilities are ignored). A
 * string whose part before the first colon is not an executor type names a tool as a whole (`"read"`).
 */
const TranscriptExecutorSchema = z.union([
  z
    .string()
    .min(1)
    .transform((value, ctx) => {
      const colon = value.indexOf(':');
      const prefix = colon > 0 ? value.slice(0, colon) : '';
      if (!EXECUTOR_TYPE_SET.has(prefix)) return { type: 'tool' as ExecutorType, target: value };
      const target = value.slice(colon + 1);
      if (target === '') {
        ctx.addIssue({ code: 'custom', message: `executor "${value}" has no target after the colon` });
        return z.NEVER;
      }
      return { type: prefix as ExecutorType, target };
    }),
  z.object({ type: ExecutorTypeSchema, target: z.string().min(1) }),
]);

const TranscriptActionSchema = z.object({
  id: z.string().min(1),
  executor: TranscriptExecutorSchema,
  operation: z.string().optional(),
  input: z.record(z.string(), z.unknown()).default({}),
  /** One id or a list, like the carrier's `depends`. */
  dependsOn: z
    .union([z.string(), z.array(z.string())])
    .optional()
    .transform((v) => (v === undefined ? [] : typeof v === 'string' ? [v] : v)),
  title: z.string().optional(),
  description: z.string().optional(),
  reason: z.string().optional(),
});

/**
 * A call and its result. `action` is the authoring name; `call` (the Observation shape) is accepted too, so parsing
 * is idempotent. One object with both optional (rather than a union) keeps validation errors precise.
 */
export const TranscriptCallSchema = z
  .object({
    action: TranscriptActionSchema.optional(),
    call: TranscriptActionSchema.optional(),
    /** `id` defaults to the action's id so a hand-written file does not repeat it. */
    result: ActionResultSchema.extend({ id: z.string().min(1).optional() }),
  })
  .superRefine((value, ctx) => {
    const action = value.action ?? value.call;
    if (!action || (value.action && value.call)) {
      ctx.addIssue({ code: 'custom', path: ['action'], message: 'give the call as exactly one of "action" or "call"' });
      return;
    }
    if (value.result.id !== undefined && value.result.id !== action.id) {
      ctx.addIssue({
        code: 'custom',
        path: ['result', 'id'],
        message: `result id "${value.result.id}" does not match its call "${action.id}"`,
      });
    }
  })
  .transform(({ action, call, result }): Observation => {
    // Presence is guaranteed by the refinement above.
    const observed = (action ?? call) as ObservedCall;
    return { call: observed, result: { ...result, id: observed.id } };
  });

/** 1-based position shown in `<turn index="N">`; defaults to the turn's position in the list. */
const turnIndex = z.number().int().positive().optional();

export const UserTurnSchema = z.object({
  kind: z.literal('user'),
  index: turnIndex,
  text: z.string(),
  /** Where the full text is stored, named when the turn is shortened for budget. */
  ref: z.string().optional(),
});

export const AnswerTurnSchema = z.object({
  kind: z.literal('answer'),
  index: turnIndex,
  text: z.string(),
  ref: z.string().optional(),
});

export const ProtocolTurnSchema = z.object({
  kind: z.literal('protocol'),
  index: turnIndex,
  runId: z.string().min(1),
  /** The model's short reason or title for this group of calls. */
  purpose: z.string().optional(),
  /** Defaults to the runtime aggregate of the call results (see `aggregateStatus`). */
  status: AggregateStatusSchema.optional(),
  calls: z.array(TranscriptCallSchema).default([]),
  /** The original declaration for full replay: raw text as the model wrote it (DSL Markdown) or its JSON. */
  declaration: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
});

/**
 * The summary of earlier turns a context compaction replaced (docs/models.md "Compaction"): shown in place of the
 * turns it covers, never shortened or dropped for budget (it is what remains of them).
 */
export const SummaryTurnSchema = z.object({
  kind: z.literal('summary'),
  index: turnIndex,
  text: z.string(),
  /** Where the summary is stored (the compaction's artifact). */
  ref: z.string().optional(),
  /** How many turns it replaces, shown in its heading. */
  turns: z.number().int().min(0).optional(),
});

export const TranscriptTurnSchema = z.discriminatedUnion('kind', [
  UserTurnSchema,
  ProtocolTurnSchema,
  AnswerTurnSchema,
  SummaryTurnSchema,
]);
export type TranscriptTurn = z.infer<typeof TranscriptTurnSchema>;
export type TranscriptTurnInput = z.input<typeof TranscriptTurnSchema>;
export type ProtocolTurn = z.infer<typeof ProtocolTurnSchema>;

/** `{ "turns": [...] }` or a bare array of turns. */
export const TranscriptInputSchema = z.preprocess(
  (v) => (Array.isArray(v) ? { turns: v } : v),
  z.object({ turns: z.array(TranscriptTurnSchema) }),
);
export type TranscriptInput = z.infer<typeof TranscriptInputSchema>;
export type TranscriptSource = { turns: TranscriptTurnInput[] } | TranscriptTurnInput[];

/** Validate a transcript input file without throwing: the CLI reports the structured error as is. */
export function parseTranscriptInput(
  value: unknown,
): { ok: true; input: TranscriptInput } | { ok: false; error: OarError } {
  const parsed = TranscriptInputSchema.safeParse(value);
  if (parsed.success) return { ok: true, input: parsed.data };
  const issues = schemaIssues(parsed.error);
  const first = issues[0];
  return {
    ok: false,
    error: oarError(
      'invalid_transcript_input',
      `transcript input is invalid${first ? `: ${first.path || '/'} ${first.message}` : ''}`,
      { details: { issues } },
    ),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Markdown helpers
// ---------------------------------------------------------------------------------------------------------------

function longestBacktickRun(text: string): number {
  let longest = 0;
  for (const run of text.match(/`+/g) ?? []) longest = Math.max(longest, run.length);
  return longest;
}

/** A fence longer than any backtick run inside, so content (e.g. a DSL declaration with its own fences) cannot close it. */
function codeBlock(info: string, content: string): string {
  const fence = '`'.repeat(Math.max(3, longestBacktickRun(content) + 1));
  return `${fence}${info}\n${content}\n${fence}`;
}

function inlineCode(text: string): string {
  const ticks = '`'.repeat(longestBacktickRun(text) + 1);
  const pad = text.startsWith('`') || text.endsWith('`') ? ' ' : '';
  return `${ticks}${pad}${text}${pad}${ticks}`;
}

/** Labels (purpose, title, description) are single lines in the format; newlines would break the line structure. */
function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/** Drop leading blank lines and trailing whitespace; keep leading indentation (it may be code). */
function tidy(text: string): string {
  // trimEnd, not /\s+$/: that regex is quadratic on a long run of spaces that does not end the text.
  return text.replace(/^(?:[ \t]*\r?\n)+/, '').trimEnd();
}

function isJsonContainer(text: string): boolean {
  const trimmed = text.trim();
  if (!(trimmed.startsWith('{') || trimmed.startsWith('['))) return false;
  try {
    JSON.parse(trimmed);
    return true;
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------------------------------------------

export const REPLAY_MODES = ['full', 'compressed', 'hybrid'] as const;
export const ReplayModeSchema = z.enum(REPLAY_MODES);
export type ReplayMode = z.infer<typeof ReplayModeSchema>;

/**
 * How much of a turn is rendered, from most to least. exact: everything (the declaration verbatim when one is
 * given); compressed: declaration replaced by a summary + ref, observations whole; summary: also call args and
 * long results/texts shortened to bounded previews + refs; stub: one line + ref; dropped: not rendered.
 */
export const RENDER_LEVELS = ['exact', 'compressed', 'summary', 'stub', 'dropped'] as const;
export type RenderLevel = (typeof RENDER_LEVELS)[number];

export const DEFAULT_RECENT_TURNS = 4;
export const DEFAULT_MAX_EXACT_DECLARATION_TOKENS = 1000;
/** Bounds of the shortened forms; fixed so the same input always renders the same text. */
export const SUMMARY_TEXT_TOKENS = 120;
export const SUMMARY_RESULT_TOKENS = 80;
export const SUMMARY_ARGS_TOKENS = 40;
const STUB_PREVIEW_TOKENS = 16;
const STUB_MAX_CALLS = 8;

export interface RenderTranscriptOptions {
  /** Default `hybrid`, the spec's long-term default. */
  mode?: ReplayMode;
  /** Total budget for the whole text (closing instruction included). Omitted = unbounded. */
  budgetTokens?: number;
  /** hybrid: a declaration is "recent" when its turn is among the last N turns. Default 4. */
  recentTurns?: number;
  /** hybrid: longer declarations are summarized even when recent. Default 1000. */
  maxExactDeclarationTokens?: number;
  /** Replaces the standard closing instruction; '' renders none. */
  closingInstruction?: string;
  /**
   * Default true: remember each turn object's validation and renderings (see `renderTranscript`). false renders
   * from scratch and counts the final text itself: the reference the memoized path is tested against, and the
   * choice for a caller that mutates turn objects between calls.
   */
  memo?: boolean;
}

export interface TranscriptOmission {
  /** The turn's `index` as rendered (or as it would have been, for a dropped turn). */
  turn: number;
  kind: TranscriptTurn['kind'];
  level: Exclude<RenderLevel, 'exact'>;
  /** mode: the replay mode chose this level; budget: the token budget forced it. */
  reason: 'mode' | 'budget';
  /** Where what was left out can be found (declaration, result artifacts, the run, the stored text). */
  refs: string[];
}

export interface RenderedTranscript {
  text: string;
  tokens: number;
  omitted: TranscriptOmission[];
}

interface Rendered {
  text: string;
  refs: string[];
}

const RANK: Record<RenderLevel, number> = { exact: 0, compressed: 1, summary: 2, stub: 3, dropped: 4 };

function wrapTurn(index: number, body: string): string {
  return `<turn index="${index}">\n${body}\n</turn>`;
}

function declarationRef(runId: string): string {
  return `runtime://runs/${runId}/declaration`;
}

function outputRef(runId: string, result: ActionResult): string {
  return result.artifacts[0] ?? `runtime://runs/${runId}/actions/${result.id}/output`;
}

function declarationText(declaration: NonNullable<ProtocolTurn['declaration']>): { info: string; text: string } {
  return typeof declaration === 'string'
    ? { info: 'md', text: tidy(declaration) }
    : { info: 'json', text: JSON.stringify(declaration, null, 2) };
}

function renderCall(call: ObservedCall, level: RenderLevel, declarationShown: boolean): string {
  const { type, target } = call.executor;
  // A concrete tool is shown as the spec's shell heredoc; anything else (agent, auto, runtime…) by executor label.
  const concreteTool = type === 'tool' && target !== 'auto';
  const lines = [concreteTool ? `Tool: ${inlineCode(target)}` : `Executor: ${inlineCode(`${type}:${target}`)}`];
  if (call.operation) lines.push(`Operation: ${inlineCode(call.operation)}`);
  if (call.dependsOn.length > 0) lines.push(`Depends: ${call.dependsOn.map(inlineCode).join(', ')}`);
  if (call.title) lines.push(`Title: ${oneLine(call.title)}`);
  // The spec: the description belongs in the model-visible result, always. The reason helps when the result comes
  // back later, so it is shown when the exact declaration is not in view (and dropped at the summary level).
  if (call.description) lines.push(`Description: ${oneLine(call.description)}`);
  if (call.reason && !declarationShown && level !== 'summary') lines.push(`Reason: ${oneLine(call.reason)}`);
  const hasInput = Object.keys(call.input).length > 0;
  if (level === 'summary') {
    if (hasInput) {
      const compact = JSON.stringify(call.input);
      const preview = headWithinTokens(compact, SUMMARY_ARGS_TOKENS);
      lines.push(`Args: ${inlineCode(preview === compact ? compact : `${preview}…`)}`);
    }
    return `### Call ${call.id}\n\n${lines.join('\n')}`;
  }
  const parts = [`### Call ${call.id}`, lines.join('\n')];
  const args = JSON.stringify(call.input, null, 2);
  if (concreteTool) parts.push(codeBlock('shell', `tool ${target} <<'JSON'\n${args}\nJSON`));
  else if (hasInput) parts.push(codeBlock('json', args));
  return parts.join('\n\n');
}

function resultBody(result: ActionResult): string | undefined {
  const body =
    result.content ??
    result.summary ??
    result.excerpt ??
    (result.structured !== undefined ? JSON.stringify(result.structured, null, 2) : undefined);
  return body === undefined || body.trim() === '' ? undefined : tidy(body);
}

function renderResult(result: ActionResult, level: RenderLevel, runId: string): Rendered {
  const lines = [`Status: ${result.status}`];
  if (result.error) {
    const retry = result.error.retryable ? ' (retryable)' : '';
    lines.push(`Error: ${inlineCode(result.error.code)} ${oneLine(result.error.message)}${retry}`);
  }
  if (result.artifacts.length > 0) lines.push(`Artifacts: ${result.artifacts.join(', ')}`);
  const heading = `### Result for ${result.id}\n\n${lines.join('\n')}`;
  let body = resultBody(result);
  if (body === undefined) return { text: heading, refs: [] };
  const refs: string[] = [];
  let info = isJsonContainer(body) ? 'json' : 'md';
  if (level === 'summary' && estimateTokens(body) > SUMMARY_RESULT_TOKENS) {
    const ref = outputRef(runId, result);
    const short =
      result.summary !== undefined && estimateTokens(result.summary) <= SUMMARY_RESULT_TOKENS
        ? tidy(result.summary)
        : `${headWithinTokens(body, SUMMARY_RESULT_TOKENS)}\n…`;
    body = `${short}\n\n[summarized for context budget; full result: ${ref}]`;
    info = 'md';
    refs.push(ref);
  }
  return { text: `${heading}\n\n${codeBlock(info, body)}`, refs };
}

function renderProtocolTurn(turn: ProtocolTurn, index: number, level: RenderLevel): Rendered {
  const status = turn.status ?? aggregateStatus(turn.calls.map((c) => c.result));
  const heading = '## Assistant protocol request and runtime observations';
  if (level === 'stub') {
    const listed = turn.calls.slice(0, STUB_MAX_CALLS).map((c) => `${inlineCode(c.call.id)} ${c.result.status}`);
    const more = turn.calls.length > STUB_MAX_CALLS ? `, and ${turn.calls.length - STUB_MAX_CALLS} more` : '';
    const purpose = turn.purpose ? ` (${oneLine(turn.purpose)})` : '';
    const calls = listed.length > 0 ? `${listed.join(', ')}${more}` : 'none';
    const runRef = `runtime://runs/${turn.runId}`;
    const line = `Omitted for context budget: run ${inlineCode(turn.runId)}${purpose}, status ${status}; calls: ${calls}. Details: ${runRef}`;
    return { text: wrapTurn(index, `${heading}\n\n${line}`), refs: [runRef] };
  }
  const header = [`run_id: ${inlineCode(turn.runId)}`];
  if (turn.purpose) header.push(`Purpose: ${oneLine(turn.purpose)}`);
  header.push(`Status: ${status}`);
  const parts = [heading, header.join('\n')];
  const refs: string[] = [];
  const declarationShown = level === 'exact' && turn.declaration !== undefined;
  if (turn.declaration !== undefined) {
    if (declarationShown) {
      const { info, text } = declarationText(turn.declaration);
      parts.push(`### Declaration\n\n${codeBlock(info, text)}`);
    } else {
      const n = turn.calls.length;
      const listed = turn.calls.map(
        (c) => `${inlineCode(c.call.id)}${c.call.title ? ` (${oneLine(c.call.title)})` : ''}`,
      );
      const declared =
        n === 0 ? 'Declared no actions.' : `Declared ${n} action${n === 1 ? '' : 's'}: ${listed.join(', ')}.`;
      const ref = declarationRef(turn.runId);
      parts.push(`### Declaration summary\n\n${declared}\nExact declaration: ${ref}`);
      refs.push(ref);
    }
  }
  for (const { call, result } of turn.calls) {
    parts.push(renderCall(call, level, declarationShown));
    const rendered = renderResult(result, level, turn.runId);
    parts.push(rendered.text);
    refs.push(...rendered.refs);
  }
  return { text: wrapTurn(index, parts.join('\n\n')), refs };
}

function renderTextTurn(
  turn: TranscriptTurn & { kind: 'user' | 'answer' },
  index: number,
  level: RenderLevel,
): Rendered {
  const heading = turn.kind === 'user' ? '## User request' : '## Assistant answer';
  const text = tidy(turn.text);
  const refs = turn.ref ? [turn.ref] : [];
  if (level === 'stub') {
    const flat = oneLine(text);
    const preview = headWithinTokens(flat, STUB_PREVIEW_TOKENS);
    const quoted = `"${preview}${preview === flat ? '' : '…'}"`;
    const details = turn.ref ? ` Details: ${turn.ref}` : '';
    return { text: wrapTurn(index, `${heading}\n\nOmitted for context budget: ${quoted}.${details}`), refs };
  }
  if (level === 'summary' && estimateTokens(text) > SUMMARY_TEXT_TOKENS) {
    const where = turn.ref ? `; full text: ${turn.ref}` : '';
    const body = `${headWithinTokens(text, SUMMARY_TEXT_TOKENS)}\n…\n\n[truncated for context budget${where}]`;
    return { text: wrapTurn(index, `${heading}\n\n${body}`), refs };
  }
  return { text: wrapTurn(index, `${heading}\n\n${text}`), refs: [] };
}

function renderSummaryTurn(turn: TranscriptTurn & { kind: 'summary' }, index: number): Rendered {
  const covered = turn.turns !== undefined ? ` (${turn.turns} turn${turn.turns === 1 ? '' : 's'})` : '';
  const where = turn.ref ? `\n\nFull summary: ${turn.ref}` : '';
  const body = `## Summary of earlier turns${covered}\n\nEarlier turns were compacted into this summary by the runtime.${where}\n\n${tidy(turn.text)}`;
  return { text: wrapTurn(index, body), refs: turn.ref ? [turn.ref] : [] };
}

function renderTurn(turn: TranscriptTurn, index: number, level: RenderLevel): Rendered {
  if (turn.kind === 'summary') return renderSummaryTurn(turn, index);
  return turn.kind === 'protocol' ? renderProtocolTurn(turn, index, level) : renderTextTurn(turn, index, level);
}

// ---------------------------------------------------------------------------------------------------------------
// Per-turn memo
// ---------------------------------------------------------------------------------------------------------------

/**
 * Why a memo: the engine renders the whole thread before every model step, and all turns but the newest are the
 * same objects step after step (its read models are immutable values, replaced rather than mutated). Validating,
 * rendering and weighing each of them again made a step's context cost grow with the thread. So what depends on a
 * turn object alone is remembered against that object: its validated form, and per (index, level) its rendering
 * and token weights. WeakMap only: an entry lives exactly as long as the caller keeps the turn object, so memory
 * stays bounded by what callers hold anyway.
 */
interface LevelRender extends Rendered {
  /** Token weights of `text`, computed on first need (only budgeting and the total need them). */
  weights?: TokenWeights;
  /** Whether `text` equals the turn's exact rendering (then this level left nothing out). */
  sameAsExact?: boolean;
}

interface TurnMemo {
  readonly turn: TranscriptTurn;
  /** hybrid mode: the estimate of the declaration's text, computed on first need. */
  declarationTokens?: number;
  /**
   * Renderings at one index (a turn keeps its index as a thread grows), by level rank. Another index replaces them
   * rather than adding to them, so a memo never outgrows five renderings of its turn.
   */
  renders?: { index: number; byLevel: Array<LevelRender | undefined> };
}

const turnMemos = new WeakMap<object, TurnMemo>();

const freshMemo = (turn: TranscriptTurn): TurnMemo => ({ turn });

/**
 * The turns of `source` with their memos. A turn object seen before is not validated again; every other one is
 * validated alone, which accepts and yields exactly what validating it inside the whole input does (the input schema
 * has no rule across turns). When anything is invalid, or the envelope is not one the fast path recognizes, the whole
 * input is validated as before, so a caller gets the same error (issue paths included) as without the memo.
 */
function memoizedTurns(source: unknown, skip = 0): TurnMemo[] {
  const list = listOf(source);
  if (list) {
    const memos: TurnMemo[] = [];
    let valid = true;
    // Indexed, not for-of: a hole in a sparse array must be seen (as undefined, which fails below).
    for (let i = skip; i < list.length; i++) {
      const item = list[i];
      if (typeof item !== 'object' || item === null) {
        valid = false;
        break;
      }
      let memo = turnMemos.get(item);
      if (!memo) {
        const parsed = TranscriptTurnSchema.safeParse(item);
        if (!parsed.success) {
          valid = false;
          break;
        }
        memo = freshMemo(parsed.data);
        turnMemos.set(item, memo);
      }
      memos.push(memo);
    }
    if (valid) return memos;
  }
  // Throws the same ZodError as before the memo existed (the fast path only rejects what this rejects).
  return TranscriptInputSchema.parse(source).turns.slice(skip).map(freshMemo);
}

/** The turn list of a source the fast path recognizes: a bare list, or `{turns}` holding one. */
function listOf(source: unknown): readonly unknown[] | undefined {
  if (Array.isArray(source)) return source;
  if (typeof source === 'object' && source !== null && Array.isArray((source as { turns?: unknown }).turns)) {
    return (source as { turns: unknown[] }).turns;
  }
  return undefined;
}

function levelRender(memo: TurnMemo, index: number, level: Exclude<RenderLevel, 'dropped'>): LevelRender {
  if (memo.renders?.index !== index) memo.renders = { index, byLevel: [] };
  const { byLevel } = memo.renders;
  const rank = RANK[level];
  let rendered = byLevel[rank];
  if (!rendered) {
    rendered = renderTurn(memo.turn, index, level);
    byLevel[rank] = rendered;
  }
  return rendered;
}

/**
 * The front of a rendering remembered for the next call (`renderTranscript`): the first `count` turns at their
 * starting levels (no budget degradation), their pieces joined, their weights summed, their omissions listed.
 */
interface RenderedPrefix {
  /** Mode, recent turns and exact-declaration limit: another setting renders the same turns differently. */
  readonly settings: string;
  readonly count: number;
  /** The source's turn objects at those positions, as the caller passed them. */
  readonly items: readonly unknown[];
  readonly memos: readonly TurnMemo[];
  readonly levels: readonly RenderLevel[];
  readonly indexes: readonly number[];
  /** The pieces of the non-dropped turns, joined by "\n\n" (no closing, no final newline). */
  readonly text: string;
  readonly pieces: number;
  readonly cjk: number;
  readonly units: number;
  readonly omitted: readonly TranscriptOmission[];
}

/** Remembered per thread, keyed by the first turn's memo (it goes when the thread's turns do). */
const prefixes = new WeakMap<TurnMemo, RenderedPrefix>();

function rememberPrefix(memos: readonly TurnMemo[], prefix: RenderedPrefix): void {
  const first = memos[0];
  if (first) prefixes.set(first, prefix);
}

/**
 * The remembered prefix when it still holds for `source`: the same settings, the very same turn objects at each of
 * its positions (turns are immutable values: the same object is the same turn, with the same index there), and all
 * of them still older than the recent window (so their starting levels are the ones remembered).
 */
function reusablePrefix(source: unknown, settings: string, recentTurns: number): RenderedPrefix | undefined {
  const list = listOf(source);
  const first = list?.[0];
  if (!list || typeof first !== 'object' || first === null) return undefined;
  const memo = turnMemos.get(first);
  const prefix = memo ? prefixes.get(memo) : undefined;
  if (!prefix || prefix.settings !== settings || prefix.count > list.length - recentTurns) return undefined;
  for (let i = 0; i < prefix.count; i++) if (prefix.items[i] !== list[i]) return undefined;
  return prefix;
}

const NO_WEIGHT: TokenWeights = Object.freeze({ cjk: 0, units: 0 });

/**
 * Render the transcript. The replay mode picks each turn's starting level (full: exact; compressed: declarations
 * summarized; hybrid: exact only for declarations in the last `recentTurns` turns and within
 * `maxExactDeclarationTokens`). Over `budgetTokens`, turns degrade oldest first, one level at a time across all
 * older turns (compressed, then summary, then stub) so every turn keeps its gist as long as possible; then the last
 * turn is shortened to summary; then older stubs are dropped. The most recent user request is never shortened or
 * dropped, and the last turn never goes below summary — if the text still exceeds the budget, `tokens` says so.
 *
 * Turn objects are treated as immutable values: a turn object's validation and renderings are remembered (see
 * `TurnMemo`), so a caller that changes a turn passes a new object rather than mutating the one it passed before.
 */
export function renderTranscript(
  source: TranscriptSource | TranscriptInput,
  options: RenderTranscriptOptions = {},
): RenderedTranscript {
  const mode = options.mode ?? 'hybrid';
  const recentTurns = options.recentTurns ?? DEFAULT_RECENT_TURNS;
  const maxExact = options.maxExactDeclarationTokens ?? DEFAULT_MAX_EXACT_DECLARATION_TOKENS;
  const closing = options.closingInstruction ?? TRANSCRIPT_CLOSING_INSTRUCTION;
  // The front a previous call rendered the same way (the very same turn objects, so the same turns, indexes and
  // starting levels): its memos, joined text, weights and omissions are taken as they are, so a long thread's step
  // does per-turn work only for the turns after it (pointer compares for the rest).
  const settings = `${mode}|${recentTurns}|${maxExact}`;
  const prefix = options.memo === false ? undefined : reusablePrefix(source, settings, recentTurns);
  const from = prefix?.count ?? 0;
  const rest =
    options.memo === false ? TranscriptInputSchema.parse(source).turns.map(freshMemo) : memoizedTurns(source, from);
  const memos = prefix ? prefix.memos.concat(rest) : rest;
  const count = memos.length;
  const turnAt = (position: number) => (memos[position] as TurnMemo).turn;
  const indexes = prefix ? [...prefix.indexes] : [];
  for (let i = from; i < count; i++) indexes.push(turnAt(i).index ?? i + 1);

  const startLevel = (position: number): RenderLevel => {
    const turn = turnAt(position);
    if (turn.kind !== 'protocol' || turn.declaration === undefined || mode === 'full') return 'exact';
    if (mode === 'compressed') return 'compressed';
    const recent = position >= count - recentTurns;
    const memo = memos[position] as TurnMemo;
    memo.declarationTokens ??= estimateTokens(declarationText(turn.declaration).text);
    return recent && memo.declarationTokens <= maxExact ? 'exact' : 'compressed';
  };
  const initial: RenderLevel[] = prefix ? [...prefix.levels] : [];
  for (let i = from; i < count; i++) initial.push(startLevel(i));
  const levels = [...initial];

  const renderAt = (position: number, level: Exclude<RenderLevel, 'dropped'>): LevelRender =>
    levelRender(memos[position] as TurnMemo, indexes[position] ?? position + 1, level);
  // The estimate is additive in its weights, so each degradation step is priced from the changed turn alone (O(1))
  // instead of re-rendering and re-counting the whole transcript (which made long threads quadratic).
  const weightAt = (position: number, level: RenderLevel): TokenWeights => {
    if (level === 'dropped') return NO_WEIGHT;
    const rendered = renderAt(position, level);
    rendered.weights ??= tokenWeights(rendered.text);
    return rendered.weights;
  };

  let pieces = (prefix?.pieces ?? 0) + (levels.length - from) + (closing !== '' ? 1 : 0);
  const sum = tokenWeights(closing);
  sum.cjk += prefix?.cjk ?? 0;
  sum.units += prefix?.units ?? 0;
  for (let i = from; i < levels.length; i++) {
    const w = weightAt(i, levels[i] as RenderLevel);
    sum.cjk += w.cjk;
    sum.units += w.units;
  }
  // The estimate of what `compose` returns, from the pieces' weights: the pieces are joined by "\n\n" and end with
  // "\n" (ASCII: one unit per character), and because every boundary between pieces is one of those ASCII
  // separators, no code point straddles a boundary (no surrogate pair can form across one), so the whole text's
  // weights are exactly the sum of its parts' (tests check this against `estimateTokens(text)`).
  const total = (cjk: number, units: number, n: number) =>
    n === 0 ? 0 : tokensOf({ cjk, units: units + 2 * (n - 1) + 1 });
  let tokens = total(sum.cjk, sum.units, pieces);

  let degraded = false;
  const budget = options.budgetTokens;
  if (budget !== undefined && tokens > budget) {
    const turns = memos.map((m) => m.turn);
    let latestUser = -1;
    turns.forEach((t, i) => {
      if (t.kind === 'user') latestUser = i;
    });
    const last = turns.length - 1;
    // A compaction summary is never degraded: it already is what remains of the turns it replaced.
    const older = turns.map((_, i) => i).filter((i) => i !== latestUser && i !== last && turns[i]?.kind !== 'summary');
    const phases: ReadonlyArray<readonly [positions: readonly number[], level: Exclude<RenderLevel, 'exact'>]> = [
      [older, 'compressed'],
      [older, 'summary'],
      [older, 'stub'],
      ...(last >= 0 && last !== latestUser
        ? ([
            [[last], 'compressed'],
            [[last], 'summary'],
          ] as const)
        : []),
      [older, 'dropped'],
    ];
    degrade: for (const [positions, level] of phases) {
      for (const i of positions) {
        const current = levels[i] ?? 'exact';
        if (RANK[current] >= RANK[level]) continue;
        const before = weightAt(i, current);
        const after = weightAt(i, level);
        const cjk = sum.cjk - before.cjk + after.cjk;
        const units = sum.units - before.units + after.units;
        const candidatePieces = pieces - (level === 'dropped' ? 1 : 0);
        const candidateTokens = total(cjk, units, candidatePieces);
        // A shorter form is not always shorter (a stub of a two-word request is longer than the request): keep
        // whichever is smaller, so a larger budget never yields a shorter transcript.
        if (candidateTokens >= tokens) continue;
        levels[i] = level;
        degraded = true;
        sum.cjk = cjk;
        sum.units = units;
        pieces = candidatePieces;
        tokens = candidateTokens;
        if (tokens <= budget) break degrade;
      }
    }
  }
  // A degraded transcript changed levels anywhere: it is rendered whole, and no prefix is taken from it.
  const reuse = degraded ? 0 : from;

  /** The text of positions `start`..`end - 1` (not dropped), each piece as `levels` says. */
  const piecesOf = (start: number, end: number): string[] => {
    const out: string[] = [];
    for (let i = start; i < end; i++) {
      const level = levels[i] as RenderLevel;
      if (level !== 'dropped') out.push(renderAt(i, level).text);
    }
    return out;
  };
  const textPieces = piecesOf(reuse, levels.length);
  if (reuse > 0 && prefix && prefix.pieces > 0) textPieces.unshift(prefix.text);
  if (closing !== '') textPieces.push(closing);
  // The final newline goes onto the last (short) piece, not onto the joined text: the join's flat result is then
  // the text itself, not a concatenation V8 copies again when it is sliced (below) or used whole.
  if (textPieces.length > 0) textPieces[textPieces.length - 1] += '\n';
  const text = textPieces.join('\n\n');

  const omissionsOf = (start: number, end: number): TranscriptOmission[] => {
    const out: TranscriptOmission[] = [];
    for (let i = start; i < end; i++) {
      const level = levels[i] as RenderLevel;
      if (level === 'exact') continue;
      const turn = turnAt(i);
      let refs: string[];
      if (level === 'dropped') {
        refs = turn.kind === 'protocol' ? [`runtime://runs/${turn.runId}`] : turn.ref ? [turn.ref] : [];
      } else {
        const rendered = renderAt(i, level);
        // A level that changed nothing (e.g. a short user turn at "summary") left nothing out.
        rendered.sameAsExact ??= rendered.text === renderAt(i, 'exact').text;
        if (rendered.sameAsExact) continue;
        // A copy: the memo's array must not be reachable (and mutable) through the result.
        refs = [...rendered.refs];
      }
      out.push({
        turn: indexes[i] ?? i + 1,
        kind: turn.kind,
        level,
        reason: level === initial[i] ? 'mode' : 'budget',
        refs,
      });
    }
    return out;
  };
  const omitted = [
    // Copies: what the caller gets must not be the remembered prefix's own objects.
    ...(reuse > 0 && prefix ? prefix.omitted.map((o) => ({ ...o, refs: [...o.refs] })) : []),
    ...omissionsOf(reuse, levels.length),
  ];

  if (!degraded && options.memo !== false) {
    // Positions before the last `recentTurns` (and before the last turn, which may still be running) keep their
    // starting level as the thread grows: the next call can take them as they are.
    const keep = Math.max(0, Math.min(count - recentTurns, count - 1));
    const list = listOf(source);
    if (keep > 0 && list) {
      const base = prefix && keep >= from ? prefix : undefined;
      const start = base ? from : 0;
      const added = piecesOf(start, keep);
      const weights = { cjk: base?.cjk ?? 0, units: base?.units ?? 0 };
      for (let i = start; i < keep; i++) {
        const w = weightAt(i, levels[i] as RenderLevel);
        weights.cjk += w.cjk;
        weights.units += w.units;
      }
      // The front's text is where `text` starts (the same pieces, in order, joined the same way): a slice of it,
      // which V8 keeps as a view of the flat string just built. Joined again, or appended to, it would be a copy or
      // a chain of concatenations the next join has to walk — that join was half of a step at 1,000 turns.
      let length = base && base.pieces > 0 ? base.text.length : -2;
      for (const piece of added) length += 2 + piece.length;
      const joined = text.slice(0, Math.max(0, length));
      rememberPrefix(memos, {
        settings,
        count: keep,
        items: list.slice(0, keep),
        memos: memos.slice(0, keep),
        levels: levels.slice(0, keep),
        indexes: indexes.slice(0, keep),
        text: joined,
        pieces: (base?.pieces ?? 0) + added.length,
        cjk: weights.cjk,
        units: weights.units,
        omitted: [...(base?.omitted ?? []), ...omissionsOf(start, keep)],
      });
    }
  }

  // The reference path counts the text itself, so tests comparing the two paths check the additive total too.
  return { text, tokens: options.memo === false ? estimateTokens(text) : tokens, omitted };
}
