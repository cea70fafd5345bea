import { RE2JS } from 're2js';
import { ToolError } from './tool.js';

/** The most characters a model-supplied pattern may have. */
export const MAX_PATTERN_LENGTH = 1_000;

export interface LinePattern {
  test(line: string): boolean;
}

/**
 * Compile a regular expression a model supplied. Patterns run on RE2 (re2js): linear time whatever the input, so
 * a pathological pattern such as `(a+)+$` — which a prompt-injected file could ask for — cannot freeze the event
 * loop and with it every session of the process. RE2 syntax is the JavaScript syntax without lookaround and
 * backreferences.
 */
export function compileLinePattern(pattern: string, options: { caseInsensitive?: boolean } = {}): LinePattern {
  checkPatternLength(pattern);
  try {
    const compiled = RE2JS.compile(pattern, options.caseInsensitive ? RE2JS.CASE_INSENSITIVE : 0);
    return { test: (line) => compiled.matcher(line).find() };
  } catch (error) {
    throw new ToolError(
      'invalid_pattern',
      `Invalid regular expression (RE2 syntax: no lookaround or backreferences): ${(error as Error).message}`,
      { details: { pattern } },
    );
  }
}

/** `invalid_pattern` for a pattern over MAX_PATTERN_LENGTH characters. */
export function checkPatternLength(pattern: string, what = 'pattern'): void {
  if (pattern.length > MAX_PATTERN_LENGTH) {
    throw new ToolError('invalid_pattern', `The ${what} is longer than ${MAX_PATTERN_LENGTH} characters.`, {
      details: { length: pattern.length },
    });
  }
}

/** A pattern that matches its text literally (for callers that fall back when a pattern does not compile). */
export function literalLinePattern(text: string): LinePattern {
  return { test: (line) => line.includes(text) };
}
