import type { PermissionRequest, SessionGrant } from '../config/permission-request.js';
import type { PermissionRule } from '../config/permissions.js';
import { commandMatches } from '../kernel/match/command-match.js';
import { globMatches } from '../kernel/match/glob-match.js';
import { normalizeTouchedPath, requestToolName } from './request.js';

/**
 * Pure matching of rules and grants against a request. No I/O: `node:path`'s posix helpers are string functions.
 */

/**
 * Whether the rule's path condition holds. Deny and ask rules match when ANY touched path matches (one forbidden
 * path is enough to stop the call); allow rules only when EVERY touched path matches, so an allow for `docs/**`
 * cannot carry along a write to `src/` in the same call. A rule with paths never matches a call touching none.
 */
function pathsMatch(rule: PermissionRule, paths: readonly string[]): boolean {
  if (!rule.paths) return true;
  if (paths.length === 0) return false;
  const touched = paths.map(normalizeTouchedPath);
  const matches = (path: string) => globMatches(rule.paths ?? [], path);
  return rule.decision === 'allow' ? touched.every(matches) : touched.some(matches);
}

/**
 * A rule matches when ALL its given conditions hold. Conditions about the tool (name, capability, flags) never hold
 * for an action that has no tool facts to check them against.
 */
export function ruleMatches(rule: PermissionRule, request: PermissionRequest): boolean {
  if (rule.executor !== undefined && rule.executor !== request.executor.type) return false;
  if (rule.tool !== undefined) {
    // A rule that names a non-tool executor type matches `tool` against the target (`{"executor": "service",
    // "tool": "crm"}`). Only then: a plain tool rule such as an allow for `*` must not start allowing pipelines.
    const name =
      requestToolName(request) ??
      (rule.executor !== undefined && rule.executor !== 'tool' ? request.executor.target : undefined);
    if (name === undefined || !globMatches([rule.tool], name)) return false;
  }
  const tool = request.tool;
  if (rule.capability !== undefined && !tool?.capabilities.includes(rule.capability)) return false;
  if (rule.readOnly !== undefined && tool?.isReadOnly !== rule.readOnly) return false;
  if (rule.destructive !== undefined && tool?.isDestructive !== rule.destructive) return false;
  if (rule.operation !== undefined) {
    if (request.operation === undefined || !globMatches([rule.operation], request.operation)) return false;
  }
  if (rule.command !== undefined) {
    if (request.command === undefined || !commandMatches(rule.command, request.command)) return false;
  }
  return pathsMatch(rule, request.paths);
}

/**
 * A grant covers a call of the same executor, exact tool name and exact operation whose touched paths are all among
 * the granted ones.
 * A grant made from a call that touched no paths covers only calls that touch none: approving `write_file` once
 * without paths must not approve writes to arbitrary files.
 */
export function grantCovers(grant: SessionGrant, request: PermissionRequest): boolean {
  if ((grant.executor ?? 'tool') !== request.executor.type) return false;
  const name = request.executor.type === 'tool' ? requestToolName(request) : request.executor.target;
  if (name !== grant.tool) return false;
  // The exact operation approved, or none on both sides: approving `calendar.update` never approves `calendar.delete`.
  if (grant.operation !== request.operation) return false;
  const touched = request.paths.map(normalizeTouchedPath);
  if (!grant.paths) return touched.length === 0;
  const granted = new Set(grant.paths.map(normalizeTouchedPath));
  return touched.length > 0 && touched.every((path) => granted.has(path));
}
