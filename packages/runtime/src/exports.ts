import type { OarError, RuntimeEvent } from '@oar/protocol';
import { notFound } from './errors.js';
import { newId } from './ids.js';
import type { EventLog } from './log/event-log.js';
import { loadAllReadModels } from './log/event-log.js';
import { threadViews } from './read-models/project.js';
import { toSessionSnapshot } from './read-models/snapshots.js';

/** Everything needed to replay a session elsewhere: the ordered event log and the snapshot it produces. */
export async function exportReplay(log: EventLog, sessionId: string) {
  const events = await log.read(sessionId);
  if (events.length === 0) throw notFound('session', sessionId);
  const models = await loadAllReadModels(log.store.db, sessionId);
  if (!models.session) throw notFound('session', sessionId);
  return {
    format: 'oar.replay.v1',
    sessionId,
    runtimeId: log.runtimeId,
    exportedAt: new Date().toISOString(),
    events,
    snapshot: toSessionSnapshot(models.session, threadViews(models), [...models.tasks.values()]),
  };
}

function summarize(event: RuntimeEvent): string {
  const p = (event.payload ?? {}) as Record<string, unknown>;
  const error = p.error as OarError | undefined;
  if (error) return `${error.code}: ${error.message}`;
  for (const key of ['summary', 'toolName', 'title', 'reason', 'decision', 'outcome', 'message']) {
    if (typeof p[key] === 'string') return String(p[key]).slice(0, 200);
  }
  return '';
}

/**
 * The evidence pack of a session: the timeline, every failure with its structured error, the artifact refs and
 * the correlation ids that join them — derived from the same events as the UI and the read models. Exporting is
 * itself recorded as `evidence.changed`.
 */
export async function exportEvidence(log: EventLog, sessionId: string) {
  const events = await log.read(sessionId);
  if (events.length === 0) throw notFound('session', sessionId);
  const ids = (
    key: 'threadId' | 'turnId' | 'taskId' | 'runId' | 'toolCallId' | 'actionId' | 'subagentId' | 'artifactId',
  ) => [...new Set(events.map((e) => e[key]).filter((v): v is string => typeof v === 'string'))];
  const failures = events
    .filter(
      (e) =>
        [
          'turn.failed',
          'tool.failed',
          'model.failed',
          'runtime.error',
          'task.failed',
          'subagent.failed',
          'sandbox.violation',
        ].includes(e.type) ||
        (e.type === 'run.status' && (e.payload as Record<string, unknown>).status === 'denied'),
    )
    .map((e) => ({
      sequence: e.sequence,
      type: e.type,
      eventId: e.eventId,
      threadId: e.threadId,
      turnId: e.turnId,
      detail: summarize(e),
      error:
        (e.payload as Record<string, unknown>).error ??
        (e.payload as Record<string, { error?: unknown }>).observation?.error,
    }));
  const artifacts = events
    .filter((e) => e.type === 'artifact.changed')
    .map((e) => {
      const p = e.payload as Record<string, unknown>;
      return { artifactId: e.artifactId, uri: p.uri, mime: p.mime, size: p.size, hash: p.hash, name: p.name };
    });
  const evidenceId = newId('ev');
  const pack = {
    format: 'oar.evidence.v1',
    evidenceId,
    sessionId,
    runtimeId: log.runtimeId,
    exportedAt: new Date().toISOString(),
    timeline: events.map((e) => ({
      sequence: e.sequence,
      type: e.type,
      timestamp: e.timestamp,
      ...(e.threadId ? { threadId: e.threadId } : {}),
      ...(e.turnId ? { turnId: e.turnId } : {}),
      ...(e.status ? { status: e.status } : {}),
      summary: summarize(e),
    })),
    failures,
    artifacts,
    correlation: {
      sessionId,
      threadIds: ids('threadId'),
      turnIds: ids('turnId'),
      taskIds: ids('taskId'),
      runIds: ids('runId'),
      toolCallIds: ids('toolCallId'),
      decisionIds: ids('actionId'),
      subagentIds: ids('subagentId'),
      artifactIds: ids('artifactId'),
    },
  };
  const threadId = ids('threadId')[0];
  await log.append(sessionId, [
    {
      type: 'evidence.changed',
      evidenceId,
      ...(threadId ? { threadId } : {}),
      payload: {
        kind: 'evidence_pack',
        events: events.length,
        failures: failures.length,
        artifacts: artifacts.length,
        ref: `runtime://evidence/${evidenceId}`,
      },
    },
  ]);
  return pack;
}
