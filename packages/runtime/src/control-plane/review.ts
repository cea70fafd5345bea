import { posix } from 'node:path';
import type { OarError, RuntimeEvent, Task } from '@oar/protocol';
import { notFound } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { fileVersionsOf } from '../read-models/file-versions.js';
import { type ReadModels, threadViews } from '../read-models/project.js';
import { bindingOf } from '../read-models/session.js';
import type { ThreadView } from '../read-models/thread-state.js';
import { storedArtifact } from '../store/artifacts.js';
import type { CommandContext } from './command-context.js';
import { digestOf, type ExportScope, limitFacts, recordExport } from './exports.js';
import {
  type FileCall,
  type FileChange,
  fragmentDiff,
  type ReviewApproval,
  type ReviewCommand,
  type ReviewCosts,
  type ReviewPack,
  reviewMarkdown,
  unifiedDiff,
} from './review-render.js';

/**
 * `export_review`: the review pack of a session, thread, turn or task — the changes OAR's file tools made (with
 * diffs), the decisions asked and who gave them, the commands run with their exit codes, what the model calls cost,
 * and the turns and tasks of the scope — all from the log's facts; recorded as `evidence.changed` (docs/review.md).
 */

export interface ExportReviewInput extends ExportScope {
  /** `markdown`: the result also carries the pack as a Markdown document (`markdown`). */
  format?: 'json' | 'markdown';
}

export type ReviewResult = ReviewPack & { digest: string; markdown?: string };

type Payload = Record<string, unknown>;
const payloadOf = (e: RuntimeEvent) => (e.payload ?? {}) as Payload;
const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
const num = (v: unknown) => (typeof v === 'number' ? v : undefined);
const clip = (text: string, max = 500) =>
  text.length > max ? `${text.slice(0, max)}… [${text.length - max} more]` : text;
const errorOf = (v: unknown): Pick<OarError, 'code' | 'message'> | undefined => {
  const e = v as Partial<OarError> | undefined;
  return e && typeof e.code === 'string' ? { code: e.code, message: String(e.message ?? '') } : undefined;
};
const ids = (e: RuntimeEvent) => ({
  ...(e.threadId ? { threadId: e.threadId } : {}),
  ...(e.turnId ? { turnId: e.turnId } : {}),
});

/** A diff longer than this is cut (the note says so). */
const MAX_DIFF_CHARS = 64 * 1024;

export async function exportReview(ctx: CommandContext, input: ExportReviewInput): Promise<ReviewResult> {
  const models = await ctx.log.allReadModels(input.sessionId);
  const session = models.session;
  if (!session) throw notFound('session', input.sessionId);
  const threads = threadViews(models);
  const { scope, inScope } = resolveScope(input, models, threads);
  const events = (await ctx.log.read(input.sessionId)).filter((e) => e.sequence <= session.lastSequence);
  const scoped = events.filter(inScope);
  const root = bindingOf(session)?.workspaceRoot;
  const changes = fileChanges(events, inScope, root, await beforeImages(ctx, input.sessionId, scoped));
  const approvals = approvalsOf(scoped);
  const commands = commandsOf(scoped);
  const turnIds = [...new Set(scoped.flatMap((e) => (e.turnId ? [e.turnId] : [])))];
  const turns = turnIds.flatMap((turnId) => turnOf(threads, turnId));
  const taskIds = [...new Set(scoped.flatMap((e) => (e.taskId && models.tasks.has(e.taskId) ? [e.taskId] : [])))];
  const tasks = taskIds.map((taskId) => taskOf(models.tasks.get(taskId) as Task));
  const reviewId = newId('ev');
  const pack: ReviewPack = {
    format: 'oar.review.v1',
    reviewId,
    sessionId: input.sessionId,
    runtimeId: ctx.log.runtimeId,
    scope,
    exportedAt: new Date().toISOString(),
    eventCount: scoped.length,
    throughSequence: session.lastSequence,
    summary: {
      turns: turns.length,
      tasks: tasks.length,
      filesChanged: changes.filter((c) => c.calls.some((call) => call.status === 'applied')).length,
      fileCalls: changes.reduce((n, c) => n + c.calls.length, 0),
      approvals: approvals.length,
      pendingApprovals: approvals.filter((a) => a.decision === 'pending').length,
      commands: commands.length,
      commandsFailed: commands.filter((c) => c.status !== 'running' && (c.status !== 'completed' || c.exitCode !== 0))
        .length,
    },
    turns,
    tasks,
    changes,
    approvals,
    policyDecisions: policyDecisions(scoped),
    commands,
    costs: costsOf(scoped),
  };
  const digest = digestOf(pack);
  const markdown = input.format === 'markdown' ? reviewMarkdown(pack) : undefined;
  await recordExport(ctx, {
    kind: 'review',
    exportId: reviewId,
    scope,
    format: pack.format,
    eventCount: pack.eventCount,
    throughSequence: pack.throughSequence,
    body: pack,
    extra: { rendering: input.format ?? 'json' },
  });
  return { ...pack, digest, ...(markdown !== undefined ? { markdown } : {}) };
}

/**
 * The scope's ids, checked (an id of another session, or of another thread than the one named, is not found), with
 * the thread a turn or task is on filled in; and which events belong to it: all its ids hold (a task's: the events
 * carrying its id, those of its own turns and of its attempts' runs).
 */
function resolveScope(
  input: ExportScope,
  models: ReadModels,
  threads: ThreadView[],
): { scope: ReviewPack['scope']; inScope: (e: RuntimeEvent) => boolean } {
  const { sessionId, turnId, taskId } = input;
  let threadId = input.threadId;
  if (threadId !== undefined && !models.threads.has(threadId)) throw notFound('thread', threadId);
  const onThread = (t: ThreadView) => threadId === undefined || t.threadId === threadId;
  if (turnId !== undefined) {
    const owner = threads.find((t) => onThread(t) && t.turns.some((turn) => turn.turnId === turnId));
    if (!owner) throw notFound('turn', turnId);
    threadId = owner.threadId;
  }
  const taskTurns = new Set<string>();
  const taskRuns = new Set<string>();
  if (taskId !== undefined) {
    const task = models.tasks.get(taskId);
    for (const t of threads) {
      for (const turn of t.turns) if (turn.task?.taskId === taskId) taskTurns.add(turn.turnId);
    }
    for (const attempt of task?.attempts ?? []) taskRuns.add(attempt.runId);
    const onIt = (t: ThreadView) => t.threadId === task?.threadId || t.turns.some((turn) => taskTurns.has(turn.turnId));
    if (!task || (threadId !== undefined && !threads.some((t) => onThread(t) && onIt(t))))
      throw notFound('task', taskId);
    threadId ??= task.threadId;
  }
  const scope = {
    sessionId,
    ...(threadId !== undefined ? { threadId } : {}),
    ...(turnId !== undefined ? { turnId } : {}),
    ...(taskId !== undefined ? { taskId } : {}),
  };
  const inScope = (e: RuntimeEvent) =>
    (threadId === undefined || e.threadId === threadId) &&
    (turnId === undefined || e.turnId === turnId) &&
    (taskId === undefined ||
      e.taskId === taskId ||
      (e.turnId !== undefined && taskTurns.has(e.turnId)) ||
      (e.runId !== undefined && taskRuns.has(e.runId)));
  return { scope, inScope };
}

// ---- changes ------------------------------------------------------------------------------------------------------

const FILE_TOOLS = new Set(['write', 'edit']);
const WRITTEN = /^(Created|Overwrote) (.+) \((\d+) bytes?\)$/;
const EDITED = /^Edited (.+): (\d+) replacements? \(first at line (\d+)\)$/;

/** What is known of a file's content at a point of the log: the text, or why it is not known. */
type Known = { content: string } | { unknown: string };

interface Entry {
  path: string;
  created: boolean;
  calls: FileCall[];
  before?: Known;
  after?: Known;
  edits: { line?: number; oldString: string; newString: string; replacements?: number }[];
  writes: number;
}

/** A workspace path as the tools report it: relative to the workspace root, normalized. */
function workspacePath(filePath: unknown, root: string | undefined): string {
  const path = String(filePath ?? '');
  const relative = root && path.startsWith(`${root}/`) ? path.slice(root.length + 1) : path;
  return posix.normalize(relative).replace(/^\.\//, '');
}

function occurrences(text: string, needle: string): number[] {
  const at: number[] = [];
  for (let i = text.indexOf(needle); i !== -1 && needle !== ''; i = text.indexOf(needle, i + needle.length)) at.push(i);
  return at;
}

const lineAt = (text: string, offset: number) => text.slice(0, offset).split('\n').length;

/**
 * The content after a write or edit that reported `summary`, from the content before and the call's recorded
 * input — the same change the tool made (tools/builtin/write.ts, edit.ts), checked against what it reported (the
 * bytes written, the replacements and their first line): a mismatch means the file changed outside OAR's tools.
 */
function applied(tool: string, input: Payload, summary: string, before: Known): Known {
  if (tool === 'write') {
    const reported = WRITTEN.exec(summary);
    if (typeof input.content !== 'string') return { unknown: 'the content written is not in the log' };
    if (reported && Buffer.byteLength(input.content, 'utf8') !== Number(reported[3])) {
      return { unknown: 'the content recorded differs from what was written (redacted before recording)' };
    }
    return { content: input.content };
  }
  if (!('content' in before)) return before;
  const oldString = String(input.oldString ?? '');
  const newString = String(input.newString ?? '');
  const at = occurrences(before.content, oldString);
  const reported = EDITED.exec(summary);
  const first = at[0];
  if (
    first === undefined ||
    !reported ||
    Number(reported[2]) !== at.length ||
    lineAt(before.content, first) !== Number(reported[3])
  ) {
    return {
      unknown: 'the file changed outside OAR’s write and edit (a command, or another program) before this edit',
    };
  }
  const content =
    input.replaceAll === true
      ? before.content.split(oldString).join(newString)
      : before.content.slice(0, first) + newString + before.content.slice(first + oldString.length);
  return { content };
}

/**
 * The files OAR's `write` and `edit` changed in the scope: each call, and the diff from the content before the
 * scope's first call to the content after its last. Contents are reconstructed over the whole log from the calls'
 * recorded inputs (a write's content; an edit's replacement applied to the content known before it): a file OAR
 * created is known from its creation, one that existed before its first write or edit is not.
 */
function fileChanges(
  events: RuntimeEvent[],
  inScope: (e: RuntimeEvent) => boolean,
  root: string | undefined,
  befores: ReadonlyMap<string, string>,
) {
  const started = new Map<string, RuntimeEvent>();
  const known = new Map<string, Known>();
  const entries = new Map<string, Entry>();
  const firstSeen: Known = { unknown: 'the file existed before OAR’s first recorded write or edit of it' };
  const record = (start: RuntimeEvent, call: FileCall, path: string, before: Known, after: Known, input: Payload) => {
    if (!inScope(start)) return;
    let entry = entries.get(path);
    if (!entry) {
      entry = { path, created: false, calls: [], edits: [], writes: 0 };
      entries.set(path, entry);
    }
    entry.calls.push(call);
    if (call.status === 'failed' || call.status === 'cancelled') return;
    if (!entry.before) {
      entry.before = before;
      entry.created =
        call.status === 'applied' && call.tool === 'write' && call.summary?.startsWith('Created ') === true;
    }
    entry.after = after;
    if (call.tool === 'write') entry.writes++;
    else {
      const reported = EDITED.exec(call.summary ?? '');
      entry.edits.push({
        oldString: String(input.oldString ?? ''),
        newString: String(input.newString ?? ''),
        ...(reported ? { line: Number(reported[3]), replacements: Number(reported[2]) } : {}),
      });
    }
  };
  const end = (start: RuntimeEvent, ended: RuntimeEvent | undefined) => {
    const p = payloadOf(start);
    const tool = p.toolName as 'write' | 'edit';
    const input = (p.input ?? {}) as Payload;
    const result = ended ? payloadOf(ended) : {};
    const summary = str(result.summary);
    const reported = summary ? (tool === 'write' ? WRITTEN : EDITED).exec(summary) : null;
    const path = reported?.[tool === 'write' ? 2 : 1] ?? workspacePath(input.filePath, root);
    const status: FileCall['status'] = !ended
      ? 'running'
      : ended.type === 'tool.result'
        ? 'applied'
        : ended.status === 'lost'
          ? 'lost'
          : ended.status === 'cancelled'
            ? 'cancelled'
            : 'failed';
    const call: FileCall = {
      tool,
      toolCallId: start.toolCallId as string,
      ...ids(start),
      ...(start.taskId ? { taskId: start.taskId } : {}),
      sequence: start.sequence,
      at: start.timestamp,
      status,
      ...(summary ? { summary } : {}),
      ...(errorOf(result.error) ? { error: errorOf(result.error) } : {}),
    };
    // The kept before-image (file versions) is the file as the call found it, whatever changed it before.
    const image = befores.get(start.toolCallId as string);
    const before: Known =
      tool === 'write' && summary?.startsWith('Created ')
        ? { content: '' }
        : image !== undefined
          ? { content: image }
          : (known.get(path) ?? firstSeen);
    const after: Known =
      status === 'applied'
        ? applied(tool, input, summary ?? '', before)
        : status === 'failed' || status === 'cancelled'
          ? before
          : { unknown: `a ${tool} call’s outcome is not known (${status})` };
    known.set(path, after);
    record(start, call, path, before, after, input);
  };
  for (const e of events) {
    const p = payloadOf(e);
    if (e.type === 'tool.started' && e.toolCallId && FILE_TOOLS.has(String(p.toolName))) started.set(e.toolCallId, e);
    else if ((e.type === 'tool.result' || e.type === 'tool.failed') && e.toolCallId && started.has(e.toolCallId)) {
      end(started.get(e.toolCallId) as RuntimeEvent, e);
      started.delete(e.toolCallId);
    }
  }
  for (const start of started.values()) end(start, undefined);
  return [...entries.values()].map(toChange);
}

/** At most this many before-images are read for one review, each at most MAX_BEFORE_IMAGE_BYTES. */
const MAX_BEFORE_IMAGES = 200;
const MAX_BEFORE_IMAGE_BYTES = 1024 * 1024;

/**
 * The text of the scope's calls' kept before-images (read-models/file-versions.ts), by tool call id: exact ones only
 * (not redacted), text, of a readable size. A file that existed before OAR's first change, or was changed outside
 * OAR between two of its calls, then has a known content before each call, and a complete diff.
 */
async function beforeImages(
  ctx: CommandContext,
  sessionId: string,
  scoped: RuntimeEvent[],
): Promise<Map<string, string>> {
  const images = new Map<string, string>();
  const wanted = fileVersionsOf(scoped).filter(
    (v) => v.before?.restorable && v.before.artifactId && v.before.size <= MAX_BEFORE_IMAGE_BYTES,
  );
  for (const version of wanted.slice(0, MAX_BEFORE_IMAGES)) {
    const artifact = await storedArtifact(ctx.log.store.db, sessionId, version.before?.artifactId as string);
    if (artifact?.mime.startsWith('text/')) images.set(version.toolCallId, new TextDecoder().decode(artifact.bytes));
  }
  return images;
}

function toChange(entry: Entry): FileChange {
  const base = { path: entry.path, created: entry.created, calls: entry.calls };
  const { before, after } = entry;
  if (!before || !after) return { ...base, diffStatus: 'none', diffNote: 'no call of the scope changed the file' };
  if ('content' in before && 'content' in after) {
    const diff = unifiedDiff(entry.path, before.content, after.content, entry.created);
    if (diff.length <= MAX_DIFF_CHARS) return { ...base, diffStatus: 'complete', diff };
    return {
      ...base,
      diffStatus: 'complete',
      diff: diff.slice(0, MAX_DIFF_CHARS),
      diffNote: `the diff is cut at ${MAX_DIFF_CHARS} characters of ${diff.length}`,
    };
  }
  const why = 'unknown' in before ? before.unknown : 'unknown' in after ? after.unknown : '';
  if (entry.writes === 0 && entry.edits.length > 0 && 'unknown' in before) {
    return {
      ...base,
      diffStatus: 'fragment',
      diff: fragmentDiff(entry.path, entry.edits),
      diffNote: `${why}: only the text each edit replaced is shown, at the line it reported`,
    };
  }
  return { ...base, diffStatus: 'unavailable', diffNote: why };
}

// ---- approvals, commands, costs -----------------------------------------------------------------------------------

/** Every decision asked in the scope (`action.required`) with its answer and who gave it, or `pending`. */
function approvalsOf(events: RuntimeEvent[]): ReviewApproval[] {
  const byId = new Map<string, ReviewApproval>();
  for (const e of events) {
    const p = payloadOf(e);
    const actionId = e.actionId;
    if (!actionId) continue;
    if (e.type === 'action.required') {
      byId.set(actionId, {
        actionId,
        actionType: str(p.actionType) ?? 'unknown',
        ...(str(p.toolName) ? { tool: str(p.toolName) } : {}),
        ...(str(p.prompt) ? { prompt: clip(String(p.prompt)) } : {}),
        decision: 'pending',
        requestedAt: e.timestamp,
        ...ids(e),
        ...(e.toolCallId ? { toolCallId: e.toolCallId } : {}),
      });
    } else if (e.type === 'action.resolved') {
      const asked = byId.get(actionId) ?? { actionId, actionType: 'unknown', decision: 'pending', ...ids(e) };
      byId.set(actionId, {
        ...asked,
        decision: str(p.decision) ?? 'unknown',
        resolvedBy: str(p.resolvedBy) ?? 'user',
        ...(str(p.reason) ? { reason: clip(String(p.reason)) } : {}),
        resolvedAt: e.timestamp,
      });
    } else if (e.type === 'permission.resolved' && str(p.grantScope)) {
      const asked = byId.get(actionId);
      if (asked) asked.grantScope = str(p.grantScope);
    }
  }
  return [...byId.values()];
}

/** What the permission policy decided by itself (`permission.evaluated` not answered by a person), counted. */
function policyDecisions(events: RuntimeEvent[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const e of events) {
    const p = payloadOf(e);
    if (e.type !== 'permission.evaluated' || p.source === 'human' || p.decision === 'ask') continue;
    // A client's evaluate_permission judged a call nobody made: not a decision about the work.
    if (p.evaluatedFor === 'client') continue;
    const key = `${String(p.decision)} (${String(p.source ?? 'policy')})`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

const PROCESS_ENDS: Record<string, ReviewCommand['status']> = {
  'process.completed': 'completed',
  'process.failed': 'failed',
  'process.terminated': 'terminated',
};

/** The commands run in the scope: each process started, with how it ended (or `running`: no end recorded yet). */
function commandsOf(events: RuntimeEvent[]): ReviewCommand[] {
  const byId = new Map<string, ReviewCommand>();
  for (const e of events) {
    const p = payloadOf(e);
    const processId = e.processId ?? str(p.processId);
    if (!processId) continue;
    if (e.type === 'process.started') {
      byId.set(processId, {
        processId,
        command: String(p.command ?? ''),
        ...(str(p.cwd) ? { cwd: str(p.cwd) } : {}),
        ...(typeof p.background === 'boolean' ? { background: p.background } : {}),
        ...(str(p.sandboxProfile) ? { sandboxProfile: str(p.sandboxProfile) } : {}),
        status: 'running',
        startedAt: e.timestamp,
        ...ids(e),
        ...(e.toolCallId ? { toolCallId: e.toolCallId } : {}),
      });
      continue;
    }
    const status = Object.hasOwn(PROCESS_ENDS, e.type) ? PROCESS_ENDS[e.type] : undefined;
    const command = byId.get(processId);
    if (!status || !command) continue;
    const error = errorOf(p.error);
    byId.set(processId, {
      ...command,
      status,
      ...(p.exitCode !== undefined ? { exitCode: num(p.exitCode) ?? null } : {}),
      ...(p.signal !== undefined ? { signal: str(p.signal) ?? null } : {}),
      ...(str(p.reason) ? { reason: str(p.reason) } : {}),
      ...(num(p.durationMs) !== undefined ? { durationMs: num(p.durationMs) } : {}),
      ...(num(p.outputBytes) !== undefined ? { outputBytes: num(p.outputBytes) } : {}),
      ...(str(p.outputRef) ? { outputRef: str(p.outputRef) } : {}),
      ...(error ? { error } : {}),
      endedAt: e.timestamp,
    });
  }
  return [...byId.values()];
}

/** What the scope's model calls used and cost: `model.completed` usage and `cost.recorded` amounts, and by turn. */
function costsOf(events: RuntimeEvent[]): ReviewCosts {
  const costs: ReviewCosts = {
    currency: 'USD',
    approximate: true,
    modelCalls: 0,
    failedCalls: 0,
    inputTokens: 0,
    outputTokens: 0,
    totalTokens: 0,
    pricedCalls: 0,
    unpricedCalls: 0,
    byTurn: {},
  };
  let amount = 0;
  for (const e of events) {
    const p = payloadOf(e);
    if (e.type === 'model.completed') {
      const usage = (p.usage ?? {}) as Record<string, unknown>;
      const input = num(usage.inputTokens) ?? 0;
      const output = num(usage.outputTokens) ?? 0;
      costs.modelCalls++;
      costs.inputTokens += input;
      costs.outputTokens += output;
      costs.totalTokens += num(usage.totalTokens) ?? input + output;
    } else if (e.type === 'model.failed') {
      costs.modelCalls++;
      costs.failedCalls++;
    } else if (e.type === 'cost.recorded' && typeof p.amount === 'number') {
      costs.pricedCalls++;
      amount = Math.round((amount + p.amount) * 1e6) / 1e6;
    }
  }
  costs.unpricedCalls = Math.max(0, costs.modelCalls - costs.failedCalls - costs.pricedCalls);
  if (costs.pricedCalls > 0) costs.costUsd = amount;
  for (const [turnId, t] of Object.entries(limitFacts(events).byTurn)) {
    costs.byTurn[turnId] = {
      ...(t.threadId ? { threadId: t.threadId } : {}),
      modelCalls: t.modelCalls,
      tokens: t.tokens,
      costUsd: t.costUsd,
    };
  }
  return costs;
}

// ---- turns and tasks ----------------------------------------------------------------------------------------------

function turnOf(threads: ThreadView[], turnId: string): ReviewPack['turns'] {
  for (const thread of threads) {
    const turn = thread.turns.find((t) => t.turnId === turnId);
    if (!turn) continue;
    return [
      {
        threadId: thread.threadId,
        turnId,
        status: turn.status,
        input: clip(turn.input),
        ...(turn.answer !== undefined ? { answer: clip(turn.answer) } : {}),
        ...(turn.error ? { error: { code: turn.error.code, message: turn.error.message } } : {}),
        submittedAt: turn.submittedAt,
        ...(turn.startedAt ? { startedAt: turn.startedAt } : {}),
        ...(turn.completedAt ? { completedAt: turn.completedAt } : {}),
        ...(turn.task ? { taskId: turn.task.taskId } : {}),
      },
    ];
  }
  return [];
}

function taskOf(task: Task): ReviewPack['tasks'][number] {
  return {
    taskId: task.taskId,
    ...(task.title ? { title: task.title } : {}),
    status: task.status,
    ...(task.threadId ? { threadId: task.threadId } : {}),
    attempts: task.attempts?.length ?? 0,
    ...(task.statusReason ? { statusReason: task.statusReason } : {}),
  };
}
