import { posix } from 'node:path';
import type { PermissionRequest, SessionGrant } from '../config/permission-request.js';

/**
 * What a permission request names, in the one form rules and grants see: its tool name and its touched paths, and
 * the grant that approving it for the session creates. Pure string work, shared by the evaluator and the control
 * plane's `respond_action` (which records the grant without loading the evaluator).
 */

/** The name rules and grants see: the tool's own name, else the executor target (an unknown tool still has one). */
export function requestToolName(request: PermissionRequest): string | undefined {
  if (request.tool) return request.tool.name;
  return request.executor.type === 'tool' ? request.executor.target : undefined;
}

/**
 * Canonical workspace-relative form, so `./src/a.ts`, `src//a.ts` and `lib/../src/a.ts` all meet the globs as
 * `src/a.ts` — otherwise a deny on `src/**` could be dodged by spelling the path differently.
 */
export function normalizeTouchedPath(path: string): string {
  const normalized = posix.normalize(path.replaceAll('\\', '/'));
  return normalized.startsWith('./') ? normalized.slice(2) : normalized;
}

/**
 * The grant an `approve_for_session` of this request creates: the exact tool (or executor target) and, if the call
 * touched paths, exactly those paths, in the workspace the question was asked in. No directory globs: the human
 * approved what they saw, nothing next to it.
 */
export function grantFor(request: PermissionRequest, workspaceRoot?: string): SessionGrant {
  const isTool = request.executor.type === 'tool';
  const grant: SessionGrant = {
    ...(isTool ? {} : { executor: request.executor.type }),
    tool: (isTool ? requestToolName(request) : undefined) ?? request.executor.target,
    ...(workspaceRoot !== undefined ? { workspaceRoot } : {}),
    ...(request.operation !== undefined ? { operation: request.operation } : {}),
  };
  if (request.paths.length === 0) return grant;
  return { ...grant, paths: [...new Set(request.paths.map(normalizeTouchedPath))] };
}
