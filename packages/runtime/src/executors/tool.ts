import {
  DEFAULT_VALIDATION_LIMITS,
  type OarError,
  oarError,
  type ToolAgentOutput,
  toolAgentProjection,
} from '@oar/protocol';
import type { PermissionRequest } from '../config/permission-request.js';
import type { PermissionRule } from '../config/permissions.js';
import { actionIds, artifactCreated, errorOutput, toolIds, withDefaultPolicy } from '../facts/action.js';
import { toolFailedEvent } from '../facts/tool-call.js';
import { localActor } from '../kernel/actor.js';
import { isClosing, ToolError, toOarError } from '../kernel/errors.js';
import type { Command } from '../kernel/match/command-match.js';
import type { EventDraft } from '../log/draft.js';
import type { HookVerdict } from '../policy/hooks/hooks.js';
import { ruleMatches } from '../policy/permission-match.js';
import { revealsOutput } from '../policy/reveal.js';
import { defaultDenial } from '../policy/sensitive-paths.js';
import type { RunActionStatus } from '../read-models/thread-state.js';
import { openBracket } from '../scheduler/bracket.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import { DEFAULT_WORKSPACE } from '../store/workspaces.js';
import type { AnyTool, ToolCallInfo, ToolOutput, ToolRecorder } from '../tools/tool.js';
import { callFacts } from '../tools/tool.js';
import { resolveWorkspacePath, toWorkspaceRelative } from '../tools/workspace.js';
import type { Executor } from './executor.js';
import { keepFileVersion } from './file-versions.js';
import type { Authorized } from './gate.js';
import { completeAction, failAction, storeOutput } from './outcome.js';
import { afterToolCall, beforeToolCall, hasToolHooks } from './tool-hooks.js';

/**
 * The permission request for a tool action: the tool's own flags and the paths the call touches — as written and,
 * when a path goes through a symlink, also as the real path it reaches, so a link is no way around a path rule.
 */
export async function toolPermissionRequest(
  tool: AnyTool,
  input: unknown,
  workspaceRoot: string,
): Promise<PermissionRequest> {
  let written: string[] = [];
  try {
    written = tool.paths?.(input, workspaceRoot) ?? [];
  } catch {
    written = [];
  }
  const facts = callFacts(tool, input);
  const paths = new Set(written);
  for (const path of written) {
    try {
      paths.add(toWorkspaceRelative(workspaceRoot, await resolveWorkspacePath(workspaceRoot, path)));
    } catch {
      // An escaping or invalid path: execution refuses it and records the violation.
    }
  }
  let operation: string | undefined;
  try {
    operation = tool.operationOf?.(input);
  } catch {
    operation = undefined;
  }
  let command: Command | undefined;
  try {
    command = tool.commandOf?.(input);
  } catch {
    command = undefined;
  }
  return {
    executor: { type: 'tool', target: tool.name },
    ...(operation !== undefined ? { operation } : {}),
    ...(command !== undefined ? { command } : {}),
    tool: {
      name: tool.name,
      // This call's facts: a tool whose calls differ (`factsOf`) is judged by what this one does.
      isReadOnly: facts.isReadOnly,
      isDestructive: facts.isDestructive,
      isConcurrencySafe: facts.isConcurrencySafe,
      capabilities: tool.capabilities,
    },
    paths: [...paths],
    input,
  };
}

/**
 * The confinement of a call that changes workspace files through the confined opens (a tool that says so,
 * `confinedToWorkspace`, whose call is not read-only): what its bracket records as `sandbox.applied` before it runs.
 * Other calls record none here (`exec` records its own, with the command's sandbox).
 */
export function fileConfinement(
  tool: AnyTool,
  input: unknown,
  request: PermissionRequest,
  workspaceRoot: string,
): { confinement?: { root: string; paths: readonly string[] } } {
  if (!tool.confinedToWorkspace || callFacts(tool, input).isReadOnly) return {};
  return { confinement: { root: workspaceRoot, paths: request.paths ?? [] } };
}

/**
 * The per-path check handed to tools that find files themselves: no path a deny or ask rule names for this call,
 * and no credential file a default deny rule names (`.env`, `*.pem`…) unless an allow rule names it.
 */
export function pathFilter(rules: readonly PermissionRule[], request: PermissionRequest): (path: string) => boolean {
  const guarding = rules.filter((rule) => rule.paths && (rule.decision === 'deny' || rule.decision === 'ask'));
  return (path) => {
    const single = { ...request, paths: [path] };
    return !guarding.some((rule) => ruleMatches(rule, single)) && defaultDenial(single, rules) === undefined;
  };
}

/**
 * A signal that aborts when `signal` does or after `ms` (a timeout). Shared by tool calls and by runtime operations
 * that do CPU work on model input (expand_ref's pattern search).
 */
export function withTimeout(
  signal: AbortSignal,
  ms: number,
): { signal: AbortSignal; timedOut: () => boolean; clear: () => void } {
  const controller = new AbortController();
  let timedOut = false;
  const onAbort = () => controller.abort(signal.reason);
  // A listener added to an already-aborted signal never fires: carry an earlier abort over explicitly.
  if (signal.aborted) controller.abort(signal.reason);
  else signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Error('timeout'));
  }, ms);
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    clear: () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    },
  };
}

/** How running a tool ended: its output, a failure (with the facts to record before it), or the runtime closing. */
export type ToolRun =
  | { outcome: 'completed'; output: ToolOutput; durationMs: number }
  | { outcome: 'closing' }
  | {
      outcome: 'failed';
      error: OarError;
      status: 'failed' | 'cancelled';
      durationMs: number;
      before: EventDraft[];
      agentOutput?: ToolAgentOutput;
    };

/** Who the call acts for (ToolContext.caller): the session's workspace and actor, read when a tool asks. */
async function callerOf(ctx: ExecutorContext, toolCallId: string): Promise<ToolCallInfo> {
  const session = await ctx.session();
  return {
    sessionId: ctx.thread.sessionId,
    threadId: ctx.thread.threadId,
    turnId: ctx.run.turnId,
    runId: ctx.run.runId,
    toolCallId,
    workspaceId: session?.workspaceId ?? DEFAULT_WORKSPACE,
    actor: session?.actor ?? localActor(),
  };
}

/** The recorder of a running call (ToolContext.recorder): its facts, live output and artifacts carry its ids. */
function toolRecorder(ctx: ExecutorContext, ids: ReturnType<typeof toolIds>): ToolRecorder {
  const { config } = ctx;
  return {
    turnSignal: ctx.signal,
    owner: config.runtimeId,
    facts: (facts) =>
      ctx.record(
        facts.map((fact) => ({
          type: fact.type,
          ...ids,
          ...(fact.processId !== undefined ? { processId: fact.processId } : {}),
          payload: fact.payload,
        })) as EventDraft[],
        { durable: true },
      ),
    live: (output) =>
      ctx.publishLive?.({
        type: 'process.output',
        threadId: ids.threadId,
        turnId: ids.turnId,
        toolCallId: ids.toolCallId,
        processId: output.processId,
        payload: { delta: output.delta, stream: output.stream, processId: output.processId },
      }),
    artifact: async (content) => {
      const stored = await ctx.artifacts.put(content, config.limits.maxArtifactBytes);
      await ctx.record([artifactCreated(actionIds(ctx), stored)], { durable: true });
      return { artifactId: stored.artifactId, uri: stored.uri, size: stored.size };
    },
  };
}

/**
 * Run a tool whose start is recorded — a tool action, or a pipeline's step: under its timeout and the turn's
 * interrupt (a `block` tool finishes even when the turn is interrupted: a half-done write is worse than a late
 * one), with its progress recorded and its failure classified (timeout, interrupt, a path outside the workspace
 * recorded as a `sandbox.violation`). `ids` and `facts` are what its events carry; `idempotencyKey` is its bracket's.
 */
export async function invokeTool(
  ctx: ExecutorContext,
  tool: AnyTool,
  input: unknown,
  request: PermissionRequest,
  ids: ReturnType<typeof toolIds>,
  facts: Record<string, unknown>,
  idempotencyKey: string,
): Promise<ToolRun> {
  const { config } = ctx;
  const started = Date.now();
  const cancels = callFacts(tool, input).interruptBehavior === 'cancel';
  const parent = cancels ? ctx.signal : new AbortController().signal;
  const timeoutMs = tool.timeoutMs ?? config.limits.toolTimeoutMs;
  const timer = withTimeout(parent, timeoutMs);
  try {
    // Interrupted between recording the start and running it: the side effect never begins.
    if (timer.signal.aborted) throw new ToolError('aborted', `${tool.name} did not start: the turn was interrupted`);
    const output = await tool.execute(input, {
      workspaceRoot: config.workspaceRoot,
      mayAccess: pathFilter(config.permissions.rules, request),
      signal: timer.signal,
      caller: () => callerOf(ctx, ids.toolCallId),
      recorder: toolRecorder(ctx, ids),
      idempotencyKey,
      progress: (message, data) => {
        void ctx
          .record([{ type: 'tool.progress', ...ids, payload: { message, ...facts, ...(data ?? {}) } }])
          .catch(() => undefined);
      },
    });
    return { outcome: 'completed', output, durationMs: Date.now() - started };
  } catch (thrown) {
    if (isClosing(ctx.signal) && cancels) return { outcome: 'closing' };
    const interrupted = ctx.signal.aborted && cancels;
    const error = timer.timedOut()
      ? oarError('tool_timeout', `${tool.name} timed out after ${timeoutMs} ms`, { retryable: true })
      : interrupted
        ? oarError('interrupted', `${tool.name} was cancelled by an interrupt`)
        : toOarError(thrown);
    const before: EventDraft[] =
      error.code === 'path_outside_workspace'
        ? [
            {
              type: 'sandbox.violation',
              ...ids,
              payload: {
                ...facts,
                kind: 'path_outside_workspace',
                message: error.message,
                details: error.details ?? {},
              },
            },
          ]
        : [];
    return {
      outcome: 'failed',
      error,
      // A command a person stopped (terminate_process) was cancelled, like an interrupted call: never retried.
      status: interrupted || error.code === 'process_terminated' ? 'cancelled' : 'failed',
      durationMs: Date.now() - started,
      before,
      ...(thrown instanceof ToolError && thrown.agentOutput ? { agentOutput: thrown.agentOutput } : {}),
    };
  } finally {
    timer.clear();
  }
}

/** What a tool action's preparation leaves for its run: the tool, the input that runs, its request, its hooks. */
interface PreparedCall {
  tool: AnyTool;
  input: unknown;
  request: PermissionRequest;
  hooks: HookVerdict | undefined;
}

/**
 * The `tool` executor: the tool looked up, its input checked (and rewritten by before_tool_call hooks, checked
 * again), the call authorized, then bracketed by tool.started … tool.result/failed with its full output stored.
 */
export const toolExecutor: Executor<PreparedCall> = {
  async prepare(ctx) {
    const { config, action } = ctx;
    const tool = config.tools.get(action.executor.target);
    if (!tool) {
      return { refused: errorOutput(oarError('unknown_tool', `tool "${action.executor.target}" is not registered`)) };
    }
    let parsed = config.tools.parseInput(tool.name, action.input);
    if (!parsed.ok) return { refused: errorOutput(parsed.error) };
    // before_tool_call hooks (docs/hooks.md): a rewritten input is validated again, like the model's own.
    const hooks = hasToolHooks(ctx, 'before_tool_call', tool)
      ? await beforeToolCall(ctx, tool, parsed.input)
      : undefined;
    if (hooks?.input) {
      // The model's input was held to the protocol's size limit; a hook's is too.
      const bytes = Buffer.byteLength(JSON.stringify(hooks.input));
      if (bytes > DEFAULT_VALIDATION_LIMITS.maxArgsBytes) {
        const error = oarError(
          'invalid_tool_input',
          `hook ${hooks.rewrittenBy.join(', ')} rewrote the input to ${bytes} bytes; at most ${DEFAULT_VALIDATION_LIMITS.maxArgsBytes} are allowed`,
          {
            details: { tool: tool.name, bytes, max: DEFAULT_VALIDATION_LIMITS.maxArgsBytes, hooks: hooks.rewrittenBy },
          },
        );
        return { refused: errorOutput(error) };
      }
      parsed = config.tools.parseInput(tool.name, hooks.input);
      if (!parsed.ok) {
        const error = {
          ...parsed.error,
          message: `${parsed.error.message} (the input as hook ${hooks.rewrittenBy.join(', ')} rewrote it)`,
        };
        return { refused: errorOutput(error) };
      }
    }
    // Refused before anyone is asked and before anything starts (a method that is not whitelisted, an input that
    // does not match the method): the call's failure, recorded like any tool failure.
    const refused = tool.check?.(parsed.input);
    if (refused) {
      const error = toOarError(refused);
      await ctx.record(await failureDrafts(ctx, tool.name, error, 0, 'failed', refused.agentOutput));
      return { settled: 'failed' };
    }
    const request = await toolPermissionRequest(tool, parsed.input, config.workspaceRoot);
    return { authorize: request, ...(hooks ? { hooks } : {}), prepared: { tool, input: parsed.input, request, hooks } };
  },
  run: runToolCall,
};

/** Run an authorized tool call: bracket the side effect with tool.started … tool.result/failed, store the output. */
async function runToolCall(
  ctx: ExecutorContext,
  { tool, input, request, hooks }: PreparedCall,
  gated: Authorized,
): Promise<RunActionStatus> {
  const { config, action } = ctx;
  const attempt = ctx.state.attempt + 1;
  const facts = callFacts(tool, input);
  const bracket = await openBracket((drafts, options) => ctx.record(drafts, options), {
    sessionId: ctx.thread.sessionId,
    ids: toolIds(ctx),
    // A call retried after a crash because the world deduplicates it by key: the key of the attempt it retries.
    ...(ctx.state.keyAttempt !== undefined ? { keyAttempt: ctx.state.keyAttempt } : {}),
    authorization: gated.allowed,
    ...fileConfinement(tool, input, request, config.workspaceRoot),
    payload: {
      toolName: tool.name,
      attempt,
      idempotent: facts.isIdempotent,
      ...(facts.isIdempotentByKey ? { idempotentByKey: true } : {}),
      graphActionId: action.id,
      input: action.input,
      // What runs is what the hooks left: the record says so next to what the model asked for.
      ...(hooks?.input ? { effectiveInput: input, rewrittenBy: hooks.rewrittenBy } : {}),
    },
  });
  const durable = { durable: bracket.durable };
  const ran = await invokeTool(
    ctx,
    tool,
    input,
    request,
    toolIds(ctx),
    { toolName: tool.name },
    bracket.idempotencyKey,
  );
  // The runtime is closing, not interrupting: record nothing, like a crash. The action stays `running`, and
  // whichever worker claims the thread next applies recovery (re-run if idempotent, else `lost`).
  if (ran.outcome === 'closing') return 'running';
  if (ran.outcome === 'failed') {
    const { error, status, durationMs } = ran;
    const failed = await failureDrafts(ctx, tool.name, error, durationMs, status, ran.agentOutput);
    await bracket.end([...ran.before, ...failed]);
    return status;
  }
  const { output, durationMs } = ran;
  // The file it changed keeps its version whatever the model is shown: recorded with the call's end either way.
  const version = output.fileVersion ? await keepFileVersion(ctx, output.fileVersion) : undefined;
  const versioned = version ? { before: version.drafts, extra: { fileVersion: version.fileVersion } } : {};
  // after_tool_call hooks: a veto withholds the result from the model; the full output is still stored.
  if (hasToolHooks(ctx, 'after_tool_call', tool)) {
    const after = await afterToolCall(ctx, tool, input, output);
    if (after.decision === 'deny') return withheld(ctx, tool.name, output, after, durationMs, durable, versioned);
  }
  const text = output.text ?? (output.structured ? JSON.stringify(output.structured, null, 2) : '');
  const shaped = tool.defaultResultPolicy ? withDefaultPolicy(ctx, tool.defaultResultPolicy) : ctx;
  // A read a rule explicitly allows reaches the model unredacted (docs/security.md "What the model sees").
  // Only when an allow rule is what let the call run: an ask rule a person answered, a grant or the mode never do.
  const reveal = gated.byRule && revealsOutput(config.permissions.rules, request) ? { reveal: { attempt } } : {};
  if (!output.agentOutput) {
    return completeAction(shaped, tool.name, { ...output, text }, durationMs, { ...durable, ...reveal, ...versioned });
  }
  const stored = await storeAgentOutput(ctx, output.agentOutput);
  return completeAction(shaped, tool.name, { ...output, text }, durationMs, {
    ...durable,
    ...reveal,
    before: [...(versioned.before ?? []), ...stored.drafts],
    extra: { ...versioned.extra, toolAgentOutput: stored.record, ...stored.ref },
  });
}

/**
 * A call's canonical record (ToolAgentOutput) as a JSON artifact of the session: the drafts that announce it and the
 * ref the completion event names. A record that cannot be stored is still on the event itself.
 */
async function storeAgentOutput(
  ctx: ExecutorContext,
  given: ToolAgentOutput,
): Promise<{ record: ToolAgentOutput; drafts: EventDraft[]; ref: { toolAgentOutputRef?: string } }> {
  // The call id is the runtime's: a tool that refused before the call started could not know it.
  const record = { ...given, tool_call_id: toolIds(ctx).toolCallId };
  const stored = await storeOutput(ctx, `${ctx.run.runId}/${ctx.action.id}/tool-agent-output.json`, {
    text: JSON.stringify(record),
    mime: 'application/json',
  });
  if ('code' in stored) return { record, drafts: [], ref: {} };
  return { record, drafts: [artifactCreated(actionIds(ctx), stored)], ref: { toolAgentOutputRef: stored.uri } };
}

/** `tool.failed` for a call, with its canonical record (stored and on the event) when the tool gave one. */
async function failureDrafts(
  ctx: ExecutorContext,
  toolName: string,
  error: OarError,
  durationMs: number,
  status: 'failed' | 'cancelled',
  agentOutput: ToolAgentOutput | undefined,
): Promise<EventDraft[]> {
  if (!agentOutput) return [toolFailedEvent(ctx, { toolName, error, durationMs, status })];
  const stored = await storeAgentOutput(ctx, agentOutput);
  return [
    ...stored.drafts,
    toolFailedEvent(ctx, {
      toolName,
      error,
      durationMs,
      status,
      text: toolAgentProjection(stored.record),
      extra: { toolAgentOutput: stored.record, ...stored.ref },
    }),
  ];
}

/**
 * A result an after_tool_call hook vetoed: the output stored whole (the record keeps what happened), the action
 * failed with `hook_denied` and the hook's reason, which is all the model sees.
 */
async function withheld(
  ctx: ExecutorContext,
  toolName: string,
  output: ToolOutput,
  verdict: HookVerdict,
  durationMs: number,
  durable: { durable: boolean },
  versioned: { before?: EventDraft[]; extra?: Record<string, unknown> },
): Promise<RunActionStatus> {
  const text = output.text ?? (output.structured ? JSON.stringify(output.structured, null, 2) : '');
  const stored = await storeOutput(ctx, `${ctx.run.runId}/${ctx.action.id}`, {
    text,
    mime: output.mime ?? 'text/plain',
  });
  const artifact = 'code' in stored ? undefined : stored;
  const error = oarError('hook_denied', verdict.reason ?? `hook "${verdict.hook}" withheld the result`, {
    details: { hook: verdict.hook, ...(artifact ? { outputRef: artifact.uri } : {}) },
  });
  return failAction(ctx, toolName, error, durationMs, {
    ...durable,
    before: [...(versioned.before ?? []), ...(artifact ? [artifactCreated(actionIds(ctx), artifact)] : [])],
    ...(versioned.extra ? { extra: versioned.extra } : {}),
  });
}
