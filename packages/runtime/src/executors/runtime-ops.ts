import { oarError } from '@oar/protocol';
import { RE2JS } from 're2js';
import { actionStatusEvent, withDefaultPolicy } from '../facts/action.js';
import { isClosing, ToolError, toOarError } from '../kernel/errors.js';
import { MAX_PATTERN_LENGTH } from '../kernel/match/pattern.js';
import type { RunActionStatus } from '../read-models/thread-state.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import { type MatchProgram, PatternMatcher } from '../tools/match-worker.js';
import type { Executor } from './executor.js';
import type { Authorized } from './gate.js';
import { resolveActionContext, resolveReference, unresolvedReference } from './references.js';
import { startJobOperation } from './start-job.js';
import { withTimeout } from './tool.js';

/** The most lines one expand_ref returns; the model can ask for further ranges. */
export const MAX_EXPAND_LINES = 400;

interface Range {
  start_line?: number;
  end_line?: number;
  pattern?: string;
  around_matches?: boolean;
  context_lines?: number;
}

/**
 * A bounded range of a text: explicit lines, or the lines around matches of a pattern.
 *
 * The pattern is the model's, and the text a stored output of up to limits.maxArtifactBytes: RE2 is linear, but in
 * pattern size × text length, so one synchronous match can take minutes (see match-worker.ts). It runs in the match
 * worker, as grep's does: `signal` (the action's interrupt and its timeout) stops it mid-match, and an abort
 * rejects with the tool error `aborted`. At most MAX_EXPAND_LINES matching lines are looked for: no more can be
 * shown, so neither the worker's answer nor the work after it grows with the text.
 */
export async function selectRange(
  text: string,
  range: Range,
  signal: AbortSignal,
): Promise<{ text: string; from: number; to: number; total: number }> {
  const lines = text.split('\n');
  const total = lines.length;
  if (range.pattern) {
    const hits = await matchingLines(range.pattern, text, signal);
    const context = range.context_lines ?? 3;
    const keep = new Set<number>();
    for (const index of hits) {
      for (let k = Math.max(0, index - context); k <= Math.min(total - 1, index + context); k++) keep.add(k);
    }
    const picked = [...keep].sort((a, b) => a - b).slice(0, MAX_EXPAND_LINES);
    return {
      text: picked.map((k) => `${k + 1}: ${lines[k]}`).join('\n'),
      from: (picked[0] ?? 0) + 1,
      to: (picked.at(-1) ?? 0) + 1,
      total,
    };
  }
  const from = Math.max(1, range.start_line ?? 1);
  const to = Math.min(total, range.end_line ?? from + MAX_EXPAND_LINES - 1, from + MAX_EXPAND_LINES - 1);
  return { text: lines.slice(from - 1, to).join('\n'), from, to, total };
}

/**
 * The 0-based indexes of the first MAX_EXPAND_LINES lines that `pattern` finds a match in (the worker splits at
 * \n or \r\n: the same line indexes as a split at \n). A pattern that is not a valid RE2 expression, or is longer
 * than MAX_PATTERN_LENGTH, is searched for as literal text: the model most likely meant the text itself.
 */
async function matchingLines(pattern: string, text: string, signal: AbortSignal): Promise<number[]> {
  const literal: MatchProgram = { source: RE2JS.quote(pattern), what: 'text', pattern };
  let matcher: PatternMatcher;
  if (pattern.length > MAX_PATTERN_LENGTH) matcher = await PatternMatcher.start([literal], signal);
  else {
    try {
      matcher = await PatternMatcher.start([{ source: pattern, what: 'regular expression', pattern }], signal);
    } catch (error) {
      if (!(error instanceof ToolError && error.code === 'invalid_pattern')) throw error;
      matcher = await PatternMatcher.start([literal], signal);
    }
  }
  try {
    const hits = await matcher.matchingLines(0, text, MAX_EXPAND_LINES, 0);
    return hits.map((hit) => hit.line);
  } finally {
    matcher.close();
  }
}

/**
 * `read_skill`: the full text of a skill a tool offers (a business CLI's document on one module), so the model loads
 * it when it needs it instead of every step. Read-only and recorded like any runtime action; disclosure only, it
 * grants nothing. Input `{skill, tool?}`: the tool may be left out when one tool offers that skill.
 */
async function readSkill(given: ExecutorContext): Promise<RunActionStatus> {
  // The text is what the model asked for: whole, unless it asked for another policy.
  const ctx = withDefaultPolicy(given, { returnToModel: 'full', storeFull: true });
  const { config, action } = ctx;
  const name = typeof action.input.skill === 'string' ? action.input.skill : '';
  const toolName = typeof action.input.tool === 'string' ? action.input.tool : undefined;
  const offering = config.tools
    .list()
    .filter((tool) => tool.skills && Object.hasOwn(tool.skills, name) && (!toolName || tool.name === toolName));
  const tool = offering[0];
  const skill = tool?.skills?.[name];
  if (!tool || !skill) {
    const available = config.tools.list().flatMap((t) => Object.keys(t.skills ?? {}).map((s) => `${t.name}:${s}`));
    const error = oarError('unknown_reference', `no enabled skill "${name}"${toolName ? ` of ${toolName}` : ''}`, {
      details: { skill: name, available },
    });
    await ctx.record([actionStatusEvent(ctx, 'failed', { error })]);
    return 'failed';
  }
  await ctx.record([
    actionStatusEvent(ctx, 'completed', {
      text: skill.text,
      summary: `skill ${name} of ${tool.name}: ${skill.summary}`,
      structured: { tool: tool.name, skill: name },
    }),
  ]);
  return 'completed';
}

/** `runtime` actions: expand_ref (a bounded range of an artifact), summarize and merge (of referenced results). */
export const runtimeExecutor: Executor<undefined> = {
  prepare: async (ctx) => ({
    // A start_job reading its items from a workspace file is judged on that path, as a read of it would be.
    authorize: { executor: ctx.action.executor, paths: itemsFile(ctx), input: ctx.action.input },
    prepared: undefined,
  }),
  run: (ctx, _prepared, authorized) => runRuntimeOperation(ctx, authorized),
};

function itemsFile(ctx: ExecutorContext): string[] {
  const file = ctx.action.input.items_file;
  return ctx.action.executor.target === 'start_job' && typeof file === 'string' ? [file] : [];
}

async function runRuntimeOperation(ctx: ExecutorContext, gated: Authorized): Promise<RunActionStatus> {
  const { config, action } = ctx;
  if (gated.allowed.length > 0) await ctx.record(gated.allowed);
  const operation = action.executor.target === 'auto' ? (action.operation ?? '') : action.executor.target;
  if (operation === 'expand_ref') {
    const ref = typeof action.input.ref === 'string' ? action.input.ref : undefined;
    const scope = { reader: ctx, thread: await ctx.loadThread(ctx.thread.threadId), run: ctx.run };
    const resolved = ref ? await resolveReference(scope, ref) : undefined;
    if (ref === undefined || !resolved?.ok) {
      const failure = resolved && !resolved.ok ? resolved : { reason: 'no ref given', error: undefined };
      // A ref the store answered for itself (an expired artifact) fails with that answer; anything else is unknown.
      const error = failure.error
        ? { ...failure.error, details: { ...failure.error.details, ref } }
        : oarError('unknown_reference', `cannot expand "${ref ?? '(no ref)'}": ${failure.reason}`, {
            details: { ref },
          });
      await ctx.record([actionStatusEvent(ctx, 'failed', { error })]);
      return 'failed';
    }
    const text = resolved.text;
    const rangeInput = (action.input.range ?? {}) as Range;
    // Bounded like a tool call: the action's interrupt and limits.toolTimeoutMs stop the search (see selectRange).
    const timeoutMs = config.limits.toolTimeoutMs;
    const timer = withTimeout(ctx.signal, timeoutMs);
    let range: Awaited<ReturnType<typeof selectRange>>;
    try {
      range = await selectRange(text, rangeInput, timer.signal);
    } catch (thrown) {
      // Closing, not interrupting: record nothing; the action is still pending wherever the thread is claimed next.
      if (isClosing(ctx.signal)) return 'pending';
      const interrupted = ctx.signal.aborted;
      const error = timer.timedOut()
        ? oarError(
            'tool_timeout',
            `expand_ref timed out after ${timeoutMs} ms searching ${ref} for its pattern (details.pattern); ` +
              'try a simpler pattern or a line range',
            { retryable: true, details: { ref, pattern: rangeInput.pattern, timeoutMs } },
          )
        : interrupted
          ? oarError('interrupted', 'expand_ref was cancelled by an interrupt')
          : toOarError(thrown);
      const status = interrupted ? 'cancelled' : 'failed';
      await ctx.record([actionStatusEvent(ctx, status, { error })]);
      return status;
    } finally {
      timer.clear();
    }
    const summary = `lines ${range.from}-${range.to} of ${range.total} from ${ref}`;
    await ctx.record([
      actionStatusEvent(ctx, 'completed', {
        text: range.text,
        summary,
        structured: { ref, from: range.from, to: range.to, totalLines: range.total },
        artifacts: [ref],
      }),
    ]);
    return 'completed';
  }
  if (operation === 'summarize' || operation === 'merge') {
    // Full outputs, bounded by the action's own observation budget (its result is shaped again below).
    const resolved = await resolveActionContext(ctx, config.limits.observationTokens * 4);
    if (!resolved.ok) {
      const error = unresolvedReference(resolved);
      await ctx.record([actionStatusEvent(ctx, 'failed', { error })]);
      return 'failed';
    }
    const parts = resolved.items.map((item) => (operation === 'merge' ? `## ${item.source}\n${item.text}` : item.text));
    const text = parts.join('\n\n');
    await ctx.record([
      actionStatusEvent(ctx, 'completed', { text, summary: `${operation} of ${parts.length} input(s)` }),
    ]);
    return 'completed';
  }
  if (operation === 'read_skill') return readSkill(ctx);
  if (operation === 'start_job') return startJobOperation(ctx);
  // The order is the scheduler's (scheduler/ordering.ts: a barrier runs after what is declared before it). A
  // checkpoint is also a durability point: its end is written and flushed with every fact before it, so nothing the
  // graph did before it is redone after a crash, whatever those facts' own durability.
  if (operation === 'wait' || operation === 'checkpoint') {
    const durable = operation === 'checkpoint';
    await ctx.record([actionStatusEvent(ctx, 'completed', { text: '', summary: operation })], { durable });
    return 'completed';
  }
  const error = oarError('unknown_runtime_operation', `runtime operation "${operation}" does not exist`);
  await ctx.record([actionStatusEvent(ctx, 'failed', { error })]);
  return 'failed';
}
