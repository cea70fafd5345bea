import { describe, expect, it } from 'vitest';
import { boundedReference, nodeRequest } from '../../src/executors/references.js';

/** Golden forms of the node request a delegated agent or a tool worker receives (docs/protocol.md "Node requests"). */
describe('node requests', () => {
  it('context items with their sources, then the task', () => {
    const text = nodeRequest(
      { runId: 'run_123', actionId: 'review_toolbar' },
      [
        { source: 'md:shared.context', text: 'Expanded shared context.' },
        { source: 'action:inspect_code.summary', text: 'Expanded inspect_code summary.' },
      ],
      'Expanded review_toolbar prompt.',
    );
    expect(text).toBe(
      [
        '<node-request run_id="run_123" action_id="review_toolbar">',
        '<context>',
        '<item source="md:shared.context">',
        'Expanded shared context.',
        '</item>',
        '<item source="action:inspect_code.summary">',
        'Expanded inspect_code summary.',
        '</item>',
        '</context>',
        '<task>',
        'Expanded review_toolbar prompt.',
        '</task>',
        '</node-request>',
      ].join('\n'),
    );
  });

  it('no context: no <context>; a tool worker with partial input: <input>', () => {
    expect(nodeRequest({ runId: 'r', actionId: 'a' }, [], 'Read the config.', { limit: 5 })).toBe(
      [
        '<node-request run_id="r" action_id="a">',
        '<input>',
        '{"limit":5}',
        '</input>',
        '<task>',
        'Read the config.',
        '</task>',
        '</node-request>',
      ].join('\n'),
    );
    expect(nodeRequest({ runId: 'r', actionId: 'a' }, [], 'Just do it.', {})).not.toContain('<input>');
  });

  it('a source cannot break out of its attribute', () => {
    expect(nodeRequest({ runId: 'r', actionId: 'a' }, [{ source: 'artifact:x"y', text: 't' }], 'task')).toContain(
      '<item source="artifact:x&quot;y">',
    );
  });

  it('a long reference is cut to its budget and says where the rest is', () => {
    const long = Array.from({ length: 400 }, (_, i) => `line ${i}`).join('\n');
    const cut = boundedReference(long, 50, 'action:scan.output');
    expect(cut.length).toBeLessThan(long.length);
    expect(cut.startsWith('line 0\nline 1')).toBe(true);
    expect(cut).toMatch(/\[… truncated: about \d+ more tokens; expand_ref "action:scan\.output" for the rest\]$/);
    expect(boundedReference('short', 50, 'x')).toBe('short');
  });
});
