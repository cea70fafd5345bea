import type { LiteralSecret } from './literals.js';
import { usableLiterals } from './literals.js';
import { CREDENTIAL_PATTERNS } from './patterns.js';
import { compileScanner, type KeepSecret, type Scanner, scanText } from './scanner.js';
import { type RedactionCounts, RedactionTally } from './tally.js';

/** A value with its secrets replaced, and how many of each kind were. */
export interface Redacted<T> {
  value: T;
  counts: RedactionCounts;
  total: number;
}

export interface RedactorOptions {
  /** Known secret values (environment secrets, `.env` values). Shorter than MIN_SECRET_LENGTH: ignored. */
  secrets?: readonly LiteralSecret[];
}

/** Scans of one text at most (see `untilClean`). */
const MAX_PASSES = 4;

/** JSON deeper than this is walked with an explicit stack instead of by recursion (no stack overflow). */
const MAX_WALK_DEPTH = 256;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Turns text, JSON values and bytes into their redacted form: known secret values and credential shapes become
 * `[REDACTED:<kind>]` (kinds.ts). Immutable and synchronous; build one per binding and share it. Every method
 * returns its input itself (same reference) when there is nothing to redact, and counts what it replaced into the
 * optional tally, from which a caller records an `output.redacted` fact (`redactionFact`).
 */
export class Redactor {
  private static patternsOnlyInstance: Redactor | undefined;
  private readonly scanner: Scanner;
  /** How many distinct literal secrets this redactor knows (not their values). */
  readonly secretCount: number;

  /** Secrets left in place (`contextualOnly`); none: every secret found is replaced. */
  private readonly keep: KeepSecret | undefined;
  private contextual: Redactor | undefined;

  private constructor(literals: readonly LiteralSecret[], from?: { scanner: Scanner; keep: KeepSecret }) {
    this.scanner = from?.scanner ?? compileScanner(literals, CREDENTIAL_PATTERNS);
    this.keep = from?.keep;
    this.secretCount = literals.length;
  }

  /**
   * This redactor narrowed to the secrets it would NOT recognise on their own, out of the context they were found
   * in: a password found after `password=` or inside a URL, a token after `Bearer `. Secrets it recognises
   * anywhere — known values (environment, `.env`) and self-evident shapes (provider keys, PEM blocks, JWTs) — are
   * left in place. What the model may be shown unredacted (policy/revealed.ts): whatever it repeats of that is
   * recognised again when it is recorded, whereas a context-only secret repeated without its context would not be.
   */
  contextualOnly(): Redactor {
    this.contextual ??= new Redactor([], {
      scanner: this.scanner,
      keep: (secret) => scanText(this.scanner, secret) !== secret,
    });
    return this.contextual;
  }

  static create(options: RedactorOptions = {}): Redactor {
    return new Redactor(usableLiterals(options.secrets ?? []));
  }

  /** A redactor that knows no secret values, only credential shapes (for output with no binding at hand). */
  static patternsOnly(): Redactor {
    Redactor.patternsOnlyInstance ??= new Redactor([]);
    return Redactor.patternsOnlyInstance;
  }

  /** `text` redacted; the very same string when nothing matched. */
  redactText(text: string, tally?: RedactionTally): string {
    return this.untilClean(text, tally);
  }

  /**
   * Scan until nothing more is found. One pass picks one of two overlapping matches (`…key` glued to
   * `password: …`); the one it left can become a whole match once the other is replaced, so the text is scanned
   * again — only when the pass changed something, and at most a few times (each pass only shortens secrets into
   * markers, so this ends).
   */
  private untilClean(text: string, tally?: RedactionTally): string {
    let current = text;
    for (let pass = 0; pass < MAX_PASSES; pass++) {
      const next = scanText(this.scanner, current, tally, this.keep);
      if (next === current) return current;
      current = next;
    }
    return current;
  }

  /**
   * A JSON value with every string in it redacted — object keys too, when they contain a secret. Arrays and
   * objects in which nothing changed are returned as they are (same reference), so an unchanged value costs one
   * scan per string and no allocation. Non-plain objects are walked by their own enumerable keys; byte arrays
   * go through `redactBytes`.
   */
  redactJson<T>(value: T, tally?: RedactionTally): T {
    return this.walk(value, tally, 0) as T;
  }

  /**
   * Bytes redacted: decoded as UTF-8 when they are valid UTF-8 (re-encoded after), else as Latin-1, which maps
   * every byte to one character and back, so binary content survives unchanged around the markers. The same
   * array when nothing matched.
   */
  redactBytes(bytes: Uint8Array, tally?: RedactionTally): Uint8Array {
    const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let encoding: 'utf8' | 'latin1' = 'utf8';
    let text: string;
    try {
      text = utf8.decode(buffer);
    } catch {
      encoding = 'latin1';
      text = buffer.toString('latin1');
    }
    const redacted = this.redactText(text, tally);
    return redacted === text ? bytes : new Uint8Array(Buffer.from(redacted, encoding));
  }

  /** Redacts a string, a JSON value or bytes, and returns the counts with it. */
  redact<T>(value: T): Redacted<T> {
    const tally = new RedactionTally();
    const redacted =
      typeof value === 'string'
        ? (this.redactText(value, tally) as T)
        : value instanceof Uint8Array
          ? (this.redactBytes(value, tally) as T)
          : this.redactJson(value, tally);
    return { value: redacted, counts: tally.counts, total: tally.total };
  }

  private walk(value: unknown, tally: RedactionTally | undefined, depth: number): unknown {
    if (typeof value === 'string') return this.redactText(value, tally);
    if (value === null || typeof value !== 'object') return value;
    if (value instanceof Uint8Array) return this.redactBytes(value, tally);
    if (depth >= MAX_WALK_DEPTH) return this.walkDeep(value, tally);
    if (Array.isArray(value)) {
      let copy: unknown[] | undefined;
      for (let i = 0; i < value.length; i++) {
        const item: unknown = value[i];
        const next = this.walk(item, tally, depth + 1);
        if (next !== item) {
          copy ??= value.slice();
          copy[i] = next;
        }
      }
      return copy ?? value;
    }
    let copy: Record<string, unknown> | undefined;
    const keys = Object.keys(value);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as string;
      const item = (value as Record<string, unknown>)[key];
      const nextKey = this.redactText(key, tally);
      const next = this.walk(item, tally, depth + 1);
      if (copy === undefined && (next !== item || nextKey !== key)) {
        // Copy-on-write: the keys before this one are unchanged.
        copy = {};
        for (let j = 0; j < i; j++) copy[keys[j] as string] = (value as Record<string, unknown>)[keys[j] as string];
      }
      if (copy !== undefined) copy[uniqueKey(copy, nextKey)] = next;
    }
    return copy ?? value;
  }

  /**
   * The same walk with an explicit stack, for JSON nested deeper than MAX_WALK_DEPTH (a model can produce
   * thousands of levels): no recursion, so no stack overflow. A cycle (not JSON, so no sink can store it) is
   * left as it is.
   */
  private walkDeep(root: object, tally: RedactionTally | undefined): unknown {
    interface Frame {
      node: Record<string, unknown> | unknown[];
      keys: string[] | undefined;
      index: number;
      copy: Record<string, unknown> | unknown[] | undefined;
    }
    const open = new Set<object>([root]);
    const frameOf = (node: object): Frame => ({
      node: node as Frame['node'],
      keys: Array.isArray(node) ? undefined : Object.keys(node),
      index: 0,
      copy: undefined,
    });
    const stack: Frame[] = [frameOf(root)];
    // Puts the (possibly redacted) child at the frame's current position, copying the container on first change.
    const settle = (frame: Frame, child: unknown) => {
      const { node, keys, index } = frame;
      if (keys === undefined) {
        const list = node as unknown[];
        if (frame.copy === undefined && child !== list[index]) frame.copy = list.slice(0, index);
        if (frame.copy !== undefined) (frame.copy as unknown[])[index] = child;
      } else {
        const record = node as Record<string, unknown>;
        const key = keys[index] as string;
        const nextKey = this.redactText(key, tally);
        if (frame.copy === undefined && (child !== record[key] || nextKey !== key)) {
          const copy: Record<string, unknown> = {};
          for (let j = 0; j < index; j++) copy[keys[j] as string] = record[keys[j] as string];
          frame.copy = copy;
        }
        if (frame.copy !== undefined) {
          const copy = frame.copy as Record<string, unknown>;
          copy[uniqueKey(copy, nextKey)] = child;
        }
      }
      frame.index++;
    };
    for (;;) {
      const frame = stack[stack.length - 1] as Frame;
      const length = frame.keys ? frame.keys.length : (frame.node as unknown[]).length;
      if (frame.index < length) {
        const child = frame.keys
          ? (frame.node as Record<string, unknown>)[frame.keys[frame.index] as string]
          : (frame.node as unknown[])[frame.index];
        if (child !== null && typeof child === 'object' && !(child instanceof Uint8Array) && !open.has(child)) {
          open.add(child);
          stack.push(frameOf(child));
        } else {
          settle(frame, open.has(child as object) ? child : this.walk(child, tally, 0));
        }
        continue;
      }
      stack.pop();
      open.delete(frame.node);
      const result = frame.copy ?? frame.node;
      const parent = stack[stack.length - 1];
      if (parent === undefined) return result;
      settle(parent, result);
    }
  }
}

/** Two keys redacted to the same marker must not overwrite one another. */
function uniqueKey(target: Record<string, unknown>, key: string): string {
  if (!Object.hasOwn(target, key)) return key;
  let n = 2;
  while (Object.hasOwn(target, `${key}#${n}`)) n++;
  return `${key}#${n}`;
}
