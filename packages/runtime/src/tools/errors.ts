import { ToolError } from '../kernel/errors.js';

/**
 * Throw `aborted` if the call was interrupted or timed out. Tools call this between units of work (directories,
 * files, before a write) so an interrupt takes effect promptly without leaving half-done work behind.
 */
export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw abortedError();
}

export function abortedError(): ToolError {
  // Not retryable: the caller (a human or the scheduler) asked for the stop, repeating it blindly defeats that.
  return new ToolError('aborted', 'The tool call was aborted.', { retryable: false });
}

/**
 * Translate a Node file-system error into a ToolError with a stable code, so the model and the UI see `not_found`
 * rather than an errno string. ToolErrors pass through untouched.
 */
export function fsToolError(error: unknown, path: string): ToolError {
  if (error instanceof ToolError) return error;
  const errno = (error as NodeJS.ErrnoException | undefined)?.code;
  const details = { path };
  switch (errno) {
    case 'ENOENT':
      return new ToolError('not_found', `${path} does not exist.`, { details });
    case 'EISDIR':
      return new ToolError('is_directory', `${path} is a directory, not a file.`, { details });
    case 'ENOTDIR':
    case 'EEXIST':
      return new ToolError('not_a_directory', `A component of ${path} is a file, not a directory.`, { details });
    case 'EACCES':
    case 'EPERM':
      return new ToolError('permission_denied', `The operating system denied access to ${path}.`, { details });
    case 'ELOOP':
      return new ToolError('invalid_path', `${path} has too many levels of symbolic links.`, { details });
    case 'ABORT_ERR':
      return abortedError();
    default: {
      // Unknown I/O faults (EIO, EMFILE, ENOSPC…) are often transient; let the caller decide whether to retry.
      const message = error instanceof Error ? error.message : String(error);
      return new ToolError('io_error', `I/O error on ${path}: ${message}`, {
        retryable: true,
        details: { ...details, errno },
      });
    }
  }
}

/** True for the errors that mean "nothing is at this path" (a missing entry, or a file where a directory should be). */
export function isMissing(error: unknown): boolean {
  const errno = (error as NodeJS.ErrnoException | undefined)?.code;
  return errno === 'ENOENT' || errno === 'ENOTDIR';
}
