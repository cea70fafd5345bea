import { z } from 'zod';

/**
 * The CLI output contract: one JSON object on stdout. Success `{ok: true, module, method, data}`; a partial success
 * also names what was not done (`partial`); a failure `{ok: false, status: "failure", error}` with a code of
 * TOOL_ERROR_CODES. Anything else on stdout (not JSON, several objects) is a broken CLI to OAR.
 */

/** The codes a CLI built on this SDK reports, as the Agent Tool Protocol names them (OAR maps each to its own). */
export const TOOL_ERROR_CODES = [
  /** `module.method` is not in the router, or not in the credential's scope. */
  'ACTION_NOT_ALLOWED',
  /** The input does not match the method's schema; `input_schema` says what it expects. */
  'INVALID_ACTION_INPUT',
  /** stdin is not one JSON object. */
  'INPUT_NOT_JSON',
  /** No credential in the environment, or a forged, malformed or expired one. */
  'CREDENTIAL_MISSING',
  'CREDENTIAL_INVALID',
  'CREDENTIAL_EXPIRED',
  /** The arguments are not `[config flags] MODULE METHOD [format flags]`. */
  'USAGE_ERROR',
  /** The handler failed (its message; details only where the handler gives them). */
  'HANDLER_FAILED',
] as const;
export type ToolErrorCode = (typeof TOOL_ERROR_CODES)[number];

export const ToolErrorSchema = z.object({
  code: z.string(),
  message: z.string(),
  module: z.string().optional(),
  method: z.string().optional(),
  /** INVALID_ACTION_INPUT: the method's input as compact text (`field: type`). */
  input_schema: z.record(z.string(), z.string()).optional(),
  details: z.record(z.string(), z.unknown()).optional(),
});
export type ToolError = z.infer<typeof ToolErrorSchema>;

export const CliSuccessSchema = z.object({
  ok: z.literal(true),
  module: z.string(),
  method: z.string(),
  data: z.unknown(),
  /** A partial success: what was not done, and why. */
  partial: z.object({ notDone: z.array(z.unknown()), reason: z.string() }).optional(),
});
export const CliFailureSchema = z.object({
  ok: z.literal(false),
  status: z.literal('failure'),
  error: ToolErrorSchema,
});
export const CliOutputSchema = z.union([CliSuccessSchema, CliFailureSchema]);
export type CliOutput = z.infer<typeof CliOutputSchema>;

/** A failure raised by a handler or the router: becomes the CLI's failure output. */
export class CliError extends Error {
  constructor(
    readonly code: ToolErrorCode,
    message: string,
    readonly extra: Omit<ToolError, 'code' | 'message'> = {},
  ) {
    super(message);
    this.name = 'CliError';
  }

  toJSON(): ToolError {
    return { code: this.code, message: this.message, ...this.extra };
  }
}
