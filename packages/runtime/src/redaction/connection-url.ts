/**
 * Store locations and other connection strings as they may be shown (CLI output, errors, events): every password
 * becomes `***`, the rest stays readable. Works on text that is not a valid URL too — a malformed URL is exactly
 * what ends up in an error message.
 */

const MASK = '***';

/** Query / DSN parameters whose value is a credential. */
const SECRET_PARAMS = 'password|passwd|pwd|pass|sslpassword|secret|token|access_token|auth_token|api_key|apikey';

/**
 * `postgres://user:PW@host/db?password=PW&sslpassword=PW` → `postgres://user:***@host/db?password=***&sslpassword=***`,
 * and `host=h user=u password='PW'` → `host=h user=u password=***`. The user info runs to the last `@` of the
 * authority, so a password containing `@` is masked whole; when the URL is malformed (a raw `/` or `?` in the
 * password) the text up to the first `@` after `scheme://user:` is masked instead.
 */
export function maskConnectionUrl(url: string): string {
  return maskParameters(maskUserInfo(url));
}

function maskUserInfo(url: string): string {
  const scheme = /^[ \t]*[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(url);
  if (!scheme) return url;
  const start = scheme[0].length;
  const rest = url.slice(start);
  const authorityEnd = rest.search(/[/?#\s]/);
  const authority = authorityEnd === -1 ? rest : rest.slice(0, authorityEnd);
  let at = authority.lastIndexOf('@');
  if (at === -1) {
    // Malformed: `user:pa/ss@host`. Mask up to the first `@` if a `user:` comes before it on the same token.
    const token = rest.split(/\s/, 1)[0] ?? '';
    at = token.indexOf('@');
    if (at === -1) return url;
  }
  const userInfo = rest.slice(0, at);
  const colon = userInfo.indexOf(':');
  if (colon === -1) return url;
  return `${url.slice(0, start)}${userInfo.slice(0, colon + 1)}${MASK}${rest.slice(at)}`;
}

function maskParameters(text: string): string {
  const query = new RegExp(`([?&;](?:${SECRET_PARAMS})=)[^&#;\\s]*`, 'gi');
  // key=value DSNs (libpq, ADO): `password=PW`, `Password='P W'`, separated by spaces or `;`.
  const dsn = new RegExp(
    `((?:^|[\\s;])(?:${SECRET_PARAMS})[ \\t]*=[ \\t]*)(?:'(?:[^'\\\\]|\\\\.){0,256}'|[^\\s;]*)`,
    'gi',
  );
  return text.replace(query, `$1${MASK}`).replace(dsn, `$1${MASK}`);
}
