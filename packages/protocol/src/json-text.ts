/**
 * Reading JSON that a model wrote. Models often put raw newlines or tabs inside JSON strings of a stringified
 * payload; that one malformation is repaired (and reported) because its meaning is unambiguous. Everything
 * else that fails to parse is reported as an error, never guessed at.
 */

export type JsonRead =
  | { ok: true; value: unknown; controlCharactersEscaped: boolean }
  | { ok: false; message: string; truncated: boolean };

const CONTROL_ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/** Escape raw \n, \r and \t inside JSON string literals; returns null when there were none. */
export function escapeControlCharactersInStrings(text: string): string | null {
  let out = '';
  let inString = false;
  let escaped = false;
  let changed = false;
  for (const ch of text) {
    if (inString) {
      if (escaped) {
        escaped = false;
      } else if (ch === '\\') {
        escaped = true;
      } else if (ch === '"') {
        inString = false;
      } else if (ch in CONTROL_ESCAPES) {
        out += CONTROL_ESCAPES[ch];
        changed = true;
        continue;
      }
    } else if (ch === '"') {
      inString = true;
    }
    out += ch;
  }
  return changed ? out : null;
}

/**
 * A best-effort signal that the text was cut off (unbalanced brackets or an open string at the end), so the
 * error can tell the model to send a shorter declaration rather than "fix your JSON".
 */
export function looksTruncated(text: string): boolean {
  let depth = 0;
  let inString = false;
  let escaped = false;
  for (const ch of text) {
    if (inString) {
      if (escaped) escaped = false;
      else if (ch === '\\') escaped = true;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === '{' || ch === '[') depth++;
    else if (ch === '}' || ch === ']') depth--;
  }
  return inString || depth > 0;
}

export function readJson(text: string): JsonRead {
  try {
    return { ok: true, value: JSON.parse(text), controlCharactersEscaped: false };
  } catch (error) {
    const escapedText = escapeControlCharactersInStrings(text);
    if (escapedText !== null) {
      try {
        return { ok: true, value: JSON.parse(escapedText), controlCharactersEscaped: true };
      } catch {
        // fall through to the original error: the escape did not explain the fault
      }
    }
    return {
      ok: false,
      message: error instanceof Error ? error.message : String(error),
      truncated: looksTruncated(text),
    };
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
