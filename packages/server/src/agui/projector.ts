import {
  type AGUIEvent,
  EventType,
  type Interrupt,
  PROTOCOL_VERSION,
  type RunFinishedOutcome,
  type TokenUsage,
} from '@ag-ui/core';
import {
  AGENT_PROTOCOL_TOOL_NAME,
  type OarError,
  PartialJsonStringField,
  RECONCILE_ACTION_TYPE,
  type RuntimeEvent,
  uiSchemaOfToolAgentOutput,
} from '@oar/protocol';
import { type PendingDecisionFacts, toInterrupt } from './interrupts.js';

/**
 * The projection of one OAR turn onto one AG-UI 1.0 run: a pure, synchronous state machine fed the session's
 * events in order (durable events and live `model.delta`s), answering the AG-UI events each one means. It keeps to
 * the turn's tree — the main thread's turn and the child threads its delegations spawned — and owns the run's
 * bracketing rules (a message, a step, a sub-agent is closed before the run ends), so the stream it produces is
 * exactly what `@ag-ui/client`'s verifier accepts. The state events and the decision of when a waiting turn is an
 * interrupt belong to the caller (they need the store); see stream.ts.
 *
 * | OAR | AG-UI |
 * |---|---|
 * | `model.delta` (text, and the `message` of a streamed `AgentProtocolOutput` call) | TEXT_MESSAGE_START / CONTENT |
 * | `model.delta` channel `reasoning`, `reasoning.delta` (when a model streams reasoning) | REASONING_START, REASONING_MESSAGE_START / CONTENT (ended with the call) |
 * | `model.completed` (the rest of the call's text) / `model.failed` | TEXT_MESSAGE_CONTENT / END |
 * | `run.status` `declared` | STEP_STARTED (stepName = the graph's run id), then per action TOOL_CALL_START / ARGS / END |
 * | `tool.result`, `tool.failed`, `subagent.completed`/`failed`, `run.status` `action` (an action's end) | TOOL_CALL_RESULT (with `metadata.oar.ui_schema` when the call's `toolAgentOutput` has UI hints) |
 * | `run.status` `observed` / `cancelled`, `task.completed`/`failed`/`cancelled` | STEP_FINISHED |
 * | `subagent.spawned` / `completed` / `failed` / `closed` | SUBAGENT_STARTED / FINISHED / ERROR |
 * | `action.required` (not resolved when the turn settles) | an interrupt of RUN_FINISHED `outcome.interrupt` |
 * | `turn.completed` | the answer (TEXT_MESSAGE_*, unless it already streamed), RUN_FINISHED `success` |
 * | `turn.failed` `cancelled`, a queued turn removed | RUN_FINISHED `cancelled` |
 * | `turn.failed` | RUN_ERROR (`code` = the OAR error code, `rawEvent.error` = the structured error) |
 */

export interface ProjectorOptions {
  /** The AG-UI thread id (echoed on RUN_STARTED / RUN_FINISHED) and run id. */
  threadId: string;
  runId: string;
  mainThreadId: string;
  /** The turn the run follows (its tree: the main thread's turn and its delegations). */
  turnId: string;
  /** Emit SUBAGENT_* lifecycle events (clients older than AG-UI 1.0 reject them); attribution is always on. */
  subagentEvents: boolean;
}

/** How the turn ended, as far as the events tell. */
export type TurnEnd =
  | { kind: 'success'; answer?: string }
  | { kind: 'cancelled'; reason?: string }
  | { kind: 'error'; error: OarError };

/** A sub-agent whose child thread belongs to the run's tree. */
export interface KnownSubagent {
  subagentId: string;
  childThreadId: string;
  agent: string;
  /** The thread that spawned it. */
  parentThreadId: string;
  objective?: string;
  status?: string;
}

interface ModelCall {
  messageId: string;
  started: boolean;
  /** The call's reasoning, when the model streams it (`reasoning_<sequence>`): opened on its first piece. */
  reasoning?: { messageId: string; text: string };
  /** Text sent so far. */
  text: string;
  /** Readers of streamed `AgentProtocolOutput` arguments, per tool call id. */
  readers: Map<string, PartialJsonStringField>;
}

interface MemberThread {
  /** The sub-agent invocation the thread is (absent: the main thread). */
  subagentRunId?: string;
}

type Payload = Record<string, unknown>;
const str = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);

const ENDED_STEP_PHASES = new Set(['observed', 'cancelled', 'planned']);
const ENDED_TASK_TYPES = new Set(['task.completed', 'task.failed', 'task.cancelled', 'task.timed_out']);

export class AguiProjector {
  private readonly threads = new Map<string, MemberThread>();
  private readonly calls = new Map<string, ModelCall>();
  /** Per thread: the message of its last model call, which holds the tool calls of the graph it declared. */
  private readonly lastMessage = new Map<string, string>();
  /** Messages started in this run (id → owner), and the texts they carried. */
  private readonly startedMessages = new Set<string>();
  private readonly texts: string[] = [];
  private readonly openSteps = new Map<string, string | undefined>();
  private readonly closedSteps = new Set<string>();
  private readonly resulted = new Set<string>();
  private readonly activeSubagents = new Set<string>();
  private readonly closedSubagents = new Set<string>();
  private readonly pending = new Map<string, PendingDecisionFacts>();
  private readonly usage = new Map<string, TokenUsage>();
  private finished = false;
  /** Set once the turn's end has been seen. */
  end: TurnEnd | undefined;

  constructor(private readonly options: ProjectorOptions) {
    this.threads.set(options.mainThreadId, {});
  }

  runStarted(): AGUIEvent[] {
    return [runStartedEvent(this.options.threadId, this.options.runId)];
  }

  /**
   * Sub-agents already running when the run starts (a resumed run): their threads belong to the tree, and each is
   * announced again with its invocation id — a continuation, as AG-UI 1.0 asks for a suspended sub-agent.
   */
  adopt(subagents: KnownSubagent[]): AGUIEvent[] {
    const out: AGUIEvent[] = [];
    const byParent = new Map<string, KnownSubagent[]>();
    for (const s of subagents) byParent.set(s.parentThreadId, [...(byParent.get(s.parentThreadId) ?? []), s]);
    const visit = (threadId: string) => {
      for (const s of byParent.get(threadId) ?? []) {
        if (this.threads.has(s.childThreadId)) continue;
        const parent = this.threads.get(threadId);
        this.threads.set(s.childThreadId, { subagentRunId: s.subagentId });
        if (s.status === undefined || s.status === 'running')
          out.push(...this.subagentStarted(s, parent?.subagentRunId));
        visit(s.childThreadId);
      }
    };
    visit(this.options.mainThreadId);
    return out;
  }

  /** Decisions pending in the run's tree, in the order they were asked. */
  get pendingDecisions(): PendingDecisionFacts[] {
    return [...this.pending.values()];
  }

  /** Whether the event belongs to the run's turn tree. */
  private member(event: RuntimeEvent): MemberThread | undefined {
    const threadId = event.threadId;
    if (threadId === undefined) return undefined;
    const thread = this.threads.get(threadId);
    if (!thread) return undefined;
    if (threadId === this.options.mainThreadId && event.turnId !== this.options.turnId) return undefined;
    return thread;
  }

  push(event: RuntimeEvent): AGUIEvent[] {
    if (this.finished) return [];
    // A queued turn removed before it ran: the run is cancelled.
    if (
      event.type === 'queue.changed' &&
      event.threadId === this.options.mainThreadId &&
      (event.payload as Payload).change === 'removed' &&
      (event.payload as Payload).queuedTurnId === this.options.turnId
    ) {
      this.end = { kind: 'cancelled', reason: 'the queued turn was removed' };
      return [];
    }
    const thread = this.member(event);
    if (!thread) return [];
    const owner = thread.subagentRunId;
    const threadId = event.threadId as string;
    const payload = (event.payload ?? {}) as Payload;
    const out: AGUIEvent[] = [];
    // Every event of a graph run (after the first, the STEP_STARTED of its declaration) happens inside its step.
    const runId = str(event.runId);
    if (runId && !ENDED_TASK_TYPES.has(event.type) && !(event.type === 'run.status' && payload.phase === 'planned')) {
      out.push(...this.openStep(runId, owner, str(payload.title)));
    }
    switch (event.type) {
      case 'model.requested':
        if (payload.purpose !== 'compaction') {
          this.calls.set(threadId, this.newCall(event.sequence));
          this.lastMessage.delete(threadId);
        }
        break;
      case 'model.delta':
      case 'reasoning.delta':
        out.push(...this.delta(event, threadId, owner, payload));
        break;
      case 'model.completed':
      case 'model.failed': {
        if (payload.purpose === 'compaction') break;
        const call = this.calls.get(threadId);
        if (event.type === 'model.completed') {
          const finalText = visibleText(payload.output);
          const base = call ?? this.newCall(event.sequence);
          if (finalText.length > base.text.length && finalText.startsWith(base.text)) {
            out.push(...this.text(base, finalText.slice(base.text.length), owner));
          }
          if (call === undefined && base.started) this.calls.set(threadId, base);
        }
        out.push(...this.closeCall(threadId, owner));
        break;
      }
      case 'run.status':
        out.push(...this.runStatus(event, payload, owner, threadId));
        break;
      case 'tool.result':
      case 'tool.failed':
      case 'subagent.completed':
      case 'subagent.failed':
        out.push(...this.result(event, payload, owner));
        if (event.type.startsWith('subagent.')) out.push(...this.subagentEnded(event, payload));
        break;
      case 'subagent.closed':
        out.push(...this.subagentEnded(event, payload));
        break;
      case 'subagent.spawned': {
        const childThreadId = str(payload.childThreadId);
        if (!childThreadId || !event.subagentId) break;
        this.threads.set(childThreadId, { subagentRunId: event.subagentId });
        out.push(
          ...this.subagentStarted(
            {
              subagentId: event.subagentId,
              childThreadId,
              agent: str(payload.agentName) ?? 'agent',
              parentThreadId: threadId,
              ...(str(payload.objective) ? { objective: str(payload.objective) } : {}),
              ...(runId && str(payload.graphActionId) ? { toolCallId: `${runId}.${str(payload.graphActionId)}` } : {}),
            } as KnownSubagent & { toolCallId?: string },
            owner,
          ),
        );
        break;
      }
      case 'action.required':
        // Whether a lost call took effect is asked after the fact: it pauses nothing, so it is no interrupt of a run
        // (a resume may still answer it: stream.ts).
        if (payload.actionType === RECONCILE_ACTION_TYPE) break;
        this.pending.set(event.actionId, {
          actionId: event.actionId,
          actionType: str(payload.actionType) ?? 'tool_approval',
          threadId,
          ...(event.turnId ? { turnId: event.turnId } : {}),
          ...(runId ? { runId } : {}),
          ...(str(payload.graphActionId) ? { graphActionId: str(payload.graphActionId) } : {}),
          ...(str(event.toolCallId) ? { toolCallId: str(event.toolCallId) } : {}),
          ...(str(payload.toolName) ? { toolName: str(payload.toolName) } : {}),
          ...(str(payload.prompt) ? { prompt: str(payload.prompt) } : {}),
          ...(str(payload.decisionKind) ? { decisionKind: str(payload.decisionKind) } : {}),
          ...(Array.isArray(payload.decisions) ? { decisions: payload.decisions.map(String) } : {}),
          ...(isRecord(payload.inputSchema) ? { inputSchema: payload.inputSchema } : {}),
          ...(str(payload.expiresAt) ? { expiresAt: str(payload.expiresAt) } : {}),
          ...(owner !== undefined ? { subagentRunId: owner } : {}),
        });
        break;
      case 'action.resolved':
        this.pending.delete(event.actionId);
        break;
      case 'task.completed':
      case 'task.failed':
      case 'task.cancelled':
      case 'task.timed_out':
        if (runId) out.push(...this.closeStep(runId));
        break;
      case 'turn.completed':
        if (threadId === this.options.mainThreadId) {
          const answer = str(payload.answer);
          out.push(...this.closeAllCalls());
          if (answer !== undefined && !this.texts.includes(answer)) {
            const call = this.newCall(event.sequence);
            out.push(...this.text(call, answer, undefined), ...this.endMessage(call, undefined));
          }
          this.end = { kind: 'success', ...(answer !== undefined ? { answer } : {}) };
        }
        break;
      case 'turn.failed':
        if (threadId === this.options.mainThreadId) {
          const error = toError(payload.error);
          this.end =
            event.status === 'cancelled' ? { kind: 'cancelled', reason: error.message } : { kind: 'error', error };
        }
        break;
    }
    if (event.type === 'model.completed') this.addUsage(payload);
    return out;
  }

  // ---- text ---------------------------------------------------------------------------------------------------

  private newCall(sequence: number): ModelCall {
    return { messageId: `msg_${sequence}`, started: false, text: '', readers: new Map() };
  }

  private delta(event: RuntimeEvent, threadId: string, owner: string | undefined, payload: Payload): AGUIEvent[] {
    const delta = payload.delta;
    if (typeof delta !== 'string') return [];
    let call = this.calls.get(threadId);
    if (!call) {
      call = this.newCall(event.sequence);
      this.calls.set(threadId, call);
    }
    if (event.type === 'reasoning.delta' || payload.channel === 'reasoning') return this.reasoning(call, delta, owner);
    let piece = '';
    if (payload.channel === 'text') piece = delta;
    else if (payload.channel === 'tool_call' && payload.toolName === AGENT_PROTOCOL_TOOL_NAME) {
      const key = event.toolCallId ?? '';
      let reader = call.readers.get(key);
      if (!reader) {
        reader = new PartialJsonStringField('message');
        call.readers.set(key, reader);
      }
      piece = reader.push(delta);
    }
    return piece === '' ? [] : this.text(call, piece, owner);
  }

  private text(call: ModelCall, piece: string, owner: string | undefined): AGUIEvent[] {
    const out: AGUIEvent[] = [];
    if (!call.started) {
      call.started = true;
      this.startedMessages.add(call.messageId);
      out.push({
        type: EventType.TEXT_MESSAGE_START,
        messageId: call.messageId,
        role: 'assistant',
        ...attribution(owner),
      });
    }
    call.text += piece;
    out.push({ type: EventType.TEXT_MESSAGE_CONTENT, messageId: call.messageId, delta: piece, ...attribution(owner) });
    return out;
  }

  /** A piece of streamed reasoning: REASONING_START and REASONING_MESSAGE_START on the first, then CONTENT. */
  private reasoning(call: ModelCall, piece: string, owner: string | undefined): AGUIEvent[] {
    if (piece === '') return [];
    const out: AGUIEvent[] = [];
    if (!call.reasoning) {
      call.reasoning = { messageId: call.messageId.replace(/^msg_/, 'reasoning_'), text: '' };
      const messageId = call.reasoning.messageId;
      out.push(
        { type: EventType.REASONING_START, messageId, ...attribution(owner) },
        { type: EventType.REASONING_MESSAGE_START, messageId, role: 'reasoning', ...attribution(owner) },
      );
    }
    call.reasoning.text += piece;
    out.push({
      type: EventType.REASONING_MESSAGE_CONTENT,
      messageId: call.reasoning.messageId,
      delta: piece,
      ...attribution(owner),
    });
    return out;
  }

  private endMessage(call: ModelCall, owner: string | undefined): AGUIEvent[] {
    const out: AGUIEvent[] = [];
    if (call.reasoning) {
      const messageId = call.reasoning.messageId;
      call.reasoning = undefined;
      out.push(
        { type: EventType.REASONING_MESSAGE_END, messageId, ...attribution(owner) },
        { type: EventType.REASONING_END, messageId, ...attribution(owner) },
      );
    }
    if (!call.started) return out;
    this.texts.push(call.text);
    out.push({ type: EventType.TEXT_MESSAGE_END, messageId: call.messageId, ...attribution(owner) });
    return out;
  }

  private closeCall(threadId: string, owner: string | undefined): AGUIEvent[] {
    const call = this.calls.get(threadId);
    this.calls.delete(threadId);
    if (call?.started) this.lastMessage.set(threadId, call.messageId);
    return call ? this.endMessage(call, owner) : [];
  }

  private closeAllCalls(): AGUIEvent[] {
    return [...this.calls.keys()].flatMap((threadId) =>
      this.closeCall(threadId, this.threads.get(threadId)?.subagentRunId),
    );
  }

  // ---- graphs, actions, sub-agents ------------------------------------------------------------------------------

  private openStep(runId: string, owner: string | undefined, title: string | undefined): AGUIEvent[] {
    if (this.openSteps.has(runId) || this.closedSteps.has(runId)) return [];
    this.openSteps.set(runId, owner);
    return [
      {
        type: EventType.STEP_STARTED,
        stepName: runId,
        ...attribution(owner),
        metadata: { oar: { runId, ...(title ? { title } : {}) } },
      },
    ];
  }

  private closeStep(runId: string): AGUIEvent[] {
    if (!this.openSteps.has(runId)) return [];
    const owner = this.openSteps.get(runId);
    this.openSteps.delete(runId);
    this.closedSteps.add(runId);
    return [{ type: EventType.STEP_FINISHED, stepName: runId, ...attribution(owner) }];
  }

  private runStatus(event: RuntimeEvent, payload: Payload, owner: string | undefined, threadId: string): AGUIEvent[] {
    const runId = str(event.runId);
    if (!runId) return [];
    const phase = str(payload.phase) ?? str(event.phase);
    if (phase === 'declared') {
      const declaration = payload.declaration as { actions?: unknown } | undefined;
      const actions = Array.isArray(declaration?.actions) ? (declaration.actions as DeclaredAction[]) : [];
      const call = this.calls.get(threadId);
      const lastMessage = call?.started ? call.messageId : this.lastMessage.get(threadId);
      return actions.flatMap((action) => {
        if (typeof action?.id !== 'string') return [];
        const toolCallId = `${runId}.${action.id}`;
        const name = action.executor?.target ?? action.executor?.type ?? 'action';
        return [
          {
            type: EventType.TOOL_CALL_START,
            toolCallId,
            toolCallName: name,
            ...(lastMessage ? { parentMessageId: lastMessage } : {}),
            ...attribution(owner),
            metadata: { oar: { runId, actionId: action.id, executor: action.executor?.type ?? 'tool' } },
          },
          {
            type: EventType.TOOL_CALL_ARGS,
            toolCallId,
            delta: JSON.stringify(action.input ?? {}),
            ...attribution(owner),
          },
          { type: EventType.TOOL_CALL_END, toolCallId, ...attribution(owner) },
        ] satisfies AGUIEvent[];
      });
    }
    if (phase === 'action') return this.result(event, payload, owner);
    if (phase && ENDED_STEP_PHASES.has(phase)) return this.closeStep(runId);
    return [];
  }

  /** An action ended (its observation is recorded): TOOL_CALL_RESULT, once per action. */
  private result(event: RuntimeEvent, payload: Payload, owner: string | undefined): AGUIEvent[] {
    const runId = str(event.runId);
    const actionId = str(payload.graphActionId);
    const observation = payload.observation as Payload | undefined;
    if (!runId || !actionId || !isRecord(observation)) return [];
    const toolCallId = `${runId}.${actionId}`;
    if (this.resulted.has(toolCallId)) return [];
    this.resulted.add(toolCallId);
    const status = str(observation.status) ?? 'completed';
    const body =
      typeof observation.content === 'string'
        ? observation.content
        : typeof observation.summary === 'string'
          ? observation.summary
          : JSON.stringify(observation);
    const error = isRecord(observation.error) ? str(observation.error.message) : undefined;
    const content = status === 'completed' ? body : `[${status}] ${error ?? body}`;
    // Tool UI (Agent Tool Protocol §10): `ui_schema`, compiled now from the call's stored UI hints, rides on the
    // result's `metadata.oar.ui_schema`. Not a top-level field: ToolCallResultEvent's schema is loose, but its type is
    // closed and a top-level name could collide with a future protocol field; and not `rawEvent`, which AG-UI defines
    // as the provider-native event this one was translated from. `metadata` is AG-UI's open-by-key slot for extra
    // information, already namespaced `oar` here, and `@ag-ui/client` merges an event's metadata into the tool
    // message it builds, so the UI reaches `agent.messages` too. `content` stays the string observation; the hints
    // themselves never leave the server, and no other event (TEXT_MESSAGE_END included) carries UI.
    const uiSchema = uiSchemaOfToolAgentOutput(payload.toolAgentOutput);
    return [
      {
        type: EventType.TOOL_CALL_RESULT,
        messageId: `${toolCallId}.result`,
        toolCallId,
        content,
        role: 'tool',
        ...attribution(owner),
        metadata: {
          oar: {
            status,
            ...(Array.isArray(observation.artifacts) ? { artifacts: observation.artifacts } : {}),
            ...(uiSchema ? { ui_schema: uiSchema } : {}),
          },
        },
      },
    ];
  }

  private subagentStarted(
    s: KnownSubagent & { toolCallId?: string },
    parentSubagentRunId: string | undefined,
  ): AGUIEvent[] {
    if (!this.options.subagentEvents || this.activeSubagents.has(s.subagentId)) return [];
    if (this.closedSubagents.has(s.subagentId)) return [];
    this.activeSubagents.add(s.subagentId);
    return [
      {
        type: EventType.SUBAGENT_STARTED,
        subagentRunId: s.subagentId,
        name: s.agent,
        ...(s.objective ? { description: s.objective } : {}),
        ...(parentSubagentRunId !== undefined ? { parentSubagentRunId } : {}),
        ...(s.toolCallId ? { parentToolCallId: s.toolCallId } : {}),
      },
    ];
  }

  private subagentEnded(event: RuntimeEvent, payload: Payload): AGUIEvent[] {
    const id = event.subagentId;
    if (!id || !this.activeSubagents.has(id)) return [];
    this.activeSubagents.delete(id);
    this.closedSubagents.add(id);
    if (event.type === 'subagent.failed') {
      const error = toError(payload.error);
      return [{ type: EventType.SUBAGENT_ERROR, subagentRunId: id, message: error.message, code: error.code }];
    }
    const summary = str(payload.summary);
    return [
      {
        type: EventType.SUBAGENT_FINISHED,
        subagentRunId: id,
        ...(summary !== undefined ? { result: summary } : {}),
        outcome: { type: 'success' },
      },
    ];
  }

  // ---- the run's end ------------------------------------------------------------------------------------------

  private addUsage(payload: Payload): void {
    const usage = payload.usage as Record<string, unknown> | undefined;
    if (!isRecord(usage)) return;
    const provider = str(payload.provider);
    const model = str(payload.modelId);
    const key = `${provider ?? ''}\u0000${model ?? ''}`;
    const entry: TokenUsage = this.usage.get(key) ?? {
      ...(provider ? { provider } : {}),
      ...(model ? { model } : {}),
    };
    const add = (field: keyof TokenUsage, value: unknown) => {
      if (typeof value !== 'number' || !Number.isFinite(value)) return;
      (entry as Record<string, unknown>)[field] = ((entry[field] as number | undefined) ?? 0) + value;
    };
    add('inputTokens', usage.inputTokens);
    add('outputTokens', usage.outputTokens);
    add('totalTokens', usage.totalTokens);
    add('reasoningTokens', usage.reasoningTokens);
    add('cachedInputTokens', usage.cachedInputTokens);
    add('cacheWriteInputTokens', usage.cacheWriteTokens);
    this.usage.set(key, entry);
  }

  private usageField(): { usage?: TokenUsage[] } {
    return this.usage.size > 0 ? { usage: [...this.usage.values()] } : {};
  }

  /** Close whatever is open (messages, steps, sub-agents) before the run's terminal event. */
  private closeAll(suspended: Map<string, string[]> | undefined): AGUIEvent[] {
    const out = this.closeAllCalls();
    for (const runId of [...this.openSteps.keys()]) out.push(...this.closeStep(runId));
    for (const id of [...this.activeSubagents]) {
      this.activeSubagents.delete(id);
      this.closedSubagents.add(id);
      const interruptIds = suspended?.get(id) ?? [];
      out.push({
        type: EventType.SUBAGENT_FINISHED,
        subagentRunId: id,
        outcome: suspended
          ? { type: 'suspended', ...(interruptIds.length > 0 ? { interruptIds } : {}) }
          : { type: 'success' },
      });
    }
    return out;
  }

  /** RUN_FINISHED with `success` or `cancelled` (from `end`), or RUN_ERROR. */
  finish(end: TurnEnd): AGUIEvent[] {
    if (this.finished) return [];
    this.finished = true;
    const out = this.closeAll(undefined);
    if (end.kind === 'error') {
      out.push({
        type: EventType.RUN_ERROR,
        message: end.error.message,
        code: end.error.code,
        ...this.usageField(),
        rawEvent: { error: end.error },
      });
      return out;
    }
    const outcome: RunFinishedOutcome = end.kind === 'cancelled' ? { type: 'cancelled' } : { type: 'success' };
    out.push({
      type: EventType.RUN_FINISHED,
      threadId: this.options.threadId,
      runId: this.options.runId,
      ...(end.kind === 'success'
        ? { result: { turnId: this.options.turnId, ...(end.answer !== undefined ? { answer: end.answer } : {}) } }
        : {}),
      outcome,
      ...this.usageField(),
    });
    return out;
  }

  /** RUN_FINISHED with the `interrupt` outcome: one interrupt per pending decision of the tree. */
  finishInterrupted(): AGUIEvent[] {
    if (this.finished) return [];
    const interrupts: Interrupt[] = this.pendingDecisions.map(toInterrupt);
    const suspended = new Map<string, string[]>();
    for (const p of this.pendingDecisions) {
      if (p.subagentRunId !== undefined) {
        suspended.set(p.subagentRunId, [...(suspended.get(p.subagentRunId) ?? []), p.actionId]);
      }
    }
    this.finished = true;
    const out = this.closeAll(suspended);
    out.push({
      type: EventType.RUN_FINISHED,
      threadId: this.options.threadId,
      runId: this.options.runId,
      outcome: { type: 'interrupt', interrupts },
      ...this.usageField(),
    });
    return out;
  }

  /** A failure of the stream itself (not of the turn): RUN_ERROR. */
  fail(error: OarError): AGUIEvent[] {
    return this.finish({ kind: 'error', error });
  }

  get done(): boolean {
    return this.finished;
  }
}

/** The first event of every run (it needs no turn yet: a run may fail before it has one). */
export function runStartedEvent(threadId: string, runId: string): AGUIEvent {
  return { type: EventType.RUN_STARTED, threadId, runId, protocolVersion: PROTOCOL_VERSION };
}

interface DeclaredAction {
  id?: string;
  executor?: { type?: string; target?: string };
  input?: unknown;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function attribution(owner: string | undefined): { subagentRunId?: string } {
  return owner !== undefined ? { subagentRunId: owner } : {};
}

function toError(value: unknown): OarError {
  if (isRecord(value) && typeof value.code === 'string' && typeof value.message === 'string') {
    return {
      code: value.code,
      message: value.message,
      retryable: value.retryable === true,
      ...(isRecord(value.details) ? { details: value.details } : {}),
    } as OarError;
  }
  return { code: 'internal_error', message: 'the turn failed', retryable: false } as OarError;
}

/**
 * The text a person sees of a completed model call: the `message` of its `AgentProtocolOutput` call, else the
 * plain text it wrote.
 */
export function visibleText(output: unknown): string {
  if (!isRecord(output)) return '';
  const calls = Array.isArray(output.toolCalls) ? output.toolCalls : [];
  for (const call of calls) {
    if (!isRecord(call) || call.name !== AGENT_PROTOCOL_TOOL_NAME) continue;
    const args = call.arguments;
    let parsed: unknown = args;
    if (typeof args === 'string') {
      try {
        parsed = JSON.parse(args);
      } catch {
        // A cut-off call: what the partial reader can make of it.
        const reader = new PartialJsonStringField('message');
        return reader.push(args);
      }
    }
    if (isRecord(parsed) && typeof parsed.message === 'string') return parsed.message;
    return '';
  }
  return typeof output.text === 'string' ? output.text : '';
}
