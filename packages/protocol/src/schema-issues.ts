import type { z } from 'zod';
import { type ProtocolIssue, pointer } from './errors.js';

/**
 * Turn zod issues into protocol issues the model can act on. Refinements may name their own stable code
 * through `params.oarCode`; every other schema fault is `invalid_schema` with a hint built from the issue.
 */
export function schemaIssues(error: z.ZodError, basePath: ReadonlyArray<string | number> = []): ProtocolIssue[] {
  return error.issues.map((issue) => {
    const path = pointer([...basePath, ...(issue.path as (string | number)[])]);
    const params = 'params' in issue ? (issue.params as Record<string, unknown> | undefined) : undefined;
    const code = typeof params?.oarCode === 'string' ? params.oarCode : 'invalid_schema';
    return { code, path, message: issue.message, hint: hintFor(issue, path) };
  });
}

function hintFor(issue: z.core.$ZodIssue, path: string): string {
  const at = path === '' ? 'the top level' : `"${path}"`;
  switch (issue.code) {
    case 'unrecognized_keys':
      return `Remove the unknown field(s) ${issue.keys.map((k) => `"${k}"`).join(', ')} at ${at}; use only the documented fields.`;
    case 'invalid_value':
      return `Use one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')} at ${at}.`;
    case 'invalid_type':
      return `Send a value of type ${issue.expected} at ${at}.`;
    case 'too_small':
      return `Provide at least ${String(issue.minimum)} at ${at}.`;
    case 'too_big':
      return `Provide at most ${String(issue.maximum)} at ${at}.`;
    case 'invalid_format':
      return `Fix the format of ${at}: ${issue.message}.`;
    case 'invalid_union':
      return `The value at ${at} matches none of the allowed forms; check the documented shape.`;
    default:
      return `Fix ${at}: ${issue.message}.`;
  }
}
