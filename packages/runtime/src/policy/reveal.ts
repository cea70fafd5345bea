import type { PermissionRequest } from '../config/permission-request.js';
import type { DefaultDenyRule, PermissionRule } from '../config/permissions.js';
import { DEFAULT_DENY_RULES, explicitlyAllowed } from './sensitive-paths.js';

/**
 * Whether the model may see a call's output unredacted (docs/security.md, "What the model sees"): secrets are
 * redacted from the record always, and from the model's view unless a permission rule EXPLICITLY allows the path
 * the call read. Explicit means the very test that lets an allow rule lift a default deny rule
 * (`explicitlyAllowed`): for every path the call touches — as written and, through a symlink, as reached — an
 * allow rule of the binding matches the call and has a glob that NAMES the path (`.env.test`, `**\/.env*`,
 * `certs/*.pem`), not one that sweeps it up with everything next to it (`**`, `*`, `src/**`). Only a read-only
 * call qualifies (a tool that writes or runs commands reads nothing the rule named), and only one that touches
 * some path. A session grant, the mode, a hook or a human approval is never such a rule.
 */
export function revealsOutput(
  rules: readonly PermissionRule[],
  request: PermissionRequest,
  defaults: readonly DefaultDenyRule[] = DEFAULT_DENY_RULES,
): boolean {
  const tool = request.tool;
  if (request.executor.type !== 'tool' || !tool?.isReadOnly || tool.isDestructive) return false;
  if (request.paths.length === 0) return false;
  return request.paths.every((path) => explicitlyAllowed(rules, request, path, defaults));
}
