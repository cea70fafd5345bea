import type { RedactionKind } from './kinds.js';

/**
 * Credential SHAPES: what a secret looks like when nobody told the runtime its value. Every pattern is written to
 * be safe on hostile input:
 *
 * - each one starts with a literal anchor (`sk-`, `eyJ`, `://`, `-----BEGIN`, `password`…), so the scan only does
 *   work where a credential could begin;
 * - no nested quantifiers, and every repetition is bounded, so a failed attempt costs at most the bound (no
 *   catastrophic backtracking: the worst case is linear in the text times a small constant);
 * - no capturing groups: the scanner adds exactly one, around `secret`.
 *
 * Only the `secret` part is replaced; `prefix` (the context that identifies it, e.g. `Authorization: Bearer `) and
 * the lookahead `after` are kept, so the redacted text still reads as what it was.
 */
export interface CredentialPattern {
  kind: RedactionKind;
  /** Regex source of the context before the secret, kept in the output. No capturing groups. */
  prefix?: string;
  /** Regex source of the secret itself, replaced by the marker. No capturing groups. */
  secret: string;
  /** Regex source of a lookahead that must follow the secret (not consumed). */
  after?: string;
  /** Rejects a lookalike: the secret's text and the character right after the match. */
  accept?: (secret: string, next: string) => boolean;
  /** Extends the redacted range past the match (a PEM block's body, up to its END line). Returns the new end. */
  extend?: (text: string, end: number) => number;
}

/** A case-insensitive regex source for an ASCII word (`ci('key')` → `[Kk][Ee][Yy]`). */
function ci(word: string): string {
  return [...word].map((c) => (/[a-z]/i.test(c) ? `[${c.toUpperCase()}${c.toLowerCase()}]` : c)).join('');
}

const hasDigit = (s: string) => /[0-9]/.test(s);
const hasLetter = (s: string) => /[A-Za-z]/.test(s);
/** Random keys mix digits, upper and lower case; words joined by dashes (`sk-learn-…`) do not. */
const looksRandom = (s: string) => hasDigit(s) && /[A-Z]/.test(s) && /[a-z]/.test(s);

/**
 * Values that are not secrets but stand where one would: references (`$PW`, `${PW}`, `{{ pw }}`, `%(pw)s`),
 * masks (`***`, `xxxx`, `…`) and values holding a marker this redactor wrote before (so redacting twice changes
 * nothing).
 */
export function isPlaceholder(value: string): boolean {
  if (value.includes('[REDACTED:')) return true;
  return /^(?:\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\{\{[^}]{0,200}\}\}|%\(?[A-Za-z_][A-Za-z0-9_]*\)?s?|\*+|x+|X+|\.\.\.|…|\[REDACTED:[a-z_]+\])$/.test(
    value,
  );
}

// --- PEM private keys ---------------------------------------------------------------------------------------------

/** How far a PEM body may run from its BEGIN line (a 16 kbit RSA key is ~12 KB). */
const MAX_PEM_BODY = 64 * 1024;

/** Characters of a PEM body when its END line is missing: base64, whitespace, escaped newlines, header lines. */
function isPemBodyChar(code: number): boolean {
  return (
    (code >= 0x30 && code <= 0x39) || // 0-9
    (code >= 0x41 && code <= 0x5a) || // A-Z
    (code >= 0x61 && code <= 0x7a) || // a-z
    code === 0x2b || // +
    code === 0x2f || // /
    code === 0x3d || // =
    code === 0x2d || // - (Proc-Type, DEK-Info)
    code === 0x3a || // :
    code === 0x2c || // ,
    code === 0x5c || // \ (a JSON- or shell-escaped newline)
    code === 0x20 ||
    code === 0x09 ||
    code === 0x0a ||
    code === 0x0d
  );
}

/**
 * The end of a PEM block whose BEGIN line ends at `from`: past its END line when there is one within reach, else
 * (a key cut off by a preview or a truncation) as far as the text still looks like key material — a truncated
 * key leaks as much as a whole one.
 */
function pemBlockEnd(text: string, from: number): number {
  const window = text.length - from > MAX_PEM_BODY ? text.slice(from, from + MAX_PEM_BODY) : text.slice(from);
  const end = window.indexOf('-----END ');
  if (end !== -1) {
    const close = window.indexOf('-----', end + 9);
    if (close !== -1 && close - end <= 80) return from + close + 5;
  }
  let i = from;
  const limit = Math.min(text.length, from + MAX_PEM_BODY);
  while (i < limit && isPemBodyChar(text.charCodeAt(i))) i++;
  return i;
}

// --- passwords -----------------------------------------------------------------------------------------------------

/** Environment-style password names: `PASSWORD` (also ending `PGPASSWORD`, `DB_PASSWORD`), `_PWD`, `_PASS`. */
const ENV_PASSWORD_KEY = '(?:PASSWORD|PASSWD|_PWD|_PASS)';
/** Every password field name: the environment-style ones and `password` / `passwd` as code and configs write them. */
const PASSWORD_KEY = '(?:[Pp]assword|PASSWORD|[Pp]asswd|PASSWD|_PWD|_PASS)';
/** A value as shells, DSNs and env files delimit it (whitespace, quotes, shell operators end it). */
const ASSIGNED_VALUE = '[^\\s"\'`;&|<>]{1,256}';
/** A YAML-ish value: stricter, because `password: str` and `password: user.password,` are code. */
const MAPPED_VALUE = '[^\\s"\'`;&|,(){}\\[\\]<>]{1,256}';

/** `os.environ`, `config.db.password`, `req.body.password`: an expression, not a password. */
const isDottedPath = (s: string) => /^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+$/.test(s);
const isNullish = (s: string) => /^(?:null|nil|None|none|undefined|true|false|~)$/.test(s);
const isTypeName = (s: string) =>
  /^(?:str|string|String|bytes|int|bool|boolean|any|Any|unknown|SecretStr|Secret|Password|text|varchar|required|optional)$/.test(
    s,
  );
/** Words and spaces only (`"Password"`, `"Mot de passe"`): a UI label in an i18n file, not a credential. */
const isProse = (s: string) => /^[A-Za-z][a-z]*(?: [A-Za-z][a-z]*)*[.:!?]?$/.test(s);

/** An environment variable's value: anything but a reference. */
const acceptEnvPassword = (secret: string) => !isPlaceholder(secret);
/** `"password": "Password"` is a UI label; `password = "hunter2"` a credential. */
const acceptQuotedPassword = (secret: string) => !isPlaceholder(secret) && !isProse(secret);
/**
 * `password=pw)`, `password=pw,` and `password=None):` are keyword arguments, `password=getpass()` a call,
 * `password=os.environ` an expression: a value with brackets or a comma in it is code, not a password.
 */
const acceptAssignedPassword = (secret: string) =>
  !isPlaceholder(secret) && !isNullish(secret) && !isDottedPath(secret) && !/[,()[\]{}]/.test(secret);
/** `userInput`, `user_input`: an identifier, as in `password: userInput` (a property set from a variable). */
const isIdentifier = (s: string) => /^[a-z]+(?:[A-Z][a-z]*|_[a-z]+)+$/.test(s);
/** A mapped value must end where the line or the token ends (`password: str;`, `password: ${PW}` are code). */
const acceptMappedPassword = (secret: string, next: string) =>
  acceptAssignedPassword(secret) && !isTypeName(secret) && !isIdentifier(secret) && (next === '' || /\s/.test(next));

// --- the patterns --------------------------------------------------------------------------------------------------

/**
 * Where a token may start: not right after a letter or digit. Not `\b`: `_` is a word character, so `\b` never
 * matched a token glued after an underscore (`KEY_sk-proj-…`, `x_ghp_…`, `AWS_ID_AKIA…`), the shape environment
 * dumps and concatenated names take. A prefix inside a word (`task-ant-…`, `desk_live_…`) still starts nothing.
 */
const TOKEN_START = '(?<![A-Za-z0-9])';

const AUTHORIZATION = `${ci('authorization')}["']?[ \\t]{0,8}[:=][ \\t]{0,8}["']?`;

/**
 * In priority order: when two patterns match at the same position, the first wins (e.g. `sk-ant-` before `sk-`,
 * an `Authorization` header before a bare `Bearer`).
 */
export const CREDENTIAL_PATTERNS: readonly CredentialPattern[] = [
  {
    kind: 'private_key',
    secret: '-----BEGIN (?:[A-Z0-9]{1,16} ){0,3}PRIVATE KEY(?: BLOCK)?-----',
    extend: pemBlockEnd,
  },
  { kind: 'jwt', secret: `${TOKEN_START}eyJ[A-Za-z0-9_-]{5,4096}\\.[A-Za-z0-9_-]{5,16384}\\.[A-Za-z0-9_-]{0,4096}` },
  { kind: 'anthropic_key', secret: `${TOKEN_START}sk-ant-[A-Za-z0-9_-]{20,512}` },
  { kind: 'openai_key', secret: `${TOKEN_START}sk-[A-Za-z0-9_-]{20,512}`, accept: looksRandom },
  { kind: 'github_token', secret: `${TOKEN_START}(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{30,255})` },
  { kind: 'slack_token', secret: `${TOKEN_START}xox[abposr]-[A-Za-z0-9-]{10,255}`, accept: hasDigit },
  { kind: 'slack_token', prefix: 'hooks\\.slack\\.com/services/', secret: '[A-Za-z0-9_/-]{20,255}' },
  { kind: 'stripe_key', secret: `${TOKEN_START}[rs]k_(?:live|test)_[A-Za-z0-9]{16,255}` },
  { kind: 'aws_access_key', secret: `${TOKEN_START}(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}`, after: '(?![A-Za-z0-9])' },
  {
    kind: 'aws_secret_key',
    prefix: `(?:${ci('aws')}_?)?${ci('secret')}_?${ci('access')}_?${ci('key')}["']?[ \\t]{0,8}[:=][ \\t]{0,8}["']?`,
    secret: '[A-Za-z0-9/+]{40}',
    after: '(?![A-Za-z0-9/+=])',
  },
  { kind: 'google_api_key', secret: `${TOKEN_START}AIza[0-9A-Za-z_-]{35}`, after: '(?![0-9A-Za-z_-])' },
  { kind: 'oar_api_key', secret: `${TOKEN_START}oar_[A-Za-z0-9_-]{40}`, after: '(?![A-Za-z0-9_-])' },
  {
    kind: 'bearer_token',
    prefix: `${AUTHORIZATION}${ci('bearer')}[ \\t]{1,8}`,
    secret: '[A-Za-z0-9._~+/=-]{8,4096}',
  },
  { kind: 'basic_auth', prefix: `${AUTHORIZATION}${ci('basic')}[ \\t]{1,8}`, secret: '[A-Za-z0-9+/]{4,4096}={0,2}' },
  {
    kind: 'bearer_token',
    prefix: '\\b[Bb]earer[ \\t]{1,8}',
    secret: '[A-Za-z0-9._~+/-]{16,4096}={0,2}',
    accept: (s) => hasDigit(s) && hasLetter(s),
  },
  // scheme://user:PASSWORD@host — the password may itself contain `@` (the last one before the host wins). No
  // `[` in the user name, so `://[REDACTED:private_key]@` is not read as `user:password@`.
  {
    kind: 'url_password',
    prefix: '://[^\\s/:@?#"\'<>[\\]]{0,256}:',
    secret: '[^\\s/?#"\'<>]{1,256}',
    after: '(?=@)',
    accept: (s) => !isPlaceholder(s),
  },
  {
    kind: 'url_password',
    prefix: `[?&](?:${ci('password')}|${ci('passwd')}|${ci('pwd')}|sslpassword)=`,
    secret: '[^&#\\s"\'<>]{1,256}',
    accept: (s) => !isPlaceholder(s),
  },
  {
    kind: 'password',
    prefix: `${ENV_PASSWORD_KEY}["']?[ \\t]{0,8}[:=][ \\t]{0,8}"`,
    secret: '[^"\\n]{1,256}',
    after: '(?=")',
    accept: acceptEnvPassword,
  },
  {
    kind: 'password',
    prefix: `${ENV_PASSWORD_KEY}["']?[ \\t]{0,8}[:=][ \\t]{0,8}'`,
    secret: "[^'\\n]{1,256}",
    after: "(?=')",
    accept: acceptEnvPassword,
  },
  {
    kind: 'password',
    prefix: `${PASSWORD_KEY}["']?[ \\t]{0,8}[:=][ \\t]{0,8}"`,
    secret: '[^"\\n]{1,256}',
    after: '(?=")',
    accept: acceptQuotedPassword,
  },
  {
    kind: 'password',
    prefix: `${PASSWORD_KEY}["']?[ \\t]{0,8}[:=][ \\t]{0,8}'`,
    secret: "[^'\\n]{1,256}",
    after: "(?=')",
    accept: acceptQuotedPassword,
  },
  { kind: 'password', prefix: `${PASSWORD_KEY}=`, secret: ASSIGNED_VALUE, accept: acceptAssignedPassword },
  // YAML: a key at the start of a line (`password: …`, `  db_password: …`, `- POSTGRES_PASSWORD: …`), so prose such
  // as `login failed, password: incorrect` is left alone.
  {
    kind: 'password',
    prefix: `(?<![^\\n])[ \\t]{0,32}(?:- )?["']?[A-Za-z0-9_.-]{0,64}${PASSWORD_KEY}["']?:[ \\t]{1,8}`,
    secret: MAPPED_VALUE,
    accept: acceptMappedPassword,
  },
];
