import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PartialJsonStringField } from '../src/index.js';

/** Feeds `json` in the given pieces; returns what the reader returned, piece by piece, joined. */
function read(json: string, cuts: number[], field = 'message'): { out: string; reader: PartialJsonStringField } {
  const reader = new PartialJsonStringField(field);
  const points = [...new Set(cuts.map((c) => Math.min(Math.max(0, c), json.length)))].sort((a, b) => a - b);
  let out = '';
  let from = 0;
  for (const point of [...points, json.length]) {
    const piece = json.slice(from, point);
    from = point;
    const got = reader.push(piece);
    // Never half a surrogate pair at the end of a piece.
    if (got.length > 0) {
      const last = got.charCodeAt(got.length - 1);
      expect(last >= 0xd800 && last <= 0xdbff).toBe(false);
    }
    out += got;
  }
  return { out, reader };
}

/** Strings that exercise escapes: quotes, backslashes, braces, control characters, astral characters. */
const tricky = fc.string({
  unit: fc.oneof(
    fc.constantFrom('"', '\\', '{', '}', '[', ']', ',', ':', '\n', '\t', '\u0001', '/', 'message', '😀', 'é', ' '),
    fc.string({ maxLength: 3 }),
    fc.string({ unit: 'grapheme', maxLength: 2 }),
  ),
  maxLength: 40,
});

describe('PartialJsonStringField', () => {
  it('reads the message of a streamed AgentProtocolOutput call, whatever the splits', () => {
    fc.assert(
      fc.property(
        tricky,
        fc.dictionary(
          fc.string({ maxLength: 8 }).filter((k) => k !== 'message'),
          fc.jsonValue({ maxDepth: 3 }),
          {
            maxKeys: 4,
          },
        ),
        fc.boolean(),
        fc.array(fc.nat({ max: 400 }), { maxLength: 30 }),
        fc.boolean(),
        (message, others, first, cuts, spaced) => {
          // Decoys: the same field name nested, and as a value, before the real one.
          const decoys = { nested: { message: 'not this' }, list: [{ message: 'nor this' }], name: 'message' };
          const object = first ? { message, ...decoys, ...others } : { ...decoys, ...others, message };
          const json = spaced ? JSON.stringify(object, null, 2) : JSON.stringify(object);
          const { out, reader } = read(json, cuts);
          expect(out).toBe(message);
          expect(reader.value).toBe(message);
          expect(reader.done).toBe(true);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('returns a growing prefix while the value is incomplete', () => {
    const json = JSON.stringify({ kind: 'answer', message: 'Hello "world" \\ 😀 done' });
    const reader = new PartialJsonStringField('message');
    let seen = '';
    for (const ch of json) {
      seen += reader.push(ch);
      expect('Hello "world" \\ 😀 done'.startsWith(seen)).toBe(true);
    }
    expect(seen).toBe('Hello "world" \\ 😀 done');
  });

  it('handles escapes split anywhere, \\u sequences and surrogate pairs written as escapes', () => {
    const json = '{"message":"a\\u00e9\\ud83d\\ude00\\n\\"b\\""}';
    for (let i = 0; i <= json.length; i++) {
      for (let j = i; j <= json.length; j++) expect(read(json, [i, j]).out).toBe('aé😀\n"b"');
    }
  });

  it('yields nothing for a missing field, a non-string value, text that is not JSON, or a nested field only', () => {
    expect(read('{"kind":"answer"}', [3]).out).toBe('');
    expect(read('{"message": 42, "x": "y"}', [5]).out).toBe('');
    expect(read('{"message": null}', []).out).toBe('');
    expect(read('not json at all "message": "x"', [4]).out).toBe('');
    expect(read('{"a": {"message": "inner"}}', [9]).out).toBe('');
    expect(read('{"message": ["x"], "b": "message"}', []).out).toBe('');
    // Only the first occurrence counts.
    expect(read('{"message": "one", "message": "two"}', []).out).toBe('one');
  });
});
