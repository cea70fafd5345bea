import type { EventDraft } from '../../log/draft.js';
import type { ModelHandle } from '../../models/model-call.js';
import type { ModelDelta, ModelDeltaSink } from '../../models/model-deltas.js';
import { STREAMING_CHANGE } from '../../read-models/thread-state.js';
import type { Engine } from '../../scheduler/engine.js';

/**
 * The one durable fact of a model call's stream: when its first piece (text, tool arguments or reasoning) arrives,
 * a `thread.updated` `{changed: ["streaming"], streaming: {modelId, provider, attempt, channel}}` — from it the turn
 * is `streaming` until the call ends (read-models/thread-state.ts, `streamingChange`, says why `model.requested` cannot tell). One append
 * per call, staged with the step's facts, whatever the number of pieces: the pieces themselves stay live-only.
 */
export interface StreamingStarted {
  /** The call's sink: the thread's own (`Engine.deltas`), after the first piece has been marked. */
  readonly sink: ModelDeltaSink;
  /** The mark's append, once it was made (the call's end is appended after it, and hears of its failure). */
  recorded(): Promise<void>;
}

export function streamingStarted(
  engine: Engine,
  sessionId: string,
  ids: { threadId: string; turnId: string },
  model: ModelHandle,
  attempt: number,
): StreamingStarted {
  const inner = engine.deltas;
  let appended: Promise<void> | undefined;
  const sink: ModelDeltaSink = {
    delta(delta: ModelDelta) {
      if (appended === undefined && delta.delta !== '') {
        const fact: EventDraft = {
          type: 'thread.updated',
          ...ids,
          payload: {
            changed: [STREAMING_CHANGE],
            [STREAMING_CHANGE]: { modelId: model.modelId, provider: model.provider, attempt, channel: delta.channel },
          },
        };
        // Staged at once (a thread engine's staged append does not wait), so it precedes the call's end; its promise
        // is kept rather than awaited here, inside the provider's stream.
        appended = engine.append(sessionId, [fact]);
        appended.catch(() => undefined);
      }
      inner?.delta(delta);
    },
    ...(inner?.toolCall ? { toolCall: inner.toolCall.bind(inner) } : {}),
    end() {
      inner?.end();
    },
  };
  return { sink, recorded: () => appended ?? Promise.resolve() };
}
