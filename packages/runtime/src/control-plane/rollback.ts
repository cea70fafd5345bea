import type { RuntimeEvent } from '@oar/protocol';
import { retryOnThreadChange, threadUnchanged } from '../facts/queue.js';
import { sha256Hex } from '../kernel/digest.js';
import { notFound, OarRuntimeError, toOarError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { AppendGuard } from '../log/draft.js';
import { loadReadModels } from '../log/read-model-rows.js';
import { type FileVersionEntry, fileVersionsOf } from '../read-models/file-versions.js';
import { bindingOf, type SessionState } from '../read-models/session.js';
import type { ThreadView } from '../read-models/thread-state.js';
import { storedThreads } from '../read-models/work.js';
import { storedArtifact } from '../store/artifacts.js';
import type { CommandContext, WorkspaceFiles } from './command-context.js';

/**
 * `rollback_thread` (docs/engine.md "Rolling back a thread"): a thread returns to the boundary before one of its
 * turns. The turns from there on leave the transcript the model sees and the read models (the log keeps them, and
 * `history.rollback.*` says what was removed), and the workspace files OAR's `write` and `edit` changed in them —
 * theirs and their delegated sub-agents' — go back to their content before the first such change, from the kept
 * before-images. A file changed since by anything else (a command, an editor, another thread) is a conflict: nothing
 * is changed and the caller is told which files and why.
 */
export interface RollbackInput {
  sessionId: string;
  /** Defaults to the session's main thread. */
  threadId?: string;
  /** The first turn to remove: the thread returns to the boundary before it. */
  turnId: string;
  /** `restore` (default): the files go back too; `keep`: only the history is rolled back. */
  files?: 'restore' | 'keep';
  /** Plan only: what would be removed and restored, and the conflicts; nothing is recorded or written. */
  dryRun?: boolean;
  /** Who asks (recorded). */
  requestedBy?: string;
}

/** What happens to one file: written back, removed (OAR created it), already as it was, or left as it is. */
export interface RollbackFile {
  path: string;
  action: 'restore' | 'delete' | 'unchanged' | 'keep';
  /** The version restored (its before-image) and the last version undone. */
  fromVersion: number;
  throughVersion: number;
  beforeRef?: string;
  /** What OAR's last change left: the digest the file must still have when it is written back. */
  expectedSha256: string;
}

export interface RollbackConflict {
  path: string;
  reason: 'changed_outside' | 'changed_between' | 'unreadable' | 'not_restorable' | 'before_image_missing';
  message: string;
  expectedSha256?: string;
  actualSha256?: string | null;
}

export interface RollbackResult {
  status: 'completed' | 'planned';
  sessionId: string;
  threadId: string;
  rollbackId?: string;
  targetTurnId: string;
  /** The last turn kept (null: none, the thread returns to its start). */
  keptThroughTurnId: string | null;
  removedTurns: string[];
  files: RollbackFile[];
  conflicts: RollbackConflict[];
  /** What the rollback does not undo: commands' effects, sub-agents' threads, processes still running, tasks. */
  affected: {
    commands: number;
    fileCalls: number;
    subagentThreads: string[];
    runningProcesses: string[];
    /** The tasks the removed turns worked on: their records (attempts, status) stay as they are. */
    tasks: string[];
  };
  /** The compaction summary that stops being the context boundary (it covered a removed turn). */
  compactionCleared?: string;
  sequence?: number;
}

/** Run or plan a rollback; a conflict throws `rollback_conflict` with the plan in its details. */
export async function rollbackThread(ctx: CommandContext, input: RollbackInput): Promise<RollbackResult> {
  const session = await ctx.session(input.sessionId);
  const threadId = input.threadId ?? (await ctx.mainThreadId(input.sessionId));
  return retryOnThreadChange(async () => {
    const thread = await ctx.log.thread(input.sessionId, threadId);
    const resumed = thread.rollback;
    if (resumed && resumed.targetTurnId !== input.turnId) {
      throw new OarRuntimeError(
        'rollback_in_progress',
        `thread "${threadId}" has a rollback to before turn ${resumed.targetTurnId} under way; run it again to finish it`,
        { retryable: true, details: { threadId, rollbackId: resumed.rollbackId, targetTurnId: resumed.targetTurnId } },
      );
    }
    const index = thread.turns.findIndex((t) => t.turnId === input.turnId);
    if (index === -1 && !resumed) throw notFound('turn', input.turnId);
    const removedTurns = resumed?.removedTurns ?? thread.turns.slice(index).map((t) => t.turnId);
    const keptThroughTurnId = index > 0 ? (thread.turns[index - 1]?.turnId ?? null) : null;
    if (!resumed) refuseBusy(thread);
    const scope = await affectedThreads(ctx, session, thread, new Set(removedTurns));
    const events = await ctx.log.read(input.sessionId);
    const plan = await planFiles(ctx, session, events, scope, input.files ?? 'restore', restoring(resumed?.files));
    const base = {
      sessionId: input.sessionId,
      threadId,
      targetTurnId: input.turnId,
      keptThroughTurnId,
      removedTurns,
      files: plan.files,
      conflicts: plan.conflicts,
      affected: affectedOf(events, scope, thread, removedTurns),
      ...(thread.compaction && removedTurns.includes(thread.compaction.throughTurnId)
        ? { compactionCleared: thread.compaction.compactionId }
        : {}),
    };
    if (input.dryRun) return { status: 'planned' as const, ...base };
    if (plan.conflicts.length > 0) {
      throw new OarRuntimeError(
        'rollback_conflict',
        `${plan.conflicts.length} file(s) cannot be rolled back: ${plan.conflicts.map((c) => `${c.path} (${c.reason})`).join(', ')}. ` +
          'Nothing was changed. Restore them by hand and retry, or roll back the history only (files: keep).',
        { details: { ...base } },
      );
    }
    const rollbackId = resumed?.rollbackId ?? newId('rbk');
    const facts = { rollbackId, targetTurnId: input.turnId, keptThroughTurnId, removedTurns };
    if (!resumed) {
      await ctx.append(
        input.sessionId,
        [
          {
            type: 'history.rollback.started',
            threadId,
            payload: {
              ...facts,
              files: plan.files.map(({ path, action, beforeRef }) => ({
                path,
                action,
                ...(beforeRef ? { beforeRef } : {}),
              })),
              ...(input.requestedBy ? { requestedBy: input.requestedBy } : {}),
            },
          },
        ],
        { guard: threadUnchanged(thread) },
      );
    }
    // The thread is held from here (no turn starts while the rollback is under way): the files are written back,
    // then the completion removes the turns. A crash in between leaves it held; the same rollback run again finds
    // the files already restored (`unchanged`) and completes.
    await restoreFiles(ctx, session, plan.files);
    const drafts = [
      {
        type: 'history.rollback.completed' as const,
        threadId,
        payload: {
          ...facts,
          files: resumedFiles(plan.files, resumed?.files),
          affected: base.affected,
          readModelRepair: {
            turnsRemoved: removedTurns.length,
            ...(base.compactionCleared ? { compactionCleared: base.compactionCleared } : {}),
          },
        },
      },
    ];
    try {
      const [completed] = await ctx.append(input.sessionId, drafts, { guard: stillUnderWay(thread, rollbackId) });
      return { status: 'completed', rollbackId, ...base, ...(completed ? { sequence: completed.sequence } : {}) };
    } catch (error) {
      // The same rollback, run again at the same time, completed it first: the files are as it left them.
      if (error instanceof RollbackFinished) return { status: 'completed', rollbackId, ...base };
      throw error;
    }
  });
}

class RollbackFinished extends Error {}

/** The paths a held rollback set out to write back (its `history.rollback.started`). */
function restoring(files: NonNullable<ThreadView['rollback']>['files']): Set<string> {
  return new Set((files ?? []).filter((f) => f.action === 'restore').map((f) => f.path));
}

/**
 * The files as the completion records them: a file a run cut short had already written back is `unchanged` now;
 * the record says what the rollback did to it (`restore` / `delete`), and that it was done before the resume.
 */
function resumedFiles(
  files: RollbackFile[],
  started: NonNullable<ThreadView['rollback']>['files'],
): (RollbackFile & { doneBeforeResume?: true })[] {
  const planned = new Map((started ?? []).map((f) => [f.path, f.action]));
  return files.map((file) => {
    const was = planned.get(file.path);
    return file.action === 'unchanged' && (was === 'restore' || was === 'delete')
      ? { ...file, action: was, doneBeforeResume: true }
      : file;
  });
}

/** A guard for the completion: the rollback is still the thread's one under way (two runs never both complete it). */
function stillUnderWay(thread: ThreadView, rollbackId: string): AppendGuard {
  return async (tx) => {
    const models = await loadReadModels(tx, thread.sessionId, [{ kind: 'thread', key: thread.threadId }]);
    if (models.threads.get(thread.threadId)?.rollback?.rollbackId !== rollbackId) throw new RollbackFinished();
  };
}

/** A thread with work in progress cannot be rolled back: its turn would run on under a history that changed. */
function refuseBusy(thread: ThreadView): void {
  if (thread.status === 'closed') throw new OarRuntimeError('thread_closed', `thread "${thread.threadId}" is closed`);
  const queued = thread.turns.filter((t) => t.status === 'accepted' || t.status === 'queued').map((t) => t.turnId);
  if (thread.activeTurnId || thread.pending.length > 0 || queued.length > 0) {
    throw new OarRuntimeError(
      'thread_busy',
      `thread "${thread.threadId}" has work in progress; interrupt it or wait until it is idle before rolling back`,
      {
        retryable: true,
        details: {
          threadId: thread.threadId,
          ...(thread.activeTurnId ? { activeTurnId: thread.activeTurnId } : {}),
          ...(queued.length ? { queuedTurns: queued } : {}),
        },
      },
    );
  }
}

/** The rolled-back work: the thread's removed turns and, through delegation, its sub-agents' threads under them. */
interface Scope {
  turns: Set<string>;
  /** Thread id → its turns in scope (`undefined`: all of them: a sub-agent delegated from a removed turn). */
  threads: Map<string, Set<string> | undefined>;
}

async function affectedThreads(
  ctx: CommandContext,
  session: SessionState,
  thread: ThreadView,
  removed: Set<string>,
): Promise<Scope> {
  const threads = new Map<string, Set<string> | undefined>([[thread.threadId, removed]]);
  // The stored threads in one read (no runs joined: only parents and running turns matter here), in creation order:
  // children are created after their parents, so one pass reaches every descendant.
  const order = new Map(session.threadIds.map((id, i) => [id, i]));
  const others = (await storedThreads(ctx.log.store.db, session.sessionId))
    .filter((t) => t.threadId !== thread.threadId)
    .sort((a, b) => (order.get(a.threadId) ?? 0) - (order.get(b.threadId) ?? 0));
  for (const child of others) {
    const parent = child.parent;
    if (!parent || !threads.has(parent.threadId)) continue;
    const parentTurns = threads.get(parent.threadId);
    if (parentTurns === undefined || parentTurns.has(parent.turnId)) {
      if (child.activeTurnId) {
        throw new OarRuntimeError('thread_busy', `sub-agent thread "${child.threadId}" is still running`, {
          retryable: true,
          details: { threadId: child.threadId, activeTurnId: child.activeTurnId },
        });
      }
      threads.set(child.threadId, undefined);
    }
  }
  return { turns: removed, threads };
}

function inScope(scope: Scope, threadId: string | undefined, turnId: string | undefined): boolean {
  if (!threadId || !scope.threads.has(threadId)) return false;
  const turns = scope.threads.get(threadId);
  return turns === undefined || (turnId !== undefined && turns.has(turnId));
}

/** Per file changed in scope: what to write back, or why it cannot be. */
async function planFiles(
  ctx: CommandContext,
  session: SessionState,
  events: RuntimeEvent[],
  scope: Scope,
  files: 'restore' | 'keep',
  /** The files a rollback cut short was writing back: one it left half-written is written again (`onDisk`). */
  resuming: Set<string> = new Set(),
): Promise<{ files: RollbackFile[]; conflicts: RollbackConflict[] }> {
  // Every version of each path (the chain), and those the rollback undoes.
  const chains = new Map<string, FileVersionEntry[]>();
  const undone = new Map<string, FileVersionEntry[]>();
  for (const version of fileVersionsOf(events)) {
    chains.set(version.path, [...(chains.get(version.path) ?? []), version]);
    if (inScope(scope, version.threadId, version.turnId)) {
      undone.set(version.path, [...(undone.get(version.path) ?? []), version]);
    }
  }
  const plan: RollbackFile[] = [];
  const conflicts: RollbackConflict[] = [];
  const root = bindingOf(session)?.workspaceRoot;
  for (const [path, versions] of undone) {
    const first = versions[0] as FileVersionEntry;
    const last = versions.at(-1) as FileVersionEntry;
    const entry = {
      path,
      fromVersion: first.version,
      throughVersion: last.version,
      ...(first.before?.uri ? { beforeRef: first.before.uri } : {}),
      expectedSha256: last.after.sha256,
    };
    if (files === 'keep') {
      plan.push({ ...entry, action: 'keep' });
      continue;
    }
    if (!root || !ctx.deps.files) throw filesUnavailable();
    const conflict =
      brokenChain(
        scope,
        (chains.get(path) ?? []).filter((v) => v.sequence >= first.sequence),
      ) ??
      (await onDisk(ctx, session, root, first, last, resuming.has(path))) ??
      (await beforeImage(ctx, session, first));
    if (conflict === 'unchanged') plan.push({ ...entry, action: 'unchanged' });
    else if (typeof conflict === 'object' && 'torn' in conflict) {
      plan.push({ ...entry, action: 'restore', expectedSha256: conflict.torn });
    } else if (conflict) conflicts.push(conflict);
    else plan.push({ ...entry, action: first.before ? 'restore' : 'delete' });
  }
  return { files: plan, conflicts };
}

/**
 * Whether the versions from the first one undone on are all the rollback's and follow each other: each found the
 * file as the one before left it. Otherwise something else changed the file in between (a command, an editor,
 * another thread), and writing the first before-image back would undo that too.
 */
function brokenChain(scope: Scope, chain: FileVersionEntry[]): RollbackConflict | undefined {
  for (const [i, version] of chain.entries()) {
    const { path } = version;
    if (!inScope(scope, version.threadId, version.turnId)) {
      return {
        path,
        reason: 'changed_between',
        message: `${path} version ${version.version} is another thread's ${version.tool} (${version.threadId}), made after the rolled-back turns changed it`,
      };
    }
    const previous = chain[i - 1];
    if (previous && (version.before?.sha256 ?? null) !== previous.after.sha256) {
      return {
        path,
        reason: 'changed_between',
        message: `${path} changed outside OAR between version ${previous.version} and version ${version.version}`,
        expectedSha256: previous.after.sha256,
        actualSha256: version.before?.sha256 ?? null,
      };
    }
  }
  return undefined;
}

/**
 * The file as it is now: `unchanged` (already as it was before), a conflict, undefined (OAR's last write), or
 * `torn` — a rollback cut short while writing it back left a beginning of the before-image (the write truncates,
 * then writes): nothing else leaves exactly that, so it is written again, checked against what is there now.
 */
async function onDisk(
  ctx: CommandContext,
  session: SessionState,
  root: string,
  first: FileVersionEntry,
  last: FileVersionEntry,
  resuming: boolean,
): Promise<RollbackConflict | 'unchanged' | { torn: string } | undefined> {
  const { path } = first;
  let now: Awaited<ReturnType<WorkspaceFiles['digest']>>;
  try {
    now = await (ctx.deps.files as WorkspaceFiles).digest(root, path);
  } catch (error) {
    // A directory, a special file, a link out of the workspace, no permission: this file's conflict, not the plan's.
    return { path, reason: 'unreadable', message: `${path} cannot be read now: ${toOarError(error).message}` };
  }
  if (now && now.path !== path) {
    return {
      path,
      reason: 'changed_outside',
      message: `${path} now leads to ${now.path} (a symbolic link): it is not the file OAR wrote`,
    };
  }
  const actual = now?.sha256 ?? null;
  if (actual === (first.before?.sha256 ?? null)) return 'unchanged';
  if (actual === last.after.sha256) return undefined;
  if (now && resuming && first.before?.artifactId && now.size < first.before.size) {
    const image = await storedArtifact(ctx.log.store.db, session.sessionId, first.before.artifactId);
    if (image && sha256Hex(image.bytes.subarray(0, now.size)) === now.sha256) return { torn: now.sha256 };
  }
  return {
    path,
    reason: 'changed_outside',
    message: `${path} changed since OAR's last ${last.tool} of it (version ${last.version}): it is not what OAR wrote`,
    expectedSha256: last.after.sha256,
    actualSha256: actual,
  };
}

/** Whether the content before the first version undone can be written back exactly. */
async function beforeImage(
  ctx: CommandContext,
  session: SessionState,
  first: FileVersionEntry,
): Promise<RollbackConflict | undefined> {
  const { path, before } = first;
  if (!before) return undefined;
  if (!before.restorable) {
    return {
      path,
      reason: 'not_restorable',
      message:
        before.reason === 'redacted'
          ? `${path}'s content before version ${first.version} held something that looks like a secret and was stored redacted`
          : `${path}'s content before version ${first.version} was over the artifact limit and was not stored`,
    };
  }
  if (before.artifactId && !(await storedArtifact(ctx.log.store.db, session.sessionId, before.artifactId))) {
    return {
      path,
      reason: 'before_image_missing',
      message: `${path}'s content before version ${first.version} (${before.uri}) is no longer stored (expired by the retention policy, or removed)`,
    };
  }
  return undefined;
}

function filesUnavailable(): OarRuntimeError {
  return new OarRuntimeError(
    'workspace_unavailable',
    'the session has no workspace this runtime can reach to restore files; roll back the history only (files: keep)',
  );
}

async function restoreFiles(ctx: CommandContext, session: SessionState, files: RollbackFile[]): Promise<void> {
  const root = bindingOf(session)?.workspaceRoot;
  const port = ctx.deps.files;
  for (const file of files) {
    if (file.action !== 'restore' && file.action !== 'delete') continue;
    if (!root || !port) throw filesUnavailable();
    const artifactId = file.beforeRef?.replace(/^artifact:\/\//, '');
    const before = artifactId ? await storedArtifact(ctx.log.store.db, session.sessionId, artifactId) : undefined;
    if (file.action === 'restore' && !before) {
      throw new OarRuntimeError('rollback_conflict', `${file.path}'s before-image is no longer stored`, {
        details: { path: file.path, beforeRef: file.beforeRef },
      });
    }
    // Checked again through the descriptor it writes through: a change since the plan is refused, not overwritten.
    const done = await port.restore(root, file.path, before?.bytes, file.expectedSha256);
    if (!done) {
      throw new OarRuntimeError(
        'rollback_conflict',
        `${file.path} changed while the rollback ran; run the rollback again to see what changed`,
        { details: { path: file.path, expectedSha256: file.expectedSha256 } },
      );
    }
  }
}

/** What the rollback leaves as it is, counted from the facts of the removed work. */
function affectedOf(
  events: RuntimeEvent[],
  scope: Scope,
  thread: ThreadView,
  removedTurns: string[],
): RollbackResult['affected'] {
  let commands = 0;
  let fileCalls = 0;
  for (const event of events) {
    if (event.type !== 'tool.started' || !inScope(scope, event.threadId, event.turnId)) continue;
    const tool = (event.payload as { toolName?: unknown } | undefined)?.toolName;
    if (tool === 'exec' || tool === 'process') commands += 1;
    if (tool === 'write' || tool === 'edit') fileCalls += 1;
  }
  const removed = new Set(removedTurns);
  return {
    commands,
    fileCalls,
    subagentThreads: [...scope.threads.keys()].filter((id) => id !== thread.threadId),
    runningProcesses: (thread.processes ?? []).filter((p) => p.turnId && removed.has(p.turnId)).map((p) => p.processId),
    tasks: [...new Set([...thread.runs.values()].filter((r) => removed.has(r.turnId)).map((r) => r.taskId))],
  };
}
