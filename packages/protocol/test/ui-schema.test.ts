import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { schemaFor } from '../src/json-schema.js';
import { type UiHint, UiHintSchema } from '../src/tool-agent-output.js';
import {
  compileUiSchema,
  UI_COMPONENT_TYPES,
  UI_SCHEMA_VERSION,
  type UiComponent,
  UiSchemaSchema,
  uiSchemaOfToolAgentOutput,
  uiSchemaText,
} from '../src/ui-schema.js';

const addFormats = ((ajvFormats as unknown as { default?: unknown }).default ?? ajvFormats) as (ajv: Ajv2020) => void;

const reschedule = {
  type: 'call',
  label: 'Reschedule',
  module: 'calendar',
  method: 'update',
  input: { id: 'evt_123', start_at: '2026-04-22T10:00:00+08:00' },
} as const;

/** One hint of every kind, as a post-processor would write them. */
const HINTS: Record<UiHint['type'], UiHint> = {
  card: {
    type: 'card',
    title: 'Project sync',
    body: 'Weekly status meeting',
    fields: [
      { label: 'Owner', value: 'Ana Li' },
      { label: 'Attendees', value: 3 },
      { label: 'Recurring', value: true },
    ],
    actions: [reschedule, { type: 'open_url', label: 'Open in calendar', url: 'https://calendar.example.com/e/123' }],
  },
  list: {
    type: 'list',
    title: 'Today',
    items: [{ id: 'evt_123', title: 'Project sync', subtitle: '10:00–11:00', meta: 'Room A' }, { title: 'Lunch' }],
  },
  table: {
    type: 'table',
    title: 'Invites',
    columns: [
      { key: 'id', label: 'ID' },
      { key: 'title', label: 'Title' },
      { key: 'count', label: 'Guests' },
    ],
    rows: [
      { id: 'evt_123', title: 'Project sync', count: 12 },
      { id: 'evt_9', title: 'Retro' },
    ],
  },
  key_value: {
    type: 'key_value',
    title: 'Memory updated',
    entries: [
      { label: 'Key', value: 'preferred_language' },
      { label: 'Value', value: 'zh-CN' },
    ],
  },
  calendar_event: {
    type: 'calendar_event',
    event: {
      id: 'evt_123',
      title: 'Project sync',
      start_at: '2026-04-21T10:00:00+08:00',
      end_at: '2026-04-21T11:00:00+08:00',
      location: 'Room A',
      attendees: ['ana@example.com', 'bo@example.com'],
      status: 'confirmed',
    },
    actions: [reschedule],
  },
  contact: {
    type: 'contact',
    contact: {
      id: 'ct_7',
      name: 'Ana Li',
      email: 'ana@example.com',
      phone: '+86 10 5555 0100',
      organization: 'Example Co',
    },
  },
  confirmation: {
    type: 'confirmation',
    title: 'Invite declined',
    message: 'You declined “Project sync”.',
    outcome: 'done',
  },
};

const context = { toolCallId: 'run_1.cal', status: 'success' } as const;

describe('ui_schema v1', () => {
  it('covers every hint kind with a component type of the same name', () => {
    expect([...UI_COMPONENT_TYPES].sort()).toEqual(Object.keys(HINTS).sort());
    for (const hint of Object.values(HINTS)) expect(UiHintSchema.parse(hint)).toEqual(hint);
  });

  it.each(Object.keys(HINTS) as UiHint['type'][])('compiles a %s hint to a component that parses', (kind) => {
    const schema = compileUiSchema([HINTS[kind]], context);
    expect(schema).toBeDefined();
    expect(UiSchemaSchema.parse(schema)).toEqual(schema);
    expect(schema).toMatchObject({ version: UI_SCHEMA_VERSION, tool_call_id: 'run_1.cal', status: 'success' });
    expect(schema?.components).toHaveLength(1);
    expect(schema?.components[0]).toMatchObject({ id: 'run_1.cal/0', type: kind });
    // JSON-native: a JSON round trip changes nothing.
    expect(JSON.parse(JSON.stringify(schema))).toEqual(schema);
  });

  it('is deterministic: the same hints give the same JSON, with stable ids, and never alias the input', () => {
    const hints = Object.values(HINTS);
    const a = compileUiSchema(hints, context);
    const b = compileUiSchema(structuredClone(hints), context);
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    expect(a?.components.map((c) => c.id)).toEqual(hints.map((_, i) => `run_1.cal/${i}`));
    const card = a?.components[0] as Extract<UiComponent, { type: 'card' }>;
    expect(card.actions.map((x) => x.id)).toEqual(['run_1.cal/0/a0', 'run_1.cal/0/a1']);
    card.fields.push({ label: 'x', value: 1 });
    expect(HINTS.card.type === 'card' && HINTS.card.fields).toHaveLength(3);
  });

  it('labels every value and normalizes what renderers need: table cells by column, list ids, event fields', () => {
    const schema = compileUiSchema(Object.values(HINTS), context);
    const [, list, table, , event, contact, confirmation] = schema?.components ?? [];
    expect(list).toMatchObject({
      items: [{ id: 'run_1.cal/1/i0', title: 'Project sync' }, { id: 'run_1.cal/1/i1' }],
      empty: 'No items',
    });
    expect(table).toMatchObject({
      rows: [
        { id: 'run_1.cal/2/r0', cells: ['evt_123', 'Project sync', 12] },
        { id: 'run_1.cal/2/r1', cells: ['evt_9', 'Retro', null] },
      ],
    });
    expect(event).toMatchObject({
      title: 'Project sync',
      event: { id: 'evt_123', start_at: '2026-04-21T10:00:00+08:00', attendees: ['ana@example.com', 'bo@example.com'] },
      fields: [
        { label: 'Starts', value: '2026-04-21T10:00:00+08:00', format: 'datetime' },
        { label: 'Ends', value: '2026-04-21T11:00:00+08:00', format: 'datetime' },
        { label: 'Location', value: 'Room A' },
        { label: 'Attendees', value: 'ana@example.com, bo@example.com' },
        { label: 'Status', value: 'confirmed' },
      ],
      actions: [{ type: 'call', tool: 'project_cli', module: 'calendar', method: 'update', label: 'Reschedule' }],
    });
    expect(contact).toMatchObject({ title: 'Ana Li', fields: [{ label: 'Email', format: 'email' }, {}, {}] });
    expect(confirmation).toMatchObject({ outcome: 'done', outcome_label: 'Done' });
  });

  it('is undefined without hints; skips hints that do not parse and links that are not http(s)', () => {
    expect(compileUiSchema([], context)).toBeUndefined();
    expect(compileUiSchema([{ type: 'chart' } as unknown as UiHint], context)).toBeUndefined();
    const schema = compileUiSchema(
      [
        { type: 'html', html: '<script>alert(1)</script>' } as unknown as UiHint,
        {
          type: 'card',
          title: 'Links',
          actions: [
            { type: 'open_url', label: 'bad', url: 'javascript:alert(1)' },
            { type: 'open_url', label: 'good', url: 'https://example.com/' },
          ],
        },
      ],
      { toolCallId: 'c1', status: 'partial' },
    );
    expect(schema?.components).toEqual([
      {
        id: 'c1/1',
        type: 'card',
        title: 'Links',
        fields: [],
        actions: [{ id: 'c1/1/a1', type: 'open_url', label: 'good', url: 'https://example.com/' }],
      },
    ]);
    expect(UiSchemaSchema.safeParse({ ...schema, components: [{ type: 'html', id: 'x', html: '<b>' }] }).success).toBe(
      false,
    );
  });

  it('reads a stored ToolAgentOutput leniently', () => {
    const record = {
      tool_name: 'project_cli',
      tool_call_id: 'call_9',
      tool_call_args: { module: 'contacts', method: 'read', input: {} },
      status: 'failure',
      result: null,
      error: { code: 'NOT_FOUND', message: 'no such contact' },
      ui_hints: [HINTS.confirmation],
    };
    expect(uiSchemaOfToolAgentOutput(record)).toMatchObject({ tool_call_id: 'call_9', status: 'failure' });
    expect(uiSchemaOfToolAgentOutput({ ...record, ui_hints: [] })).toBeUndefined();
    expect(uiSchemaOfToolAgentOutput(undefined)).toBeUndefined();
    expect(uiSchemaOfToolAgentOutput({ ui_hints: 'no' })).toBeUndefined();
  });

  it('renders plain text with the key facts of every component', () => {
    const schema = compileUiSchema(Object.values(HINTS), context);
    if (!schema) throw new Error('no schema');
    const text = uiSchemaText(schema);
    expect(text).toContain('┌ Project sync');
    expect(text).toContain('│ Owner:     Ana Li');
    expect(text).toContain('│ Recurring: yes');
    expect(text).toContain('→ Reschedule (proposed: calendar.update)');
    expect(text).toContain('→ Open in calendar <https://calendar.example.com/e/123>');
    expect(text).toContain('  • Project sync — 10:00–11:00 (Room A)');
    // a table: aligned columns, a rule, a dash for a missing cell
    expect(text).toContain(['ID       Title         Guests', '───────  ────────────  ──────'].join('\n'));
    expect(text).toContain('evt_9    Retro         —');
    expect(text).toContain('  Key:   preferred_language');
    expect(text).toContain('│ When: 2026-04-21T10:00:00+08:00 → 2026-04-21T11:00:00+08:00');
    expect(text).toContain('│ Attendees: ana@example.com, bo@example.com');
    expect(text).toContain('┌ Contact: Ana Li');
    expect(text).toContain('│ Email:        ana@example.com');
    expect(text).toContain('✓ Done: Invite declined');
    const failed = compileUiSchema([{ ...HINTS.confirmation, outcome: 'failed' } as UiHint], context);
    expect(uiSchemaText(failed as never)).toMatch(/^✗ Failed: Invite declined/);
    const empty = compileUiSchema([{ type: 'list', items: [], empty: 'Nothing today' }], context);
    expect(uiSchemaText(empty as never)).toBe('  (Nothing today)');
    // data cannot inject lines
    const sneaky = compileUiSchema([{ type: 'card', title: 'a\nb', fields: [{ label: 'x\ny', value: 'z' }] }], context);
    expect(uiSchemaText(sneaky as never).split('\n')).toHaveLength(3);
  });

  it('exports a JSON Schema (oar schema ui) that accepts compiled output and rejects markup', () => {
    const json = schemaFor('ui');
    expect(json).toMatchObject({
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      title: 'OAR ui_schema (oar.ui/1)',
    });
    // Strict, but a scalar value is a JSON Schema union type (`"type": ["string", "number", …]`) by design.
    const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true });
    addFormats(ajv);
    const validate = ajv.compile(json as object);
    const schema = compileUiSchema(Object.values(HINTS), context);
    expect(validate(schema), JSON.stringify(validate.errors)).toBe(true);
    expect(validate({ ...schema, version: 'oar.ui/0' })).toBe(false);
    expect(validate({ ...schema, components: [{ id: 'x', type: 'html', html: '<b>hi</b>' }] })).toBe(false);
    const link = { id: 'a', type: 'open_url', label: 'x', url: 'javascript:alert(1)' };
    const card = { id: 'c', type: 'card', title: 't', fields: [], actions: [link] };
    expect(validate({ ...schema, components: [card] })).toBe(false);
  });
});
