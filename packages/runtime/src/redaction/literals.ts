/**
 * Literal secrets: known values (from the environment, from `.env*` files) to find verbatim, together with the
 * encodings in which they commonly reappear. Pure string functions; Node's Buffer only for base64.
 */

/** A known secret value and where it came from (the kind its marker shows). */
export interface LiteralSecret {
  value: string;
  kind: 'env_secret' | 'dotenv';
}

/**
 * Values shorter than this are never treated as literal secrets: redacting every `admin`, `3000` or `true` a
 * `.env` file happens to contain would mangle ordinary text while protecting nothing. Credential SHAPES (keys,
 * tokens, passwords in URLs) are recognised whatever their length.
 */
export const MIN_SECRET_LENGTH = 6;

/** Shortest base64 fragment worth searching for (a chance collision of 8 base64 characters is ~1 in 2^48). */
const MIN_BASE64_FRAGMENT = 8;

/**
 * The forms of `value` to search for: the raw value, its JSON-escaped form (a secret with a quote, backslash or
 * newline inside a JSON document), its URL-encoded form, and its base64 forms — the value encoded on its own, and
 * the part of any base64 blob that encodes it at each of the three byte alignments (so `Authorization: Basic
 * base64(user:secret)` or a Kubernetes secret manifest still match). Deduplicated, longest first.
 */
export function literalVariants(value: string): string[] {
  const variants = new Set<string>([value]);
  const json = JSON.stringify(value).slice(1, -1);
  variants.add(json);
  variants.add(encodeURIComponent(value));
  const bytes = Buffer.from(value, 'utf8');
  for (let shift = 0; shift < 3; shift++) {
    const fragment = alignedBase64(bytes, shift);
    if (fragment.length >= MIN_BASE64_FRAGMENT) {
      variants.add(fragment);
      variants.add(fragment.replaceAll('+', '-').replaceAll('/', '_'));
    }
  }
  return [...variants].filter((variant) => variant.length > 0).sort((a, b) => b.length - a.length);
}

/**
 * The base64 characters that depend only on `bytes` when they are preceded by `shift` other bytes: character i
 * covers bits [6i, 6i + 6), so it is fully inside the value's bits [8·shift, 8·(shift + length)) when
 * ceil(8·shift / 6) ≤ i < floor(8·(shift + length) / 6).
 */
function alignedBase64(bytes: Buffer, shift: number): string {
  const padded = Buffer.concat([Buffer.alloc(shift), bytes]);
  const encoded = padded.toString('base64').replace(/=+$/, '');
  const start = Math.ceil((8 * shift) / 6);
  const end = Math.floor((8 * (shift + bytes.length)) / 6);
  return end > start ? encoded.slice(start, end) : '';
}

/**
 * The secrets worth searching for: long enough, deduplicated, an environment secret winning over the same value
 * found in a `.env` file (one kind per value, so counts do not depend on the order sources were read in).
 */
export function usableLiterals(secrets: readonly LiteralSecret[]): LiteralSecret[] {
  const byValue = new Map<string, LiteralSecret>();
  for (const secret of secrets) {
    if (secret.value.length < MIN_SECRET_LENGTH) continue;
    const known = byValue.get(secret.value);
    if (!known || (known.kind === 'dotenv' && secret.kind === 'env_secret')) byValue.set(secret.value, secret);
  }
  return [...byValue.values()];
}
