import type { AgentApiErrorCode, AgentRunnerCapabilities } from '@oar/runner-sdk';
import { PeerError } from '@oar/runner-sdk';
import type { EventDraft } from '../log/draft.js';
import type { ThreadView } from '../read-models/thread-state.js';
import type { AgentConfig, Engine } from '../scheduler/engine.js';
import type { RunAccess } from './access.js';

/** What a runner may ask a person to decide: a tool call's approval, or a platform action. */
export type RunnerAskType = 'tool_approval' | 'platform_action';

/** An open question, as its closing facts need it. */
export interface OpenDecision {
  actionId: string;
  actionType: RunnerAskType;
  toolName: string;
  toolCallId?: string;
}

/** The correlation ids of everything a runner run records: it is one task attempt of the turn. */
export interface RunnerRunIds {
  threadId: string;
  turnId: string;
  taskId: string;
  runId: string;
}

/**
 * The host's side of one active run: what the connection it was started on may do, until it ends. Created when
 * the run starts, bound to that connection (the caller's identity is the connection, never a field of a message),
 * and ended on every exit path — after `end()` every proxy call is refused.
 */
export class RunSession {
  private ended = false;
  /** Model calls this run made so far: with the thread's count before, the scripted model's cursor. */
  modelCalls = 0;
  /** Proxy tool calls, by the runner-visible call id: a `tool.call.*` result naming one is linked, not counted again. */
  readonly proxyToolCalls = new Set<string>();
  /** Artifacts this run stored (tool outputs, artifact.created results). */
  readonly artifactIds = new Set<string>();
  /** Decisions this run asked for that have no answer yet (agent-runners/decisions.ts): closed when the run ends. */
  readonly openDecisions = new Map<string, OpenDecision>();
  /** Platform actions requested by `action.requested` results, still waiting for their decision (and its facts). */
  readonly requestedActions = new Set<Promise<unknown>>();
  /** An `action.requested` decision was still open at the deadline: the run ends `runner_timeout`. */
  requestedActionTimedOut = false;
  private readonly callTimes: number[] = [];
  /**
   * The manifest's capabilities, set by the host once the manifest is read: a result they do not declare (a
   * `message.delta` without `streaming`…) is ignored with a warning, never applied (results.ts).
   */
  capabilities: Partial<AgentRunnerCapabilities> = {};

  constructor(
    readonly engine: Engine,
    readonly thread: ThreadView,
    readonly agent: AgentConfig,
    readonly runnerId: string,
    readonly ids: RunnerRunIds,
    readonly access: RunAccess,
    /** Milliseconds since the epoch. */
    readonly deadlineAt: number,
    /** Aborted by an interrupt, the deadline or the run's end: every call in flight stops with it. */
    readonly signal: AbortSignal,
  ) {}

  get sessionId(): string {
    return this.thread.sessionId;
  }

  get active(): boolean {
    return !this.ended;
  }

  end(): void {
    this.ended = true;
  }

  /** One more call within the per-minute limit? (a sliding window of the last minute) */
  admit(now = Date.now()): boolean {
    while (this.callTimes.length && (this.callTimes[0] as number) <= now - 60_000) this.callTimes.shift();
    if (this.callTimes.length >= this.access.callsPerMinute) return false;
    this.callTimes.push(now);
    return true;
  }

  /** Record facts of this run (staged like every fact of the driven thread). */
  record(drafts: EventDraft[], durable = false): Promise<void> {
    return this.engine.append(this.sessionId, drafts, durable ? { durable: true } : {});
  }
}

/** A refusal or failure in the spec's AgentAPIError shape, with exactly its codes. */
export function apiError(
  code: AgentApiErrorCode,
  message: string,
  details: Record<string, unknown> = {},
  retryable = false,
): PeerError {
  return new PeerError({ code, message, retryable, details });
}

/** A `run.status` about the runner run (its start, access, tool facts, end). */
export function runnerStatus(
  session: Pick<RunSession, 'ids' | 'runnerId'>,
  title: string,
  runner: Record<string, unknown>,
): EventDraft {
  const { phase, ...rest } = runner;
  return {
    type: 'run.status',
    ...session.ids,
    payload: { phase, title, runner: { runId: session.ids.runId, runnerId: session.runnerId, ...rest } },
  };
}

/** What one proxy call touched, for its audit event: the resource (a model, tool, artifact…) and the scope. */
export interface AuditTarget {
  resource?: string;
  scope?: string;
}
