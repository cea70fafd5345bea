/**
 * OAR's context answers → the records LangBot's SDK validates (its `TranscriptItem`, `AgentEventRecord`,
 * `SteeringInputItem`, `AgentRun`, `AgentRunEvent`). Those models ignore unknown fields and default the optional
 * ones, so only their required fields must be present; everything else is filled where OAR knows it.
 */

type Json = Record<string, unknown>;

/** Seconds since the epoch (LangBot's timestamps are integer seconds), or null for a missing or bad date. */
export function epochSeconds(iso: unknown): number | null {
  if (typeof iso !== 'string') return null;
  const ms = Date.parse(iso);
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : null;
}

/**
 * One OAR transcript message (history.page / history.search item) → LangBot's TranscriptItem. OAR's opaque cursor
 * is the item's stable id: it names the message, so it is the transcript id and the event id too (an OAR message is
 * a projection of its turn, not an event of its own).
 */
export function transcriptItem(item: Json, conversationId: string | undefined): Json {
  const cursor = typeof item.cursor === 'string' ? item.cursor : '';
  return {
    transcript_id: cursor,
    event_id: cursor,
    conversation_id: conversationId ?? null,
    thread_id: conversationId ?? null,
    role: typeof item.role === 'string' ? item.role : 'user',
    item_type: 'message',
    content: typeof item.content === 'string' ? item.content : null,
    cursor: cursor || null,
    attachment_refs: [],
    metadata: typeof item.score === 'number' ? { score: item.score } : {},
  };
}

/** One OAR event envelope (events.get / events.page) → LangBot's AgentEventRecord (the payload under metadata). */
export function eventRecord(envelope: Json): Json {
  const time = epochSeconds(envelope.timestamp);
  const threadId = typeof envelope.thread_id === 'string' ? envelope.thread_id : null;
  return {
    event_id: String(envelope.event_id ?? ''),
    event_type: String(envelope.event_type ?? ''),
    event_time: time,
    source: 'oar',
    conversation_id: threadId,
    thread_id: threadId,
    seq: typeof envelope.sequence === 'number' ? envelope.sequence : null,
    created_at: time,
    metadata: {
      turn_id: envelope.turn_id ?? null,
      data: envelope.data ?? {},
      ...(envelope.payload_truncated ? { payload_truncated: true, payload_bytes: envelope.payload_bytes } : {}),
    },
  };
}

/** What a LangBot record of this run is built from (the run's identity, as the host froze it when it started). */
export interface RunIdentity {
  runId: string;
  runnerId?: string;
  conversationId?: string;
  workspaceId?: string;
}

/**
 * One input the run claimed with steering.pull (a queued turn of its thread) → LangBot's SteeringInputItem: the turn
 * is the event (`message.received`, as the run's own event is), its text the input.
 */
export function steeringItem(item: Json, claimedAt: unknown, run: RunIdentity): Json {
  const turnId = String(item.turn_id ?? '');
  const text = typeof item.input === 'string' ? item.input : '';
  return {
    claimed_run_id: run.runId,
    runner_id: run.runnerId ?? '',
    claimed_at: epochSeconds(claimedAt),
    event: {
      event_id: turnId,
      event_type: 'message.received',
      event_time: epochSeconds(item.enqueued_at),
      source: 'oar',
      source_event_type: 'turn.submitted',
      data: { turn_id: turnId },
    },
    input: { text, contents: [{ type: 'text', text }], attachments: [] },
    conversation: {
      conversation_id: run.conversationId ?? null,
      thread_id: run.conversationId ?? null,
      workspace_id: run.workspaceId ?? null,
    },
    metadata: { turn_id: turnId, source: item.source ?? null, enqueued_at: item.enqueued_at ?? null },
  };
}

/** The run's own record (LangBot's AgentRun) while it runs: the ids the host froze at its start, status `running`. */
export function runRecord(run: RunIdentity & { turnId?: string; startedAt?: number; deadlineAt?: number }): Json {
  return {
    run_id: run.runId,
    runner_id: run.runnerId ?? null,
    conversation_id: run.conversationId ?? null,
    thread_id: run.conversationId ?? null,
    workspace_id: run.workspaceId ?? null,
    status: 'running',
    started_at: run.startedAt !== undefined ? Math.floor(run.startedAt / 1000) : null,
    deadline_at: run.deadlineAt !== undefined ? Math.floor(run.deadlineAt / 1000) : null,
    metadata: { host: 'oar', ...(run.turnId ? { turn_id: run.turnId } : {}) },
  };
}

/** One OAR fact of the run (an events.page envelope of its turn) → LangBot's AgentRunEvent. */
export function runEvent(envelope: Json, runId: string): Json {
  return {
    run_id: runId,
    sequence: typeof envelope.sequence === 'number' ? envelope.sequence : 0,
    type: String(envelope.event_type ?? ''),
    data: (envelope.data as Json | undefined) ?? {},
    created_at: epochSeconds(envelope.timestamp),
    source: 'oar',
    metadata: {
      event_id: envelope.event_id ?? null,
      ...(envelope.payload_truncated ? { payload_truncated: true } : {}),
    },
  };
}
