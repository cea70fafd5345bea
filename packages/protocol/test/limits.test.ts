import { describe, expect, it } from 'vitest';
import {
  type CatalogInput,
  findSections,
  jsonTextTooDeep,
  MAX_JSON_DEPTH,
  MAX_OUTPUT_CHARS,
  type ParseOutcome,
  parseAssistantText,
  parseToolCall,
  renderTranscript,
  valueTooDeep,
} from '../src/index.js';
import { readRepoJson } from './helpers.js';

const catalog = readRepoJson<CatalogInput>('examples/catalog.json');
const codes = (outcome: ParseOutcome) => outcome.errors.map((e) => e.code);
/** `[[[…]]]` nested `depth` levels (text). */
const nestedText = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
/** The same as a value, built without recursion. */
function nestedValue(depth: number): unknown {
  let value: unknown = [];
  for (let i = 1; i < depth; i += 1) value = [value];
  return value;
}
const carrierWith = (args: string) =>
  `{"kind":"act","calls":[{"id":"r","type":"tool","name":"read","args":{"filePath":"a.ts","x":${args}}}]}`;
const dslWith = (input: string) =>
  '```json agent-protocol\n' +
  `{"type":"agent.protocol","version":"1","intent":"execute","payload":{"type":"action_graph","actions":[{"type":"action","id":"r","executor":{"type":"tool","target":"read"},"input":{"filePath":"a.ts","x":${input}}}]}}\n` +
  '```\n';

function expectDepthError(outcome: ParseOutcome): void {
  expect(outcome.ok).toBe(false);
  expect(codes(outcome)).toEqual(['nesting_too_deep']);
  expect(outcome.errors[0]?.message).toContain(`the limit is ${MAX_JSON_DEPTH}`);
  expect(outcome.errors[0]?.hint).toContain(String(MAX_JSON_DEPTH));
}

describe(`JSON nesting depth (limit ${MAX_JSON_DEPTH})`, () => {
  it('rejects 100,000 levels in AgentProtocolOutput arguments with nesting_too_deep, not a crash', () => {
    const deep = carrierWith(nestedText(100_000));
    expectDepthError(parseToolCall(deep, { catalog }));
    expectDepthError(parseToolCall([{ name: 'AgentProtocolOutput', arguments: deep }], { catalog }));
  });

  it('rejects deep arguments that arrive already parsed (an object), checked before schema validation', () => {
    const args = { kind: 'act', calls: [{ id: 'r', type: 'tool', name: 'read', args: { x: nestedValue(100_000) } }] };
    expectDepthError(parseToolCall(args, { catalog }));
    expectDepthError(parseToolCall({ name: 'AgentProtocolOutput', arguments: args }, { catalog }));
    // A direct (recovered) call with deep arguments fails closed the same way.
    const direct = parseToolCall({ name: 'read', arguments: { filePath: nestedValue(100_000) } }, { catalog });
    expect(codes(direct)).toContain('nesting_too_deep');
  });

  it('rejects a deep fenced agent-protocol block', () => {
    expectDepthError(parseAssistantText(dslWith(nestedText(100_000)), { catalog }));
  });

  it('a deep text tool call fails closed and says why', () => {
    const outcome = parseAssistantText(`<tool_call>{"name":"read","arguments":${nestedText(100_000)}}</tool_call>`, {
      catalog,
    });
    expect(outcome.ok).toBe(false);
    expect(outcome.errors[0]?.message).toContain(`${MAX_JSON_DEPTH} levels`);
  });

  it('accepts nesting up to the limit', () => {
    // The carrier uses 4 levels before `x`, the DSL 6.
    const fits = parseToolCall(carrierWith(nestedText(MAX_JSON_DEPTH - 4)), { catalog, validate: false });
    expect(codes(fits)).not.toContain('nesting_too_deep');
    expectDepthError(parseToolCall(carrierWith(nestedText(MAX_JSON_DEPTH - 3)), { catalog, validate: false }));
  });

  it('the scans count brackets outside strings only, and stop at the limit', () => {
    expect(jsonTextTooDeep(`{"a":"${'['.repeat(1000)}"}`)).toBe(false);
    expect(jsonTextTooDeep(`{"a":"\\"${'['.repeat(1000)}"}`)).toBe(false);
    expect(jsonTextTooDeep(nestedText(3), 2)).toBe(true);
    expect(jsonTextTooDeep(nestedText(2), 2)).toBe(false);
    expect(valueTooDeep(nestedValue(3), 2)).toBe(true);
    expect(valueTooDeep(nestedValue(2), 2)).toBe(false);
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(valueTooDeep(cyclic)).toBe(true);
    // Wide and shared (or cyclic) structures stay cheap: each object is walked again only when reached deeper.
    const wide: Record<string, unknown> = {};
    for (let i = 0; i < 1000; i += 1) wide[`k${i}`] = wide;
    expect(valueTooDeep(wide)).toBe(true);
    let shared: unknown = 'leaf';
    for (let i = 0; i < 100; i += 1) shared = [shared, shared];
    expect(valueTooDeep(shared)).toBe(false);
  });
});

describe(`model output size (limit ${MAX_OUTPUT_CHARS} characters)`, () => {
  it('rejects oversized assistant text with output_too_large, naming the limit and the size', () => {
    const text = `${'x'.repeat(MAX_OUTPUT_CHARS)}!`;
    const outcome = parseAssistantText(text, { catalog, allowPlainText: true });
    expect(codes(outcome)).toEqual(['output_too_large']);
    expect(outcome.errors[0]?.message).toContain(String(MAX_OUTPUT_CHARS));
    expect(outcome.errors[0]?.message).toContain(String(MAX_OUTPUT_CHARS + 1));
  });

  it('rejects oversized tool-call arguments, alone or across the calls of one message', () => {
    const big = JSON.stringify({ kind: 'answer', message: 'x'.repeat(MAX_OUTPUT_CHARS) });
    expect(codes(parseToolCall(big, { catalog }))).toEqual(['output_too_large']);
    const half = JSON.stringify({ filePath: 'x'.repeat(MAX_OUTPUT_CHARS / 2) });
    const calls = [
      { name: 'read', arguments: half },
      { name: 'read', arguments: half },
    ];
    expect(codes(parseToolCall(calls, { catalog }))).toEqual(['output_too_large']);
  });
});

describe('parsing model text takes linear time', () => {
  // Each input below is under the size limit and took the old code from tens of seconds to hours.
  it('many unclosed tool-call tags', () => {
    const text = `${'<invoke name="a">'.repeat(30_000)}${'<tool_call>'.repeat(25_000)}${'[TOOL_CALL]'.repeat(20_000)}`;
    expect(text.length).toBeLessThan(MAX_OUTPUT_CHARS);
    const started = Date.now();
    const outcome = parseAssistantText(text, { catalog });
    expect(outcome.ok).toBe(false);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('a heading line of spaces next to a protocol block', () => {
    const text = `# a${' '.repeat(500_000)}x\n\n${dslWith('1')}`;
    const started = Date.now();
    parseAssistantText(text, { catalog });
    expect(findSections(text)[0]?.id).toBe(`a${'_'}x`);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('many headings and fences', () => {
    const text = `${'## h\n```\n```\n'.repeat(40_000)}${dslWith('1')}`;
    const started = Date.now();
    parseAssistantText(text, { catalog });
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('a transcript turn with a long run of spaces', () => {
    const started = Date.now();
    const { text } = renderTranscript([{ kind: 'user', text: `a${' '.repeat(300_000)}x   ` }], { mode: 'full' });
    expect(text).toContain('x');
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('headings keep their text without the closing hashes', () => {
    const ids = findSections('# Title ##\n## a # b #  \n### `x`   y\n#### c#\n##### ##\n').map((s) => s.heading);
    expect(ids).toEqual(['Title', 'a # b', '`x`   y', 'c#', '##']);
  });
});
