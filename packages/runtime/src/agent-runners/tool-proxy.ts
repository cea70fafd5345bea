import { randomUUID } from 'node:crypto';
import type { Action, OarError } from '@oar/protocol';
import { ToolCallArgsSchema, type ToolCallResult } from '@oar/runner-sdk';
import { keepFileVersion } from '../executors/file-versions.js';
import { pathsBeyondApproval } from '../executors/gate.js';
import { fileConfinement, invokeTool, toolPermissionRequest } from '../executors/tool.js';
import { artifactCreated } from '../facts/action.js';
import { toolFailed, toolResult } from '../facts/tool-call.js';
import { toOarError } from '../kernel/errors.js';
import type { EventDraft } from '../log/draft.js';
import { approvalEvaluated, authorize, deniedByUpdatedBinding, permissionEvaluated } from '../policy/authorize.js';
import { approvalScope } from '../policy/permissions.js';
import type { RunAction, RunState } from '../read-models/thread-state.js';
import { openBracket } from '../scheduler/bracket.js';
import { type ExecutorContext, executorContext, sessionDoors } from '../scheduler/executor-context.js';
import { awaitDecision } from './decisions.js';
import type { AuditTarget } from './run-session.js';
import { apiError, type RunSession } from './run-session.js';

/** The tools a run may see: the granted ones that this process has, as catalog entries (name, description, schema). */
export function runTools(session: Pick<RunSession, 'engine' | 'access'>) {
  if (!session.access.toolOps.length) return [];
  return session.engine.tools.catalog().filter((tool) => session.access.tools.includes(tool.name));
}

export async function toolDetail(
  session: RunSession,
  payload: Record<string, unknown>,
  audit: AuditTarget,
): Promise<Record<string, unknown>> {
  const name = typeof payload.tool_name === 'string' ? payload.tool_name : undefined;
  if (!name) throw apiError('invalid_argument', 'tools.get_detail takes {tool_name}');
  audit.resource = name;
  audit.scope = 'tool';
  if (!session.access.toolOps.includes('detail')) throw apiError('unauthorized', 'tools.get_detail is not granted');
  const tool = runTools(session).find((t) => t.name === name);
  // Not granted and not registered look the same to the runner: resource ids are opaque.
  if (!tool) throw apiError('not_found', `no tool ${name} for this run`);
  return { tool_name: tool.name, description: tool.description, parameters: tool.inputSchema };
}

/**
 * tools.call through the governed tool path: the tool's own input schema and checks, the permission policy
 * (`permission.evaluated`; a deny refuses the call as `unauthorized` — a runner never bypasses the permission engine;
 * an ask is a durable decision the call waits for, agent-runners/decisions.ts), then the call bracketed by
 * `tool.started` … `tool.result` / `tool.failed` (durable when not idempotent), with the workspace confinement,
 * timeout and interrupt of every tool, and its full output stored as an artifact.
 */
export async function toolCall(
  session: RunSession,
  payload: Record<string, unknown>,
  audit: AuditTarget,
  /** The runner cancelled the call (its request's stream). */
  signal?: AbortSignal,
): Promise<ToolCallResult> {
  const parsed = ToolCallArgsSchema.safeParse(payload);
  if (!parsed.success) throw apiError('invalid_argument', 'tools.call takes {tool_name, parameters}');
  const { tool_name: name, parameters } = parsed.data;
  audit.resource = name;
  audit.scope = 'tool';
  const { engine } = session;
  if (!session.access.toolOps.includes('call')) throw apiError('unauthorized', 'tools.call is not granted');
  if (!session.access.tools.includes(name))
    throw apiError('unauthorized', `tool ${name} is not among this run's resources`);
  const tool = engine.tools.get(name);
  if (!tool) throw apiError('not_found', `no tool ${name} for this run`);
  const input = engine.tools.parseInput(name, parameters);
  if (!input.ok) throw apiError('invalid_argument', input.error.message, { issues: input.error.details?.issues ?? [] });
  const refused = tool.check?.(input.input);
  if (refused) throw apiError('invalid_argument', toOarError(refused).message);

  const toolCallId = `${session.ids.runId}.call_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const ids = { ...session.ids, stepId: toolCallId, toolCallId };
  const runnerFacts = { runner: { runId: session.ids.runId, runnerId: session.runnerId } };
  let request = await toolPermissionRequest(tool, input.input, engine.workspaceRoot);
  const evaluation = await authorize(engine, session.sessionId, request);
  const evaluated = permissionEvaluated(ids, evaluation, request, runnerFacts);
  if (evaluation.decision === 'deny') {
    await session.record([evaluated]);
    throw apiError('unauthorized', `permission denied: ${evaluation.reason}`, {
      decision: 'deny',
      reason: evaluation.reason,
    });
  }
  let before: EventDraft[] = [evaluated];
  if (evaluation.decision === 'ask') {
    // A durable question, answered by `oar respond` while the call waits (until the run's deadline).
    const prompt = `Runner ${session.runnerId} asks to run ${name}${
      request.paths.length ? ` on ${request.paths.join(', ')}` : ''
    }. ${evaluation.reason}`;
    const answer = await awaitDecision(
      session,
      {
        actionType: 'tool_approval',
        toolName: name,
        prompt,
        decisions: evaluation.decisions ?? ['approve', 'deny'],
        scope: approvalScope(request, engine.workspaceRoot),
        input: input.input as Record<string, unknown>,
        toolCallId,
        before: [evaluated],
      },
      signal ? { signal } : {},
    );
    if (answer.decision === 'deny') {
      throw apiError(
        'unauthorized',
        `permission denied by ${answer.resolvedBy ?? 'user'}${answer.reason ? `: ${answer.reason}` : ''}`,
        {
          decision: 'deny',
          action_id: answer.actionId,
        },
      );
    }
    // Approved for what it showed: a path the call touches now and the question did not show (a link retargeted
    // while it waited) is refused, and so is a call the binding, updated meanwhile, denies.
    const now = await toolPermissionRequest(tool, input.input, engine.workspaceRoot);
    const beyond = pathsBeyondApproval(request.paths, now.paths);
    if (beyond.length > 0) {
      throw apiError('unauthorized', `the call now touches ${beyond.join(', ')}, which the approval did not cover`, {
        decision: 'deny',
        action_id: answer.actionId,
      });
    }
    const denied = await deniedByUpdatedBinding(engine, session.sessionId, now);
    if (denied) {
      throw apiError('unauthorized', `permission denied: ${denied.reason}`, {
        decision: 'deny',
        action_id: answer.actionId,
      });
    }
    request = now;
    before = [
      approvalEvaluated(
        ids,
        { reason: `approved by respond_action (${answer.actionId})`, toolName: name },
        runnerFacts,
      ),
    ];
  }
  session.proxyToolCalls.add(toolCallId);
  const bracket = await openBracket((drafts, options) => session.record(drafts, options.durable), {
    sessionId: session.sessionId,
    ids,
    authorization: before,
    ...fileConfinement(tool, input.input, request, engine.workspaceRoot),
    payload: {
      toolName: name,
      attempt: 1,
      idempotent: tool.isIdempotent,
      input: input.input as Record<string, unknown>,
      ...runnerFacts,
    },
  });
  const context = actionContext(session, toolCallId, signal);
  const ran = await invokeTool(context, tool, input.input, request, ids, { toolName: name }, bracket.idempotencyKey);
  if (ran.outcome !== 'completed') {
    const error: OarError =
      ran.outcome === 'failed' ? ran.error : { code: 'interrupted', message: 'the host is closing', retryable: true };
    await bracket.end([
      ...(ran.outcome === 'failed' ? ran.before : []),
      toolFailed(
        ids,
        { toolName: name, error, durationMs: ran.outcome === 'failed' ? ran.durationMs : 0, ...runnerFacts },
        ran.outcome === 'failed' && ran.status === 'cancelled' ? 'cancelled' : undefined,
      ),
    ]);
    // A tool's own failure is the runner's result to handle (as a model's tool result would be), not a refusal.
    return {
      tool_call_id: toolCallId,
      idempotency_key: bracket.idempotencyKey,
      ok: false,
      content: error.message,
      error: { code: error.code, message: error.message },
    };
  }
  const { output, durationMs } = ran;
  const text = engine.redactor.redactText(
    output.text ?? (output.structured ? JSON.stringify(output.structured, null, 2) : ''),
  );
  const stored = await engine.artifacts.put(
    session.sessionId,
    { text, mime: output.mime ?? 'text/plain', name: `${session.ids.runId}/${toolCallId}` },
    engine.limits.maxArtifactBytes,
  );
  session.artifactIds.add(stored.artifactId);
  // A runner's write or edit keeps the file's version as the model's own calls do (rollback, review).
  const version = output.fileVersion ? await keepFileVersion(context, output.fileVersion) : undefined;
  await bracket.end([
    ...(version?.drafts ?? []),
    artifactCreated(session.ids, stored),
    toolResult(ids, {
      toolName: name,
      summary: output.summary ?? text.slice(0, 200),
      outputRef: stored.uri,
      artifactIds: [stored.artifactId],
      durationMs,
      ...runnerFacts,
      ...(version ? { fileVersion: version.fileVersion } : {}),
    }),
  ]);
  return {
    tool_call_id: toolCallId,
    idempotency_key: bracket.idempotencyKey,
    ok: true,
    content: text,
    ...(output.structured ? { structured: output.structured } : {}),
    artifact_id: stored.artifactId,
  };
}

/** The executor context `invokeTool` runs a tool with: this run's ids, the thread, the call's abort signal. */
function actionContext(session: RunSession, toolCallId: string, cancelled?: AbortSignal): ExecutorContext {
  const run = { runId: session.ids.runId, turnId: session.ids.turnId, taskId: session.ids.taskId } as RunState;
  return executorContext(
    sessionDoors(session.engine, session.thread.sessionId),
    {
      thread: session.thread,
      run,
      action: { id: toolCallId } as Action,
      state: { toolCallId, attempt: 0 } as unknown as RunAction,
    },
    // The run's end or interrupt, and the runner cancelling this very call, both stop the tool.
    cancelled ? AbortSignal.any([session.signal, cancelled]) : session.signal,
  );
}
