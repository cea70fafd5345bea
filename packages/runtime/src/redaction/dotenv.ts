import { MIN_SECRET_LENGTH } from './literals.js';

/**
 * `.env` files: which files count, how their lines parse, and which of their values are secrets. Pure.
 */

/**
 * `.env`, `.env.local`, `.env.production`, `.envrc`… but not the committed templates `.env.example`,
 * `.env.sample`, `.env.template` (also `.env.local.example` …): those hold placeholders meant to be read. The
 * default permission rules (policy/sensitive-paths.ts) draw the same line.
 */
export function isDotenvFileName(name: string): boolean {
  return name.startsWith('.env') && !/\.(?:example|sample|template)$/.test(name);
}

export interface DotenvEntry {
  key: string;
  /** The value as a program sees it (quotes removed, `\n` escapes of double-quoted values expanded). */
  value: string;
  /** The value as written in the file, when it differs (the model may read the file itself). */
  raw?: string;
}

const KEY = /^[ \t]*(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*[=:][ \t]*/;

/**
 * The entries of a `.env` file: `KEY=VALUE` lines, an optional `export ` prefix, `#` comments (whole-line, and
 * after an unquoted value), single-, double- and backtick-quoted values — double-quoted ones may span lines and
 * use `\n`-style escapes, as dotenv reads them. Lines that are not assignments are skipped.
 */
export function parseDotenv(text: string): DotenvEntry[] {
  const entries: DotenvEntry[] = [];
  const lines = text.replace(/^\uFEFF/, '').split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] as string;
    const head = KEY.exec(line);
    if (!head) continue;
    const key = head[1] as string;
    let rest = line.slice(head[0].length);
    const quote = rest[0];
    if (quote === '"' || quote === "'" || quote === '`') {
      // A quoted value runs to the closing quote, possibly lines later.
      let body = rest.slice(1);
      let close = closingQuote(body, quote);
      while (close === -1 && i + 1 < lines.length) {
        i++;
        body += `\n${lines[i]}`;
        close = closingQuote(body, quote);
      }
      const raw = close === -1 ? body : body.slice(0, close);
      const value = quote === '"' ? unescapeDouble(raw) : raw;
      entries.push(value === raw ? { key, value } : { key, value, raw });
      continue;
    }
    const comment = rest.search(/[ \t]#/);
    if (comment !== -1) rest = rest.slice(0, comment);
    entries.push({ key, value: rest.trim() });
  }
  return entries;
}

function closingQuote(body: string, quote: string): number {
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '\\' && quote === '"') i++;
    else if (c === quote) return i;
  }
  return -1;
}

function unescapeDouble(raw: string): string {
  return raw.replace(/\\([nrt"\\])/g, (_, c: string) => (c === 'n' ? '\n' : c === 'r' ? '\r' : c === 't' ? '\t' : c));
}

/** Key names that say "this is a secret" whatever the value looks like. */
const SECRET_KEY = /(?:KEY|SECRET|TOKEN|PASS|PWD|PRIVATE|CREDENTIAL|AUTH|SALT|SIGNATURE|CERT|DSN|COOKIE|SESSION)/i;

/**
 * Whether a `.env` value is treated as a secret. Every value of at least MIN_SECRET_LENGTH characters is, except —
 * under a key whose name does not suggest a secret (`NODE_ENV`, `PORT`, `API_URL`) — values that are plainly
 * configuration: one word (`development`), a number, an address or port (`127.0.0.1:5432`), a host name
 * (`api.example.com`), a URL without a password, and references to other variables (`${OTHER}`). Redacting those
 * everywhere would mangle ordinary text; a password inside a URL is still caught by the `url_password` shape.
 */
export function isDotenvSecret(key: string, value: string): boolean {
  if (value.length < MIN_SECRET_LENGTH) return false;
  if (value.includes('${')) return false;
  if (SECRET_KEY.test(key)) return true;
  if (/^[A-Za-z]+$/.test(value)) return false;
  if (/^[0-9.:,_-]+$/.test(value)) return false;
  if (/^(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?::[0-9]{1,5})?$/.test(value)) return false;
  if (isPlainUrl(value)) return false;
  return true;
}

/**
 * A URL with no credentials in it: no user info, no query, and no path segment long enough to be a token (webhook
 * URLs carry their secret in the path).
 */
function isPlainUrl(value: string): boolean {
  const match = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^\s:@/?#]+(?::[0-9]{1,5})?(\/[^\s@?#]*)?$/.exec(value);
  if (!match) return false;
  return (match[1] ?? '').split('/').every((segment) => segment.length < 16);
}

/** The secret values of a `.env` file's text (both as read and as written when they differ). */
export function dotenvSecretValues(text: string): string[] {
  const values: string[] = [];
  for (const entry of parseDotenv(text)) {
    if (!isDotenvSecret(entry.key, entry.value)) continue;
    values.push(entry.value);
    if (entry.raw !== undefined) values.push(entry.raw);
  }
  return values;
}
