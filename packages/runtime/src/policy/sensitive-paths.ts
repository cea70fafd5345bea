import { posix } from 'node:path';
import type { PermissionRequest } from '../config/permission-request.js';
import type { DefaultDenyRule, PermissionRule } from '../config/permissions.js';
import { globMatches } from '../kernel/match/glob-match.js';
import { ruleMatches } from './permission-match.js';
import { normalizeTouchedPath } from './request.js';

/**
 * The runtime's default deny rules: files that hold credentials are not touched by any tool unless the binding
 * explicitly allows the path with an allow rule. Unlike a user's deny rule (final), a default deny is lifted by
 * an allow rule that NAMES the file — see `explicitlyAllowed`. Pure: linear-time globs (glob-match.ts) and posix
 * path helpers only.
 * Evaluation order and rationale: docs/permissions.md "Default rules".
 */
export const DEFAULT_DENY_RULES: readonly DefaultDenyRule[] = [
  {
    name: 'dotenv',
    paths: ['**/.env*'],
    // Committed templates hold placeholders meant to be read (redaction/dotenv.ts draws the same line).
    except: ['**/.env*.example', '**/.env*.sample', '**/.env*.template'],
    reason: '.env files hold credentials',
  },
  {
    name: 'private_key_file',
    paths: ['**/*.pem', '**/*.key', '**/*.p12', '**/*.pfx'],
    reason: 'key files may hold private keys',
  },
  {
    name: 'ssh_private_key',
    // id_rsa, id_ed25519, id_ecdsa_sk, id_rsa.old, id_rsa-github… — not id_utils.ts, not the .pub halves.
    paths: ['**/id_{rsa,dsa,ecdsa,ed25519}', '**/id_{rsa,dsa,ecdsa,ed25519}[._-]*'],
    except: ['**/*.pub'],
    reason: 'SSH private keys',
  },
  {
    name: 'ssh_dir',
    paths: ['**/.ssh', '**/.ssh/**'],
    reason: '~/.ssh holds SSH keys and the hosts they open',
  },
];

/** A default rule names a path its globs match and its exceptions do not. */
function ruleNames(rule: DefaultDenyRule, path: string): boolean {
  return globMatches(rule.paths, path) && !(rule.except && globMatches(rule.except, path));
}

/**
 * The form default rules match: normalized, and with a leading `/` or `../` segments removed, so an absolute or
 * escaping request (`/home/me/.ssh/id_rsa`, `../.env`) meets them too — confinement refuses those anyway, but
 * the record then names the real reason.
 */
function defaultForm(path: string): string {
  return normalizeTouchedPath(path).replace(/^(?:\.\.\/|\/)+/, '');
}

/** The first default rule that names `path`, if any. */
export function sensitivePathRule(
  path: string,
  defaults: readonly DefaultDenyRule[] = DEFAULT_DENY_RULES,
): DefaultDenyRule | undefined {
  const form = defaultForm(path);
  return defaults.find((rule) => ruleNames(rule, form));
}

/** Stands for "any ordinary file next to it" when judging whether a glob names a file or a whole directory. */
const ORDINARY_NAME = 'oar-ordinary-file';

/**
 * Whether `glob` NAMES `path` rather than sweeping it up: it matches the path but not an ordinary file in the
 * same directory (`.env`, `**\/.env.local`, `certs/*.pem`, `*.{pem,key}`), or the glob's own text is a sensitive
 * path (`.ssh/**`, `**\/.env*`). `**`, `*` and `src/**` match everything around the file too, so they don't.
 */
export function globNamesPath(
  glob: string,
  path: string,
  defaults: readonly DefaultDenyRule[] = DEFAULT_DENY_RULES,
): boolean {
  const matches = (value: string) => globMatches([glob], value);
  const normalized = normalizeTouchedPath(path);
  if (!matches(normalized)) return false;
  const sibling = posix.join(posix.dirname(normalized), ORDINARY_NAME);
  return !matches(sibling) || sensitivePathRule(glob, defaults) !== undefined;
}

/**
 * Whether the user's rules explicitly allow touching `path` in this request: an allow rule that matches the
 * request (all its conditions, every touched path) has a glob that names `path` (`globNamesPath`).
 */
export function explicitlyAllowed(
  rules: readonly PermissionRule[],
  request: PermissionRequest,
  path: string,
  defaults: readonly DefaultDenyRule[] = DEFAULT_DENY_RULES,
): boolean {
  return rules.some(
    (rule) =>
      rule.decision === 'allow' &&
      rule.paths !== undefined &&
      rule.paths.some((glob) => globNamesPath(glob, path, defaults)) &&
      ruleMatches(rule, request),
  );
}

/**
 * The default rule that denies this request: the first touched path a default rule names and no allow rule
 * explicitly allows. `undefined` when the request may go on to the rest of the evaluation.
 */
export function defaultDenial(
  request: PermissionRequest,
  rules: readonly PermissionRule[],
  defaults: readonly DefaultDenyRule[] = DEFAULT_DENY_RULES,
): { rule: DefaultDenyRule; path: string } | undefined {
  if (defaults.length === 0) return undefined;
  for (const path of request.paths) {
    const rule = sensitivePathRule(path, defaults);
    if (rule && !explicitlyAllowed(rules, request, path, defaults)) return { rule, path: normalizeTouchedPath(path) };
  }
  return undefined;
}

/** A default rule in the notation of permission events' `rule` field: `defaults.dotenv {"decision":"deny",…}`. */
export function describeDefaultRule(rule: DefaultDenyRule & { path?: string }): string {
  const { name, paths, except } = rule;
  return `defaults.${name} ${JSON.stringify({ decision: 'deny', paths, ...(except ? { except } : {}) })}`;
}
