import type { EventDraft } from '../../log/draft.js';
import type { ModelCallResult, ModelHandle } from '../../models/model-call.js';
import { classifyModelError } from '../../models/model-errors.js';
import type { SlotWait } from '../../models/provider-limits.js';
import type { Engine } from '../../scheduler/engine.js';

/**
 * A model call's turn to start under this process's provider limits (models/provider-limits.ts). A call that has to
 * wait longer than a moment shows it: the thread is `waiting_resource` (a `thread.updated` naming the limit), and
 * `running` again once the call starts. An interrupt during the wait ends it at once: the call then fails as
 * interrupted without being sent (so its request is bracketed like any).
 */

/** Waits shorter than this are not worth a fact (a slot freed by a call that was just ending). */
const SHOWN_AFTER_MS = 25;

export type ProviderSlot = { release(): void; cancelled?: undefined } | { cancelled: ModelCallResult };

const MESSAGES: Record<SlotWait['reason'], string> = {
  concurrency: 'waiting for a free slot: the most calls allowed at once are running',
  requests_per_minute: 'waiting for the per-minute request limit',
  rate_limited: 'the provider asked to wait (HTTP 429 retry-after); every call of this model waits',
};

export async function providerSlot(
  engine: Engine,
  sessionId: string,
  ids: { threadId: string; turnId: string },
  model: ModelHandle,
  signal: AbortSignal,
): Promise<ProviderSlot> {
  const started = Date.now();
  let shown = false;
  let timer: NodeJS.Timeout | undefined;
  let recording: Promise<void> = Promise.resolve();
  const show = (wait: SlotWait) => {
    const fact: EventDraft = {
      type: 'thread.updated',
      ...ids,
      status: 'waiting_resource',
      statusReason: wait.reason,
      payload: {
        changed: ['resourceWait'],
        resourceWait: {
          kind: 'provider',
          reason: wait.reason,
          key: wait.key,
          modelId: model.modelId,
          provider: model.provider,
          message: MESSAGES[wait.reason],
          ...(wait.limit !== undefined ? { limit: wait.limit } : {}),
          ...(wait.until ? { until: wait.until } : {}),
        },
      },
    };
    // The standard's fact for a limit that holds a call back, beside the thread's status: here OAR's own limit
    // (this process's, or the store's shared by every worker) rather than a provider's 429.
    const hit: EventDraft = {
      type: 'rate_limit.hit',
      ...ids,
      payload: {
        modelId: model.modelId,
        provider: model.provider,
        enforcedBy: engine.limiter.scope === 'store' ? 'oar_shared_limits' : 'oar_process_limits',
        reason: wait.reason,
        key: wait.key,
        ...(wait.limit !== undefined ? { limit: wait.limit } : {}),
        ...(wait.until ? { until: wait.until } : {}),
      },
    };
    shown = true;
    recording = recording.then(() => engine.append(sessionId, [hit, fact])).catch(() => undefined);
  };
  try {
    const slot = await engine.limiter.acquire(model, signal, (wait) => {
      clearTimeout(timer);
      timer = setTimeout(() => show(wait), Math.max(0, SHOWN_AFTER_MS - (Date.now() - started)));
      timer.unref();
    });
    clearTimeout(timer);
    await recording;
    if (shown) {
      await engine.append(sessionId, [
        {
          type: 'thread.updated',
          ...ids,
          status: 'running',
          payload: { changed: ['resourceWait'], resourceWait: null, waitedMs: Date.now() - started },
        },
      ]);
    }
    return slot;
  } catch (error) {
    clearTimeout(timer);
    await recording;
    if (!signal.aborted) throw error;
    const failure = classifyModelError(error, { interrupted: true, timedOut: false });
    return { cancelled: { ok: false, failure, durationMs: Date.now() - started } };
  }
}
