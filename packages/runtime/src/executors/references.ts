import {
  ACTION_REFERENCE_PATTERN,
  type ActionResult,
  estimateTokens,
  headWithinTokens,
  type OarError,
  oarError,
} from '@oar/protocol';
import type { RunState, ThreadView } from '../read-models/thread-state.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import { artifactIdFromRef, isArtifactExpired } from '../store/artifacts.js';

/**
 * References (docs/protocol.md "References"): what `context_refs`, a non-`md:` `prompt_ref` and `expand_ref` name,
 * resolved when the action that needs them starts — from the durable record only, so a restarted worker resolves
 * them to the same text. `md:` sections were resolved when the declaration was parsed.
 *
 * - `action:<id>.summary` / `.output`: an action of the same run, else the latest completed one of the thread.
 *   `.output` is the full output (the action's artifact), not the summary.
 * - `input:user.goal`: the user's request of the turn — for a sub-agent or tool worker, of the root turn above it.
 * - `runtime://runs/<run>/actions/<id>[/output|/summary]`, also without `runs/`: an action of a named run.
 * - `artifact://<id>`: a stored artifact of the session; `artifact:<name>`: the artifact of the run's action
 *   `<name>`, or `<run>/<action>` (the names tool outputs are stored under).
 */

/** What a reference resolves against: artifacts and threads of the session, and the run of the resolving action. */
export interface ReferenceScope {
  reader: Pick<ExecutorContext, 'artifacts' | 'loadThread'>;
  thread: ThreadView;
  run: RunState;
}

/**
 * A failure says why in words (`reason`); `error` is set when a stored thing answered with its own structured error
 * — an artifact the retention policy expired (`artifact_expired`) — which the action then fails with, as is.
 */
export type ResolvedReference = { ok: true; text: string } | { ok: false; reason: string; error?: OarError };

/** An artifact's text, or the structured error of one that expired (any other failure is thrown). */
async function artifactText(scope: ReferenceScope, artifactId: string): Promise<{ text?: string; error?: OarError }> {
  try {
    const text = await scope.reader.artifacts.text(artifactId);
    return text === undefined ? {} : { text };
  } catch (error) {
    if (isArtifactExpired(error)) return { error: error.error };
    throw error;
  }
}

const RUNTIME_REF = /^runtime:\/\/(?:runs\/)?([^/\s]+)\/actions\/([^/\s]+)(?:\/(output|summary))?\/?$/;

export async function resolveReference(scope: ReferenceScope, ref: string): Promise<ResolvedReference> {
  const action = ACTION_REFERENCE_PATTERN.exec(ref);
  if (action) {
    const [, id = '', part] = action;
    const result = actionResult(scope, id);
    if (!result) return { ok: false, reason: `action "${id}" has no result in this thread` };
    return part === 'summary' ? { ok: true, text: summaryOf(result) } : outputOf(scope, result);
  }
  if (ref.startsWith('input:')) {
    if (ref !== 'input:user.goal') return { ok: false, reason: 'the only input reference is input:user.goal' };
    return { ok: true, text: await userGoal(scope.reader, scope.thread, scope.run.turnId) };
  }
  const runtime = RUNTIME_REF.exec(ref);
  if (runtime) {
    const [, runId = '', id = '', part] = runtime;
    const result = scope.thread.runs.get(runId)?.actions[id]?.result;
    if (!result) return { ok: false, reason: `run "${runId}" has no result for action "${id}" in this thread` };
    return part === 'summary' ? { ok: true, text: summaryOf(result) } : outputOf(scope, result);
  }
  const artifactId = artifactIdFromRef(ref);
  if (artifactId) {
    const { text, error } = await artifactText(scope, artifactId);
    if (error) return { ok: false, reason: error.message, error };
    return text === undefined ? { ok: false, reason: `no artifact ${artifactId} in this session` } : { ok: true, text };
  }
  if (ref.startsWith('artifact:')) {
    const name = ref.slice('artifact:'.length);
    const [runId, id] = name.includes('/') ? name.split('/', 2) : [scope.run.runId, name];
    const result = scope.thread.runs.get(runId ?? '')?.actions[id ?? '']?.result;
    const stored = result?.artifacts.find((uri) => artifactIdFromRef(uri));
    if (!result || !stored) return { ok: false, reason: `no artifact named "${name}" in this run` };
    return outputOf(scope, result);
  }
  return { ok: false, reason: 'not a reference the runtime resolves' };
}

/** The action's result in the resolving run, else in the thread's latest run where it completed. */
function actionResult(scope: ReferenceScope, id: string): ActionResult | undefined {
  const current = scope.thread.runs.get(scope.run.runId)?.actions[id]?.result;
  if (current) return current;
  const runs = [...scope.thread.runs.values()];
  for (let i = runs.length - 1; i >= 0; i--) {
    const result = runs[i]?.actions[id]?.result;
    if (result?.status === 'completed') return result;
  }
  return undefined;
}

function summaryOf(result: ActionResult): string {
  return result.summary ?? result.content ?? (result.error ? result.error.message : '');
}

/**
 * The full output: the stored artifact when there is one, else what the result itself carries. An artifact that
 * expired is an error, not a fallback to the result's content: that content is the cut view the model already saw,
 * and handing it over as "the full output" would be a silent lie.
 */
async function outputOf(scope: ReferenceScope, result: ActionResult): Promise<ResolvedReference> {
  for (const uri of result.artifacts) {
    const id = artifactIdFromRef(uri);
    if (!id) continue;
    const { text, error } = await artifactText(scope, id);
    if (error) return { ok: false, reason: error.message, error };
    if (text !== undefined) return { ok: true, text };
  }
  if (result.content !== undefined) return { ok: true, text: result.content };
  if (result.structured !== undefined) return { ok: true, text: JSON.stringify(result.structured, null, 2) };
  return { ok: true, text: summaryOf(result) };
}

/** The user's request: of this thread's turn, or — for a child thread's delegated turn — of the turn above it. */
async function userGoal(reader: ReferenceScope['reader'], thread: ThreadView, turnId: string): Promise<string> {
  let current = thread;
  let turn = turnId;
  // Bounded by the delegation depth; a missing parent ends the walk at the deepest turn found.
  for (let hops = 0; hops < 16; hops++) {
    const parent = current.parent;
    if (!parent || current.turns[0]?.turnId !== turn) break;
    current = await reader.loadThread(parent.threadId);
    turn = parent.turnId;
  }
  return current.turns.find((t) => t.turnId === turn)?.input ?? '';
}

/** A resolved text cut to `maxTokens`, saying how much more there is and where. */
export function boundedReference(text: string, maxTokens: number, ref: string): string {
  const total = estimateTokens(text);
  if (total <= maxTokens) return text;
  const head = headWithinTokens(text, maxTokens);
  return `${head}\n[… truncated: about ${total - estimateTokens(head)} more tokens; expand_ref "${ref}" for the rest]`;
}

/** One item of an action's resolved context, labelled with where it came from. */
export interface ContextItem {
  source: string;
  text: string;
}

export type ResolvedContext =
  | { ok: true; items: ContextItem[]; task?: string }
  | { ok: false; ref: string; reason: string; error?: OarError };

/**
 * The action's error when one of its references resolves to nothing: it would otherwise work blind. A reference
 * that answered with its own error (`artifact_expired`) fails the action with that error, naming the ref.
 */
export function unresolvedReference(failure: { ref: string; reason: string; error?: OarError }): OarError {
  if (failure.error) return { ...failure.error, details: { ...failure.error.details, ref: failure.ref } };
  return oarError('unresolved_reference', `cannot resolve "${failure.ref}": ${failure.reason}`, {
    details: { ref: failure.ref },
  });
}

/**
 * Everything an executor gives the node it starts: the action's context (md: sections, then its refs) and its task
 * (the prompt, or what a non-md prompt_ref names), read from the thread as it is now — not from the snapshot the
 * scheduler started with, which predates the results of the actions this one waited on. The refs share
 * `budgetTokens`; a ref that cannot be resolved is an error, never silently dropped.
 */
export async function resolveActionContext(ctx: ExecutorContext, budgetTokens: number): Promise<ResolvedContext> {
  const { action } = ctx;
  const thread = await ctx.loadThread(ctx.thread.threadId);
  const scope: ReferenceScope = { reader: ctx, thread, run: thread.runs.get(ctx.run.runId) ?? ctx.run };
  const sections = Object.entries(ctx.run.declaration.source.sections ?? {});
  const items: ContextItem[] = (action.context ?? []).map((text) => ({
    source: `md:${sections.find(([, body]) => body === text)?.[0] ?? 'section'}`,
    text,
  }));
  const each = Math.max(256, Math.floor(budgetTokens / Math.max(1, action.contextRefs.length)));
  for (const ref of action.contextRefs) {
    const resolved = await resolveReference(scope, ref);
    if (!resolved.ok)
      return { ok: false, ref, reason: resolved.reason, ...(resolved.error ? { error: resolved.error } : {}) };
    items.push({ source: ref, text: boundedReference(resolved.text, each, ref) });
  }
  let task = action.prompt;
  if (task === undefined && action.promptRef !== undefined && !action.promptRef.startsWith('md:')) {
    const resolved = await resolveReference(scope, action.promptRef);
    if (!resolved.ok) {
      return {
        ok: false,
        ref: action.promptRef,
        reason: resolved.reason,
        ...(resolved.error ? { error: resolved.error } : {}),
      };
    }
    task = boundedReference(resolved.text, budgetTokens, action.promptRef);
  }
  return { ok: true, items, ...(task !== undefined ? { task } : {}) };
}

/** What the action asks for in words: its task, else a prompt-like input field, its description or title. */
export function taskText(action: ExecutorContext['action'], task: string | undefined): string {
  const fromInput = [action.input.prompt, action.input.task, action.input.description].find(
    (v): v is string => typeof v === 'string' && v.trim() !== '',
  );
  return task ?? fromInput ?? action.description ?? action.title ?? JSON.stringify(action.input);
}

/**
 * The spec's node request: how a delegated agent or a tool worker receives its work. The context lists each
 * resolved item with its source; a tool worker's partial input follows as `<input>`.
 */
export function nodeRequest(
  ids: { runId: string; actionId: string },
  items: readonly ContextItem[],
  task: string,
  input?: Record<string, unknown>,
): string {
  const lines = [`<node-request run_id="${ids.runId}" action_id="${ids.actionId}">`];
  if (items.length > 0) {
    lines.push('<context>');
    for (const item of items)
      lines.push(`<item source="${item.source.replaceAll('"', '&quot;')}">`, item.text, '</item>');
    lines.push('</context>');
  }
  if (input && Object.keys(input).length > 0) lines.push('<input>', JSON.stringify(input), '</input>');
  lines.push('<task>', task, '</task>', '</node-request>');
  return lines.join('\n');
}
