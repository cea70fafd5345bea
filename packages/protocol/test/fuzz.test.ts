import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type CatalogInput,
  type ParseOutcome,
  ParseOutcomeSchema,
  parseAssistantText,
  parseToolCall,
} from '../src/index.js';
import { readRepoJson } from './helpers.js';

const catalog = readRepoJson<CatalogInput>('examples/catalog.json');

/** Every outcome is either a valid Declaration or structured errors, and never an internal failure. */
function wellFormed(outcome: ParseOutcome): void {
  expect(ParseOutcomeSchema.safeParse(outcome).success).toBe(true);
  if (outcome.ok) {
    expect(outcome.declaration).toBeDefined();
    expect(outcome.errors).toEqual([]);
  } else {
    expect(outcome.errors.length).toBeGreaterThan(0);
    for (const error of outcome.errors) expect(error.code).not.toBe('internal_error');
  }
}

// Values shaped like carrier arguments so the fuzzer reaches deep paths, not only the top-level type check.
const callArb = fc.record(
  {
    id: fc.oneof(fc.constantFrom('a', 'b', 'c', 'r1'), fc.string()),
    type: fc.oneof(fc.constantFrom('tool', 'agent'), fc.string()),
    name: fc.oneof(fc.constantFrom('read', 'glob', 'grep', 'auto', 'code-reviewer'), fc.string()),
    args: fc.oneof(fc.dictionary(fc.string(), fc.jsonValue()), fc.jsonValue()),
    depends: fc.oneof(fc.constantFrom('a', 'b', 'none', ''), fc.array(fc.constantFrom('a', 'b', 'c', 'none'))),
    result: fc.oneof(fc.constantFrom('summary', 'full', 'adaptive'), fc.string()),
  },
  { requiredKeys: [] },
);
const carrierArb = fc.record(
  {
    kind: fc.oneof(fc.constantFrom('act', 'answer', 'done'), fc.string()),
    message: fc.oneof(fc.string(), fc.jsonValue()),
    calls: fc.oneof(fc.array(fc.oneof(callArb, fc.string(), fc.jsonValue()), { maxLength: 6 }), fc.string()),
    answer: fc.string(),
    text: fc.string(),
  },
  { requiredKeys: [] },
);

describe('parsers never throw', () => {
  it('any JSON value through the tool carrier', () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => wellFormed(parseToolCall(value, { catalog }))),
      { numRuns: 500 },
    );
  });

  it('carrier-shaped values, raw, stringified and wrapped', () => {
    fc.assert(
      fc.property(carrierArb, fc.constantFrom('raw', 'string', 'wrapped', 'native'), (value, form) => {
        const input =
          form === 'raw'
            ? value
            : form === 'string'
              ? JSON.stringify(value)
              : form === 'wrapped'
                ? { input: JSON.stringify(value) }
                : { name: 'AgentProtocolOutput', arguments: JSON.stringify(value) };
        wellFormed(parseToolCall(input, { catalog, history: { completedActionIds: ['c'] } }));
      }),
      { numRuns: 1000 },
    );
  });

  it('any string through both carriers', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 400 }), (text) => {
        wellFormed(parseAssistantText(text, { catalog }));
        wellFormed(parseToolCall(text, { catalog }));
      }),
      { numRuns: 500 },
    );
  });

  it('text assembled from protocol fragments', () => {
    const fragment = fc.oneof(
      fc.constantFrom(
        '```json agent-protocol\n',
        '```json\n',
        '```\n',
        '~~~\n',
        '## user.visible\n',
        '## p\n',
        '<invoke name="read">',
        '<parameter name="filePath">',
        '</parameter>',
        '</invoke>',
        '<tool_call>',
        '</tool_call>',
        '[TOOL_CALL]',
        '[/TOOL_CALL]',
        '{"type": "agent.protocol", "version": "1", "intent": "execute", ',
        '"payload": {"type": "action_graph", "actions": [',
        '{"type": "action", "id": "a", "executor": {"type": "tool", "target": "read"}, "input": {"filePath": "x"}, "prompt_ref": "md:p"}',
        ']}}',
        '{"name": "read", "arguments": {"filePath": "a"}}',
        '\n',
      ),
      fc.string({ maxLength: 20 }),
    );
    fc.assert(
      fc.property(fc.array(fragment, { maxLength: 20 }), (parts) => {
        const text = parts.join('');
        wellFormed(parseAssistantText(text, { catalog }));
        wellFormed(parseAssistantText(text, { catalog, allowPlainText: true }));
      }),
      { numRuns: 1000 },
    );
  });
});
