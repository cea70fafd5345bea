import type { HookConfig, HookInput } from '../config/hooks.js';
import type { PermissionRequest } from '../config/permission-request.js';
import { toolIds } from '../facts/action.js';
import { type HookEngine, type HookVerdict, hooksAt, runHooks } from '../policy/hooks/hooks.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import type { AnyTool, ToolOutput } from '../tools/tool.js';
import { callFacts } from '../tools/tool.js';

/** The part of a tool's output an after_tool_call hook is shown (the whole output is in the artifact). */
const OUTPUT_TEXT_LIMIT = 64 * 1024;

/** Whether any hook of the binding applies at `point` to this tool call (so a call without hooks pays nothing). */
export function hasToolHooks(
  ctx: ExecutorContext,
  point: 'before_tool_call' | 'after_tool_call',
  tool: AnyTool,
): boolean {
  return (
    hooksAt(ctx.config.binding.hooks, point, { agent: ctx.thread.agent, toolName: tool.name, executor: 'tool' })
      .length > 0
  );
}

/** What every hook of an action is told about where the call stands: session, thread, turn, agent, call id. */
function actionInput(ctx: ExecutorContext) {
  return {
    sessionId: ctx.thread.sessionId,
    threadId: ctx.thread.threadId,
    turnId: ctx.run.turnId,
    agent: ctx.thread.agent,
    workspaceRoot: ctx.config.workspaceRoot,
    toolCallId: ctx.state.toolCallId,
  };
}

function callInput(ctx: ExecutorContext, tool: AnyTool, input: unknown): Omit<HookInput, 'version' | 'point' | 'hook'> {
  const facts = callFacts(tool, input);
  return {
    ...actionInput(ctx),
    tool: {
      name: tool.name,
      isReadOnly: facts.isReadOnly,
      isDestructive: facts.isDestructive,
      isConcurrencySafe: facts.isConcurrencySafe,
      capabilities: [...tool.capabilities],
    },
    executor: { type: 'tool', target: tool.name },
    input: (input ?? {}) as Record<string, unknown>,
  };
}

/** A hook point of this action: the binding's hooks, in its workspace, its facts recorded in its session. */
function hookEngine(ctx: ExecutorContext): HookEngine {
  return { binding: ctx.config.binding, workspaceRoot: ctx.config.workspaceRoot, record: (d, o) => ctx.record(d, o) };
}

/** before_tool_call: the hooks' verdict on the call as parsed; a rewrite comes back as the new input. */
export function beforeToolCall(ctx: ExecutorContext, tool: AnyTool, input: unknown): Promise<HookVerdict> {
  return runHooks('before_tool_call', {
    engine: hookEngine(ctx),
    ids: toolIds(ctx),
    signal: ctx.signal,
    input: callInput(ctx, tool, input),
  });
}

/** after_tool_call: the hooks' verdict on what the call returned (a deny withholds it from the model). */
export function afterToolCall(
  ctx: ExecutorContext,
  tool: AnyTool,
  input: unknown,
  output: ToolOutput,
): Promise<HookVerdict> {
  const text = output.text ?? (output.structured ? JSON.stringify(output.structured) : '');
  return runHooks('after_tool_call', {
    engine: hookEngine(ctx),
    ids: toolIds(ctx),
    signal: ctx.signal,
    input: {
      ...callInput(ctx, tool, input),
      output: {
        text: text.slice(0, OUTPUT_TEXT_LIMIT),
        truncated: text.length > OUTPUT_TEXT_LIMIT,
        ...(output.structured ? { structured: output.structured } : {}),
        ...(output.summary ? { summary: output.summary } : {}),
      },
    },
  });
}

/**
 * before_tool_call hooks for an action whose executor is not a tool (a pipeline, a service, a delegation, a human
 * question, a runtime operation): only hooks whose matcher names that executor type run, and only their deny and
 * ask apply — such an action's input has no tool schema to validate a rewrite against, so a rewrite denies it.
 */
export async function beforeExecutorCall(
  ctx: ExecutorContext,
  request: PermissionRequest,
): Promise<HookVerdict | undefined> {
  const type = request.executor.type;
  const named = (hook: HookConfig) => hook.matcher?.executors?.includes(type) === true;
  const hooks = hooksAt(ctx.config.binding.hooks, 'before_tool_call', { agent: ctx.thread.agent, executor: type });
  if (!hooks.some(named)) return undefined;
  const verdict = await runHooks('before_tool_call', {
    engine: hookEngine(ctx),
    ids: toolIds(ctx),
    signal: ctx.signal,
    only: named,
    input: {
      ...actionInput(ctx),
      executor: { type, target: request.executor.target },
      input: (request.input ?? {}) as Record<string, unknown>,
    },
  });
  if (verdict.rewrittenBy.length === 0) return verdict;
  return {
    decision: 'deny',
    reason: `hook ${verdict.rewrittenBy.join(', ')} rewrote a ${type} action; rewrites apply to tool calls only`,
    hook: verdict.rewrittenBy[0] as string,
    rewrittenBy: verdict.rewrittenBy,
  };
}
