import { AGENT_API_ERROR_CODES, type AgentAPIErrorShape, type AgentApiErrorCode } from './schemas.js';

/** A proxy call refused or failed by the host, with the spec's AgentAPIError fields. */
export class AgentAPIError extends Error {
  readonly code: AgentApiErrorCode;
  readonly retryable: boolean;
  readonly details: Record<string, unknown>;

  constructor(error: { code: string; message: string; retryable?: boolean; details?: Record<string, unknown> }) {
    super(error.message);
    this.name = 'AgentAPIError';
    // A code outside the spec's list (a transport fault) is reported as the host's own error.
    this.code = (AGENT_API_ERROR_CODES as readonly string[]).includes(error.code)
      ? (error.code as AgentApiErrorCode)
      : 'runtime_error';
    this.retryable = error.retryable === true;
    this.details =
      this.code === error.code ? (error.details ?? {}) : { ...(error.details ?? {}), transport_code: error.code };
  }

  toJSON(): AgentAPIErrorShape {
    return { code: this.code, message: this.message, retryable: this.retryable, details: this.details };
  }
}
