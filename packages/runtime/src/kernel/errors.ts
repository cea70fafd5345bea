import { type OarError, oarError, type ToolAgentOutput } from '@oar/protocol';

export interface OarRuntimeErrorOptions {
  retryable?: boolean;
  details?: Record<string, unknown>;
}

/**
 * The runtime's throwable form of the structured error `{code, message, retryable, details}`. Control-plane
 * commands throw it for bad input (unknown ids, invalid commands), tools throw its subclass ToolError; transports
 * and `toOarError` turn it back into the plain object.
 */
export class OarRuntimeError extends Error {
  readonly error: OarError;

  constructor(code: string, message: string, options: OarRuntimeErrorOptions = {}) {
    super(message);
    this.name = 'OarRuntimeError';
    this.error = oarError(code, message, options);
  }

  get code(): string {
    return this.error.code;
  }
}

/** Any thrown value as a structured error; unknown failures are `internal_error` and not retryable. */
export function toOarError(error: unknown): OarError {
  if (error instanceof OarRuntimeError) return error.error;
  if (error instanceof Error) return oarError('internal_error', error.message, { details: { name: error.name } });
  return oarError('internal_error', String(error));
}

export const notFound = (kind: string, id: string) =>
  new OarRuntimeError(`${kind}_not_found`, `unknown ${kind} id "${id}"`, { details: { [`${kind}Id`]: id } });

/**
 * The abort reason of work stopped because its runtime is closing (not an interrupt: the work resumes elsewhere).
 * Retryable: the same command succeeds against a runtime that is not closing.
 */
export function runtimeClosing(): OarRuntimeError {
  return new OarRuntimeError('runtime_closing', 'the runtime is closing', { retryable: true });
}

/** The signal was aborted by a closing runtime, not by an interrupt: record nothing, the next worker resumes. */
export function isClosing(signal: AbortSignal): boolean {
  return signal.reason instanceof OarRuntimeError && signal.reason.code === 'runtime_closing';
}

/**
 * A tool failure with a stable code: the runtime's structured error (`error` is its `{code, message, retryable,
 * details}`), thrown by a tool. `path_outside_workspace` is recorded as a sandbox violation; other codes become
 * `tool.failed` with the structured error. `options` are the options as given (unset fields stay unset).
 */
export class ToolError extends OarRuntimeError {
  constructor(
    code: string,
    message: string,
    readonly options: OarRuntimeErrorOptions = {},
    /** The failed call's canonical record (a business CLI): on `tool.failed`, and its projection is what the model sees. */
    readonly agentOutput?: ToolAgentOutput,
  ) {
    super(code, message, options);
    this.name = 'ToolError';
  }
}
