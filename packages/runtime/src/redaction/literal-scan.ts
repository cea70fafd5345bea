import { MIN_SECRET_LENGTH } from './literals.js';

/**
 * Finding many known strings in a text in one pass, in time linear in the text whatever the number of strings
 * (a regular-expression alternation of N literals costs O(N) per position: 200 secrets made a 1 MB scan take
 * ~0.8 s). Rabin–Karp over a fixed window: every literal is at least WINDOW characters long, so a rolling hash of
 * the last WINDOW characters is checked against a bitmap of the literals' first WINDOW characters; only on a
 * bitmap hit (rare: about literals / 2^20 of positions) are the candidate literals compared.
 */

const WINDOW = MIN_SECRET_LENGTH;
const BASE = 0x01000193;
/** BASE^WINDOW mod 2^32: the weight of the character leaving the window. */
const OUT_WEIGHT = (() => {
  let weight = 1;
  for (let i = 0; i < WINDOW; i++) weight = Math.imul(weight, BASE);
  return weight;
})();
const BITMAP_BITS = 20;

export interface LiteralHit {
  start: number;
  end: number;
  /** The index of the literal's group (e.g. its kind) as given to the index. */
  group: number;
}

export class LiteralIndex {
  private readonly bitmap = new Uint32Array((1 << BITMAP_BITS) / 32);
  /** Window hash → literals starting with that window, longest first. */
  private readonly candidates = new Map<number, { text: string; group: number }[]>();
  readonly size: number;

  /** `literals` of at least MIN_SECRET_LENGTH characters (shorter ones are ignored). */
  constructor(literals: readonly { text: string; group: number }[]) {
    let size = 0;
    for (const literal of literals) {
      if (literal.text.length < WINDOW) continue;
      const hash = windowHash(literal.text, 0);
      const slot = hash >>> (32 - BITMAP_BITS);
      (this.bitmap[slot >>> 5] as number) |= 1 << (slot & 31);
      let list = this.candidates.get(hash);
      if (!list) {
        list = [];
        this.candidates.set(hash, list);
      }
      if (!list.some((known) => known.text === literal.text)) {
        list.push(literal);
        list.sort((a, b) => b.text.length - a.text.length);
        size++;
      }
    }
    this.size = size;
  }

  /**
   * The ranges of `text` covered by literals, in order: at one start only the longest literal counts, and
   * overlapping occurrences are merged into one range. `undefined` when there is none (no allocation). Linear in
   * the text, plus the comparison of a candidate literal where a window matches one's first characters.
   */
  findAll(text: string): LiteralHit[] | undefined {
    if (this.size === 0 || text.length < WINDOW) return undefined;
    let hits: LiteralHit[] | undefined;
    const bitmap = this.bitmap;
    const shift = 32 - BITMAP_BITS;
    let hash = 0;
    for (let i = 0; i < WINDOW - 1; i++) hash = (Math.imul(hash, BASE) + text.charCodeAt(i)) | 0;
    for (let i = WINDOW - 1; i < text.length; i++) {
      hash = (Math.imul(hash, BASE) + text.charCodeAt(i)) | 0;
      if (i >= WINDOW) hash = (hash - Math.imul(text.charCodeAt(i - WINDOW), OUT_WEIGHT)) | 0;
      const slot = hash >>> shift;
      if (((bitmap[slot >>> 5] as number) & (1 << (slot & 31))) === 0) continue;
      const list = this.candidates.get(hash);
      if (!list) continue;
      const start = i - WINDOW + 1;
      for (const literal of list) {
        if (text.startsWith(literal.text, start)) {
          const end = start + literal.text.length;
          const last = hits?.[hits.length - 1];
          // Overlapping finds are merged as they come (the first one's group wins): a text repeating a secret's
          // first characters makes one hit, not one per position.
          if (last !== undefined && start < last.end) {
            if (end > last.end) last.end = end;
          } else {
            hits ??= [];
            hits.push({ start, end, group: literal.group });
          }
          break;
        }
      }
    }
    return hits;
  }
}

/** The hash of `text[from, from + WINDOW)`, the same as the rolling hash computes. */
function windowHash(text: string, from: number): number {
  let hash = 0;
  for (let i = from; i < from + WINDOW; i++) hash = (Math.imul(hash, BASE) + text.charCodeAt(i)) | 0;
  return hash;
}
