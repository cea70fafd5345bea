import { type OarError, oarError } from '@oar/protocol';
import { AgentRunResultSchema, RESULT_TYPES, ResultDataSchemas, type ResultType } from '@oar/runner-sdk';
import { artifactCreated } from '../facts/action.js';
import type { EventDraft } from '../log/draft.js';
import { stateChange } from './context-apis.js';
import { requestedAction } from './platform-actions.js';
import { type RunSession, runnerStatus } from './run-session.js';

/** The largest single result (its JSON), as the spec's reference host. */
export const MAX_RESULT_BYTES = 1_000_000;
/** The most results one run may send (deltas included): past it the runner is flooding and the run fails. */
export const MAX_RESULTS = 20_000;
/** The most streamed text kept as the answer of a run that never sent a complete message (its first bytes). */
export const MAX_STREAMED_ANSWER_BYTES = MAX_RESULT_BYTES;
/** Warnings recorded per run for ignored results; further ones are counted in the run's end. */
const MAX_WARNINGS = 20;

/**
 * The manifest capability (spec 3.3) each result type needs: a result the manifest does not declare is ignored with
 * a `runtime.warning` (`capability_not_declared`), never applied. `artifact.created` and the terminal results need
 * none (the spec ties no capability to them); `action.requested` is checked by its own path (platform-actions.ts).
 */
const RESULT_CAPABILITIES: Partial<Record<ResultType, 'streaming' | 'tool_calling' | 'stateful_session'>> = {
  'message.delta': 'streaming',
  'tool.call.started': 'tool_calling',
  'tool.call.completed': 'tool_calling',
  'state.updated': 'stateful_session',
};

/** How a run ended, as the result stream said. */
export type RunEnd = { ok: true; answer: string } | { ok: false; error: OarError };

/**
 * The result stream of one run mapped to OAR facts, one result at a time in arrival order:
 * `message.delta` → live `model.delta` (never stored), `message.completed` → the turn's answer,
 * `tool.call.*` → `run.status` (phase `runner_tool`, linked to the proxy call it names), `artifact.created` → the
 * artifact store + `artifact.changed`, `state.updated` → checked host-owned state (`thread.updated`),
 * `run.completed` / `run.failed` → the end. Duplicates (a sequence already seen) are dropped; unknown types,
 * and results after the end are ignored with a recorded `runtime.warning`; `action.requested` is a durable
 * decision (platform-actions.ts). A result that breaks the protocol (invalid, oversized, another run's, a flood)
 * fails the run.
 */
export class ResultStream {
  private lastSequence = -1;
  private count = 0;
  private warnings = 0;
  private ignored = 0;
  private readonly answer: string[] = [];
  /** The text of the applied `message.delta`s: the answer of a run that streamed it and never completed a message. */
  private streamed = '';
  private streamedBytes = 0;
  private chain: Promise<void> = Promise.resolve();
  /** Set once: the run's end (a terminal result), or the protocol failure that ends it. */
  end: RunEnd | undefined;
  /** Settles when `end` is set. */
  readonly ended: Promise<RunEnd>;
  private resolveEnded: (end: RunEnd) => void = () => undefined;

  constructor(private readonly session: RunSession) {
    this.ended = new Promise((resolve) => {
      this.resolveEnded = resolve;
    });
  }

  /** Take one raw chunk of the RUN_AGENT stream (in order; processed one after another). */
  push(raw: unknown): void {
    // A terminal result ends the run's API session at once, before it is recorded: a call the runner sends after it
    // (in wire order) is refused, whatever the recording still waits for.
    const r = raw as { run_id?: unknown; type?: unknown } | null;
    if (r?.run_id === this.session.ids.runId && (r.type === 'run.completed' || r.type === 'run.failed'))
      this.session.end();
    this.chain = this.chain
      .then(() => this.accept(raw))
      .catch((error: unknown) => {
        this.finish({
          ok: false,
          error: oarError('runner_protocol_error', `a result could not be recorded: ${(error as Error).message}`),
        });
      });
  }

  /** Everything pushed so far has been recorded. */
  drained(): Promise<void> {
    return this.chain;
  }

  /** End the run from outside (the stream ended, the process died, the deadline passed): the first end wins. */
  finish(end: RunEnd): void {
    if (this.end) return;
    this.end = end;
    this.session.end();
    this.resolveEnded(end);
  }

  get ignoredCount(): number {
    return this.ignored;
  }

  private async accept(raw: unknown): Promise<void> {
    const size = Buffer.byteLength(JSON.stringify(raw) ?? '');
    if (this.end) {
      if (size <= MAX_RESULT_BYTES)
        await this.warn('a result after the run ended was refused', { reason: 'after_end' });
      return;
    }
    if (size > MAX_RESULT_BYTES) {
      this.finish({
        ok: false,
        error: oarError('runner_result_too_large', `a result of ${size} bytes; the limit is ${MAX_RESULT_BYTES}`, {
          details: { size, limit: MAX_RESULT_BYTES },
        }),
      });
      return;
    }
    const parsed = AgentRunResultSchema.safeParse(raw);
    if (!parsed.success || parsed.data.run_id !== this.session.ids.runId) {
      this.finish({
        ok: false,
        error: oarError(
          'runner_protocol_error',
          parsed.success ? 'a result of another run' : 'a result that is not an AgentRunResult',
          {
            details: { reason: parsed.success ? 'run_id_mismatch' : 'invalid_result' },
          },
        ),
      });
      return;
    }
    const result = parsed.data;
    if (typeof result.sequence === 'number') {
      if (result.sequence <= this.lastSequence) return; // a duplicate
      this.lastSequence = result.sequence;
    }
    if (++this.count > MAX_RESULTS) {
      this.finish({
        ok: false,
        error: oarError('runner_protocol_error', `more than ${MAX_RESULTS} results in one run`, {
          details: { reason: 'too_many_results', limit: MAX_RESULTS },
        }),
      });
      return;
    }
    if (!(RESULT_TYPES as readonly string[]).includes(result.type)) {
      await this.warn(`result type ${result.type.slice(0, 64)} is not known; ignored`, {
        reason: 'unknown_type',
        type: result.type.slice(0, 64),
      });
      return;
    }
    const type = result.type as ResultType;
    const data = ResultDataSchemas[type].safeParse(result.data);
    if (!data.success) {
      this.finish({
        ok: false,
        error: oarError('runner_protocol_error', `a ${type} result whose data does not match`, {
          details: { reason: 'invalid_data', type },
        }),
      });
      return;
    }
    const capability = RESULT_CAPABILITIES[type];
    if (capability && this.session.capabilities[capability] !== true) {
      await this.warn(`${type} needs the capability ${capability}, which the manifest does not declare; ignored`, {
        reason: 'capability_not_declared',
        type,
        capability,
      });
      return;
    }
    await this.apply(type, data.data as Record<string, unknown>);
  }

  private async apply(type: ResultType, data: Record<string, unknown>): Promise<void> {
    const { session } = this;
    const { engine } = session;
    switch (type) {
      case 'message.delta': {
        const content = (data.chunk as { content: string }).content;
        engine.deltas?.delta({ channel: 'text', delta: engine.redactor.redactText(content) });
        if (this.streamedBytes < MAX_STREAMED_ANSWER_BYTES) {
          this.streamed += content;
          this.streamedBytes += Buffer.byteLength(content);
        }
        return;
      }
      case 'message.completed':
        this.answer.push((data.message as { content: string }).content);
        return;
      case 'tool.call.started':
      case 'tool.call.completed': {
        const toolCallId = typeof data.tool_call_id === 'string' ? data.tool_call_id.slice(0, 128) : null;
        await session.record([
          runnerStatus(
            session,
            `runner tool ${String(data.tool_name).slice(0, 64)} ${type.endsWith('started') ? 'started' : 'completed'}`,
            {
              phase: 'runner_tool',
              toolName: String(data.tool_name).slice(0, 128),
              toolCallId,
              // The call itself is recorded by the proxy (tool.started … tool.result): this is the runner's view of it.
              linkedToProxyCall: toolCallId !== null && session.proxyToolCalls.has(toolCallId),
              event: type,
            },
          ),
        ]);
        return;
      }
      case 'artifact.created': {
        const content = data.content as string;
        const bytes = data.encoding === 'base64' ? Buffer.from(content, 'base64') : undefined;
        const stored = await engine.artifacts.put(
          session.sessionId,
          {
            ...(bytes ? { bytes } : { text: engine.redactor.redactText(content) }),
            mime: typeof data.mime_type === 'string' ? data.mime_type : 'text/plain',
            name: `${session.ids.runId}/${String(data.name).slice(0, 200)}`,
          },
          engine.limits.maxArtifactBytes,
        );
        session.artifactIds.add(stored.artifactId);
        await session.record([artifactCreated(session.ids, stored)]);
        return;
      }
      case 'state.updated': {
        let change: EventDraft;
        try {
          change = stateChange(session, data.scope, data.key, data.value);
        } catch (error) {
          await this.warn(`state.updated refused: ${(error as Error).message}`, { reason: 'state_refused' });
          return;
        }
        await session.record([change]);
        return;
      }
      case 'action.requested':
        // A durable decision the run does not wait for (platform-actions.ts); one that cannot be asked is a warning.
        requestedAction(session, data, (refused) =>
          this.warn(`action.requested ${String(data.action).slice(0, 64)} was not executed: ${refused}`, {
            reason: 'action_refused',
            action: String(data.action).slice(0, 64),
          }),
        );
        return;
      case 'run.completed': {
        const message = (data.message as { content?: string } | undefined)?.content;
        if (message !== undefined && this.answer.length === 0) this.answer.push(message);
        // A run that only streamed its text (LangBot's stream_ok) answers with it: deltas alone are live-only, but
        // the end with no message means the streamed text was the message.
        if (this.answer.length === 0 && this.streamed !== '') this.answer.push(this.streamed);
        this.finish({ ok: true, answer: this.answer.join('\n\n') });
        return;
      }
      case 'run.failed':
        this.finish({
          ok: false,
          error: {
            code: String(data.code).slice(0, 64),
            message: engine.redactor.redactText(String(data.message).slice(0, 2_000)),
            retryable: data.retryable === true,
            details: { runnerId: session.runnerId, source: 'runner' },
          },
        });
        return;
    }
  }

  private async warn(message: string, details: Record<string, unknown>): Promise<void> {
    this.ignored++;
    if (this.warnings >= MAX_WARNINGS) return;
    this.warnings++;
    const warning = oarError('runner_result_ignored', message, {
      details: { ...details, runnerId: this.session.runnerId },
    });
    await this.session.record([{ type: 'runtime.warning', ...this.session.ids, payload: { ...warning } }]);
  }
}
