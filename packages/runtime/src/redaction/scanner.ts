import { type RedactionKind, redactionMarker } from './kinds.js';
import { LiteralIndex } from './literal-scan.js';
import { type LiteralSecret, literalVariants } from './literals.js';
import type { CredentialPattern } from './patterns.js';
import type { RedactionTally } from './tally.js';

/**
 * Finds every secret of a text: the literal secrets with a rolling-hash index (one pass, linear whatever their
 * number) and every credential pattern as an alternative of one regular expression (one more pass), each wrapped
 * in exactly one capturing group so the group that matched says which pattern it was. A text with nothing to
 * redact costs those two passes, allocates nothing, and is returned as is.
 */
export interface Scanner {
  readonly literals: LiteralIndex;
  readonly regex: RegExp;
  readonly entries: readonly ScanEntry[];
}

interface ScanEntry {
  kind: RedactionKind;
  accept?: CredentialPattern['accept'];
  extend?: CredentialPattern['extend'];
}

/** Literal groups of the index, by kind. */
const LITERAL_KINDS = ['env_secret', 'dotenv'] as const;

export function compileScanner(literals: readonly LiteralSecret[], patterns: readonly CredentialPattern[]): Scanner {
  const texts: { text: string; group: number }[] = [];
  // Environment secrets first: a value known as both keeps the env_secret kind.
  for (const [group, kind] of LITERAL_KINDS.entries()) {
    for (const literal of literals) {
      if (literal.kind === kind) for (const text of literalVariants(literal.value)) texts.push({ text, group });
    }
  }
  const sources: string[] = [];
  const entries: ScanEntry[] = [];
  for (const pattern of patterns) {
    sources.push(`${pattern.prefix ?? ''}(${pattern.secret})${pattern.after ?? ''}`);
    entries.push({
      kind: pattern.kind,
      ...(pattern.accept ? { accept: pattern.accept } : {}),
      ...(pattern.extend ? { extend: pattern.extend } : {}),
    });
  }
  const regex = new RegExp(sources.join('|'), 'g');
  const groups = (new RegExp(`${regex.source}|`).exec('')?.length ?? 1) - 1;
  if (groups !== entries.length) {
    throw new Error(
      `redaction patterns must not contain capturing groups (${groups} groups, ${entries.length} entries)`,
    );
  }
  return { literals: new LiteralIndex(texts), regex, entries };
}

interface Range {
  start: number;
  end: number;
  kind: RedactionKind;
}

/** The ranges the credential patterns replace, in order; `undefined` when none. */
function patternRanges(scanner: Scanner, text: string): Range[] | undefined {
  const { regex, entries } = scanner;
  regex.lastIndex = 0;
  let match = regex.exec(text);
  if (match === null) return undefined;
  const ranges: Range[] = [];
  while (match !== null) {
    const start = match.index;
    let group = 1;
    while (match[group] === undefined) group++;
    const entry = entries[group - 1] as ScanEntry;
    const secret = match[group] as string;
    let end = start + match[0].length;
    if (entry.accept && !entry.accept(secret, text.charAt(end))) {
      // A lookalike: look again from the next character, so a real secret overlapping it is still found.
      regex.lastIndex = start + 1;
      match = regex.exec(text);
      continue;
    }
    // The secret ends the match (only a lookahead may follow it), so it starts where the kept prefix ends.
    const secretStart = end - secret.length;
    if (entry.extend) end = entry.extend(text, end);
    ranges.push({ start: secretStart, end, kind: entry.kind });
    regex.lastIndex = end > start ? end : start + 1;
    match = regex.exec(text);
  }
  return ranges.length > 0 ? ranges : undefined;
}

/** Which found secrets to leave in place (`Redactor.contextualOnly`): the rest are replaced. */
export type KeepSecret = (secret: string, kind: RedactionKind) => boolean;

/** The ranges `keep` does not keep; `undefined` when none is left. */
function notKept(text: string, ranges: Range[] | undefined, keep: KeepSecret | undefined): Range[] | undefined {
  if (ranges === undefined || keep === undefined) return ranges;
  const left = ranges.filter((range) => !keep(text.slice(range.start, range.end), range.kind));
  return left.length > 0 ? left : undefined;
}

/**
 * `text` with every secret replaced by its marker (every one `keep` does not keep); the same string (by identity)
 * when nothing was replaced.
 */
export function scanText(scanner: Scanner, text: string, tally?: RedactionTally, keep?: KeepSecret): string {
  const found = scanner.literals.findAll(text);
  const patterns = notKept(text, patternRanges(scanner, text), keep);
  const literalHits = found?.filter(
    (hit) => keep === undefined || !keep(text.slice(hit.start, hit.end), LITERAL_KINDS[hit.group] ?? 'env_secret'),
  );
  if ((literalHits === undefined || literalHits.length === 0) && patterns === undefined) return text;
  if (literalHits === undefined || literalHits.length === 0) return replaceRanges(text, patterns ?? [], tally);
  const literals: Range[] = literalHits.map((hit) => ({
    start: hit.start,
    end: hit.end,
    kind: LITERAL_KINDS[hit.group] ?? 'env_secret',
  }));
  const out = replaceRanges(text, mergeSorted(literals, patterns ?? []), tally);
  // A literal glued to a word (`…secretsk-Ab3…`) hid that word's boundary; with the literal replaced by its marker
  // a key may show, so the patterns look once more (which also makes redacting twice a no-op). Only then: a
  // literal delimited by spaces or quotes changes no boundary.
  if (!literalHits.some((hit) => isWordChar(text.charCodeAt(hit.end)) || isWordChar(text.charCodeAt(hit.start - 1)))) {
    return out;
  }
  const again = notKept(out, patternRanges(scanner, out), keep);
  return again === undefined ? out : replaceRanges(out, again, tally);
}

/** `\w` for a UTF-16 code unit (NaN, out of range, is not). */
function isWordChar(code: number): boolean {
  return (
    (code >= 0x30 && code <= 0x39) || (code >= 0x41 && code <= 0x5a) || (code >= 0x61 && code <= 0x7a) || code === 0x5f
  );
}

/**
 * `text` with the ranges (sorted by start) replaced by markers. Overlapping ranges (a literal inside a PEM block,
 * a secret straddling a pattern) become one marker, of the kind of the range that starts first.
 */
function replaceRanges(text: string, ranges: readonly Range[], tally: RedactionTally | undefined): string {
  let out = '';
  let copied = 0;
  let current = ranges[0] as Range;
  const emit = (range: Range) => {
    out += text.slice(copied, range.start) + redactionMarker(range.kind);
    copied = range.end;
    tally?.add(range.kind);
  };
  for (let i = 1; i < ranges.length; i++) {
    const range = ranges[i] as Range;
    if (range.start < current.end) {
      if (range.end > current.end) current = { ...current, end: range.end };
    } else {
      emit(current);
      current = range;
    }
  }
  emit(current);
  return out + text.slice(copied);
}

/** Two lists sorted by start merged into one; on equal starts the first list's range comes first. */
function mergeSorted(a: Range[], b: Range[]): Range[] {
  if (a.length === 0) return b;
  if (b.length === 0) return a;
  const merged: Range[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    const left = a[i];
    const right = b[j];
    if (right === undefined || (left !== undefined && left.start <= right.start)) {
      merged.push(left as Range);
      i++;
    } else {
      merged.push(right);
      j++;
    }
  }
  return merged;
}
