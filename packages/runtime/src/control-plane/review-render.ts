import type { OarError } from '@oar/protocol';

/**
 * The review pack of `export_review` (review.ts collects it from the log): its shape, the unified diffs of the files
 * OAR's tools changed, and the pack as a Markdown document. Pure functions: no I/O.
 */

/** A write or edit call of OAR's own tools on a file. */
export interface FileCall {
  tool: 'write' | 'edit';
  toolCallId: string;
  threadId?: string;
  turnId?: string;
  taskId?: string;
  sequence: number;
  at: string;
  /** `applied`: the tool reported the change; `failed` / `cancelled`: it made none; `lost` / `running`: unknown. */
  status: 'applied' | 'failed' | 'cancelled' | 'lost' | 'running';
  summary?: string;
  error?: Pick<OarError, 'code' | 'message'>;
}

/** A file the scope's calls changed (or tried to), with the diff from before the first to after the last. */
export interface FileChange {
  path: string;
  /** The first call of the scope created the file. */
  created: boolean;
  calls: FileCall[];
  /**
   * `complete`: a unified diff of the whole file; `fragment`: only the text edits replaced (the content before is
   * not in the log); `unavailable`: no diff (`diffNote` says why); `none`: no call of the scope changed it.
   */
  diffStatus: 'complete' | 'fragment' | 'unavailable' | 'none';
  diff?: string;
  diffNote?: string;
}

export interface ReviewApproval {
  actionId: string;
  actionType: string;
  tool?: string;
  prompt?: string;
  /** approve, deny, approve_for_session…, or `pending` while nobody answered. */
  decision: string;
  resolvedBy?: string;
  reason?: string;
  grantScope?: string;
  requestedAt?: string;
  resolvedAt?: string;
  threadId?: string;
  turnId?: string;
  toolCallId?: string;
}

export interface ReviewCommand {
  processId: string;
  command: string;
  cwd?: string;
  background?: boolean;
  sandboxProfile?: string;
  status: 'completed' | 'failed' | 'terminated' | 'running';
  exitCode?: number | null;
  signal?: string | null;
  reason?: string;
  durationMs?: number;
  outputBytes?: number;
  outputRef?: string;
  startedAt: string;
  endedAt?: string;
  threadId?: string;
  turnId?: string;
  toolCallId?: string;
  error?: Pick<OarError, 'code' | 'message'>;
}

export interface ReviewCosts {
  currency: 'USD';
  approximate: true;
  modelCalls: number;
  failedCalls: number;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
  /** The sum of `cost.recorded`; absent when no call of the scope had a known price. */
  costUsd?: number;
  pricedCalls: number;
  unpricedCalls: number;
  byTurn: Record<string, { threadId?: string; modelCalls: number; tokens: number; costUsd: number }>;
}

export interface ReviewPack {
  format: 'oar.review.v1';
  reviewId: string;
  sessionId: string;
  runtimeId: string;
  scope: { sessionId: string; threadId?: string; turnId?: string; taskId?: string };
  exportedAt: string;
  /** The events of the scope it covers, and the last sequence of the session read. */
  eventCount: number;
  throughSequence: number;
  summary: {
    turns: number;
    tasks: number;
    filesChanged: number;
    fileCalls: number;
    approvals: number;
    pendingApprovals: number;
    commands: number;
    commandsFailed: number;
  };
  turns: {
    threadId: string;
    turnId: string;
    status: string;
    input: string;
    answer?: string;
    error?: Pick<OarError, 'code' | 'message'>;
    submittedAt?: string;
    startedAt?: string;
    completedAt?: string;
    taskId?: string;
  }[];
  tasks: {
    taskId: string;
    title?: string;
    status: string;
    threadId?: string;
    attempts: number;
    statusReason?: string;
  }[];
  changes: FileChange[];
  approvals: ReviewApproval[];
  /** Decisions the policy made without asking (`permission.evaluated`), by `<decision> (<source>)`. */
  policyDecisions: Record<string, number>;
  commands: ReviewCommand[];
  costs: ReviewCosts;
}

/** Lines compared at most (old × new, after the common head and tail): beyond it a change is shown whole. */
const MAX_DIFF_CELLS = 2_000_000;
/** Lines of context around each change. */
const CONTEXT = 3;
/** A text with no newline at its end carries this on its last line while it is compared. */
const NO_EOL = '\u0000no-eol';

type Op = readonly [' ' | '-' | '+', string];

function linesOf(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  else lines[lines.length - 1] = `${lines.at(-1)}${NO_EOL}`;
  return lines;
}

/** The line edit script from `a` to `b`: a longest common subsequence of the part between their common ends. */
function diffLines(a: string[], b: string[]): Op[] {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const ops: Op[] = a.slice(0, start).map((line) => [' ', line] as const);
  const x = a.slice(start, endA);
  const y = b.slice(start, endB);
  const n = x.length;
  const m = y.length;
  if (n * m > MAX_DIFF_CELLS) {
    ops.push(...x.map((line) => ['-', line] as const), ...y.map((line) => ['+', line] as const));
  } else {
    const w = m + 1;
    const lcs = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i * w + j] =
          x[i] === y[j]
            ? (lcs[(i + 1) * w + j + 1] ?? 0) + 1
            : Math.max(lcs[(i + 1) * w + j] ?? 0, lcs[i * w + j + 1] ?? 0);
      }
    }
    let i = 0;
    let j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && x[i] === y[j]) {
        ops.push([' ', x[i++] as string]);
        j++;
      } else if (j >= m || (i < n && (lcs[(i + 1) * w + j] ?? 0) >= (lcs[i * w + j + 1] ?? 0))) {
        ops.push(['-', x[i++] as string]);
      } else {
        ops.push(['+', y[j++] as string]);
      }
    }
  }
  ops.push(...a.slice(endA).map((line) => [' ', line] as const));
  return ops;
}

const printed = (op: Op) =>
  op[1].endsWith(NO_EOL)
    ? `${op[0]}${op[1].slice(0, -NO_EOL.length)}\n\\ No newline at end of file`
    : `${op[0]}${op[1]}`;

/** A hunk header's range: `start,count`, the start being the line before an empty range (as diff(1) writes it). */
const range = (first: number, count: number) => `${count === 0 ? first - 1 : first},${count}`;

/**
 * The unified diff (3 lines of context) of a file from `before` to `after`; `created`: it did not exist before
 * (`--- /dev/null`). Empty when the contents are equal.
 */
export function unifiedDiff(path: string, before: string, after: string, created = false): string {
  const ops = diffLines(linesOf(before), linesOf(after));
  // The old and new line numbers before each op.
  const oldAt: number[] = [];
  const newAt: number[] = [];
  let o = 1;
  let n = 1;
  for (const op of ops) {
    oldAt.push(o);
    newAt.push(n);
    if (op[0] !== '+') o++;
    if (op[0] !== '-') n++;
  }
  const hunks: string[] = [];
  let k = 0;
  while (k < ops.length) {
    while (k < ops.length && ops[k]?.[0] === ' ') k++;
    if (k >= ops.length) break;
    const from = Math.max(0, k - CONTEXT);
    // Extend while the next change is within twice the context of the last one.
    let last = k;
    for (let i = k + 1; i < ops.length && i <= last + 2 * CONTEXT; i++) if (ops[i]?.[0] !== ' ') last = i;
    const to = Math.min(ops.length, last + CONTEXT + 1);
    const part = ops.slice(from, to);
    const oldCount = part.filter((op) => op[0] !== '+').length;
    const newCount = part.filter((op) => op[0] !== '-').length;
    hunks.push(
      `@@ -${range(oldAt[from] ?? 1, oldCount)} +${range(newAt[from] ?? 1, newCount)} @@`,
      ...part.map(printed),
    );
    k = to;
  }
  if (hunks.length === 0) return '';
  return [`--- ${created ? '/dev/null' : `a/${path}`}`, `+++ b/${path}`, ...hunks].join('\n');
}

/** An edit whose file's content before is unknown: only the replaced text, at the line the edit reported. */
export function fragmentDiff(
  path: string,
  edits: readonly { line?: number; oldString: string; newString: string; replacements?: number }[],
): string {
  const hunks = edits.flatMap((edit) => {
    const removed = linesOf(edit.oldString.endsWith('\n') ? edit.oldString : `${edit.oldString}\n`);
    const added =
      edit.newString === '' ? [] : linesOf(edit.newString.endsWith('\n') ? edit.newString : `${edit.newString}\n`);
    const line = edit.line ?? 1;
    const more = (edit.replacements ?? 1) > 1 ? ` first of ${edit.replacements} replacements` : '';
    return [
      `@@ -${range(line, removed.length)} +${range(line, added.length)} @@${edit.line === undefined ? ' line unknown' : ''}${more}`,
      ...removed.map((l) => `-${l}`),
      ...added.map((l) => `+${l}`),
    ];
  });
  return [`--- a/${path}`, `+++ b/${path}`, ...hunks].join('\n');
}

// ---- Markdown ---------------------------------------------------------------------------------------------------

/** Inline code, fenced with more backticks than the text holds; one line. */
function code(text: string): string {
  const flat = text.replace(/\s*\n\s*/g, ' ');
  const ticks = '`'.repeat(Math.max(0, ...(flat.match(/`+/g) ?? []).map((t) => t.length)) + 1);
  return flat.startsWith('`') || flat.endsWith('`') ? `${ticks} ${flat} ${ticks}` : `${ticks}${flat}${ticks}`;
}

/** A table cell: one line, pipes escaped, at most `max` characters. */
function cell(text: string | number | undefined, max = 120): string {
  if (text === undefined || text === '') return '—';
  const flat = String(text)
    .replace(/\s*\n\s*/g, ' ')
    .replace(/\|/g, '\\|');
  return flat.length > max ? `${flat.slice(0, max)}…` : flat;
}

function table(head: string[], rows: (string | number | undefined)[][]): string[] {
  return [
    `| ${head.join(' | ')} |`,
    `|${head.map(() => '---').join('|')}|`,
    ...rows.map((row) => `| ${row.map((c) => cell(c)).join(' | ')} |`),
  ];
}

/** A fenced block that no line of `text` can close. */
function fence(lang: string, text: string): string[] {
  const longest = Math.max(2, ...(text.match(/^`{3,}/gm) ?? []).map((t) => t.length));
  const ticks = '`'.repeat(longest + 1);
  return [`${ticks}${lang}`, text, ticks];
}

const usd = (amount: number) => `$${amount.toFixed(6).replace(/0+$/, '').replace(/\.$/, '')}`;

/** The review pack as a readable Markdown document: Summary, Changes, Approvals, Commands, Costs. */
export function reviewMarkdown(pack: ReviewPack): string {
  const { scope, summary, costs } = pack;
  const named = [
    `session ${code(scope.sessionId)}`,
    ...(scope.threadId ? [`thread ${code(scope.threadId)}`] : []),
    ...(scope.turnId ? [`turn ${code(scope.turnId)}`] : []),
    ...(scope.taskId ? [`task ${code(scope.taskId)}`] : []),
  ];
  const out: string[] = [
    `# Review of ${named.join(', ')}`,
    '',
    `Review ${code(pack.reviewId)}, exported ${pack.exportedAt} from ${pack.eventCount} event(s) through sequence ${pack.throughSequence}.`,
    '',
    '## Summary',
    '',
    `- Turns: ${summary.turns}; tasks: ${summary.tasks}`,
    `- Files changed: ${summary.filesChanged} (${summary.fileCalls} write/edit call(s))`,
    `- Approvals: ${summary.approvals} (${summary.pendingApprovals} pending)`,
    `- Commands: ${summary.commands} (${summary.commandsFailed} failed or exited non-zero)`,
    `- Model calls: ${costs.modelCalls}, ${costs.totalTokens} tokens, ${costs.costUsd === undefined ? 'cost unknown (no priced call)' : `${usd(costs.costUsd)} (approximate)`}`,
    '',
  ];
  if (pack.turns.length > 0) {
    out.push(
      '### Turns',
      '',
      ...table(
        ['Turn', 'Thread', 'Status', 'Input', 'Outcome'],
        pack.turns.map((t) => [
          code(t.turnId),
          code(t.threadId),
          t.status,
          t.input,
          t.error ? `${t.error.code}: ${t.error.message}` : t.answer,
        ]),
      ),
      '',
    );
  }
  if (pack.tasks.length > 0) {
    out.push(
      '### Tasks',
      '',
      ...table(
        ['Task', 'Title', 'Status', 'Attempts'],
        pack.tasks.map((t) => [
          code(t.taskId),
          t.title,
          t.statusReason ? `${t.status}: ${t.statusReason}` : t.status,
          t.attempts,
        ]),
      ),
      '',
    );
  }
  out.push('## Changes', '');
  if (pack.changes.length === 0) out.push('No file was written or edited by OAR’s tools in this scope.', '');
  for (const change of pack.changes) {
    out.push(`### ${code(change.path)}${change.created ? ' (created)' : ''}`, '');
    for (const call of change.calls) {
      const what =
        call.status === 'applied'
          ? (call.summary ?? call.tool)
          : `${call.tool} ${call.status}${call.error ? ` (${call.error.code}: ${call.error.message})` : ''}`;
      out.push(
        `- ${call.at} ${code(call.tool)} in turn ${code(call.turnId ?? '?')}: ${what.replace(/\s*\n\s*/g, ' ')}`,
      );
    }
    out.push('');
    if (change.diff) out.push(...fence('diff', change.diff), '');
    if (change.diffNote)
      out.push(`_${change.diffStatus === 'fragment' ? 'Partial diff' : 'Diff unavailable'}: ${change.diffNote}_`, '');
  }
  out.push('## Approvals', '');
  if (pack.approvals.length === 0) out.push('No decision was asked in this scope.', '');
  else {
    out.push(
      ...table(
        ['Decision', 'By', 'What', 'Asked', 'Resolved', 'Reason'],
        pack.approvals.map((a) => [
          a.grantScope && a.grantScope !== 'once' ? `${a.decision} (${a.grantScope})` : a.decision,
          a.resolvedBy,
          a.tool ?? a.actionType,
          a.requestedAt,
          a.resolvedAt,
          a.reason,
        ]),
      ),
      '',
    );
  }
  const policy = Object.entries(pack.policyDecisions);
  if (policy.length > 0)
    out.push(`Decided by policy without asking: ${policy.map(([k, n]) => `${n} ${k}`).join(', ')}.`, '');
  out.push('## Commands', '');
  if (pack.commands.length === 0) out.push('No command was run in this scope.', '');
  else {
    out.push(
      ...table(
        ['Command', 'Exit code', 'Status', 'Duration', 'Turn'],
        pack.commands.map((c) => [
          code(c.command),
          c.exitCode ?? (c.signal ? `signal ${c.signal}` : undefined),
          c.reason ? `${c.status} (${c.reason})` : c.status,
          c.durationMs === undefined ? undefined : `${c.durationMs} ms`,
          c.turnId ? code(c.turnId) : undefined,
        ]),
      ),
      '',
    );
  }
  out.push(
    '## Costs',
    '',
    `- Model calls: ${costs.modelCalls} (${costs.failedCalls} failed)`,
    `- Tokens: ${costs.inputTokens} input, ${costs.outputTokens} output, ${costs.totalTokens} total`,
    `- Cost: ${costs.costUsd === undefined ? 'unknown' : `${usd(costs.costUsd)} USD, approximate`} (${costs.pricedCalls} priced call(s), ${costs.unpricedCalls} without a known price)`,
    '',
  );
  const turns = Object.entries(costs.byTurn);
  if (turns.length > 0) {
    out.push(
      ...table(
        ['Turn', 'Model calls', 'Tokens', 'Cost (USD)'],
        turns.map(([turnId, t]) => [code(turnId), t.modelCalls, t.tokens, t.costUsd > 0 ? usd(t.costUsd) : undefined]),
      ),
      '',
    );
  }
  return `${out.join('\n').trimEnd()}\n`;
}
