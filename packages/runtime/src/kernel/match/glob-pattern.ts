import { ToolError } from '../errors.js';
import { MAX_PATTERN_LENGTH } from './pattern.js';

/**
 * Glob patterns from the model, translated to RE2 syntax so they run on a linear-time engine (re2js).
 *
 * picomatch compiles a glob to a backtracking JavaScript RegExp: a pattern with nested extglob stars such as
 * `**\/*(a*)*(a*)*(a*)*(a*)*(a*)*(a*)!` against a long file name froze the whole process for minutes. RE2 has no
 * backtracking, so matching costs at most (pattern size × path length) steps whatever the pattern.
 *
 * The syntax and the matching rules are picomatch's with `dot: false`, which the glob and grep tools always used:
 * `*`, `?`, `**` as a whole segment (any number of segments), `[…]` classes (`[!…]`, `[^…]`, ranges, POSIX
 * `[:alpha:]`), braces `{a,b}` (nested) and `{a..z}` (single characters), extglobs `@( )`, `?( )`, `*( )`, `+( )`
 * with `|` alternatives, plain groups `(a|b)`, `\` escapes, a leading `!` (negates the whole pattern) and leading `./`.
 * A wildcard never matches a `/`, nor the dot that starts a segment (dot files): only a literal `.` at the start of
 * a pattern segment names those. `!( )` (match anything *except*) has no linear-time translation and is refused with
 * `invalid_pattern`, like a NUL byte or a pattern over the length limit.
 *
 * The leading-dot rule without lookahead (RE2 has none): the subject path gets every segment-leading `.` replaced by
 * a NUL marker (`globSubject`), which no wildcard or class accepts and only a segment-leading literal `.` does.
 * File names never contain NUL, so the marker cannot collide with a real character.
 */

/** Stands for a `.` that starts a path segment in the subject (see above). */
const LEADING_DOT = '\\x00';
/** One character a wildcard may match: not a separator, not a leading dot. */
const WILD = '[^/\\x00]';
/** A whole segment that `**` may cross: non-empty, not a dot segment. */
const SEGMENT = `${WILD}+`;
const STAR = `${WILD}*`;

export interface GlobProgram {
  /** RE2 source matched against the whole `globSubject(path)`. */
  source: string;
  /** A leading `!`: the path matches when the source does not. */
  negated: boolean;
  /** Match the last path segment only (a grep glob without `/`). */
  basename: boolean;
}

/** The string a GlobProgram is matched against: the path (or its last segment) with leading dots marked. */
export function globSubject(path: string, basename: boolean): string {
  const subject = basename ? path.slice(path.lastIndexOf('/') + 1) : path;
  return subject.replace(/(^|\/)\./g, '$1\u0000');
}

function invalid(pattern: string, message: string): ToolError {
  return new ToolError('invalid_pattern', message, { details: { pattern } });
}

/** Translate a glob to RE2. Throws `invalid_pattern` for what has no safe translation. */
export function translateGlob(pattern: string, options: { basename?: boolean } = {}): GlobProgram {
  if (pattern.length > MAX_PATTERN_LENGTH) {
    throw invalid(pattern, `The glob pattern is longer than ${MAX_PATTERN_LENGTH} characters.`);
  }
  if (pattern.includes('\u0000')) throw invalid(pattern, 'The glob pattern contains a NUL character.');
  let start = 0;
  let negated = false;
  while (pattern[start] === '!' && pattern[start + 1] !== '(') {
    negated = !negated;
    start += 1;
  }
  while (pattern.startsWith('./', start)) start += 2;
  const pairs = pairBrackets(pattern, start);
  const translator = new Translator(pattern, pairs);
  const alternatives = translator.sequence(start, pattern.length, undefined, true);
  return { source: alternatives.join(''), negated, basename: options.basename ?? false };
}

interface Pairs {
  /** Index of the matching `)` or `}` for each `(` / `{` that has one. */
  close: Map<number, number>;
  /** `{` positions with a top-level comma (a brace list rather than literal text). */
  hasComma: Set<number>;
}

/**
 * Match brackets in one linear pass, skipping escapes and classes exactly as the translator does. Knowing the pairs
 * up front keeps the translation single-pass: retrying an unclosed `{` as literal text would make `{{{{…` exponential.
 */
function pairBrackets(pattern: string, start: number): Pairs {
  const close = new Map<number, number>();
  const hasComma = new Set<number>();
  const stack: number[] = [];
  for (let i = start; i < pattern.length; i += 1) {
    const ch = pattern[i];
    if (ch === '\\') i += 1;
    else if (ch === '[') i = classEnd(pattern, i) ?? i;
    else if (ch === '(' || ch === '{') stack.push(i);
    else if (ch === ')' || ch === '}') {
      const open = stack.at(-1);
      if (open !== undefined && pattern[open] === (ch === ')' ? '(' : '{')) {
        stack.pop();
        close.set(open, i);
      }
    } else if (ch === ',') {
      const open = stack.at(-1);
      if (open !== undefined && pattern[open] === '{') hasComma.add(open);
    }
  }
  return { close, hasComma };
}

/**
 * Index of the `]` closing the class opened at `open`, or undefined (then `[` is a literal). A `]` right after `[`,
 * `[!` or `[^` is a member; `[:name:]` is a POSIX class. Scans at most the rest of the pattern (length-limited).
 */
function classEnd(pattern: string, open: number): number | undefined {
  let i = open + 1;
  if (pattern[i] === '!' || pattern[i] === '^') i += 1;
  if (pattern[i] === ']') i += 1;
  for (; i < pattern.length; i += 1) {
    const ch = pattern[i];
    if (ch === '\\') i += 1;
    else if (ch === ']') return i;
    else if (ch === '[' && pattern[i + 1] === ':') {
      const end = pattern.indexOf(':]', i + 2);
      if (end >= 0) i = end + 1;
    }
  }
  return undefined;
}

const POSIX_CLASSES = new Set([
  'alnum',
  'alpha',
  'ascii',
  'blank',
  'cntrl',
  'digit',
  'graph',
  'lower',
  'print',
  'punct',
  'space',
  'upper',
  'word',
  'xdigit',
]);

function escapeLiteral(ch: string): string {
  return /[\\^$.|?*+()[\]{}]/.test(ch) ? `\\${ch}` : ch;
}

function escapeInClass(ch: string): string {
  return /[\\\]^[-]/.test(ch) ? `\\${ch}` : ch;
}

class Translator {
  constructor(
    private readonly pattern: string,
    private readonly pairs: Pairs,
  ) {}

  /**
   * Translate `pattern[from, to)` into the RE2 of each alternative (split at `separator` on this level: `,` in a
   * brace, `|` in a group; none at the top, where `|` and `,` are literal). `segmentStart`: the text starts a path
   * segment, so a literal `.` there may match a leading dot.
   */
  sequence(from: number, to: number, separator: ',' | '|' | undefined, segmentStart: boolean): string[] {
    const p = this.pattern;
    const alternatives: string[] = [];
    let out = '';
    let atStart = segmentStart;
    let altStart = from;
    const atAltEnd = (j: number) => j >= to || (separator !== undefined && p[j] === separator);
    for (let i = from; i < to; i += 1) {
      const ch = p[i] as string;
      if (separator !== undefined && ch === separator) {
        alternatives.push(out);
        out = '';
        atStart = segmentStart;
        altStart = i + 1;
        continue;
      }
      if (ch === '\\') {
        const next = p[i + 1];
        i += 1;
        if (next === undefined) out += '\\\\';
        else out += next === '.' && atStart ? `[.${LEADING_DOT}]` : escapeLiteral(next);
        atStart = false;
        continue;
      }
      if (ch === '/') {
        // `/**` ending the alternative: the directory itself or anything below it (picomatch: `a/**` matches `a`).
        let j = i + 1;
        while (p[j] === '*') j += 1;
        if (j - i - 1 >= 2 && atAltEnd(j)) {
          out += `(?:/${SEGMENT})*`;
          i = j - 1;
          atStart = false;
          continue;
        }
        out += '/';
        atStart = true;
        continue;
      }
      if (ch === '*') {
        let j = i;
        while (p[j] === '*') j += 1;
        const run = j - i;
        const wholeSegment = (i === altStart ? segmentStart : p[i - 1] === '/') && (atAltEnd(j) || p[j] === '/');
        if (run >= 2 && wholeSegment) {
          if (p[j] === '/') {
            // `**/`: zero or more whole segments, so `**/x` matches `x` too.
            out += `(?:${SEGMENT}/)*`;
            i = j;
            atStart = true;
          } else {
            out += `(?:${SEGMENT}(?:/${SEGMENT})*)?`;
            i = j - 1;
            atStart = false;
          }
          continue;
        }
        if (p[j] === '(' && this.pairs.close.has(j)) {
          // `…*(x)`: the last star opens an extglob; any stars before it are one wildcard.
          if (run > 1) out += STAR;
          const group = this.extglob('*', j, atStart && run === 1);
          out += group;
          i = this.pairs.close.get(j) as number;
          atStart = atStart && run === 1;
          continue;
        }
        out += STAR;
        i = j - 1;
        atStart = false;
        continue;
      }
      if ((ch === '?' || ch === '+' || ch === '@' || ch === '!') && p[i + 1] === '(' && this.pairs.close.has(i + 1)) {
        if (ch === '!') {
          throw invalid(
            p,
            'Negated extglobs "!(…)" are not supported: they have no linear-time translation. List what you want ' +
              '(e.g. "*.{js,ts}") or put a single "!" before the whole pattern to invert it.',
          );
        }
        out += this.extglob(ch, i + 1, atStart);
        i = this.pairs.close.get(i + 1) as number;
        // An optional group may match nothing, so what follows can still start the segment (picomatch agrees).
        atStart = atStart && ch === '?';
        continue;
      }
      if (ch === '?') {
        out += WILD;
        atStart = false;
        continue;
      }
      if (ch === '(' && this.pairs.close.has(i)) {
        out += this.extglob('@', i, atStart);
        i = this.pairs.close.get(i) as number;
        atStart = false;
        continue;
      }
      if (ch === '[') {
        const end = classEnd(p, i);
        if (end !== undefined) {
          out += this.characterClass(i, end, atStart);
          i = end;
          atStart = false;
          continue;
        }
      }
      if (ch === '{' && this.pairs.close.has(i)) {
        const end = this.pairs.close.get(i) as number;
        if (this.pairs.hasComma.has(i)) {
          out += `(?:${this.sequence(i + 1, end, ',', atStart).join('|')})`;
          i = end;
          atStart = false;
          continue;
        }
        const range = /^([^\\])\.\.([^\\])$/.exec(p.slice(i + 1, end));
        if (range?.[1] && range[2]) {
          const [low, high] = [range[1], range[2]].sort();
          out += `[${escapeInClass(low as string)}-${escapeInClass(high as string)}]`;
          i = end;
          atStart = false;
          continue;
        }
      }
      out += ch === '.' && atStart ? `[.${LEADING_DOT}]` : escapeLiteral(ch);
      atStart = false;
    }
    alternatives.push(out);
    return alternatives;
  }

  /** `@(a|b)`, `?(…)`, `*(…)`, `+(…)`; `open` is the index of `(`. */
  private extglob(kind: string, open: number, segmentStart: boolean): string {
    const close = this.pairs.close.get(open) as number;
    const body = this.sequence(open + 1, close, '|', segmentStart).join('|');
    const quantifier = kind === '@' ? '' : kind;
    return `(?:${body})${quantifier}`;
  }

  /** A `[…]` class: members copied with RE2 escaping; negated classes never match `/` or a leading dot. */
  private characterClass(open: number, close: number, segmentStart: boolean): string {
    const p = this.pattern;
    let i = open + 1;
    const negated = p[i] === '!' || p[i] === '^';
    if (negated) i += 1;
    let members = '';
    let namesDot = false;
    for (; i < close; i += 1) {
      const ch = p[i] as string;
      if (ch === '[' && p[i + 1] === ':') {
        const end = p.indexOf(':]', i + 2);
        const name = p.slice(i + 2, end);
        if (end >= 0 && end < close && POSIX_CLASSES.has(name)) {
          members += `[:${name}:]`;
          i = end + 1;
          continue;
        }
      }
      const literal = ch === '\\' && i + 1 < close ? (p[++i] as string) : ch;
      if (literal === '.') namesDot = true;
      members += escapeInClass(literal);
      if (p[i + 1] === '-' && i + 2 < close) {
        // A range: RE2 rejects a reversed one (`[z-a]`), which surfaces as invalid_pattern.
        const high = p[i + 2] === '\\' && i + 3 < close ? (p[i + 3] as string) : (p[i + 2] as string);
        if (literal <= '.' && high >= '.') namesDot = true;
        members += `-${escapeInClass(high)}`;
        i += p[i + 2] === '\\' && i + 3 < close ? 3 : 2;
      }
    }
    if (negated) return `[^${members}/${LEADING_DOT}]`;
    return `[${members}${namesDot && segmentStart ? LEADING_DOT : ''}]`;
  }
}
