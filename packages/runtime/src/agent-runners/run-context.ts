import { createHash } from 'node:crypto';
import type { AgentRunContextInput, AgentRunnerManifest, ArtifactRef, Message } from '@oar/runner-sdk';
import type { ThreadView, TurnAttachment, TurnState } from '../read-models/thread-state.js';
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
  /**
   * Who the turn acts for: the session's recorded actor (`user:ada` locally, `api_key:key_1` behind the server),
   * the same identity a business tool's credential names. Unknown (a session recorded before actors) → null.
   */
  actor?: string;
}

/**
 * The spec's ActorContext of an OAR actor: its kind is the part before the first colon (`user`, `api_key`), its id
 * the whole actor, its name the rest. No actor recorded: an honest unknown (null id and name), never an invented one.
 */
export function actorContext(actor: string | undefined): AgentRunContextInput['actor'] {
  if (!actor) return { actor_type: 'user', actor_id: null, actor_name: null };
  const colon = actor.indexOf(':');
  return colon > 0
    ? { actor_type: actor.slice(0, colon), actor_id: actor, actor_name: actor.slice(colon + 1) }
    : { actor_type: 'user', actor_id: actor, actor_name: actor };
}

/** ArtifactRefs (the runner SDK's shape, snake_case on the wire) of a turn's attachments. */
export function attachmentRefs(attachments: readonly TurnAttachment[]): ArtifactRef[] {
  return attachments.map((a) => ({
    artifact_id: a.artifactId,
    name: a.name,
    mime_type: a.mimeType,
    size: a.size,
  }));
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
    actor: actorContext(input.actor),
    subject: { subject_type: 'message', subject_id: turn.turnId },
    input: {
      text: turn.input,
      contents: [{ type: 'text', text: turn.input }],
      // Refs the runner reads with artifacts.*: a file is never inlined.
      attachments: attachmentRefs(turn.attachments ?? []),
    },
    delivery: { surface: 'oar', supports_streaming: true },
    resources: {
      models,
      tools,
      knowledge_bases: access.knowledgeBases.map((id) => ({ kb_id: id })),
      files: [],
      // The storage areas granted (storage.*): the same frozen access every call is checked against.
      storage: {
        plugin_storage: access.storage.includes('plugin'),
        workspace_storage: access.storage.includes('workspace'),
        binding_storage: access.storage.includes('binding'),
      },
    },
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
