/**
 * Reading one string field of a JSON object while the object is still arriving: the `message` of a streamed
 * `AgentProtocolOutput` call, shown to a person as the model writes it. The reader takes the JSON text in pieces
 * split anywhere (inside a key, an escape, a `\uXXXX` sequence, a surrogate pair) and returns, per piece, the
 * newly decoded characters of the field's value. Only a field of the top-level object counts (the same name inside
 * a nested object or array is skipped), only its first occurrence, and only when its value is a string. It never
 * throws: text that is not JSON simply yields nothing more.
 */

const SIMPLE_ESCAPES: Record<string, string> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

type StringRole = 'key' | 'target' | 'other';

export class PartialJsonStringField {
  /** Open objects and arrays (1 = inside the top-level object). */
  private depth = 0;
  /** At depth 1: a key comes next (after `{` or `,`) rather than a value (after `:`). */
  private expectKey = false;
  private inString = false;
  private role: StringRole = 'other';
  /** An escape in progress: `\`, or `\u` and up to four hex digits. */
  private escape: string | undefined;
  /** The key being read, and the last key read at depth 1. */
  private key = '';
  private lastKey: string | undefined;
  /** A high surrogate decoded but not yet returned (its low half may come in the next piece). */
  private pendingHigh = '';
  private found = false;
  private broken = false;
  /** The field's value is complete. */
  done = false;
  /** Everything returned so far. */
  value = '';

  constructor(readonly field: string) {}

  /** Read the next piece; returns the field's newly decoded characters (often ''). */
  push(piece: string): string {
    if (this.done || this.broken) return '';
    let out = '';
    for (let i = 0; i < piece.length && !this.done && !this.broken; i++) {
      const ch = piece.charAt(i);
      if (this.inString) {
        const decoded = this.stringChar(ch);
        if (decoded !== undefined && this.role === 'target') out += decoded;
        continue;
      }
      this.structural(ch);
    }
    return this.emit(out);
  }

  /** Hold back a trailing high surrogate so a pair is never returned in halves. */
  private emit(text: string): string {
    let all = this.pendingHigh + text;
    this.pendingHigh = '';
    if (!this.done && all.length > 0) {
      const last = all.charCodeAt(all.length - 1);
      if (last >= 0xd800 && last <= 0xdbff) {
        this.pendingHigh = all.slice(-1);
        all = all.slice(0, -1);
      }
    }
    this.value += all;
    return all;
  }

  /** One character inside a string; returns what it decodes to (undefined: nothing yet, or the closing quote). */
  private stringChar(ch: string): string | undefined {
    if (this.escape !== undefined) {
      if (this.escape === '\\') {
        if (ch === 'u') {
          this.escape = '\\u';
          return undefined;
        }
        this.escape = undefined;
        return this.decoded(SIMPLE_ESCAPES[ch] ?? ch);
      }
      // \u and its hex digits
      if (!/[0-9a-fA-F]/.test(ch)) {
        this.broken = true;
        return undefined;
      }
      this.escape += ch;
      if (this.escape.length < 6) return undefined;
      const code = Number.parseInt(this.escape.slice(2), 16);
      this.escape = undefined;
      return this.decoded(String.fromCharCode(code));
    }
    if (ch === '\\') {
      this.escape = '\\';
      return undefined;
    }
    if (ch === '"') {
      this.inString = false;
      if (this.role === 'key') {
        this.lastKey = this.key;
        this.key = '';
      } else if (this.role === 'target') {
        this.done = true;
      }
      this.role = 'other';
      return undefined;
    }
    return this.decoded(ch);
  }

  private decoded(text: string): string {
    if (this.role === 'key') this.key += text;
    return text;
  }

  /** One character outside strings. */
  private structural(ch: string): void {
    switch (ch) {
      case '"':
        this.inString = true;
        if (this.depth === 1 && this.expectKey) this.role = 'key';
        else if (this.depth === 1 && !this.found && this.lastKey === this.field) {
          this.role = 'target';
          this.found = true;
        } else this.role = 'other';
        if (this.depth === 1) this.expectKey = false;
        return;
      case '{':
        this.depth++;
        if (this.depth === 1) this.expectKey = true;
        return;
      case '[':
        this.depth++;
        return;
      case '}':
      case ']':
        this.depth--;
        if (this.depth <= 0) this.broken = true; // the top-level object ended
        return;
      case ',':
        if (this.depth === 1) {
          this.expectKey = true;
          this.lastKey = undefined;
        }
        return;
      case ':':
        return;
      default:
        // whitespace, or a number / literal value (which is never the field's string)
        if (this.depth === 1 && !this.expectKey && /[^\s]/.test(ch) && this.lastKey === this.field) {
          this.lastKey = undefined; // the field is not a string
        }
        return;
    }
  }
}
