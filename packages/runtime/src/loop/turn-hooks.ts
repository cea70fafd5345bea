import { estimateTokens, type OarError, oarError } from '@oar/protocol';
import type { HookMessage } from '../config/hooks.js';
import type { ModelHandle } from '../models/model-call.js';
import { hooksAt, runHooks, sessionHooks } from '../policy/hooks/hooks.js';
import type { ThreadView, TurnState } from '../read-models/thread-state.js';
import type { Engine } from '../scheduler/engine.js';
import type { AssembledContext } from './context/context.js';

/**
 * The hooks around a model call and at a turn's end (docs/hooks.md). A model call is one system prompt and one
 * transcript, which a hook sees as two messages; a rewrite must keep that shape (the runtime checks it) and then
 * replaces what is sent. A turn's end is observed: its hooks cannot change it, their failures are recorded.
 */

/** How the hooks before a model call decided: go on with this context (perhaps rewritten), or stop the turn. */
export type ModelHookVerdict = { context: AssembledContext } | { error: OarError };

export async function beforeModelCall(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  context: AssembledContext,
  model: ModelHandle,
  signal: AbortSignal,
): Promise<ModelHookVerdict> {
  if (hooksAt(engine.binding.hooks, 'before_model_call', { agent: thread.agent }).length === 0) return { context };
  // A context that shows reads unredacted (policy/revealed.ts) is for the model provider only: a hook is another
  // reader, so it gets the redacted form — and a rewrite, built from that, is what is sent then.
  const shown = (text: string) => (context.revealed ? engine.redactor.redactText(text) : text);
  const messages: HookMessage[] = [
    { role: 'system', content: shown(context.system) },
    { role: 'user', content: shown(context.transcript.text) },
  ];
  const verdict = await runHooks('before_model_call', {
    engine: sessionHooks(engine, thread.sessionId),
    ids: { threadId: thread.threadId, turnId: turn.turnId },
    signal,
    input: {
      sessionId: thread.sessionId,
      threadId: thread.threadId,
      turnId: turn.turnId,
      agent: thread.agent,
      workspaceRoot: engine.workspaceRoot,
      messages,
      model: { modelId: model.modelId, provider: model.provider },
    },
  });
  if (verdict.decision === 'deny') {
    return {
      error: oarError('hook_denied', verdict.reason ?? 'a hook stopped the model call', {
        details: { hook: verdict.hook, point: 'before_model_call', ...(verdict.error ? { cause: verdict.error } : {}) },
      }),
    };
  }
  if (!verdict.messages) return { context };
  // The runtime sends one system prompt and one transcript: a rewrite that changes that shape cannot be sent.
  const [system, user, ...rest] = verdict.messages;
  if (system?.role !== 'system' || user?.role !== 'user' || rest.length > 0) {
    return {
      error: oarError(
        'hook_output_invalid',
        `hook ${verdict.rewrittenBy.join(', ')} rewrote the model request into another shape: it must stay one system message and one user message`,
        { details: { hooks: verdict.rewrittenBy, roles: verdict.messages.map((m) => m.role) } },
      ),
    };
  }
  const transcriptTokens = estimateTokens(user.content);
  return {
    context: {
      system: system.content,
      transcript: { ...context.transcript, text: user.content, tokens: transcriptTokens },
      tokenEstimate: estimateTokens(system.content) + transcriptTokens,
    },
  };
}

/** The hooks at a turn's end: told how it ended, under their own timeout (an interrupted turn's signal is spent). */
export async function atTurnEnd(
  engine: Partial<Pick<Engine, 'binding' | 'workspaceRoot'>> & Pick<Engine, 'append'>,
  thread: ThreadView,
  turn: TurnState,
  end: { outcome: 'completed' | 'failed' | 'cancelled'; answer?: string; error?: OarError },
): Promise<void> {
  if (!engine.binding || engine.workspaceRoot === undefined) return;
  if (hooksAt(engine.binding.hooks, 'turn_end', { agent: thread.agent }).length === 0) return;
  await runHooks('turn_end', {
    engine: {
      binding: engine.binding,
      workspaceRoot: engine.workspaceRoot,
      record: (drafts, options) => engine.append(thread.sessionId, drafts, options),
    },
    ids: { threadId: thread.threadId, turnId: turn.turnId },
    signal: new AbortController().signal,
    input: {
      sessionId: thread.sessionId,
      threadId: thread.threadId,
      turnId: turn.turnId,
      agent: thread.agent,
      workspaceRoot: engine.workspaceRoot,
      turn: {
        outcome: end.outcome,
        ...(end.answer !== undefined ? { answer: end.answer } : {}),
        ...(end.error ? { error: { code: end.error.code, message: end.error.message } } : {}),
      },
    },
  }).catch(() => undefined);
}
