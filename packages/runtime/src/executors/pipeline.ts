import { type OarError, oarError } from '@oar/protocol';
import { mappingRef, type PipelineConfig, type PipelineStep, stepOrder } from '../config/pipelines.js';
import { actionIds, artifactCreated, toolIds } from '../facts/action.js';
import { toolFailed, toolResult } from '../facts/tool-call.js';
import { isClosing } from '../kernel/errors.js';
import type { EventDraft } from '../log/draft.js';
import { authorize, permissionEvaluated } from '../policy/authorize.js';
import type { RunActionStatus } from '../read-models/thread-state.js';
import { openBracket } from '../scheduler/bracket.js';
import type { ExecutorContext } from '../scheduler/executor-context.js';
import type { AnyTool } from '../tools/tool.js';
import { callFacts } from '../tools/tool.js';
import { type Executor, prepareNamed } from './executor.js';
import { keepFileVersion } from './file-versions.js';
import type { Authorized } from './gate.js';
import { type ActionOutput, completeAction, failAction, storeOutput, summaryOf } from './outcome.js';
import { fileConfinement, invokeTool, toolPermissionRequest } from './tool.js';

/**
 * The `pipeline` executor: a predefined, deterministic flow of tool calls from the binding, run as ONE graph action
 * (docs/executors.md). The pipeline is authorized once (`permission.evaluated` for executor `pipeline`), then each
 * step is a governed tool call of its own: input resolved from the mapping, checked by the tool's schema, evaluated
 * by the permission policy, bracketed by `tool.started` … `tool.result`/`tool.failed` carrying the step's own ids
 * (`<toolCallId>.<stepId>`, payload `pipelineStep`), full output stored as an artifact. Step events carry no
 * `graphActionId`, so only the pipeline's own `tool.result`/`tool.failed` ends the action. An interrupt stops the
 * pipeline between steps (and aborts a step whose tool cancels); the first failing step fails the pipeline.
 */

/** What a step left for the steps after it: the values a `$step` reference reads. */
interface StepValue {
  text: string;
  structured?: Record<string, unknown>;
  summary?: string;
}

/** One finished step, as the pipeline's result lists it. */
interface StepRecord {
  id: string;
  tool: string;
  status: 'completed' | 'failed' | 'cancelled';
  summary?: string;
  outputRef?: string;
  durationMs: number;
  error?: OarError;
}

export const pipelineExecutor: Executor<PipelineConfig> = {
  prepare: async (ctx) => prepareNamed(ctx, 'pipeline', ctx.config.binding.pipelines),
  run: runPipeline,
};

async function runPipeline(
  ctx: ExecutorContext,
  pipeline: PipelineConfig,
  gated: Authorized,
): Promise<RunActionStatus> {
  const { config, action } = ctx;
  const sessionId = ctx.thread.sessionId;
  const steps = stepOrder(pipeline.steps) ?? pipeline.steps;
  const tools = steps.map((step) => config.tools.get(step.tool));
  // Re-running is harmless only when every step is: otherwise the start is made durable first (a crash mid-way
  // then ends in an honest `lost`, see worker/recovery.ts), and so is every step's start and end.
  const bracket = await openBracket((drafts, options) => ctx.record(drafts, options), {
    sessionId,
    ids: toolIds(ctx),
    authorization: gated.allowed,
    payload: {
      toolName: pipeline.name,
      executor: 'pipeline',
      attempt: ctx.state.attempt + 1,
      idempotent: tools.every((tool) => tool?.isIdempotent === true),
      graphActionId: action.id,
      input: action.input,
      steps: steps.map((step) => ({ id: step.id, tool: step.tool, depends: step.depends })),
    },
  });
  const durable = { durable: bracket.durable };
  const started = Date.now();
  const values = new Map<string, StepValue>();
  const records: StepRecord[] = [];
  const fail = (error: OarError, status: 'failed' | 'cancelled' = 'failed') =>
    failAction(ctx, pipeline.name, { ...error, details: { ...error.details, steps: records } }, Date.now() - started, {
      ...durable,
      status,
    });

  for (const [index, step] of steps.entries()) {
    // Between steps: an interrupt stops here; a closing runtime records nothing (recovery decides, like a crash).
    if (ctx.signal.aborted) {
      if (isClosing(ctx.signal)) return 'running';
      return fail(
        oarError('interrupted', `pipeline "${pipeline.name}" was interrupted before step "${step.id}"`, {
          details: { pipeline: pipeline.name, nextStep: step.id },
        }),
        'cancelled',
      );
    }
    const outcome = await runStep(ctx, pipeline, step, tools[index], values);
    if (outcome === 'closing') return 'running';
    records.push(outcome.record);
    if (outcome.record.status !== 'completed') {
      const error = outcome.record.error ?? oarError('pipeline_step_failed', `step "${step.id}" failed`);
      return fail(
        oarError(
          outcome.record.status === 'cancelled' ? 'interrupted' : 'pipeline_step_failed',
          `pipeline "${pipeline.name}" stopped at step "${step.id}" (${step.tool}): ${error.message}`,
          { retryable: error.retryable, details: { pipeline: pipeline.name, step: step.id, cause: error } },
        ),
        outcome.record.status === 'cancelled' ? 'cancelled' : 'failed',
      );
    }
    values.set(step.id, outcome.value);
  }

  // The pipeline's result is its last step's output; the structured part lists every step with its artifact.
  const last = values.get(steps.at(-1)?.id ?? '');
  const output: ActionOutput = {
    text: last?.text ?? '',
    structured: {
      pipeline: pipeline.name,
      steps: records.map(({ error: _none, ...record }) => record),
      ...(last?.structured ? { result: last.structured } : {}),
    },
    summary: `pipeline ${pipeline.name}: ${records.length} step(s) completed${last?.summary ? `; ${last.summary}` : ''}`,
  };
  return completeAction(ctx, pipeline.name, output, Date.now() - started, {
    ...durable,
    extra: { executor: 'pipeline', steps: records.length },
  });
}

type StepOutcome = { record: StepRecord; value: StepValue } | 'closing';

/** One step: resolve its input, check it, authorize it, run the tool, store its output. Never throws for a fault. */
async function runStep(
  ctx: ExecutorContext,
  pipeline: PipelineConfig,
  step: PipelineStep,
  tool: AnyTool | undefined,
  values: ReadonlyMap<string, StepValue>,
): Promise<StepOutcome> {
  const { config } = ctx;
  const sessionId = ctx.thread.sessionId;
  const ids = stepIds(ctx, step);
  const facts = { toolName: step.tool, pipeline: pipeline.name, pipelineStep: step.id };
  const started = Date.now();
  const failed = async (
    error: OarError,
    options: {
      status?: 'failed' | 'cancelled';
      before?: EventDraft[];
      durable?: boolean;
      extra?: Record<string, unknown>;
    } = {},
  ): Promise<StepOutcome> => {
    const status = options.status ?? 'failed';
    const durationMs = Date.now() - started;
    await ctx.record(
      [
        ...(options.before ?? []),
        toolFailed(ids, { ...facts, ...options.extra, error, durationMs }, status === 'cancelled' ? status : undefined),
      ],
      { durable: options.durable ?? false },
    );
    return { record: { id: step.id, tool: step.tool, status, durationMs, error }, value: { text: '' } };
  };
  if (!tool) {
    return failed(oarError('unknown_tool', `tool "${step.tool}" is not bound to this session`));
  }
  const resolved = resolveMapping(step.input, ctx.action.input, values);
  if ('error' in resolved) return failed(resolved.error);
  const parsed = config.tools.parseInput(tool.name, resolved.value);
  if (!parsed.ok) return failed(parsed.error);

  // Each step is evaluated by the policy like any tool call. A deny (a user rule, a credential file, read-only
  // mode) stops the pipeline; so does an ask rule, which means "ask every time" and a running pipeline cannot
  // wait for an answer mid-way. An ask that is only the mode's default is covered by the pipeline's own
  // authorization: its steps are fixed in the binding, so authorizing the pipeline authorizes them.
  const request = await toolPermissionRequest(tool, parsed.input, config.workspaceRoot);
  const evaluation = await authorize(ctx.policy, sessionId, request);
  const covered = evaluation.decision === 'ask' && evaluation.source !== 'rule';
  const evaluated = permissionEvaluated(ids, evaluation, request, {
    ...(covered
      ? {
          decision: 'allow',
          reason: `${evaluation.reason}; covered by the authorization of pipeline "${pipeline.name}"`,
          coveredBy: { executor: 'pipeline', target: pipeline.name, graphActionId: ctx.action.id },
        }
      : {}),
    ...facts,
  });
  if (evaluation.decision === 'deny' || (evaluation.decision === 'ask' && !covered)) {
    const error =
      evaluation.decision === 'deny'
        ? oarError('permission_denied', `permission denied: ${evaluation.reason}`, {
            details: { reason: evaluation.reason },
          })
        : oarError(
            'approval_required',
            `step "${step.id}" needs approval (${evaluation.reason}), and a running pipeline cannot wait for one`,
            {
              details: {
                reason: evaluation.reason,
                hint: 'add an allow rule for this tool and path, or run it as its own action',
              },
            },
          );
    return failed(error, { before: [evaluated] });
  }

  const bracket = await openBracket((drafts, options) => ctx.record(drafts, options), {
    sessionId,
    ids,
    authorization: [evaluated],
    ...fileConfinement(tool, parsed.input, request, ctx.config.workspaceRoot),
    payload: { ...facts, attempt: 1, idempotent: callFacts(tool, parsed.input).isIdempotent, input: parsed.input },
  });
  const durable = { durable: bracket.durable };
  // A `block` tool finishes even when the turn is interrupted; the pipeline then stops before its next step.
  const ran = await invokeTool(ctx, tool, parsed.input, request, ids, facts, bracket.idempotencyKey);
  if (ran.outcome === 'closing') return 'closing';
  if (ran.outcome === 'failed') {
    return failed(ran.error, {
      before: ran.before,
      ...durable,
      ...(ran.status === 'cancelled' ? { status: 'cancelled' as const } : {}),
    });
  }
  const { output, durationMs } = ran;
  const text = output.text ?? (output.structured ? JSON.stringify(output.structured, null, 2) : '');
  const value: StepValue = {
    text,
    ...(output.structured ? { structured: output.structured } : {}),
    summary: summaryOf({ text, ...(output.summary ? { summary: output.summary } : {}) }),
  };
  // The file it changed keeps its version whether or not its output can be stored.
  const version = output.fileVersion ? await keepFileVersion(ctx, output.fileVersion) : undefined;
  const artifact = await storeOutput(ctx, `${ctx.run.runId}/${ctx.action.id}/${step.id}`, {
    text,
    ...(output.mime ? { mime: output.mime } : {}),
  });
  if ('code' in artifact) {
    return failed(artifact, {
      ...durable,
      ...(version ? { before: version.drafts, extra: { fileVersion: version.fileVersion } } : {}),
    });
  }
  await ctx.record(
    [
      ...(version?.drafts ?? []),
      artifactCreated(actionIds(ctx), artifact),
      toolResult(ids, {
        ...facts,
        summary: value.summary,
        outputRef: artifact.uri,
        artifactIds: [artifact.artifactId],
        durationMs,
        ...(version ? { fileVersion: version.fileVersion } : {}),
      }),
    ],
    durable,
  );
  return {
    record: {
      id: step.id,
      tool: step.tool,
      status: 'completed',
      summary: value.summary,
      outputRef: artifact.uri,
      durationMs,
    },
    value,
  };
}

/** A step's own correlation ids: its tool call is `<the pipeline action's tool call id>.<step id>`. */
function stepIds(ctx: ExecutorContext, step: PipelineStep) {
  const { stepId: _action, toolCallId, ...ids } = toolIds(ctx);
  const id = `${toolCallId}.${step.id}`;
  return { ...ids, stepId: id, toolCallId: id };
}

// ---- the input mapping --------------------------------------------------------------------------------------

/** The value at a dotted path (`a.b.0.c`; "" is the root), or `found: false`. */
export function valueAt(root: unknown, path: string): { found: true; value: unknown } | { found: false } {
  if (path === '') return { found: true, value: root };
  let current: unknown = root;
  for (const segment of path.split('.')) {
    if (Array.isArray(current) && /^\d+$/.test(segment) && Number(segment) < current.length) {
      current = current[Number(segment)];
    } else if (
      current !== null &&
      typeof current === 'object' &&
      !Array.isArray(current) &&
      Object.hasOwn(current, segment)
    ) {
      current = (current as Record<string, unknown>)[segment];
    } else {
      return { found: false };
    }
  }
  return { found: true, value: current };
}

/**
 * Resolve a step's input template (see `mappingRef` in definitions.ts) against the pipeline input and the outputs
 * of the steps before it. A path that is missing and has no default is an error naming it: a step never runs on a
 * silently dropped value.
 */
export function resolveMapping(
  template: unknown,
  input: Record<string, unknown>,
  values: ReadonlyMap<string, StepValue>,
): { value: unknown } | { error: OarError } {
  const missing: string[] = [];
  const walk = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(walk);
    if (value === null || typeof value !== 'object') return value;
    const ref = mappingRef(value as Record<string, unknown>);
    if (typeof ref === 'string') {
      missing.push(ref);
      return undefined;
    }
    if (!ref) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, walk(item)]));
    if (ref.kind === 'literal') return ref.value;
    const source = ref.kind === 'input' ? input : values.get(ref.step);
    const found = source === undefined ? { found: false as const } : valueAt(source, ref.path);
    if (found.found) return found.value;
    if (ref.hasDefault) return ref.default;
    missing.push(ref.kind === 'input' ? `$input "${ref.path}"` : `$step "${ref.step}" path "${ref.path}"`);
    return undefined;
  };
  const value = walk(template);
  if (missing.length === 0) return { value };
  return {
    error: oarError(
      'pipeline_mapping_unresolved',
      `the step input references values that do not exist: ${missing.join(', ')}`,
      {
        details: { missing },
      },
    ),
  };
}
