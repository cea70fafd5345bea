import type { OarEvent, ThreadRM } from './types.js';

/**
 * What the session view draws, folded from the event log (never from prose): per thread its turns, per turn the
 * user input, the model's step messages, the answer, and each action graph (`run.status` phase `declared`) with its
 * actions, their dependencies and every fact about each action (permission, attempts, observation, artifacts,
 * sub-agent). Action statuses come from the thread read model when it has them, else from the last event about
 * the action. Folding is linear in the number of events, so time travel folds the prefix up to the chosen event.
 */

export interface ActionNode {
  id: string;
  runId: string;
  title?: string;
  executorType: string;
  target?: string;
  input?: unknown;
  dependsOn: string[];
  status: string;
  statusSeq?: number;
  permission?: { decision: string; reason?: string; source?: string; rule?: unknown; mode?: string };
  decision?: { decision: string; reason?: string; resolvedBy?: string };
  pendingActionId?: string;
  /** A lost call's open question (did it take effect?): it holds nothing, so the action does not wait on it. */
  reconcileActionId?: string;
  attempts: { attempt: number; startedAt: string; status: string; error?: string; durationMs?: number }[];
  observation?: unknown;
  summary?: string;
  artifacts: string[];
  childThreadId?: string;
  subagentId?: string;
  error?: { code?: string; message?: string };
  /**
   * A business-tool call that recorded a ToolAgentOutput (`payload.toolAgentOutput` on its tool.result /
   * tool.failed): its tool UI is read from history as of `sequence` (the console never reads the UI hints).
   */
  toolOutput?: { toolCallId: string; sequence: number };
}

export interface RunGraph {
  runId: string;
  title?: string;
  message?: string;
  status: string;
  actions: ActionNode[];
  declaredAt: number;
}

export interface TurnView {
  turnId: string;
  threadId: string;
  /** The sequence of the first event about the turn: where it stands among the thread's rollbacks. */
  firstSeq: number;
  input?: string;
  inputRef?: string;
  source?: string;
  submittedAt?: string;
  status: string;
  answer?: string;
  outcome?: string;
  error?: { code?: string; message?: string };
  runs: RunGraph[];
}

export interface ThreadView {
  threadId: string;
  parentThreadId?: string;
  agent?: string;
  title?: string;
  depth?: number;
  status: string;
  turns: TurnView[];
  /** Live model text of the step in progress (model.delta), cleared when the step's model call completes. */
  streaming: string;
  /** Characters of tool-call arguments streamed so far (an action graph being declared). */
  streamingCall: number;
  /** The thread's rollbacks (`history.rollback.*`), oldest first: their turns are gone from `turns`. */
  rollbacks: RollbackView[];
}

/** What a rollback does to one file: written back, removed (OAR created it), already as before, left as it is. */
export type RollbackFileAction = 'restore' | 'delete' | 'unchanged' | 'keep';

/**
 * A rollback of the thread (docs/engine.md "Rolling back a thread"), from `history.rollback.started` and
 * `.completed`: the turns it removed (their inputs, to say which), the files and what each became, and what it does
 * not undo. `started` alone: under way (or cut short by a crash; running it again finishes it).
 */
export interface RollbackView {
  rollbackId: string;
  status: 'started' | 'completed';
  /** The sequence of its first event: where it stands among the turns. */
  sequence: number;
  targetTurnId: string;
  keptThroughTurnId: string | null;
  removedTurns: string[];
  /** The removed turns' inputs, while the fold still had them. */
  removedInputs: Record<string, string>;
  files: { path: string; action: RollbackFileAction | string }[];
  affected?: { commands?: number; fileCalls?: number; subagentThreads?: string[]; runningProcesses?: string[] };
  requestedBy?: string;
  startedAt?: string;
  completedAt?: string;
}

export interface SessionModel {
  threads: Map<string, ThreadView>;
  /** childThreadId → the action that spawned it, for the way back to the parent. */
  parents: Map<string, { threadId: string; turnId?: string; runId?: string; actionId: string }>;
  lastSequence: number;
}

export function emptyModel(): SessionModel {
  return { threads: new Map(), parents: new Map(), lastSequence: 0 };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const obj = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' ? (v as Record<string, unknown>) : {});

function thread(model: SessionModel, threadId: string): ThreadView {
  let t = model.threads.get(threadId);
  if (!t) {
    t = { threadId, status: 'unknown', turns: [], streaming: '', streamingCall: 0, rollbacks: [] };
    model.threads.set(threadId, t);
  }
  return t;
}

function turn(t: ThreadView, turnId: string, sequence: number): TurnView {
  let u = t.turns.find((x) => x.turnId === turnId);
  if (!u) {
    u = { turnId, threadId: t.threadId, firstSeq: sequence, status: 'unknown', runs: [] };
    t.turns.push(u);
  }
  return u;
}

/** The graph action an event is about: `graphActionId`, or the suffix of `runId.actionId` step / call ids. */
function actionOf(model: SessionModel, e: OarEvent): ActionNode | undefined {
  const p = obj(e.payload);
  if (!e.threadId || !e.turnId) return undefined;
  const u = model.threads.get(e.threadId)?.turns.find((x) => x.turnId === e.turnId);
  if (!u) return undefined;
  let id = str(p.graphActionId);
  let runId = e.runId;
  const callId = e.toolCallId ?? e.stepId;
  if (!id && callId?.includes('.')) {
    const dot = callId.indexOf('.');
    runId = runId ?? callId.slice(0, dot);
    id = callId.slice(dot + 1);
  }
  if (!id) return undefined;
  for (let i = u.runs.length - 1; i >= 0; i--) {
    const run = u.runs[i];
    if (!run || (runId && run.runId !== runId)) continue;
    const a = run.actions.find((x) => x.id === id);
    if (a) return a;
  }
  return undefined;
}

export function applyEvent(model: SessionModel, e: OarEvent): void {
  if (e.sequence > model.lastSequence) model.lastSequence = e.sequence;
  const p = obj(e.payload);
  if (!e.threadId) return;
  const t = thread(model, e.threadId);
  switch (e.type) {
    case 'thread.started': {
      t.agent = str(p.agent) ?? t.agent;
      t.title = str(p.title) ?? t.title;
      t.parentThreadId = str(p.parentThreadId) ?? t.parentThreadId;
      if (typeof p.depth === 'number') t.depth = p.depth;
      t.status = 'idle';
      return;
    }
    case 'thread.updated': {
      t.status = str(p.status) ?? e.status ?? t.status;
      t.title = str(p.title) ?? t.title;
      return;
    }
    case 'model.delta': {
      if (p.channel === undefined || p.channel === 'text') t.streaming += str(p.delta) ?? '';
      else if (p.channel === 'tool_call') t.streamingCall += (str(p.delta) ?? '').length;
      return;
    }
    case 'model.completed':
    case 'model.failed': {
      t.streaming = '';
      t.streamingCall = 0;
      return;
    }
    case 'history.rollback.started':
    case 'history.rollback.completed':
      applyRollback(t, e, p);
      return;
  }
  if (!e.turnId) return;
  const u = turn(t, e.turnId, e.sequence);
  switch (e.type) {
    case 'turn.submitted':
      u.input = str(p.input) ?? u.input;
      u.inputRef = str(p.inputRef) ?? u.inputRef;
      u.source = str(p.source);
      u.submittedAt = e.timestamp;
      u.status = str(p.status) ?? e.status ?? 'accepted';
      return;
    case 'turn.started':
      u.status = 'running';
      return;
    case 'turn.completed':
      u.status = e.status ?? 'completed';
      u.outcome = str(p.outcome);
      u.answer = str(p.answer) ?? str(p.summary);
      return;
    case 'turn.failed':
      u.status = e.status ?? 'failed';
      u.error = obj(p.error) as TurnView['error'];
      return;
    case 'turn.cancelled':
      u.status = 'cancelled';
      return;
    case 'run.status': {
      const phase = e.phase ?? str(p.phase);
      if (phase === 'declared' && e.runId) {
        const d = obj(p.declaration);
        const actions = Array.isArray(d.actions) ? d.actions : [];
        if (u.runs.some((r) => r.runId === e.runId)) return;
        u.runs.push({
          runId: e.runId,
          title: str(p.title),
          message: str(d.message),
          status: e.status ?? 'running',
          declaredAt: e.sequence,
          actions: actions.map((raw) => {
            const a = obj(raw);
            const ex = obj(a.executor);
            return {
              id: String(a.id),
              runId: e.runId as string,
              title: str(a.title),
              executorType: str(ex.type) ?? 'tool',
              target: str(ex.target),
              input: a.input,
              dependsOn: Array.isArray(a.dependsOn) ? a.dependsOn.map(String) : [],
              status: 'pending',
              attempts: [],
              artifacts: [],
            } satisfies ActionNode;
          }),
        });
      } else if (e.runId) {
        const run = u.runs.find((r) => r.runId === e.runId);
        if (!run) return;
        run.status = e.status ?? run.status;
        const result = obj(p.result);
        for (const raw of Array.isArray(result.actions) ? result.actions : []) {
          const r = obj(raw);
          const a = run.actions.find((x) => x.id === r.id);
          if (!a) continue;
          if (str(r.status)) setStatus(a, str(r.status) as string, e.sequence);
          a.observation ??= r;
          for (const ref of Array.isArray(r.artifacts) ? r.artifacts : []) addArtifact(a, String(ref));
        }
      }
      return;
    }
  }
  const a = actionOf(model, e);
  if (!a) return;
  switch (e.type) {
    case 'permission.evaluated':
      a.permission = {
        decision: str(p.decision) ?? 'unknown',
        reason: str(p.reason),
        source: str(p.source),
        rule: p.rule,
        mode: str(p.mode),
      };
      if (p.decision === 'deny') setStatus(a, 'denied', e.sequence);
      return;
    case 'action.required':
      if (p.actionType === 'reconcile') {
        a.reconcileActionId = e.actionId;
        return;
      }
      a.pendingActionId = e.actionId;
      setStatus(a, 'waiting_permission', e.sequence);
      return;
    case 'action.resolved':
      a.decision = { decision: str(p.decision) ?? '', reason: str(p.reason), resolvedBy: str(p.resolvedBy) };
      if (p.actionType === 'reconcile') {
        a.reconcileActionId = undefined;
        return;
      }
      a.pendingActionId = undefined;
      if (p.decision === 'deny') setStatus(a, 'denied', e.sequence);
      return;
    case 'tool.started':
      a.attempts.push({
        attempt: typeof p.attempt === 'number' ? p.attempt : a.attempts.length + 1,
        startedAt: e.timestamp,
        status: 'running',
      });
      setStatus(a, 'running', e.sequence);
      return;
    case 'tool.result': {
      const at = a.attempts[a.attempts.length - 1];
      if (at) {
        at.status = p.isError ? 'failed' : 'completed';
        at.durationMs = typeof p.durationMs === 'number' ? p.durationMs : undefined;
      }
      a.summary = str(p.summary);
      a.observation = p.observation ?? a.observation;
      for (const id of Array.isArray(p.artifactIds) ? p.artifactIds : []) addArtifact(a, String(id));
      noteToolOutput(a, e, p);
      setStatus(a, p.isError ? 'failed' : 'completed', e.sequence);
      return;
    }
    case 'tool.failed': {
      const at = a.attempts[a.attempts.length - 1];
      const err = obj(p.error);
      // `lost`: a crash stopped the call mid-run; it may have acted, which "failed" would deny.
      const status = e.status === 'lost' ? 'lost' : 'failed';
      if (at) {
        at.status = status;
        at.error = str(err.message) ?? str(err.code);
      }
      a.error = err as ActionNode['error'];
      noteToolOutput(a, e, p);
      setStatus(a, status, e.sequence);
      return;
    }
    case 'subagent.spawned':
      a.childThreadId = str(p.childThreadId);
      a.subagentId = e.subagentId;
      a.attempts.push({ attempt: a.attempts.length + 1, startedAt: e.timestamp, status: 'running' });
      setStatus(a, 'running', e.sequence);
      if (a.childThreadId && e.threadId) {
        model.parents.set(a.childThreadId, { threadId: e.threadId, turnId: e.turnId, runId: a.runId, actionId: a.id });
        const child = thread(model, a.childThreadId);
        child.parentThreadId = e.threadId;
        child.agent ??= str(p.agentName);
      }
      return;
    case 'subagent.completed': {
      const at = a.attempts[a.attempts.length - 1];
      if (at) at.status = 'completed';
      a.summary = str(p.summary);
      a.observation = p.observation ?? a.observation;
      for (const id of Array.isArray(p.artifactIds) ? p.artifactIds : []) addArtifact(a, String(id));
      setStatus(a, 'completed', e.sequence);
      return;
    }
    case 'subagent.failed': {
      const at = a.attempts[a.attempts.length - 1];
      const err = obj(p.error);
      if (at) {
        at.status = 'failed';
        at.error = str(err.message);
      }
      a.error = err as ActionNode['error'];
      setStatus(a, 'failed', e.sequence);
      return;
    }
  }
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

function filesOf(v: unknown): RollbackView['files'] {
  return (Array.isArray(v) ? v : [])
    .map(obj)
    .filter((f) => typeof f.path === 'string')
    .map((f) => ({ path: f.path as string, action: str(f.action) ?? 'restore' }));
}

/**
 * A rollback started holds the thread; completed, its turns leave the thread as they leave the read model (the log
 * keeps them: time travel before it still shows them). A rollback resumed after a crash has no second `started`.
 */
function applyRollback(t: ThreadView, e: OarEvent, p: Record<string, unknown>) {
  const rollbackId = str(p.rollbackId);
  if (!rollbackId) return;
  let r = t.rollbacks.find((x) => x.rollbackId === rollbackId);
  if (!r) {
    r = {
      rollbackId,
      status: 'started',
      sequence: e.sequence,
      targetTurnId: str(p.targetTurnId) ?? '',
      keptThroughTurnId: str(p.keptThroughTurnId) ?? null,
      removedTurns: [],
      removedInputs: {},
      files: [],
    };
    t.rollbacks.push(r);
  }
  r.targetTurnId = str(p.targetTurnId) ?? r.targetTurnId;
  if (p.keptThroughTurnId !== undefined) r.keptThroughTurnId = str(p.keptThroughTurnId) ?? null;
  r.removedTurns = strings(p.removedTurns);
  if (Array.isArray(p.files)) r.files = filesOf(p.files);
  r.requestedBy = str(p.requestedBy) ?? r.requestedBy;
  if (e.type === 'history.rollback.started') {
    r.startedAt = e.timestamp;
    return;
  }
  r.status = 'completed';
  r.completedAt = e.timestamp;
  const affected = obj(p.affected);
  r.affected = {
    ...(typeof affected.commands === 'number' ? { commands: affected.commands } : {}),
    ...(typeof affected.fileCalls === 'number' ? { fileCalls: affected.fileCalls } : {}),
    subagentThreads: strings(affected.subagentThreads),
    runningProcesses: strings(affected.runningProcesses),
  };
  const removed = new Set(r.removedTurns);
  for (const u of t.turns) if (removed.has(u.turnId) && u.input !== undefined) r.removedInputs[u.turnId] = u.input;
  t.turns = t.turns.filter((u) => !removed.has(u.turnId));
}

const FILE_DONE: Record<string, string> = {
  restore: 'restored',
  delete: 'deleted',
  unchanged: 'already as before',
  keep: 'kept as it is',
};
const FILE_PLANNED: Record<string, string> = {
  restore: 'to restore',
  delete: 'to delete (created in these turns)',
  unchanged: 'already as before',
  keep: 'kept as it is',
};

/** A file's fate in words: `planned` for a plan (a dry run, a rollback under way), else what it became. */
export function fileActionText(action: string, planned = false): string {
  return (planned ? FILE_PLANNED : FILE_DONE)[action] ?? action;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/** What a rollback did not undo (`affected`), in words; empty when nothing. */
export function notUndoneText(a: RollbackView['affected'] | undefined): string[] {
  if (!a) return [];
  const out: string[] = [];
  if (a.commands) out.push(`the effects of ${plural(a.commands, 'command')}`);
  if (a.subagentThreads?.length) out.push(`the history of ${plural(a.subagentThreads.length, 'sub-agent thread')}`);
  if (a.runningProcesses?.length) out.push(`${plural(a.runningProcesses.length, 'background process')} still running`);
  return out;
}

/**
 * One line about an event that is not about an action, for the event explorer: a rollback's removed turns and
 * files. Undefined for the others (their status and action say enough).
 */
export function eventSummary(e: OarEvent): string | undefined {
  if (e.type !== 'history.rollback.started' && e.type !== 'history.rollback.completed') return undefined;
  const p = obj(e.payload);
  const removed = strings(p.removedTurns);
  const files = filesOf(p.files);
  const started = e.type === 'history.rollback.started';
  const head = `${started ? 'rolling back' : 'rolled back'} ${plural(removed.length, 'turn')}${
    removed.length ? ` (${removed.join(', ')})` : ''
  }`;
  const fileText = files.length
    ? files.map((f) => `${f.path} ${fileActionText(f.action, started)}`).join(', ')
    : 'no files';
  const affected = obj(p.affected);
  const notUndone = notUndoneText({
    ...(typeof affected.commands === 'number' ? { commands: affected.commands } : {}),
    subagentThreads: strings(affected.subagentThreads),
    runningProcesses: strings(affected.runningProcesses),
  });
  return `${head} · files: ${fileText}${notUndone.length ? ` · not undone: ${notUndone.join(', ')}` : ''}`;
}

function noteToolOutput(a: ActionNode, e: OarEvent, p: Record<string, unknown>) {
  const record = p.toolAgentOutput;
  if (!record || typeof record !== 'object') return;
  const toolCallId = str(obj(record).tool_call_id) ?? e.toolCallId;
  if (toolCallId) a.toolOutput = { toolCallId, sequence: e.sequence };
}

function setStatus(a: ActionNode, status: string, seq: number) {
  a.status = status;
  a.statusSeq = seq;
}

function addArtifact(a: ActionNode, ref: string) {
  const id = ref.startsWith('artifact://') ? ref.slice('artifact://'.length) : ref;
  if (!a.artifacts.includes(id)) a.artifacts.push(id);
}

export function foldEvents(events: OarEvent[], upTo = Number.POSITIVE_INFINITY): SessionModel {
  const model = emptyModel();
  for (const e of events) {
    if (e.sequence > upTo) break;
    applyEvent(model, e);
  }
  return model;
}

/** The read model's word for an action wins over the event-derived one: the runtime projected it. */
export function actionStatus(a: ActionNode, rm: ThreadRM | undefined): string {
  const fromRm = rm?.actions?.find((x) => x.runId === a.runId && x.actionId === a.id)?.status;
  return fromRm ?? a.status;
}

/** Status → how it reads without colour: a symbol and a word; the CSS class adds the colour and the border. */
export const STATUS_LOOK: Record<string, { symbol: string; tone: string }> = {
  pending: { symbol: '○', tone: 'idle' },
  idle: { symbol: '○', tone: 'idle' },
  accepted: { symbol: '○', tone: 'idle' },
  queued: { symbol: '◷', tone: 'idle' },
  preparing: { symbol: '◔', tone: 'running' },
  running: { symbol: '◐', tone: 'running' },
  streaming: { symbol: '◐', tone: 'running' },
  retrying: { symbol: '↻', tone: 'running' },
  waiting_permission: { symbol: '‖', tone: 'waiting' },
  waiting_input: { symbol: '‖', tone: 'waiting' },
  waiting_resource: { symbol: '‖', tone: 'waiting' },
  blocked: { symbol: '‖', tone: 'waiting' },
  completed: { symbol: '✓', tone: 'ok' },
  failed: { symbol: '✕', tone: 'bad' },
  denied: { symbol: '⊘', tone: 'bad' },
  lost: { symbol: '✕', tone: 'bad' },
  timed_out: { symbol: '✕', tone: 'bad' },
  cancelled: { symbol: '⊘', tone: 'muted' },
  skipped: { symbol: '–', tone: 'muted' },
  stale: { symbol: '?', tone: 'muted' },
  unknown: { symbol: '?', tone: 'muted' },
};

export function look(status: string): { symbol: string; tone: string } {
  return STATUS_LOOK[status] ?? { symbol: '•', tone: 'muted' };
}
