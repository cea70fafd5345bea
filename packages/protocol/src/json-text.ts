/**
 * Reading JSON that a model wrote. Models often put raw newlines or tabs inside JSON strings of a stringified
 * payload; that one malformation is repaired (and reported) because its meaning is unambiguous. Everything
 * else that fails to parse is reported as an error, never guessed at.
 */

/**
 * `unbalanced`: the text ends before every string, array and object is closed — a fact about the text, not a claim
 * that the output was cut off (only the model's finish reason can say that; see `readStringified`).
 */
export type JsonRead =
  | { ok: true; value: unknown; controlCharactersEscaped: boolean }
  | { ok: false; message: string; unbalanced: boolean; tooDeep?: boolean };

/**
 * The deepest nesting of arrays and objects accepted in JSON a model wrote. Real declarations need a handful of
 * levels (the carrier itself uses four before `args`); thousands of levels crash recursive code (JSON.stringify,
 * schema validators, deep comparisons) with a stack overflow. Checked by a linear scan before anything parses.
 */
export const MAX_JSON_DEPTH = 128;

/** Does JSON text nest arrays/objects deeper than `limit`? One pass, strings skipped; stops at the first excess. */
export function jsonTextTooDeep(text: string, limit = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  let escaped = false;
  for (let i = 0; i < text.length; i += 1) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (escaped) escaped = false;
      else if (ch === 0x5c) escaped = true;
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x5b || ch === 0x7b) {
      depth += 1;
      if (depth > limit) return true;
    } else if (ch === 0x5d || ch === 0x7d) depth -= 1;
  }
  return false;
}

/**
 * Does an already-parsed value (a provider may hand over arguments as an object) nest deeper than `limit`?
 * Iterative, and never looks below `limit + 1` levels, so neither depth nor a cycle (which counts as too deep) can
 * make it recurse or loop. An object reached again is walked again only when reached deeper, so shared
 * substructures cost at most `limit` walks each.
 */
export function valueTooDeep(value: unknown, limit = MAX_JSON_DEPTH): boolean {
  const deepest = new Map<object, number>();
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const item = stack.pop() as { value: unknown; depth: number };
    if (typeof item.value !== 'object' || item.value === null) continue;
    const depth = item.depth + 1;
    if (depth > limit) return true;
    if ((deepest.get(item.value) ?? 0) >= depth) continue;
    deepest.set(item.value, depth);
    for (const child of Object.values(item.value)) stack.push({ value: child, depth });
  }
  return false;
}

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
 * Does the text end before every string, array and object it opened is closed? A fact about the text only:
 * whether the output was *cut off* is for the model's finish reason to say (`length`), never guessed from this.
 */
export function endsUnbalanced(text: string): boolean {
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
  if (jsonTextTooDeep(text)) {
    return {
      ok: false,
      message: `arrays and objects are nested deeper than ${MAX_JSON_DEPTH} levels`,
      unbalanced: false,
      tooDeep: true,
    };
  }
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
      unbalanced: endsUnbalanced(text),
    };
  }
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
