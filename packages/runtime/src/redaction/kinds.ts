/**
 * The kinds of secret the redactor recognises. A kind names what a secret IS (its source or its shape), never
 * which one: it is what `[REDACTED:<kind>]` markers and `output.redacted` facts carry. The list is part of the
 * record's vocabulary (docs/security.md): kinds are added, never renamed.
 */
export const REDACTION_KINDS = [
  /** The value of an environment variable the binding names as a secret (provider keys always, `secrets.env`). */
  'env_secret',
  /** A value found in a `.env*` file of the workspace. */
  'dotenv',
  /** `-----BEGIN … PRIVATE KEY-----` blocks (PKCS#1/#8, EC, OpenSSH, encrypted, PGP), to the END line. */
  'private_key',
  /** A JSON Web Token: three base64url segments, the first starting `eyJ`. */
  'jwt',
  /** `sk-ant-…` */
  'anthropic_key',
  /** `sk-…`, `sk-proj-…` (mixed-case random body, so `sk-learn` and friends stay). */
  'openai_key',
  /** `ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`. */
  'github_token',
  /** `xoxb-`, `xoxp-`, `xoxa-`, `xoxr-`, `xoxs-`, `xoxo-` tokens and `hooks.slack.com/services/…` webhook paths. */
  'slack_token',
  /** `sk_live_…`, `rk_test_…` … */
  'stripe_key',
  /** `AKIA…`/`ASIA…` access key ids. */
  'aws_access_key',
  /** The value assigned to `aws_secret_access_key` / `SecretAccessKey`. */
  'aws_secret_key',
  /** `AIza…` */
  'google_api_key',
  /** The token of `Authorization: Bearer …`, or of a bare `Bearer …` that looks random. */
  'bearer_token',
  /** The credentials of `Authorization: Basic …`. */
  'basic_auth',
  /** The password of `scheme://user:PASSWORD@host` and of `?password=` / `&password=` query parameters. */
  'url_password',
  /** `PGPASSWORD=…`, `DB_PASSWORD=…`, `password=…` in key=value DSNs, `"password": "…"` assignments. */
  'password',
  /** An OAR API key (`oar_` and 40 random characters, store/workspaces.ts). */
  'oar_api_key',
] as const;

export type RedactionKind = (typeof REDACTION_KINDS)[number];

/** What replaces a secret in text. */
export function redactionMarker(kind: RedactionKind): string {
  return `[REDACTED:${kind}]`;
}
