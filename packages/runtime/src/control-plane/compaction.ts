import type { RuntimeEvent } from '@oar/protocol';
import { retryOnThreadChange, threadUnchanged } from '../facts/queue.js';
import { OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { compactionRange } from '../read-models/thread-state.js';
import type { CommandContext } from './command-context.js';

/** The `compact` command: a durable compaction request, and waiting for how it ended. */

/** How a compaction request ended (`compact`): see `Commands.awaitCompaction`. */
export interface CompactionResult {
  status: 'completed' | 'failed' | 'requested';
  threadId: string;
  requestId: string;
  compactionId?: string;
  sequence?: number;
  affectedTurns?: string[];
  tokensBefore?: number;
  tokensAfter?: number;
  summaryRef?: string;
  summarySource?: string;
  error?: { code: string; message: string; retryable: boolean; details?: Record<string, unknown> };
}

export interface CompactionRequestInput {
  sessionId: string;
  /** Defaults to the session's main thread. */
  threadId?: string;
  reason?: string;
}

/** A recorded compaction request: what `awaitCompaction` waits on. */
export interface CompactionRequest {
  sessionId: string;
  threadId: string;
  requestId: string;
}

/**
 * Ask for the thread's context to be compacted now (`oar compact`). Stateless like every command: it records a
 * durable request on the thread (`thread.updated` with `compactionRequest`), and whichever worker holds or claims
 * the thread compacts under its lease — the summary is a model call, which a command never makes. A request
 * already pending is returned, not repeated. Refused with `nothing_to_compact` when the thread has no finished
 * turn after its current boundary.
 */
export async function requestCompaction(
  ctx: CommandContext,
  input: CompactionRequestInput,
): Promise<CompactionRequest & { duplicate: boolean }> {
  await ctx.session(input.sessionId);
  const threadId = input.threadId ?? (await ctx.mainThreadId(input.sessionId));
  return retryOnThreadChange(async () => {
    const thread = await ctx.log.thread(input.sessionId, threadId);
    const base = { sessionId: input.sessionId, threadId };
    if (thread.compactionRequest) return { ...base, requestId: thread.compactionRequest.requestId, duplicate: true };
    if (thread.status === 'closed') throw new OarRuntimeError('thread_closed', `thread "${threadId}" is closed`);
    if (compactionRange(thread, 0).length === 0) {
      throw new OarRuntimeError(
        'nothing_to_compact',
        thread.compaction
          ? `thread "${threadId}" has no finished turn after its last compaction (${thread.compaction.compactionId})`
          : `thread "${threadId}" has no finished turn to compact`,
        {
          details: {
            threadId,
            turns: thread.turns.length,
            ...(thread.activeTurnId ? { activeTurnId: thread.activeTurnId } : {}),
            ...(thread.compaction ? { compactedThrough: thread.compaction.throughTurnId } : {}),
          },
        },
      );
    }
    const requestId = `${newId('cmp')}_req`;
    await ctx.append(
      input.sessionId,
      [
        {
          type: 'thread.updated',
          threadId,
          payload: {
            changed: ['compaction'],
            compactionRequest: { requestId, ...(input.reason ? { reason: input.reason } : {}) },
          },
        },
      ],
      { guard: threadUnchanged(thread) },
    );
    return { ...base, requestId, duplicate: false };
  });
}

/**
 * Wait up to `waitMs` (default 120 s) for a compaction request to be acted on, and say how it ended: `completed`
 * (with the new boundary's figures), `failed` (with the error), or still `requested`.
 */
export async function awaitCompaction(
  ctx: CommandContext,
  request: CompactionRequest,
  waitMs = 120_000,
): Promise<CompactionResult> {
  const { sessionId, threadId, requestId } = request;
  await ctx.deps.notifier.waitFor(
    sessionId,
    async () => (await ctx.log.thread(sessionId, threadId)).compactionRequest?.requestId !== requestId,
    waitMs,
  );
  const rows = await ctx.log.store.db
    .selectFrom('oar_events')
    .select(['body'])
    .where('session_id', '=', sessionId)
    .where('type', 'in', ['context.compaction.completed', 'context.compaction.failed'])
    .orderBy('sequence', 'desc')
    .limit(200)
    .execute();
  for (const row of rows) {
    const event = JSON.parse(row.body) as RuntimeEvent;
    const payload = (event.payload ?? {}) as Record<string, unknown>;
    if (payload.requestId !== requestId) continue;
    const base = { threadId, requestId, compactionId: String(payload.compactionId ?? ''), sequence: event.sequence };
    if (event.type === 'context.compaction.failed') {
      return { ...base, status: 'failed', error: payload.error as CompactionResult['error'] };
    }
    return {
      ...base,
      status: 'completed',
      affectedTurns: (payload.affectedTurns as string[] | undefined) ?? [],
      tokensBefore: Number(payload.tokensBefore ?? 0),
      tokensAfter: Number(payload.tokensAfter ?? 0),
      summaryRef: String(payload.summaryRef ?? ''),
      summarySource: String(payload.summarySource ?? ''),
    };
  }
  return { threadId, requestId, status: 'requested' };
}
