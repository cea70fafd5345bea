import { z } from 'zod';

/**
 * The structured error every OAR boundary returns: library calls, CLI output, HTTP bodies.
 * `retryable` tells a caller whether the same request may succeed later (or after a corrective retry).
 */
export const OarErrorSchema = z.object({
  code: z.string().min(1),
  message: z.string(),
  retryable: z.boolean(),
  details: z.record(z.string(), z.unknown()).optional(),
});
export type OarError = z.infer<typeof OarErrorSchema>;

export function oarError(
  code: string,
  message: string,
  options: { retryable?: boolean; details?: Record<string, unknown> } = {},
): OarError {
  return {
    code,
    message,
    retryable: options.retryable ?? false,
    ...(options.details ? { details: options.details } : {}),
  };
}

/**
 * One fault found in a model's declaration. `path` is a JSON-pointer-like location inside what the model sent
 * (e.g. `/calls/1/depends`); `hint` is written for the model's corrective retry, not for a human operator.
 */
export const ProtocolIssueSchema = z.object({
  code: z.string().min(1),
  path: z.string(),
  message: z.string(),
  hint: z.string(),
});
export type ProtocolIssue = z.infer<typeof ProtocolIssueSchema>;

/** A sentence ends with its own punctuation: `.`, `?`, `!`, `:` or an ellipsis (`…`) — or gets a full stop. */
function asSentence(text: string): string {
  return /[.?!:…]$/.test(text) ? text : `${text}.`;
}

/**
 * Join sentences with one space, giving each exactly one closing mark: a part that already ends in `.` (or `?`,
 * `!`, `:`, `…`) keeps it, any other gets a full stop, so "message." + "hint" never reads "message.. hint". Blank
 * parts are dropped.
 */
export function joinSentences(...parts: string[]): string {
  return parts
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .map(asSentence)
    .join(' ');
}

/**
 * One issue as the line of a corrective request: `- [code] at /path: message. hint` (no path part when the path
 * is empty). The one place message and hint are joined, so every runtime builds the same clean wording.
 */
export function correctiveLine(issue: ProtocolIssue): string {
  return `- [${issue.code}]${issue.path ? ` at ${issue.path}` : ''}: ${joinSentences(issue.message, issue.hint)}`;
}

/** A repair the runtime applied to a known malformation; recorded so adherence and repair rates can be measured. */
export const RepairSchema = z.object({
  code: z.string().min(1),
  detail: z.string(),
});
export type Repair = z.infer<typeof RepairSchema>;

/** JSON-pointer path from segments: `['calls', 1, 'depends']` → `/calls/1/depends`. */
export function pointer(segments: ReadonlyArray<string | number | symbol>): string {
  if (segments.length === 0) return '';
  return `/${segments.map((s) => String(s).replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
}
