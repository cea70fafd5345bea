import { createHash } from 'node:crypto';
import type { AgentRunContextInput, AgentRunnerManifest, Message } from '@oar/runner-sdk';
import type { ThreadView, TurnState } from '../read-models/thread-state.js';
import { availableApis, type RunAccess } from './access.js';
import { stateSnapshot, transcriptOf } from './context-apis.js';

/** What the host knows when it builds a run's context. */
export interface RunContextInput {
  thread: ThreadView;
  turn: TurnState;
  runId: string;
  manifest: AgentRunnerManifest;
  access: RunAccess;
  config: Record<string, unknown>;
  /** Milliseconds since the epoch. */
  deadlineAt: number;
  traceId: string;
  tools: { name: string; description: string; inputSchema: Record<string, unknown> }[];
  workspaceId: string;
  actor?: { type?: string; id?: string; name?: string };
}

/**
 * The event-first AgentRunContext of one OAR turn (spec section 4): the turn is the event (`message.received`), its
 * input the input, the thread the conversation; resources are exactly the run's access (opaque ids); the context
 * access says what was inlined and what the runner may pull, with counts that say truthfully what was left out.
 * History is never inlined whole by default: only what the manifest's bootstrap policy asks for, within
 * max_inline_events and max_inline_bytes.
 */
export function buildRunContext(input: RunContextInput): AgentRunContextInput {
  const { thread, turn, manifest, access } = input;
  const transcript = transcriptOf(thread, turn.turnId);
  const bootstrap = bootstrapOf(manifest, transcript, thread);
  const submitted = Date.parse(turn.submittedAt);
  const tools = input.tools.map((t) => ({ tool_name: t.name, description: t.description, parameters: t.inputSchema }));
  const models = access.models.map((id) => ({ model_id: id, operations: access.modelOps }));
  return {
    run_id: input.runId,
    trigger: { type: 'message.received', source: 'api', timestamp: submitted },
    event: {
      event_id: turn.turnId,
      event_type: 'message.received',
      event_time: submitted,
      source: 'oar',
      source_event_type: 'turn.submitted',
      // Small data only; the text itself is the input (and the turn's record holds it whole).
      data: { turn_id: turn.turnId, input_bytes: Buffer.byteLength(turn.input) },
    },
    conversation: { conversation_id: thread.threadId, thread_id: thread.threadId, workspace_id: input.workspaceId },
    actor: {
      actor_type: input.actor?.type ?? 'user',
      actor_id: input.actor?.id ?? null,
      actor_name: input.actor?.name ?? null,
    },
    subject: { subject_type: 'message', subject_id: turn.turnId },
    input: { text: turn.input, contents: [{ type: 'text', text: turn.input }], attachments: [] },
    delivery: { surface: 'oar', supports_streaming: true },
    resources: { models, tools, knowledge_bases: access.knowledgeBases.map((id) => ({ kb_id: id })), files: [] },
    context: {
      conversation_id: thread.threadId,
      thread_id: thread.threadId,
      latest_cursor: null,
      event_seq: thread.lastSequence,
      transcript_seq: transcript.length,
      has_history_before: transcript.length > 0,
      inline_policy: bootstrap.policy,
      available_apis: availableApis(access),
    },
    state: stateSnapshot(thread.state),
    runtime: {
      host: 'oar',
      trace_id: input.traceId,
      deadline_at: input.deadlineAt / 1000,
      static_refs: manifest.context.wants_static_context_refs
        ? {
            tools: { hash: hashOf(tools) },
            resources: { hash: hashOf({ models, tools: tools.map((t) => t.tool_name) }) },
          }
        : {},
    },
    config: input.config,
    ...(bootstrap.context ? { bootstrap: bootstrap.context } : {}),
    metadata: { session_id: thread.sessionId, turn_id: turn.turnId },
  };
}

function hashOf(value: unknown): string {
  return `sha256:${createHash('sha256').update(JSON.stringify(value)).digest('hex')}`;
}

/**
 * The inline bootstrap the manifest asks for: none or the current event only (the default), or the most recent
 * messages (and, for summary_tail, the thread's compaction summary) within both inline limits.
 */
function bootstrapOf(manifest: AgentRunnerManifest, transcript: Message[], thread: ThreadView) {
  const mode = manifest.context.bootstrap;
  const total = transcript.length;
  if (mode === 'none' || mode === 'current_event') {
    return {
      policy: {
        mode,
        delivered_count: 0,
        source_total_count: total,
        messages_complete: total === 0,
        reason: total ? 'history is pulled with history.page' : null,
      },
      context: undefined,
    };
  }
  const maxEvents = manifest.context.max_inline_events;
  const maxBytes = manifest.context.max_inline_bytes;
  const tail: Message[] = [];
  let bytes = 0;
  let reason: string | null = null;
  for (let i = transcript.length - 1; i >= 0; i--) {
    const message = transcript[i] as Message;
    const size = Buffer.byteLength(JSON.stringify(message));
    if (tail.length >= maxEvents) {
      reason = 'max_inline_events';
      break;
    }
    if (bytes + size > maxBytes) {
      reason = 'max_inline_bytes';
      break;
    }
    tail.unshift(message);
    bytes += size;
  }
  const summary = mode === 'summary_tail' ? thread.compaction?.summaryPreview : undefined;
  return {
    policy: {
      mode,
      delivered_count: tail.length,
      source_total_count: total,
      messages_complete: tail.length === total,
      reason: tail.length === total ? null : reason,
    },
    context: { messages: tail, ...(summary ? { summary } : {}) },
  };
}
