import type { OarError } from '@oar/protocol';
import {
  failurePolicy,
  type HookConfig,
  type HookInput,
  type HookMessage,
  type HookPoint,
  type HooksConfig,
} from '../../config/hooks.js';
import type { EventDraft } from '../../log/draft.js';
import { type JsonChange, jsonDiff } from './diff.js';
import { type HookRun, runHook } from './run-hook.js';

/**
 * What a hook point needs of the engine: the binding's hooks, the workspace, and the fenced writer of the one session
 * the point runs in (an executor's `record`, or the engine's append bound to the session by `sessionHooks`).
 */
export interface HookEngine {
  readonly binding: { readonly hooks?: HooksConfig };
  readonly workspaceRoot: string;
  record(drafts: EventDraft[], options?: { durable?: boolean }): Promise<void>;
}

/** A hook engine over a writer of many sessions (the worker's engine), bound to one of them. */
export function sessionHooks(
  engine: {
    readonly binding: { readonly hooks?: HooksConfig };
    readonly workspaceRoot: string;
    append(sessionId: string, drafts: EventDraft[], options?: { durable?: boolean }): Promise<void>;
  },
  sessionId: string,
): HookEngine {
  return {
    binding: engine.binding,
    workspaceRoot: engine.workspaceRoot,
    record: (drafts, options) => engine.append(sessionId, drafts, options),
  };
}

/** One run of a hook point: where its facts go and what its hooks are told. */
export interface HookScope {
  engine: HookEngine;
  /** The correlation ids every `hook.*` event of this point carries (the thread's, the turn's, the call's). */
  ids: { threadId: string; turnId: string } & Record<string, string | undefined>;
  signal: AbortSignal;
  /** What every hook of the point is given, besides its own name and the point. */
  input: Omit<HookInput, 'version' | 'point' | 'hook'>;
  /** The environment command hooks take their allowed variables from (default: this process's). */
  env?: Record<string, string | undefined>;
  /** Of the hooks that match, only these run (an executor that is not a tool: hooks that name it). */
  only?: (hook: HookConfig) => boolean;
}

/**
 * The point's verdict, its hooks taken in binding order: the first `deny` (or failure that fails closed) ends it;
 * an `ask` is kept while later hooks still run (one of them may deny); rewrites compose, each hook seeing the
 * value the one before it left. The caller applies it through the runtime's own checks.
 */
export interface HookVerdict {
  decision: 'allow' | 'deny' | 'ask';
  reason?: string;
  /** The hook whose answer decided a deny or an ask. */
  hook?: string;
  /** The tool input after every rewrite (before_tool_call), when some hook rewrote it. */
  input?: Record<string, unknown>;
  /** The model messages after every rewrite (before_model_call), when some hook rewrote them. */
  messages?: HookMessage[];
  /** The hooks that rewrote, in order. */
  rewrittenBy: string[];
  /** A failure that failed closed, for the error the caller records. */
  error?: OarError;
}

const ALLOW: HookVerdict = { decision: 'allow', rewrittenBy: [] };

/** The binding's hooks at `point` that apply to this call (tool name, executor type, agent). */
export function hooksAt(
  hooks: HooksConfig | undefined,
  point: HookPoint,
  subject: { agent: string; toolName?: string; executor?: string },
): HookConfig[] {
  return (hooks ?? []).filter((hook) => {
    if (hook.point !== point) return false;
    const matcher = hook.matcher;
    if (!matcher) return true;
    if (matcher.agents && !matcher.agents.includes(subject.agent)) return false;
    if (matcher.executors && (!subject.executor || !matcher.executors.includes(subject.executor as never)))
      return false;
    if (matcher.tools && (!subject.toolName || !matcher.tools.some((p) => toolMatches(p, subject.toolName as string))))
      return false;
    return true;
  });
}

/** `name` exactly, or a `prefix*` pattern (`*` alone: every tool). */
export function toolMatches(pattern: string, name: string): boolean {
  return pattern.endsWith('*') ? name.startsWith(pattern.slice(0, -1)) : pattern === name;
}

/**
 * Run the hooks of one point and record each: `hook.started`, then `hook.completed` with its decision (and for a
 * rewrite the value before and after and the changes) or `hook.failed` with the error and the failure policy that
 * decided instead. Hook output enters the record through the log, which redacts it like every fact.
 */
export async function runHooks(point: HookPoint, scope: HookScope): Promise<HookVerdict> {
  const subject = {
    agent: scope.input.agent,
    ...(scope.input.tool ? { toolName: scope.input.tool.name } : {}),
    ...(scope.input.executor ? { executor: scope.input.executor.type } : {}),
  };
  const hooks = hooksAt(scope.engine.binding.hooks, point, subject).filter((hook) => scope.only?.(hook) ?? true);
  if (hooks.length === 0) return ALLOW;
  let input = scope.input.input;
  let messages = scope.input.messages;
  const rewrittenBy: string[] = [];
  let asked: Pick<HookVerdict, 'reason' | 'hook'> | undefined;
  const facts = (hook: HookConfig) => ({
    hookName: hook.name,
    point,
    ...(subject.toolName ? { toolName: subject.toolName } : {}),
  });
  const ids = Object.fromEntries(Object.entries(scope.ids).filter(([, v]) => v !== undefined));
  const event = (type: 'hook.started' | 'hook.completed' | 'hook.failed', hook: HookConfig, payload: object) =>
    ({
      type,
      ...ids,
      threadId: scope.ids.threadId,
      turnId: scope.ids.turnId,
      hookRun: { hookName: hook.name, point },
      payload: { ...facts(hook), ...payload },
    }) as unknown as EventDraft;
  for (const hook of hooks) {
    // Durable before the hook runs (it may take a while): observers see it running, as they see a tool run.
    await scope.engine.record(
      [event('hook.started', hook, { kind: hook.command ? 'command' : 'module', timeoutMs: hook.timeoutMs })],
      { durable: true },
    );
    const run: HookRun = await runHook(
      hook,
      {
        version: 1,
        point,
        hook: hook.name,
        ...scope.input,
        ...(input !== undefined ? { input } : {}),
        ...(messages !== undefined ? { messages } : {}),
      },
      { signal: scope.signal, env: scope.env ?? process.env, cwd: scope.engine.workspaceRoot },
    );
    if (!run.ok) {
      const policy = failurePolicy(hook);
      await scope.engine.record([
        event('hook.failed', hook, { error: run.error, durationMs: run.durationMs, onFailure: policy }),
      ]);
      if (policy === 'deny' || run.error.code === 'interrupted') {
        return {
          decision: 'deny',
          reason: `hook "${hook.name}" failed (${run.error.code}) and fails closed: ${run.error.message}`,
          hook: hook.name,
          rewrittenBy,
          error: run.error,
        };
      }
      continue;
    }
    const { output } = run;
    let rewrite: Record<string, unknown> | undefined;
    if (output.decision === 'rewrite') {
      const target = point === 'before_tool_call' ? 'input' : 'messages';
      const before = target === 'input' ? input : messages;
      const after = target === 'input' ? output.input : output.messages;
      const diff = jsonDiff(before, after);
      // A tool input is recorded before and after; a model request (a whole transcript) only by its changes, each
      // value capped, so one rewrite does not copy the context into the log twice.
      // A very large input is recorded like a model request: by its changes only (the tool call keeps it whole).
      const whole = target === 'input' && JSON.stringify([before, after]).length <= WHOLE_REWRITE_CHARS;
      rewrite = whole
        ? { target, before, after, ...diff }
        : { target, ...diff, changes: diff.changes.map(capChange), ...(target === 'input' ? { whole: false } : {}) };
      if (target === 'input') input = output.input;
      else messages = output.messages;
      rewrittenBy.push(hook.name);
    }
    await scope.engine.record([
      event('hook.completed', hook, {
        decision: output.decision,
        ...(output.reason !== undefined ? { reason: output.reason } : {}),
        durationMs: run.durationMs,
        ...(rewrite ? { rewrite } : {}),
      }),
    ]);
    if (output.decision === 'deny') {
      return {
        decision: 'deny',
        reason: `hook "${hook.name}" denied the call${output.reason ? `: ${output.reason}` : ''}`,
        hook: hook.name,
        rewrittenBy,
      };
    }
    if (output.decision === 'ask' && !asked) {
      asked = {
        reason: `hook "${hook.name}" asks for approval${output.reason ? `: ${output.reason}` : ''}`,
        hook: hook.name,
      };
    }
  }
  return {
    decision: asked ? 'ask' : 'allow',
    ...(asked ?? {}),
    ...(rewrittenBy.length > 0 && input !== undefined && point === 'before_tool_call' ? { input } : {}),
    ...(rewrittenBy.length > 0 && messages !== undefined && point === 'before_model_call' ? { messages } : {}),
    rewrittenBy,
  };
}

/** The largest tool input (before and after together, as JSON) a rewrite records whole. */
const WHOLE_REWRITE_CHARS = 64 * 1024;

/** The most characters of one changed value a model-request rewrite records. */
const CHANGE_VALUE_CHARS = 2_000;

function capChange(change: JsonChange): JsonChange {
  const cap = (value: unknown) =>
    typeof value === 'string' && value.length > CHANGE_VALUE_CHARS
      ? `${value.slice(0, CHANGE_VALUE_CHARS)}… (${value.length} characters)`
      : value;
  return {
    ...change,
    ...('before' in change ? { before: cap(change.before) } : {}),
    ...('after' in change ? { after: cap(change.after) } : {}),
  };
}
