import {
  type ActionResult,
  estimateTokens,
  MECHANICAL_SUMMARY_TOKENS,
  mechanicalSummary,
  type OarError,
} from '@oar/protocol';
import { actionIds, artifactCreated, observe, toolIds } from '../facts/action.js';
import { toolFailedEvent, toolResult } from '../facts/tool-call.js';
import { toOarError } from '../kernel/errors.js';
import type { EventDraft } from '../log/draft.js';
import type { RunActionStatus } from '../read-models/thread-state.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import type { StoredArtifact } from '../store/artifacts.js';

/**
 * How the pipeline and service executors end an action, the way a tool action ends (executors/tool.ts): the full
 * output stored as an artifact, the observation shaped by the result policy, `tool.result` / `tool.failed` naming
 * the graph action (which is what ends it in the run projection).
 */

export interface ActionOutput {
  text: string;
  structured?: Record<string, unknown>;
  /** A one-line summary written by the executor, preferred over a mechanical one. */
  summary?: string;
  mime?: string;
  /** What the model sees under the `summary` policy instead of a mechanical summary (ToolOutput.view). */
  view?: string;
  /** The view is a cut of a larger output (ToolOutput.spilled): record `output.spilled` with this reason. */
  spilled?: string;
  /** The run reported its own failure (ToolOutput.isError): `tool.result` carries `isError: true`. */
  isError?: boolean;
}

/** A short output is its own summary; a long one gets the executor's line followed by its first lines. */
export function summaryOf(output: ActionOutput): string {
  if (output.view !== undefined) return output.view;
  if (estimateTokens(output.text) <= MECHANICAL_SUMMARY_TOKENS) return output.text || (output.summary ?? '');
  const head = mechanicalSummary({ text: output.text });
  return output.summary ? `${output.summary}\n${head}` : head;
}

/** Store a full output as a named artifact of the session; a failure to store comes back as the error. */
export async function storeOutput(
  ctx: ExecutorContext,
  name: string,
  output: ActionOutput,
): Promise<StoredArtifact | OarError> {
  const { config } = ctx;
  return ctx.artifacts
    .put({ text: output.text, mime: output.mime ?? 'text/plain', name }, config.limits.maxArtifactBytes)
    .catch((error: unknown) => toOarError(error));
}

/**
 * End the action completed: artifact, observation, `tool.result`. `toolName` is what the record calls the
 * executor (the pipeline's or service's name); `extra` goes into the result payload (executor type, steps, status).
 */
export async function completeAction(
  ctx: ExecutorContext,
  toolName: string,
  output: ActionOutput,
  durationMs: number,
  options: {
    durable: boolean;
    extra?: Record<string, unknown>;
    before?: EventDraft[];
    /**
     * A permission rule explicitly allows what the call read (policy/reveal.ts): the model may see this observation
     * unredacted for the rest of the turn (policy/revealed.ts); `attempt` is the call's (its `tool.started`). The
     * record gets the redacted form either way.
     */
    reveal?: { attempt: number };
  },
): Promise<RunActionStatus> {
  const { action } = ctx;
  const artifact = await storeOutput(ctx, `${ctx.run.runId}/${action.id}`, output);
  if ('code' in artifact) {
    // What the call did is still recorded with its failure (a file version and its before-image).
    const failed = toolFailedEvent(ctx, {
      toolName,
      error: artifact,
      durationMs,
      ...(options.extra ? { extra: options.extra } : {}),
    });
    await ctx.record([...(options.before ?? []), failed], { durable: options.durable });
    return 'failed';
  }
  const observation = observe(ctx, {
    text: output.text,
    ...(output.structured ? { structured: output.structured } : {}),
    summary: summaryOf(output),
    artifacts: [artifact.uri],
  });
  const drafts: EventDraft[] = [...(options.before ?? []), artifactCreated(actionIds(ctx), artifact)];
  if (observation.truncated || output.spilled) {
    drafts.push({
      type: 'output.spilled',
      ...toolIds(ctx),
      artifactId: artifact.artifactId,
      payload: {
        artifactId: artifact.artifactId,
        sizeBytes: artifact.size,
        uri: artifact.uri,
        preview: artifact.preview,
        reason: observation.truncated
          ? 'observation over the context budget: the model sees a preview and the ref'
          : output.spilled,
      },
    });
  }
  drafts.push(
    toolResult(toolIds(ctx), {
      toolName,
      summary: observation.summary ?? output.summary,
      outputRef: artifact.uri,
      artifactIds: [artifact.artifactId],
      truncated: observation.truncated ?? false,
      durationMs,
      graphActionId: action.id,
      ...(output.isError ? { isError: true } : {}),
      ...options.extra,
      observation,
    }),
  );
  await ctx.record(drafts, { durable: options.durable });
  rememberRevealed(ctx, observation, options.reveal);
  // `if_truncated: fail` on an output over the budget: the output is stored, the action failed.
  return observation.status === 'failed' ? 'failed' : 'completed';
}

/**
 * Keep the observation as the model may see it when it may and that differs from the recorded one; otherwise
 * forget an earlier attempt's. What it may see: every secret the redactor recognises on its own (known values,
 * self-evident shapes) in place, the secrets recognised only by their context (`password=…`, a URL's password)
 * still redacted — the model's output is recorded through the same redactor, and a context-only secret it repeated
 * without its context would go into the record unrecognised (`Redactor.contextualOnly`). Only after the result is
 * appended: the side channel never runs ahead of the record it stands in for.
 */
function rememberRevealed(
  ctx: ExecutorContext,
  observation: ActionResult,
  reveal: { attempt: number } | undefined,
): void {
  const { revealed } = ctx;
  const { redactor } = ctx.config;
  if (!revealed) return;
  const recorded = reveal ? redactor.redactJson(observation) : observation;
  const shown = recorded === observation ? observation : redactor.contextualOnly().redactJson(observation);
  if (!reveal || recorded === observation || JSON.stringify(shown) === JSON.stringify(recorded)) {
    revealed.forget(ctx.run.runId, ctx.action.id);
    return;
  }
  revealed.remember({
    turnId: ctx.run.turnId,
    runId: ctx.run.runId,
    actionId: ctx.action.id,
    attempt: reveal.attempt,
    observation: shown,
  });
}

/** End the action failed (or cancelled by an interrupt) with a structured error: `tool.failed`. */
export async function failAction(
  ctx: ExecutorContext,
  toolName: string,
  error: OarError,
  durationMs: number,
  options: {
    durable: boolean;
    status?: 'failed' | 'cancelled';
    before?: EventDraft[];
    extra?: Record<string, unknown>;
  },
): Promise<RunActionStatus> {
  const status = options.status ?? 'failed';
  await ctx.record(
    [
      ...(options.before ?? []),
      toolFailedEvent(ctx, {
        toolName,
        error,
        durationMs,
        ...(status === 'cancelled' ? { status } : {}),
        ...(options.extra ? { extra: options.extra } : {}),
      }),
    ],
    { durable: options.durable },
  );
  return status;
}
