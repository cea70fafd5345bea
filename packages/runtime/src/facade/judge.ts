import type { PermissionJudge } from '../control-plane/command-context.js';
import { toolPermissionRequest } from '../executors/tool.js';
import { OarRuntimeError } from '../kernel/errors.js';
import { authorize, permissionEvaluated } from '../policy/authorize.js';
import type { SessionState } from '../read-models/session.js';
import type { BoundConfig } from '../scheduler/engine.js';

/**
 * `evaluate_permission`'s judgement (control-plane/permissions.ts asks through this port): the request a call of a
 * bound tool with this input would make, judged as the executor would judge it now — the session's current binding
 * and grants, its workspace — through the one authorization (policy/authorize.ts). Before-call hooks are not run:
 * they are commands with effects of their own, and an evaluation must change nothing.
 */
export function permissionJudge(configFor: (session: SessionState) => Promise<BoundConfig>): PermissionJudge {
  return {
    async evaluate(session, call, ids, facts) {
      const config = await configFor(session);
      const parsed = config.tools.parseInput(call.toolName, call.input ?? {});
      if (!parsed.ok) {
        throw new OarRuntimeError(parsed.error.code, parsed.error.message, {
          details: parsed.error.details ?? {},
        });
      }
      const request = await toolPermissionRequest(parsed.tool, parsed.input, config.workspaceRoot);
      const source = {
        permissions: config.permissions,
        workspaceRoot: config.workspaceRoot,
        grants: async () => session.grants,
      };
      const evaluation = await authorize(source, session.sessionId, request);
      return permissionEvaluated(ids, evaluation, request, {
        ...(evaluation.decisions ? { decisions: evaluation.decisions } : {}),
        ...(request.command ? { command: request.command } : {}),
        ...facts,
      });
    },
  };
}
