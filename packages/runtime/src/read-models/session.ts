import { type EvidenceExport, EvidenceExportSchema, type RuntimeEvent, UsageSchema } from '@oar/protocol';
import { z } from 'zod';
import type { SessionBinding } from '../config/binding.js';
import { SessionGrantSchema } from '../config/permission-request.js';

const OverrideLimitsSchema = z.object({
  tokens: z.number().nullable().optional(),
  costUsd: z.number().nullable().optional(),
  modelCalls: z.number().nullable().optional(),
  wallTimeMs: z.number().nullable().optional(),
});
/** The limits `limit.changed` set: per scope and dimension (null: unbounded), and the policy. */
export const LimitOverridesSchema = z.object({
  turn: OverrideLimitsSchema.optional(),
  session: OverrideLimitsSchema.optional(),
  onExceeded: z.enum(['wait', 'fail']).optional(),
  lowAt: z.number().optional(),
});
export type LimitOverrides = z.infer<typeof LimitOverridesSchema>;

/** What the evidence summary counts of one thread's facts (docs/review.md "The evidence summary"). */
const EvidenceAuditSchema = z.object({
  /** Resolved decisions (`action.resolved`) by `<decision> by <resolvedBy>`. */
  decisions: z.record(z.string(), z.number().int()),
  sandboxViolations: z.number().int(),
  /** Secrets replaced before an output was recorded (the `count` of `output.redacted`). */
  redactions: z.number().int(),
});
type EvidenceAudit = z.infer<typeof EvidenceAuditSchema>;

/** How many recorded exports the session keeps listed (the newest; `exportCount` counts them all). */
export const MAX_EVIDENCE_EXPORTS = 100;

/** The session projection: metadata, its threads, usage totals, routing facts and session-wide grants. */
export const SessionStateSchema = z.object({
  sessionId: z.string(),
  runtimeId: z.string(),
  title: z.string().optional(),
  /** The workspace that owns the session (absent: the default workspace). */
  workspaceId: z.string().optional(),
  /** Who created the session (`api_key:<id>` behind the server, `user:<name>` locally): the authority it acts for. */
  actor: z.string().optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
  threadIds: z.array(z.string()),
  /** Totals of the session's model calls; the cache and reasoning counts appear once a provider reports them. */
  usage: UsageSchema.required({ inputTokens: true, outputTokens: true, totalTokens: true }),
  routing: z
    .object({
      selectedModel: z.string(),
      provider: z.string().optional(),
      candidateCount: z.number(),
      reason: z.string().optional(),
      capabilityGap: z.string().optional(),
      fallback: z.object({ from: z.string(), to: z.string(), trigger: z.string(), attempts: z.number() }).optional(),
    })
    .optional(),
  /** The recorded cost of the session's priced model calls (approximate; unpriced calls are not in it). */
  cost: z.object({ currency: z.literal('USD'), amount: z.number(), pricedCalls: z.number().int() }).optional(),
  /**
   * What budgets count beyond usage and cost (facts/budgets.ts): model calls made, the time of ended turns and the
   * start of running ones, and the `quota.low` facts recorded for session limits. Absent until the first turn.
   */
  budget: z
    .object({
      modelCalls: z.number().int(),
      turnTimeMs: z.number(),
      runningTurns: z.record(z.string(), z.string()),
      quotaLow: z.array(z.string()),
    })
    .optional(),
  /** Limits changed by `limit.changed` (over the binding's budgets, from the moment recorded; null: unbounded). */
  limits: LimitOverridesSchema.optional(),
  /** The provider rate limits the session's calls met (`rate_limit.hit`): how many, and the last one. */
  rateLimits: z
    .object({
      hits: z.number().int(),
      last: z.object({
        modelId: z.string(),
        provider: z.string(),
        at: z.string(),
        turnId: z.string().optional(),
        retryAfterMs: z.number().optional(),
        /** Set when OAR's own limit held the call back (not the provider): which limits, and why. */
        enforcedBy: z.string().optional(),
        reason: z.string().optional(),
      }),
    })
    .optional(),
  /**
   * The evidence facts (absent until the first): the exports recorded (`evidence.changed`, newest last, at most
   * MAX_EVIDENCE_EXPORTS) and, by thread id ('' for facts of no thread), what the audit notes count.
   */
  evidence: z
    .object({
      exports: z.array(EvidenceExportSchema),
      exportCount: z.number().int(),
      audit: z.record(z.string(), EvidenceAuditSchema),
    })
    .optional(),
  /** Grants from approve_for_session: the permission policy allows matching calls for the rest of the session. */
  grants: z.array(SessionGrantSchema),
  /** Session-scoped state set through the control plane (`setState`), key → JSON value. */
  state: z.record(z.string(), z.unknown()),
  /** The content hash of the current binding (sessions created before bindings have none). */
  bindingHash: z.string().optional(),
  /**
   * Every binding the session has had, by hash: a running turn keeps the one it started with. Only a type: a
   * binding is validated when it is written and this schema never parses, while naming the binding's schema here
   * would make every reader of a read model (the control plane among them) load every binding schema.
   */
  bindings: z.record(z.string(), z.custom<SessionBinding>()).optional(),
  lastSequence: z.number().int(),
});
export type SessionState = z.infer<typeof SessionStateSchema>;

type BudgetCounts = NonNullable<SessionState['budget']>;
const EMPTY_BUDGET: BudgetCounts = { modelCalls: 0, turnTimeMs: 0, runningTurns: {}, quotaLow: [] };

/** Budget counts after a change (the counts are created by the first change). */
/** `next`, this reduction's own copy of the session, with its budget counts changed (on it: no second copy). */
function counted(next: SessionState, change: (budget: BudgetCounts) => BudgetCounts): SessionState {
  next.budget = change(next.budget ?? EMPTY_BUDGET);
  return next;
}

/** A turn ended: its time joins the session's, it is no longer running. */
function turnEnded(state: SessionState, event: RuntimeEvent): SessionState {
  const startedAt = state.budget?.runningTurns[event.turnId ?? ''];
  if (startedAt === undefined || !event.turnId) return state;
  const { [event.turnId]: _ended, ...runningTurns } = state.budget?.runningTurns ?? {};
  const elapsed = Math.max(0, Date.parse(event.timestamp) - Date.parse(startedAt));
  return counted(state, (b) => ({ ...b, runningTurns, turnTimeMs: b.turnTimeMs + elapsed }));
}

type Payload = Record<string, unknown>;

export function reduceSession(state: SessionState | undefined, event: RuntimeEvent): SessionState | undefined {
  const payload = (event.payload ?? {}) as Payload;
  if (event.type === 'session.created') {
    return {
      sessionId: event.sessionId,
      runtimeId: event.runtimeId,
      ...(typeof payload.title === 'string' ? { title: payload.title } : {}),
      ...(typeof payload.workspaceId === 'string' ? { workspaceId: payload.workspaceId } : {}),
      ...(typeof payload.actor === 'string' ? { actor: payload.actor } : {}),
      createdAt: event.timestamp,
      updatedAt: event.timestamp,
      threadIds: [],
      usage: { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
      grants: [],
      state: {},
      ...withBinding({}, payload),
      lastSequence: event.sequence,
    };
  }
  if (!state) return state;
  const next = { ...state, updatedAt: event.timestamp, lastSequence: event.sequence };
  return sessionChange(event.type)?.(next, event, payload) ?? next;
}

/**
 * What each event type changes of the session, given `next`: this reduction's own copy with the event's clock
 * (`updatedAt`, `lastSequence`). An event of any other type only moves the clock (`ticksSessionClock`).
 */
const SESSION_CHANGES: Partial<
  Record<string, (next: SessionState, event: RuntimeEvent, payload: Payload) => SessionState>
> = {
  'session.updated': (next, _event, payload) =>
    withState(
      {
        ...next,
        ...(typeof payload.title === 'string' ? { title: payload.title } : {}),
        ...withBinding(next, payload),
      },
      payload,
    ),
  'thread.started': (next, { threadId }) =>
    !threadId || next.threadIds.includes(threadId) ? next : { ...next, threadIds: [...next.threadIds, threadId] },
  'turn.started': (next, event) =>
    event.turnId
      ? counted(next, (b) => ({
          ...b,
          runningTurns: { ...b.runningTurns, [event.turnId as string]: event.timestamp },
        }))
      : next,
  'turn.completed': (next, event) => turnEnded(next, event),
  'turn.failed': (next, event) => turnEnded(next, event),
  'model.failed': (next) => counted(next, (b) => ({ ...b, modelCalls: b.modelCalls + 1 })),
  'quota.low': (next, _event, payload) =>
    payload.scope === 'session' && typeof payload.key === 'string'
      ? counted(next, (b) => ({ ...b, quotaLow: [...b.quotaLow, payload.key as string] }))
      : next,
  'rate_limit.hit': (next, event, payload) => ({
    ...next,
    rateLimits: {
      hits: (next.rateLimits?.hits ?? 0) + 1,
      last: {
        modelId: String(payload.modelId),
        provider: String(payload.provider),
        at: event.timestamp,
        ...(event.turnId ? { turnId: event.turnId } : {}),
        ...(typeof payload.retryAfterMs === 'number' ? { retryAfterMs: payload.retryAfterMs } : {}),
        ...(typeof payload.enforcedBy === 'string' ? { enforcedBy: payload.enforcedBy } : {}),
        ...(typeof payload.reason === 'string' ? { reason: payload.reason } : {}),
      },
    },
  }),
  'limit.changed': (next, _event, payload) => {
    const limits = LimitOverridesSchema.safeParse(payload.limits);
    return limits.success ? { ...next, limits: limits.data } : next;
  },
  'model.completed': (next, _event, payload) => {
    const usage = payload.usage as Partial<Record<keyof SessionState['usage'], number>>;
    const input = usage.inputTokens ?? 0;
    const output = usage.outputTokens ?? 0;
    const total = next.usage;
    // An optional count joins the totals the first time a call reports it.
    const plus = (key: 'cachedInputTokens' | 'cacheWriteTokens' | 'reasoningTokens') =>
      typeof usage[key] === 'number' ? { [key]: (total[key] ?? 0) + usage[key] } : {};
    const counts = counted(next, (b) => ({ ...b, modelCalls: b.modelCalls + 1 }));
    counts.usage = {
      ...total,
      inputTokens: total.inputTokens + input,
      outputTokens: total.outputTokens + output,
      totalTokens: total.totalTokens + (usage.totalTokens ?? input + output),
      ...plus('cachedInputTokens'),
      ...plus('cacheWriteTokens'),
      ...plus('reasoningTokens'),
    };
    return counts;
  },
  'routing.single_candidate': (next, _event, payload) => routed(next, payload),
  'routing.decided': (next, _event, payload) => routed(next, payload),
  'cost.recorded': (next, _event, payload) => {
    const amount = typeof payload.amount === 'number' ? payload.amount : 0;
    const cost = next.cost ?? { currency: 'USD' as const, amount: 0, pricedCalls: 0 };
    // Summed in micro-dollars, so a long session's total does not drift by float error.
    const total = Math.round((cost.amount + amount) * 1e6) / 1e6;
    next.cost = { currency: 'USD', amount: total, pricedCalls: cost.pricedCalls + 1 };
    return next;
  },
  'routing.fallback.applied': (next, _event, payload) => {
    // The model that answers now; the decision that chose the first one stays in the log.
    const fallback = {
      from: String(payload.from),
      to: String(payload.to),
      trigger: String(payload.trigger),
      attempts: typeof payload.attempts === 'number' ? payload.attempts : 1,
    };
    return {
      ...next,
      routing: {
        candidateCount: next.routing?.candidateCount ?? 1,
        ...next.routing,
        selectedModel: fallback.to,
        ...(typeof payload.toProvider === 'string' ? { provider: payload.toProvider } : {}),
        fallback,
      },
    };
  },
  'evidence.changed': exported,
  'action.resolved': (next, event, payload) =>
    audited(next, event, (audit) => {
      const key = `${String(payload.decision ?? 'unknown')} by ${typeof payload.resolvedBy === 'string' ? payload.resolvedBy : 'user'}`;
      const decisions = {
        ...audit.decisions,
        [key]: (Object.hasOwn(audit.decisions, key) ? (audit.decisions[key] ?? 0) : 0) + 1,
      };
      return { ...audit, decisions };
    }),
  'sandbox.violation': (next, event) =>
    audited(next, event, (a) => ({ ...a, sandboxViolations: a.sandboxViolations + 1 })),
  'output.redacted': (next, event, payload) =>
    typeof payload.count === 'number' && payload.count > 0
      ? audited(next, event, (a) => ({ ...a, redactions: a.redactions + (payload.count as number) }))
      : next,
  'permission.resolved': (next, _event, payload) => {
    const grant = SessionGrantSchema.safeParse(payload.grant);
    if (payload.grantScope !== 'session' || !grant.success) return next;
    return { ...next, grants: [...next.grants, grant.data] };
  },
};

const EMPTY_EVIDENCE: NonNullable<SessionState['evidence']> = { exports: [], exportCount: 0, audit: {} };
const EMPTY_AUDIT: EvidenceAudit = { decisions: {}, sandboxViolations: 0, redactions: 0 };
/** The export kinds of `evidence.changed` (`evidence_pack`: what logs written before called an evidence export). */
const EXPORT_KINDS = new Map<unknown, EvidenceExport['kind']>([
  ['evidence', 'evidence'],
  ['evidence_pack', 'evidence'],
  ['replay', 'replay'],
  ['review', 'review'],
]);

/** An export recorded (`evidence.changed` of a known kind): listed, newest last. Other evidence facts change nothing. */
function exported(next: SessionState, event: RuntimeEvent, payload: Payload): SessionState {
  const kind = EXPORT_KINDS.get(payload.kind);
  if (!kind || !event.evidenceId) return next;
  const scope = (payload.scope ?? {}) as Payload;
  // An export of another session (a fork copies its source's history, exports included) is not this one's.
  if (typeof scope.sessionId === 'string' && scope.sessionId !== event.sessionId) return next;
  const text = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);
  const optional = { threadId: scope.threadId, turnId: scope.turnId, taskId: scope.taskId, digest: payload.digest };
  const entry: EvidenceExport = {
    kind,
    exportId: event.evidenceId,
    ref: text(payload.ref) ?? `runtime://${kind}/${event.evidenceId}`,
    sequence: event.sequence,
    at: event.timestamp,
    ...Object.fromEntries(Object.entries(optional).filter(([, v]) => text(v) !== undefined)),
    ...(typeof payload.throughSequence === 'number' ? { throughSequence: payload.throughSequence } : {}),
  };
  const evidence = next.evidence ?? EMPTY_EVIDENCE;
  next.evidence = {
    ...evidence,
    exports: [...evidence.exports, entry].slice(-MAX_EVIDENCE_EXPORTS),
    exportCount: evidence.exportCount + 1,
  };
  return next;
}

/** `next` with the audit counts of the event's thread changed. */
function audited(next: SessionState, event: RuntimeEvent, change: (audit: EvidenceAudit) => EvidenceAudit) {
  const evidence = next.evidence ?? EMPTY_EVIDENCE;
  const key = event.threadId ?? '';
  const audit = Object.hasOwn(evidence.audit, key) ? (evidence.audit[key] as EvidenceAudit) : EMPTY_AUDIT;
  next.evidence = { ...evidence, audit: { ...evidence.audit, [key]: change(audit) } };
  return next;
}

/** The model the router chose (routing.decided, or the only candidate). */
function routed(next: SessionState, payload: Payload): SessionState {
  return {
    ...next,
    routing: {
      selectedModel: String(payload.selectedModel),
      ...(typeof payload.provider === 'string' ? { provider: payload.provider } : {}),
      candidateCount: typeof payload.candidateCount === 'number' ? payload.candidateCount : 1,
      ...(typeof payload.reason === 'string' ? { reason: payload.reason } : {}),
      ...(typeof payload.capabilityGap === 'string' ? { capabilityGap: payload.capabilityGap } : {}),
    },
  };
}

/** The change an event type makes; own entries only, so no event type can name an Object method. */
function sessionChange(type: string) {
  return Object.hasOwn(SESSION_CHANGES, type) ? SESSION_CHANGES[type] : undefined;
}

/** Whether an event changes nothing of the session but its clock: replay sets the clock once, from the last one. */
export function ticksSessionClock(event: RuntimeEvent): boolean {
  return event.type !== 'session.created' && sessionChange(event.type) === undefined;
}

/** A binding carried by session.created / session.updated (`binding` + `bindingHash`) becomes the current one. */
function withBinding(
  state: Pick<SessionState, 'bindings'>,
  payload: Payload,
): Pick<SessionState, 'bindingHash' | 'bindings'> {
  if (typeof payload.bindingHash !== 'string' || !payload.binding) return {};
  return {
    bindingHash: payload.bindingHash,
    bindings: { ...(state.bindings ?? {}), [payload.bindingHash]: payload.binding as SessionBinding },
  };
}

/** The binding a turn runs with: the one current when it started, else the session's current one. */
export function bindingOf(session: SessionState, hash?: string): SessionBinding | undefined {
  const key = hash ?? session.bindingHash;
  return key ? session.bindings?.[key] : undefined;
}

/** Apply a `state` change carried by a session.updated / thread.updated payload: `{key, value}`; null deletes. */
export function withState<T extends { state: Record<string, unknown> }>(model: T, payload: Record<string, unknown>): T {
  const change = payload.state as { key?: unknown; value?: unknown } | undefined;
  if (!change || typeof change.key !== 'string') return model;
  const { [change.key]: _previous, ...rest } = model.state;
  return { ...model, state: change.value === null ? rest : { ...rest, [change.key]: change.value } };
}
