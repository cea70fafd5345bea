import { ToolError } from '../errors.js';

/**
 * The most characters a model-supplied pattern may have.
 *
 * Model-supplied patterns (grep's regular expression and glob, expand_ref's `range.pattern`) run on RE2 (re2js):
 * linear time whatever the input, so a pathological pattern such as `(a+)+$` cannot backtrack for hours. Linear is
 * still pattern size × text length, so they never run on the main thread: they run in the match worker
 * (match-worker.ts), which a call's timeout or interrupt stops mid-match.
 */
export const MAX_PATTERN_LENGTH = 1_000;

/** `invalid_pattern` for a pattern over MAX_PATTERN_LENGTH characters. */
export function checkPatternLength(pattern: string, what = 'pattern'): void {
  if (pattern.length > MAX_PATTERN_LENGTH) {
    throw new ToolError('invalid_pattern', `The ${what} is longer than ${MAX_PATTERN_LENGTH} characters.`, {
      details: { length: pattern.length },
    });
  }
}
