import { compileUiSchema, type UiHint } from '@oar/protocol';
import { describe, expect, it } from 'vitest';
import { foldEvents } from '../src/model.js';
import { safeHref, toolMessageFor, toolUiView } from '../src/tool-ui-model.js';
import type { OarEvent } from '../src/types.js';

/** The console's tool UI view model, fed what the server's codec compiles (the history's `ui_schema`). */

const HINTS: UiHint[] = [
  {
    type: 'card',
    title: 'Project sync',
    body: 'Weekly',
    fields: [
      { label: 'Owner', value: 'Ana' },
      { label: 'Recurring', value: true },
      { label: 'Room', value: null },
    ],
    actions: [
      { type: 'call', label: 'Reschedule', module: 'calendar', method: 'update', input: { id: 'evt_1' } },
      { type: 'open_url', label: 'Open', url: 'https://calendar.example.com/e/1' },
    ],
  },
  { type: 'list', title: 'Today', items: [], empty: 'Nothing today' },
  {
    type: 'table',
    columns: [
      { key: 'id', label: 'ID' },
      { key: 'n', label: 'Guests' },
    ],
    rows: [{ id: 'evt_1', n: 3 }, { id: 'evt_2' }],
  },
  { type: 'key_value', entries: [{ label: 'Key', value: 'lang' }] },
  {
    type: 'calendar_event',
    event: { id: 'evt_1', title: 'Project sync', start_at: '2026-04-21T10:00:00+08:00', location: 'Room A' },
  },
  { type: 'contact', contact: { id: 'c1', name: 'Ana Li', email: 'ana@example.com' } },
  { type: 'confirmation', title: 'Not shared', message: 'not the organizer', outcome: 'failed' },
];

describe('the tool UI view model', () => {
  it('turns every component of a compiled ui_schema into text-only blocks', () => {
    const view = toolUiView(compileUiSchema(HINTS, { toolCallId: 'run_1.cal', status: 'partial' }));
    expect(view?.toolCallId).toBe('run_1.cal');
    expect(view?.status).toBe('partial');
    expect(view?.blocks.map((b) => b.kind)).toEqual([
      'card',
      'list',
      'table',
      'key_value',
      'calendar_event',
      'contact',
      'confirmation',
    ]);
    const [card, list, table, kv, event, contact, confirmation] = view?.blocks ?? [];
    expect(card).toMatchObject({
      kind: 'card',
      title: 'Project sync',
      body: 'Weekly',
      fields: [
        { label: 'Owner', text: 'Ana' },
        { label: 'Recurring', text: 'yes' },
        { label: 'Room', text: '—' },
      ],
    });
    // a proposed call is never runnable: it is a proposal with an explanation; links are http(s) only
    expect(card?.kind === 'card' && card.actions).toEqual([
      expect.objectContaining({ kind: 'proposal', label: 'Reschedule', title: expect.stringContaining('never runs') }),
      expect.objectContaining({ kind: 'link', label: 'Open', href: 'https://calendar.example.com/e/1' }),
    ]);
    expect(list).toMatchObject({ kind: 'list', items: [], empty: 'Nothing today' });
    expect(table).toMatchObject({
      columns: ['ID', 'Guests'],
      rows: [{ cells: ['evt_1', '3'] }, { cells: ['evt_2', '—'] }],
    });
    expect(kv).toMatchObject({ fields: [{ label: 'Key', text: 'lang' }] });
    expect(event).toMatchObject({
      title: 'Project sync',
      fields: [
        { label: 'Starts', text: '2026-04-21T10:00:00+08:00', format: 'datetime' },
        { label: 'Location', text: 'Room A' },
      ],
    });
    expect(contact).toMatchObject({ title: 'Ana Li', fields: [{ label: 'Email', format: 'email' }] });
    expect(confirmation).toMatchObject({ outcome: 'failed', outcomeLabel: 'Failed', mark: '✕' });
  });

  it('ignores what it cannot trust: another version, unknown components, non-http links', () => {
    expect(toolUiView(undefined)).toBeUndefined();
    expect(toolUiView({ version: 'oar.ui/2', components: [{ type: 'card' }] })).toBeUndefined();
    const view = toolUiView({
      version: 'oar.ui/1',
      tool_call_id: 'x',
      status: 'success',
      components: [
        { id: 'x/0', type: 'html', html: '<img src=x onerror=alert(1)>' },
        {
          id: 'x/1',
          type: 'card',
          title: '<b>not markup</b>',
          fields: [],
          actions: [{ id: 'a', type: 'open_url', label: 'evil', url: 'javascript:alert(1)' }],
        },
      ],
    });
    expect(view?.blocks).toEqual([
      { id: 'x/0', kind: 'unsupported', type: 'html' },
      { id: 'x/1', kind: 'card', title: '<b>not markup</b>', fields: [], actions: [] },
    ]);
    expect(safeHref('data:text/html,hi')).toBeUndefined();
    expect(safeHref('http://example.com')).toBe('http://example.com/');
  });

  it('finds a call’s tool message in history, and the fold notes which calls have one', () => {
    const messages = [
      { role: 'tool', toolCallId: 'run_1.a', content: '{}', sequence: 4 },
      { role: 'tool', toolCallId: 'run_1.cal', content: '{}', sequence: 5, ui_schema: { version: 'oar.ui/1' } },
    ];
    expect(toolMessageFor(messages, 'run_1.cal')?.sequence).toBe(5);
    expect(toolMessageFor(undefined, 'run_1.cal')).toBeUndefined();

    const T = '2026-11-25T10:00:00.000Z';
    const base = { sessionId: 's', timestamp: T, threadId: 'thr', turnId: 'turn', runId: 'run_1' };
    const events = [
      { ...base, sequence: 1, type: 'turn.submitted', payload: { input: 'go' } },
      {
        ...base,
        sequence: 2,
        type: 'run.status',
        payload: {
          phase: 'declared',
          declaration: { actions: [{ id: 'cal', executor: { type: 'tool' } }, { id: 'a' }] },
        },
      },
      {
        ...base,
        sequence: 3,
        type: 'tool.result',
        toolCallId: 'run_1.cal',
        payload: { graphActionId: 'cal', toolAgentOutput: { tool_call_id: 'run_1.cal', ui_hints: [] } },
      },
      { ...base, sequence: 4, type: 'tool.result', toolCallId: 'run_1.a', payload: { graphActionId: 'a' } },
    ] as OarEvent[];
    const actions = foldEvents(events).threads.get('thr')?.turns[0]?.runs[0]?.actions ?? [];
    expect(actions.map((a) => a.toolOutput)).toEqual([{ toolCallId: 'run_1.cal', sequence: 3 }, undefined]);
  });
});
