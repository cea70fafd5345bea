import { pointer } from '@oar/protocol';
import { z } from 'zod';
import { OarRuntimeError } from '../kernel/errors.js';
import { checkJsonDepth, INPUT_FILE_LIMITS, readBoundedText } from '../kernel/input-files.js';

/**
 * The model script file: a documented list of responses a scripted model replays, one per model call. Used by the
 * demo, the tests and users' own CI, so every field is strict: a typo in a script is a script bug, not a no-op.
 */

const FINISH_REASONS = ['stop', 'length', 'content-filter', 'tool-calls', 'error', 'other'] as const;

export const ScriptToolCallSchema = z.strictObject({
  name: z.string().min(1),
  /** An object is JSON-encoded; a string is sent verbatim so malformed JSON can be scripted. */
  arguments: z.union([z.record(z.string(), z.unknown()), z.string()]),
  /** Optional explicit tool call id; otherwise a deterministic one is generated. */
  id: z.string().min(1).optional(),
});
export type ScriptToolCall = z.infer<typeof ScriptToolCallSchema>;

export const ScriptErrorSchema = z.strictObject({
  message: z.string().min(1),
  statusCode: z.number().int().min(100).max(599).optional(),
  /** Defaults to what APICallError derives from the status code (408, 409, 429 and 5xx are retryable). */
  retryable: z.boolean().optional(),
  /** Response headers of the failure, e.g. `{"retry-after": "1"}` or `x-ratelimit-*` for a scripted rate limit. */
  headers: z.record(z.string(), z.string()).optional(),
  /** The response body, e.g. a provider's "context_length_exceeded" error JSON. */
  body: z.string().optional(),
});

export const ScriptUsageSchema = z.strictObject({
  inputTokens: z.number().int().nonnegative().optional(),
  outputTokens: z.number().int().nonnegative().optional(),
  /** Of the input tokens, how many the provider read from its prompt cache (not reported when left out). */
  cachedInputTokens: z.number().int().nonnegative().optional(),
  /** Of the output tokens, how many were reasoning (not reported when left out). */
  reasoningTokens: z.number().int().nonnegative().optional(),
});

/** The fields of one model response (a step, or one of its alternatives). */
const STEP_FIELDS = {
  /**
   * Arguments of a native AgentProtocolOutput call. Deliberately NOT validated against the carrier schema so
   * invalid declarations (act without calls, unknown fields) can be scripted to exercise the corrective retry.
   */
  protocol: z.record(z.string(), z.unknown()).optional(),
  /** Raw assistant text: the full DSL in text, pseudo tool calls in text, cut-off output, plain prose. */
  text: z.string().optional(),
  /**
   * The model's reasoning before its answer, as a provider sends it apart from the output (reasoning parts): streamed
   * as `reasoning-start` / `reasoning-delta` / `reasoning-end`, a `reasoning` content part when not streamed. Not
   * content on its own: a step with reasoning still needs its answer.
   */
  reasoning: z.string().min(1).optional(),
  /** Arbitrary native tool calls, including unknown tools and malformed arguments. */
  toolCalls: z.array(ScriptToolCallSchema).min(1).optional(),
  /** The call fails with a provider error (APICallError). */
  error: ScriptErrorSchema.optional(),
  /** Wait before answering; an aborted signal ends the wait at once. */
  delayMs: z.number().int().nonnegative().optional(),
  /** Streaming only: how many pieces each text, reasoning and tool call's arguments arrive in (default 3). */
  chunks: z.number().int().min(1).max(100_000).optional(),
  /** Streaming only: the wait before each piece, like a model producing tokens; an abort ends it at once. */
  chunkDelayMs: z.number().int().nonnegative().optional(),
  /** Reported token usage; each side omitted is estimated from the prompt / response length. */
  usage: ScriptUsageSchema.optional(),
  /** Overrides the derived finish reason (tool-calls when the step has tool calls, else stop). */
  finishReason: z.enum(FINISH_REASONS).optional(),
};

/** A step has content or an error, never both. */
function checkStep(
  step: { protocol?: unknown; text?: unknown; toolCalls?: unknown; reasoning?: unknown; error?: unknown },
  ctx: z.RefinementCtx,
): void {
  const content = ['protocol', 'text', 'toolCalls'].filter((key) => step[key as keyof typeof step] !== undefined);
  const output = step.reasoning !== undefined ? [...content, 'reasoning'] : content;
  if (step.error !== undefined && output.length > 0) {
    ctx.addIssue({
      code: 'custom',
      path: ['error'],
      message: `an error step takes no content (found ${output.join(', ')})`,
    });
  }
  if (step.error === undefined && content.length === 0) {
    ctx.addIssue({ code: 'custom', path: [], message: 'a step needs one of protocol, text, toolCalls or error' });
  }
}

/**
 * Another response for the same call, given when `ifPrompt` (a regular expression) matches the text the model is
 * shown: a script that reacts to what happened (an approved or a denied action) the way a model would.
 */
export const ModelScriptAlternativeSchema = z
  .strictObject({
    ifPrompt: z.string().refine((source) => {
      try {
        new RegExp(source);
        return true;
      } catch {
        return false;
      }
    }, 'a regular expression'),
    ...STEP_FIELDS,
  })
  .superRefine(checkStep);
export type ModelScriptAlternative = z.infer<typeof ModelScriptAlternativeSchema>;

/**
 * One model response. Content fields may be combined (emitted in the order text, protocol, toolCalls), which
 * scripts a model that talks before its tool call; `error` stands alone because a failed call has no content.
 * `alternatives` are tried in order: the first whose `ifPrompt` matches answers instead of the step.
 */
export const ModelScriptStepSchema = z
  .strictObject({ ...STEP_FIELDS, alternatives: z.array(ModelScriptAlternativeSchema).min(1).optional() })
  .superRefine(checkStep);
export type ModelScriptStep = z.infer<typeof ModelScriptStepSchema>;

export const ModelScriptSchema = z.strictObject({
  /** What the script exercises; JSON has no comments, so documentation lives here. Ignored by the model. */
  description: z.string().optional(),
  /** The main agent's responses, in call order. */
  steps: z.array(ModelScriptStepSchema),
  /**
   * Answers to context compaction requests (docs/models.md "Context budget and compaction"), in the order the
   * thread asks for summaries; usually `{"text": "…summary…"}` or an `error`. A script without them cannot
   * summarise: the runtime then records the failed call and uses its deterministic summary.
   */
  compaction: z.strictObject({ description: z.string().optional(), steps: z.array(ModelScriptStepSchema) }).optional(),
  /** Per-agent responses for sub-agents delegated to by name. */
  agents: z
    .record(
      z.string().min(1),
      z.strictObject({ description: z.string().optional(), steps: z.array(ModelScriptStepSchema) }),
    )
    .optional(),
});
export type ModelScript = z.infer<typeof ModelScriptSchema>;

/** Validates an already-parsed script; `source` names it in errors (a path or a label). */
export function parseModelScript(value: unknown, source = 'model script'): ModelScript {
  const result = ModelScriptSchema.safeParse(value);
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => ({
    path: pointer(issue.path as (string | number)[]),
    message: issue.message,
  }));
  const summary = issues.map((issue) => `${issue.path || '/'}: ${issue.message}`).join('; ');
  throw new OarRuntimeError('invalid_model_script', `invalid model script ${source}: ${summary}`, {
    details: { source, issues },
  });
}

/**
 * Reads and validates a script file. Unreadable files and bad JSON are `invalid_model_script` too; a file over
 * INPUT_FILE_LIMITS.modelScript is refused before it is read (`input_too_large`), one nested deeper than
 * MAX_JSON_DEPTH before it is parsed (`input_too_deep`: deeply nested model output is scripted as `text`).
 */
export async function loadModelScript(path: string): Promise<ModelScript> {
  let text: string;
  try {
    // Without a UTF-8 byte-order mark, which some editors write and JSON.parse rejects.
    text = await readBoundedText(path, INPUT_FILE_LIMITS.modelScript, 'model script');
  } catch (error) {
    if (error instanceof OarRuntimeError) throw error;
    const reason = error instanceof Error ? error.message : String(error);
    throw new OarRuntimeError('invalid_model_script', `cannot read model script ${path}: ${reason}`, {
      details: { source: path, issues: [{ path: '', message: reason }] },
    });
  }
  checkJsonDepth(text, path, 'model script');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new OarRuntimeError('invalid_model_script', `model script ${path} is not valid JSON: ${reason}`, {
      details: { source: path, issues: [{ path: '', message: reason }] },
    });
  }
  return parseModelScript(json, path);
}
