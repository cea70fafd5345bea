import { createInterface } from 'node:readline/promises';
import {
  type ActionDecision,
  AGENT_PROTOCOL_TOOL_NAME,
  PartialJsonStringField,
  type RuntimeEvent,
  type ThreadReadModel,
  uiSchemaOfToolAgentOutput,
} from '@oar/protocol';
import { type AskedWatch, isLiveEvent, isTransientStoreFault, OarRuntimeError, type Runtime } from '@oar/runtime';
import { renderEvent } from './render.js';

export type ApprovalMode = 'ask' | 'approve' | 'deny' | 'leave';

export interface DriveOptions {
  json: boolean;
  approvals: ApprovalMode;
  /** Printed next to every automatic decision so nobody mistakes it for a human's. */
  autoNote?: string;
  printer?: Printer;
  /**
   * Ctrl-C at an approval prompt. In raw mode the terminal sends it to the prompt, not to the process as SIGINT, so
   * the command's own Ctrl-C handling (`CtrlC.press`: interrupt the turn) is called from here. Without one, Ctrl-C
   * does what it does anywhere: it ends the process (by SIGINT), and the decision keeps waiting.
   */
  onCtrlC?: () => void;
}

export interface DriveResult {
  status: 'completed' | 'failed' | 'cancelled' | 'waiting';
  answer?: string;
  error?: { code: string; message: string; details?: Record<string, unknown> };
  threads: ThreadReadModel[];
  /** For each pending decision: what a person needs to decide it (see `requestDetails`). */
  details?: Map<string, RequestDetails>;
  /** The turns that wait for a resource (a budget): their limit state, as the read model has it. */
  resources?: { threadId: string; turnId: string; limitState: Record<string, unknown> }[];
}

/** A pending request as a person sees it: what it would do and why it asks, and how it can be answered. */
export interface RequestDetails {
  /** `input: …` and `rule: …` / `mode: …` lines. */
  lines: string[];
  choices: ActionDecision[];
  /** A question (`ask_user`) answered with text, not an approval. */
  question: boolean;
}

/**
 * How a read after the turn settled rides out a store that is briefly unreachable: at most `attempts` tries, the
 * pause before the next doubling from `firstDelayMs` to `maxDelayMs` (200, 400, 800, 1600 ms: about 3 s in all).
 */
export const SETTLED_READ_RETRY = { attempts: 5, firstDelayMs: 200, maxDelayMs: 2_000 } as const;

/**
 * A read of what the store already holds (the outcome of a settled turn, its pending decisions, the events left to
 * print), tried again on a retryable `store_unavailable` (a connection the server dropped, a failover). The turn's
 * facts are committed, so asking again is safe; a process that gave up here used to exit 74 on a completed turn.
 * Any other error, and the last attempt's, is thrown as it is.
 */
export async function readSettled<T>(read: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      if (!isTransientStoreFault(error) || attempt >= SETTLED_READ_RETRY.attempts) throw error;
      const delay = Math.min(SETTLED_READ_RETRY.firstDelayMs * 2 ** (attempt - 1), SETTLED_READ_RETRY.maxDelayMs);
      await new Promise((resolve) => setTimeout(resolve, delay));
    }
  }
}

/** How much of a tool's input a decision shows (it is in the log whole, already redacted). */
const INPUT_PREVIEW_CHARS = 400;

/**
 * What a person needs to decide each pending request of a session: the tool's input (bounded; the log holds it
 * redacted) and the permission rule or mode that asked. Read from the `action.required` and `permission.evaluated`
 * facts, so `run`, `respond` and `inspect` show the same thing.
 */
export async function requestDetails(runtime: Runtime, sessionId: string): Promise<Map<string, RequestDetails>> {
  const { events } = await readSettled(() => runtime.getSession({ sessionId, limit: 100_000 }));
  const evaluated = new Map<string, Record<string, unknown>>();
  const details = new Map<string, RequestDetails>();
  for (const event of events) {
    const payload = (event.payload ?? {}) as Record<string, unknown>;
    const toolCallId = (event as { toolCallId?: string }).toolCallId;
    if (event.type === 'permission.evaluated' && toolCallId) evaluated.set(toolCallId, payload);
    if (event.type !== 'action.required' || !event.actionId) continue;
    const lines: string[] = [];
    if (payload.input !== undefined) {
      const input = JSON.stringify(payload.input);
      const shown =
        input.length > INPUT_PREVIEW_CHARS ? `${input.slice(0, INPUT_PREVIEW_CHARS)}… (${input.length} chars)` : input;
      lines.push(`input: ${shown}`);
    }
    const evaluation = toolCallId ? evaluated.get(toolCallId) : undefined;
    if (evaluation) {
      const rule = typeof evaluation.rule === 'string' ? evaluation.rule : undefined;
      lines.push(rule ? `rule: ${rule}` : `mode: ${String(evaluation.mode ?? evaluation.source ?? 'default')}`);
    }
    details.set(event.actionId, {
      lines,
      choices: (payload.decisions as ActionDecision[] | undefined) ?? ['approve', 'deny'],
      question: payload.actionType === 'user_input',
    });
  }
  return details;
}

/**
 * Print a session's events after `after` as they become durable — written by this process or any other driving
 * the session: NDJSON with --json, otherwise one readable line per interesting event. `stop` prints whatever is
 * left up to the end of the log, then stops.
 *
 * `stream`: also print the model's output as it arrives (the live-only `model.delta` events of the calls this
 * process makes): the main agent's text, and the `message` of its `AgentProtocolOutput` arguments while they are
 * written. With `json` the deltas — and the other live-only events, `tool.args` and `reasoning.delta` — are NDJSON
 * lines of their own, between the events.
 */
export function attachPrinter(runtime: Runtime, sessionId: string, json: boolean, after = 0, stream = false): Printer {
  const agents = new Map<string, string>();
  let cursor = after;
  const live = new LivePrinter();
  const print = (event: RuntimeEvent) => {
    if (event.type === 'process.output') {
      // A command's output as it runs (exec, live-only): NDJSON with --json, else its lines, indented.
      if (json) process.stdout.write(`${JSON.stringify(event)}\n`);
      else live.processOutput(event);
      return;
    }
    if (event.type === 'model.delta') {
      if (json) process.stdout.write(`${JSON.stringify(event)}\n`);
      else if (!event.threadId || !agents.has(event.threadId) || agents.get(event.threadId) === 'main') {
        live.delta(event);
      }
      return;
    }
    // The other live-only events (a tool call's streamed arguments, the provider's reasoning): NDJSON only, and
    // never a cursor (they are not in the log).
    if (isLiveEvent(event)) {
      if (json) process.stdout.write(`${JSON.stringify(event)}\n`);
      return;
    }
    if (event.sequence <= cursor) return;
    cursor = event.sequence;
    if (json) {
      process.stdout.write(`${JSON.stringify(event)}\n`);
      // A business tool's UI as its wire format (ui_schema, compiled from the record's hints), after its event.
      const ui = uiSchemaOfToolAgentOutput((event.payload as { toolAgentOutput?: unknown }).toolAgentOutput);
      if (ui) process.stdout.write(`${JSON.stringify({ uiSchema: ui, toolCallId: event.toolCallId })}\n`);
    } else {
      const line = renderEvent(event, agents, { omitMessage: live.shown(event) });
      live.durable(event, line !== undefined);
      if (line) process.stdout.write(`${line}\n`);
    }
  };
  const controller = new AbortController();
  const following = (async () => {
    for await (const event of runtime.subscribe(sessionId, { after, signal: controller.signal, deltas: stream })) {
      print(event);
    }
  })().catch(() => undefined);
  const flush = async () => {
    for (const event of await readSettled(() => runtime.log.read(sessionId, { after: cursor }))) print(event);
  };
  return {
    flush,
    async stop() {
      controller.abort();
      await following;
      await flush();
    },
  };
}

/**
 * The model's output as it arrives, for a person: text deltas as they are, `AgentProtocolOutput` argument deltas
 * through a partial-JSON reader of their `message`. A durable line printed meanwhile starts on a line of its own.
 */
class LivePrinter {
  /** Per tool call: the reader of its message. */
  private readonly messages = new Map<string, PartialJsonStringField>();
  /** The threads whose current call's message was printed (its `declared` line then leaves it out). */
  private readonly printed = new Set<string>();
  private midLine = false;

  delta(event: RuntimeEvent): void {
    const p = (event.payload ?? {}) as { delta?: unknown; channel?: unknown; toolName?: unknown };
    if (typeof p.delta !== 'string') return;
    let text = '';
    if (p.channel === 'text') text = p.delta;
    else if (p.channel === 'tool_call' && p.toolName === AGENT_PROTOCOL_TOOL_NAME) {
      const key = event.toolCallId ?? '';
      let reader = this.messages.get(key);
      if (!reader) {
        reader = new PartialJsonStringField('message');
        this.messages.set(key, reader);
      }
      text = reader.push(p.delta);
      if (text !== '' && event.threadId) this.printed.add(event.threadId);
    }
    if (text === '') return;
    process.stdout.write(text);
    this.midLine = !text.endsWith('\n');
  }

  /** A running command's output (`process.output`): its lines, indented under the call that runs it. */
  processOutput(event: RuntimeEvent): void {
    const delta = (event.payload as { delta?: unknown }).delta;
    if (typeof delta !== 'string' || delta === '') return;
    if (this.midLine) process.stdout.write('\n');
    const lines = delta.endsWith('\n') ? delta.slice(0, -1) : delta;
    process.stdout.write(
      `${lines
        .split('\n')
        .map((line) => `  │ ${line}`)
        .join('\n')}\n`,
    );
    this.midLine = false;
  }

  /** Was this `declared` fact's message already printed as it streamed? */
  shown(event: RuntimeEvent): boolean {
    return event.type === 'run.status' && event.threadId !== undefined && this.printed.has(event.threadId);
  }

  /** A durable event is about to be printed (`line`), or passed by. */
  durable(event: RuntimeEvent, line: boolean): void {
    if (line && this.midLine) {
      process.stdout.write('\n');
      this.midLine = false;
    }
    if (event.type === 'model.completed' || event.type === 'model.failed') {
      if (this.midLine) process.stdout.write('\n');
      this.midLine = false;
      this.messages.clear();
    }
    if (event.type === 'model.requested' && event.threadId) this.printed.delete(event.threadId);
  }
}

export interface Printer {
  /** Print everything durable so far (before a line of our own, so the output keeps the log's order). */
  flush(): Promise<void>;
  stop(): Promise<void>;
}

/** Ctrl-C at a prompt (see `DriveOptions.onCtrlC`): no answer. */
class PromptInterrupted extends Error {}

/** One line typed at a prompt; Ctrl-C there is `PromptInterrupted`, not an error of the command. */
async function prompt(text: string): Promise<string> {
  const rl = createInterface({ input: process.stdin, output: process.stdout });
  try {
    return await rl.question(text);
  } catch (error) {
    // readline/promises rejects the question with an AbortError when the terminal sends Ctrl-C.
    if ((error as { code?: string }).code === 'ABORT_ERR') throw new PromptInterrupted();
    throw error;
  } finally {
    rl.close();
  }
}

async function ask(question: string, choices: ActionDecision[]): Promise<{ decision: ActionDecision; text?: string }> {
  const hint = choices.includes('approve_for_session') ? '[y]es / [n]o / [a]lways this session' : '[y]es / [n]o';
  const answer = (await prompt(`${question}\n  ${hint} > `)).trim().toLowerCase();
  if (answer === 'a' && choices.includes('approve_for_session')) return { decision: 'approve_for_session' };
  return { decision: answer === 'y' || answer === 'yes' ? 'approve' : 'deny' };
}

async function askText(question: string): Promise<string> {
  return prompt(`${question}\n  > `);
}

/**
 * An answer to a runner's question may come after the runtime closed it (its deadline passed, the run ended, while
 * the prompt waited): that is no failure of `oar run` — the turn's own outcome is what it reports.
 */
async function answered(respond: Promise<unknown>, request: { runnerId?: string }): Promise<void> {
  try {
    await respond;
  } catch (error) {
    const late =
      error instanceof OarRuntimeError && ['decision_already_resolved', 'action_not_found'].includes(error.code);
    if (!late || request.runnerId === undefined) throw error;
    process.stderr.write(`  ${error.message}\n`);
  }
}

/**
 * Drive a session until every thread is done or waits for a decision nobody here can make. Pending decisions are
 * answered by the approval mode: interactively in a TTY, or by --approve-all / --deny-all (with a visible note).
 */
export async function driveSession(
  runtime: Runtime,
  sessionId: string,
  turnId: string,
  options: DriveOptions,
): Promise<DriveResult> {
  // Questions of live runner runs seen so far: such a run waits for its answer while it runs, so the drive stops
  // for each new one (to answer it, or to say how) instead of waiting for a session that cannot settle without it.
  const asked: AskedWatch = { known: new Set<string>(), cursor: 0 };
  for (;;) {
    await runtime.settled(sessionId, { orAsked: asked });
    // What settled is committed: a dropped connection here must not turn a finished turn into a store error.
    const { snapshot } = await readSettled(() => runtime.getSession({ sessionId, limit: 0 }));
    const pending = snapshot.threads.flatMap((t) => t.pendingRequests);
    const fresh = pending.filter((p) => p.runnerId !== undefined && !asked.known.has(p.actionId));
    for (const p of fresh) asked.known.add(p.actionId);
    if (options.approvals === 'leave' && fresh.length > 0) {
      await options.printer?.flush();
      if (!options.json) {
        for (const p of fresh) {
          process.stdout.write(
            `  waiting for a decision (the runner waits until its deadline): oar respond ${sessionId} ${p.actionId} approve|deny\n`,
          );
        }
      }
      continue;
    }
    if (pending.length === 0 || options.approvals === 'leave') {
      const main = snapshot.threads[0];
      const turn = main?.turns.find((t) => t.turnId === turnId);
      const outcome = main?.lastOutcome as
        | {
            turnId?: string;
            answer?: string;
            error?: { code: string; message: string; details?: Record<string, unknown> };
          }
        | undefined;
      const mine = outcome?.turnId === turnId ? outcome : undefined;
      if (pending.length > 0) {
        return { status: 'waiting', threads: snapshot.threads, details: await requestDetails(runtime, sessionId) };
      }
      // A turn that waits for a budget is not over: a higher limit (`oar limit`) continues it.
      const resources = snapshot.threads.flatMap((t) =>
        t.turns
          .filter((x) => x.status === 'waiting_resource')
          .map((x) => ({ threadId: t.threadId, turnId: x.turnId, limitState: x.limitState ?? {} })),
      );
      if (resources.length > 0) return { status: 'waiting', threads: snapshot.threads, resources };
      return {
        status: turn?.status === 'completed' ? 'completed' : turn?.status === 'cancelled' ? 'cancelled' : 'failed',
        ...(mine?.answer !== undefined ? { answer: mine.answer } : {}),
        ...(mine?.error ? { error: mine.error } : {}),
        threads: snapshot.threads,
      };
    }
    await options.printer?.flush();
    const details = await requestDetails(runtime, sessionId);
    try {
      await decide(runtime, sessionId, pending, details, options);
    } catch (error) {
      if (!(error instanceof PromptInterrupted)) throw error;
      process.stdout.write('\n');
      if (options.onCtrlC) options.onCtrlC();
      // Nobody here interrupts a turn: Ctrl-C ends the process (the signal's default), as it would off the prompt.
      else process.kill(process.pid, 'SIGINT');
      return { status: 'waiting', threads: snapshot.threads, details };
    }
  }
}

/** Decide each pending request the way `options.approvals` says: at a prompt, or automatically. */
async function decide(
  runtime: Runtime,
  sessionId: string,
  pending: ThreadReadModel['pendingRequests'],
  details: Map<string, RequestDetails>,
  options: DriveOptions,
): Promise<void> {
  for (const request of pending) {
    const detail = details.get(request.actionId);
    const choices = detail?.choices ?? ['approve', 'deny'];
    if (options.approvals === 'ask') {
      if (detail?.question) {
        const text = await askText(request.prompt ?? 'Input needed');
        await runtime.respondAction({
          sessionId,
          actionId: request.actionId,
          decision: 'approve',
          payload: { text },
        });
      } else {
        const shown = (detail?.lines ?? []).map((line) => `\n  ${line}`).join('');
        const { decision } = await ask(`${request.prompt ?? 'Approve?'}${shown}`, choices);
        await answered(runtime.respondAction({ sessionId, actionId: request.actionId, decision }), request);
      }
      continue;
    }
    const decision: ActionDecision = options.approvals === 'approve' ? 'approve' : 'deny';
    if (!options.json) process.stdout.write(`  ${options.autoNote ?? `auto-${decision}d (--${decision}-all)`}\n`);
    await answered(
      runtime.respondAction({
        sessionId,
        actionId: request.actionId,
        decision,
        reason: options.autoNote ?? `--${decision}-all`,
        resolvedBy: 'cli-auto',
        ...(detail?.question ? { payload: { text: 'approved automatically (no TTY)' } } : {}),
      }),
      request,
    );
  }
}
