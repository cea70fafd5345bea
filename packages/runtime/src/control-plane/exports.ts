import { createHash } from 'node:crypto';
import type { EvidenceExportKind, OarError, RuntimeEvent } from '@oar/protocol';
import { canonicalJson } from '../kernel/canonical-json.js';
import { notFound } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import { loadAllReadModels } from '../log/read-model-rows.js';
import { threadViews } from '../read-models/project.js';
import { toSessionSnapshot } from '../read-models/snapshots.js';
import type { CommandContext } from './command-context.js';

/** What an export covers: a session, or one thread, turn or task of it. */
export interface ExportScope {
  sessionId: string;
  threadId?: string;
  turnId?: string;
  taskId?: string;
}

/** The SHA-256 of a body's canonical JSON (kernel/canonical-json.ts): `sha256:<hex>`. */
export function digestOf(body: unknown): string {
  return `sha256:${createHash('sha256').update(canonicalJson(body)).digest('hex')}`;
}

/** The payload field the standard names for each kind's ref. */
const REF_FIELD: Record<EvidenceExportKind, string> = { evidence: 'packRef', replay: 'replayRef', review: 'reviewRef' };

/**
 * Record an export as a fact: one `evidence.changed` (its id the export's, the envelope scoped like the export) with
 * the ref, format, scope, how many of the scope's events it covers up to `throughSequence`, and the digest of `body`
 * — after the body was made, so an export never covers its own record. Returns the ref and the digest.
 */
export async function recordExport(
  ctx: CommandContext,
  record: {
    kind: EvidenceExportKind;
    exportId: string;
    scope: ExportScope;
    format: string;
    eventCount: number;
    throughSequence: number;
    body: unknown;
    extra?: Record<string, unknown>;
  },
): Promise<{ ref: string; digest: string }> {
  const { kind, exportId, scope } = record;
  const ref = `runtime://${kind}/${exportId}`;
  const digest = digestOf(record.body);
  const ids = Object.fromEntries(
    (['threadId', 'turnId', 'taskId'] as const).filter((k) => scope[k] !== undefined).map((k) => [k, scope[k]]),
  );
  // Nothing happened since the last record of this very export (kind and scope): it is not recorded again, so
  // exporting repeatedly (a viewer polling) never grows the log by itself.
  const [last] = await ctx.log.read(scope.sessionId, { after: record.throughSequence - 1, limit: 1 });
  const previous = (last?.payload ?? {}) as { kind?: string; scope?: unknown; ref?: string; digest?: string };
  if (
    last?.type === 'evidence.changed' &&
    last.sequence === record.throughSequence &&
    previous.kind === kind &&
    JSON.stringify(previous.scope) === JSON.stringify({ sessionId: scope.sessionId, ...ids })
  ) {
    return { ref: previous.ref ?? ref, digest: previous.digest ?? digest };
  }
  await ctx.append(scope.sessionId, [
    {
      type: 'evidence.changed',
      evidenceId: exportId,
      ...ids,
      payload: {
        kind,
        ref,
        [REF_FIELD[kind]]: ref,
        format: record.format,
        scope: { sessionId: scope.sessionId, ...ids },
        eventCount: record.eventCount,
        throughSequence: record.throughSequence,
        digest,
        ...record.extra,
      },
    },
  ]);
  return { ref, digest };
}

/**
 * Everything needed to replay a session elsewhere: the ordered event log and the snapshot it produces — up to the
 * export's own record (`evidence.changed`, written after it).
 */
export async function exportReplay(ctx: CommandContext, sessionId: string) {
  const events = await ctx.log.read(sessionId);
  if (events.length === 0) throw notFound('session', sessionId);
  const models = await loadAllReadModels(ctx.log.store.db, sessionId);
  if (!models.session) throw notFound('session', sessionId);
  const exportId = newId('ev');
  const body = {
    format: 'oar.replay.v1',
    exportId,
    sessionId,
    runtimeId: ctx.log.runtimeId,
    exportedAt: new Date().toISOString(),
    events,
    snapshot: toSessionSnapshot(
      models.session,
      threadViews(models),
      [...models.tasks.values()],
      [...models.jobs.values()],
    ),
  };
  await recordExport(ctx, {
    kind: 'replay',
    exportId,
    scope: { sessionId },
    format: body.format,
    eventCount: events.length,
    throughSequence: events.at(-1)?.sequence ?? 0,
    body,
  });
  return body;
}

function summarize(event: RuntimeEvent): string {
  const p = (event.payload ?? {}) as Record<string, unknown>;
  const error = p.error as OarError | undefined;
  if (event.type.startsWith('hook.')) {
    const what = error ? `failed (${error.code}), ${p.onFailure}` : (p.decision ?? 'started');
    return `hook ${p.hookName} ${p.point}${p.toolName ? ` ${p.toolName}` : ''}: ${what}`.slice(0, 200);
  }
  if (error) return `${error.code}: ${error.message}`;
  for (const key of ['summary', 'toolName', 'title', 'reason', 'decision', 'outcome', 'message']) {
    if (typeof p[key] === 'string') return String(p[key]).slice(0, 200);
  }
  return '';
}

/** The cost, rate-limit, quota and limit facts of a session (the standard's Cost / limits family, plus limit.changed). */
const LIMIT_FACTS = new Set(['cost.recorded', 'rate_limit.hit', 'quota.low', 'quota.blocked', 'limit.changed']);

/**
 * The limit facts of the log, each with the ids that join it (thread, turn), and per turn what its model calls
 * spent and which limits it met: the same facts the read models count, joined by turn id.
 */
export function limitFacts(events: RuntimeEvent[]) {
  const pick = (p: Record<string, unknown>, keys: string[]) =>
    Object.fromEntries(keys.filter((k) => p[k] !== undefined).map((k) => [k, p[k]]));
  const limits = events
    .filter((e) => LIMIT_FACTS.has(e.type))
    .map((e) => {
      const p = (e.payload ?? {}) as Record<string, unknown>;
      return {
        sequence: e.sequence,
        type: e.type,
        eventId: e.eventId,
        ...(e.threadId ? { threadId: e.threadId } : {}),
        ...(e.turnId ? { turnId: e.turnId } : {}),
        ...(e.status ? { status: e.status } : {}),
        ...pick(p, [
          'modelId',
          'provider',
          'attempt',
          'retryAfterMs',
          'limits',
          'providerRequestId',
          'scope',
          'dimension',
          'limit',
          'spent',
          'requested',
          'policy',
          'amount',
          'currency',
          'changes',
          'reason',
        ]),
      };
    });
  const byTurn: Record<
    string,
    {
      threadId?: string;
      modelCalls: number;
      tokens: number;
      costUsd: number;
      rateLimitHits: number;
      quotaLow: number;
      quotaBlocked: number;
      outcome?: string;
    }
  > = {};
  const turn = (e: RuntimeEvent) => {
    if (!e.turnId) return undefined;
    byTurn[e.turnId] ??= {
      ...(e.threadId ? { threadId: e.threadId } : {}),
      modelCalls: 0,
      tokens: 0,
      costUsd: 0,
      rateLimitHits: 0,
      quotaLow: 0,
      quotaBlocked: 0,
    };
    return byTurn[e.turnId];
  };
  for (const e of events) {
    const p = (e.payload ?? {}) as Record<string, unknown>;
    if (e.type === 'model.completed' || e.type === 'model.failed') {
      const t = turn(e);
      if (!t) continue;
      const usage = p.usage as { totalTokens?: number } | undefined;
      t.modelCalls++;
      t.tokens += usage?.totalTokens ?? 0;
    } else if (e.type === 'cost.recorded') {
      const t = turn(e);
      if (t && typeof p.amount === 'number') t.costUsd = Math.round((t.costUsd + p.amount) * 1e6) / 1e6;
    } else if (e.type === 'rate_limit.hit') {
      const t = turn(e);
      if (t) t.rateLimitHits++;
    } else if (e.type === 'quota.low') {
      const t = turn(e);
      if (t) t.quotaLow++;
    } else if (e.type === 'quota.blocked') {
      const t = turn(e);
      if (t) t.quotaBlocked++;
    } else if (e.type === 'turn.completed' || e.type === 'turn.failed') {
      const t = turn(e);
      if (t) t.outcome = e.status ?? (e.type === 'turn.completed' ? 'completed' : 'failed');
    }
  }
  return { limits, byTurn };
}

/**
 * The runtime summary of an evidence pack and its verification, from the session snapshot: each thread's status
 * and last outcome, the turns by status, the task counts and the usage; the verification outcomes and the refs of
 * the review and replay exports recorded before it (the standard's acceptance scenario 9).
 */
async function packSummary(ctx: CommandContext, sessionId: string, eventCount: number) {
  const models = await loadAllReadModels(ctx.log.store.db, sessionId);
  if (!models.session) throw notFound('session', sessionId);
  const snapshot = toSessionSnapshot(
    models.session,
    threadViews(models),
    [...models.tasks.values()],
    [...models.jobs.values()],
  );
  const turns: Record<string, number> = {};
  for (const turn of snapshot.threads.flatMap((t) => t.turns)) turns[turn.status] = (turns[turn.status] ?? 0) + 1;
  const unique = <T>(values: T[]) => [...new Map(values.map((v) => [JSON.stringify(v), v])).values()];
  const summaries = snapshot.threads.map((t) => t.evidenceSummary);
  return {
    summary: {
      threads: snapshot.threads.map((t) => ({
        threadId: t.threadId,
        status: t.status,
        turns: t.turns.length,
        ...(t.lastOutcome ? { lastOutcome: { turnId: t.lastOutcome.turnId, status: t.lastOutcome.status } } : {}),
      })),
      turns,
      tasks: snapshot.taskSummary,
      usage: snapshot.telemetrySummary.usage,
      events: eventCount,
    },
    verification: {
      outcomes: unique(summaries.flatMap((s) => s.verificationOutcomes ?? [])),
      reviewRefs: unique(summaries.flatMap((s) => s.reviewRefs ?? [])),
      replayRefs: unique(summaries.flatMap((s) => s.replayRefs ?? [])),
    },
  };
}

/**
 * The evidence pack of a session: the timeline, every failure with its structured error, the artifact refs and
 * the correlation ids that join them — derived from the same events as the UI and the read models. Exporting is
 * itself recorded as `evidence.changed`.
 */
export async function exportEvidence(ctx: CommandContext, sessionId: string) {
  const events = await ctx.log.read(sessionId);
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
          'task.timed_out',
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
  const { limits, byTurn } = limitFacts(events);
  const { summary, verification } = await packSummary(ctx, sessionId, events.length);
  const evidenceId = newId('ev');
  const pack = {
    format: 'oar.evidence.v1',
    evidenceId,
    sessionId,
    runtimeId: ctx.log.runtimeId,
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
    limits,
    turns: byTurn,
    summary: { ...summary, failures: failures.length, artifacts: artifacts.length },
    verification,
    // Every hook run with its decision and, for a rewrite, the change (docs/hooks.md; scenario 12).
    hooks: events
      .filter((e) => e.type === 'hook.completed' || e.type === 'hook.failed')
      .map((e) => ({
        sequence: e.sequence,
        type: e.type,
        ...(e.turnId ? { turnId: e.turnId } : {}),
        ...(e.toolCallId ? { toolCallId: e.toolCallId } : {}),
        ...(e.payload as Record<string, unknown>),
      })),
    // The schedule firings that started work here (docs/schedules.md): which schedule, which cron time, what started.
    scheduleFirings: scheduleFirings(events),
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
  await recordExport(ctx, {
    kind: 'evidence',
    exportId: evidenceId,
    scope: { sessionId },
    format: pack.format,
    eventCount: events.length,
    throughSequence: events.at(-1)?.sequence ?? 0,
    body: pack,
    extra: { events: events.length, failures: failures.length, artifacts: artifacts.length },
  });
  return pack;
}

/**
 * The schedule firings recorded in a session's facts (`payload.schedule` of `session.created` and `turn.submitted`),
 * one entry per (schedule, cron time): what it started — the session, the turn — and with which binding.
 */
function scheduleFirings(events: readonly RuntimeEvent[]) {
  const firings = new Map<string, Record<string, unknown>>();
  for (const e of events) {
    const fact = (e.payload as { schedule?: { scheduleId?: unknown; firedAt?: unknown } }).schedule;
    if ((e.type !== 'session.created' && e.type !== 'turn.submitted') || typeof fact?.scheduleId !== 'string') continue;
    const key = `${fact.scheduleId} ${String(fact.firedAt)}`;
    const { firedAt, ...rest } = fact;
    const seen = firings.get(key);
    const facts = [...((seen?.facts as unknown[]) ?? []), { type: e.type, sequence: e.sequence }];
    firings.set(key, { ...seen, ...rest, fireAt: firedAt, ...(e.turnId ? { turnId: e.turnId } : {}), facts });
  }
  return [...firings.values()];
}
