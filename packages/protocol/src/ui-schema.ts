import { z } from 'zod';
import { TOOL_CALL_STATUSES, type UiAction, type UiHint, UiHintSchema } from './tool-agent-output.js';

/**
 * `ui_schema` v1 — the wire format of tool UI (Agent Tool Protocol §9, §10, §13).
 *
 * A business tool's post-processor writes `ui_hints` into its `ToolAgentOutput`; hints are internal and never leave
 * the backend. What clients receive is `ui_schema`, compiled from the hints by this codec:
 *
 * - on AG-UI, on `TOOL_CALL_RESULT` as `metadata.oar.ui_schema` (server/src/agui/projector.ts);
 * - on `GET /v1/sessions/{sessionId}/history`, on each tool message as `ui_schema`.
 *
 * It is compiled at read time from the stored hints, so a newer codec re-renders old messages. The codec is pure and
 * deterministic (the same hints and context always give the same JSON, no clock, no randomness) and its output is
 * JSON-native.
 *
 * ```json
 * {
 *   "version": "oar.ui/1",
 *   "tool_call_id": "run_1.read_calendar",
 *   "status": "success",
 *   "components": [
 *     { "id": "run_1.read_calendar/0", "type": "calendar_event", "title": "Project sync",
 *       "event": { "id": "evt_123", "start_at": "2026-04-21T10:00:00+08:00", "attendees": [] },
 *       "fields": [{ "label": "Starts", "value": "2026-04-21T10:00:00+08:00", "format": "datetime" }],
 *       "actions": [] }
 *   ]
 * }
 * ```
 *
 * Rules a renderer can rely on:
 *
 * - `version` is `oar.ui/1`. A breaking change gets a new version; additions within v1 are new optional fields
 *   or new component types, so a renderer skips what it does not know.
 * - Every component, list item, table row and action has an `id`, stable across recompilations of the same hints
 *   (derived from the tool call id and positions, never random).
 * - Every displayed value has an explicit `label` (fields) or a column (tables); values are JSON scalars, meant as
 *   text, never markup. There is no HTML and no code anywhere in the format.
 * - Actions are declarative proposals. `call` names another call of the same business tool (module, method,
 *   input); a client may offer it to the user, who sends it back through the model and the runtime's permissions —
 *   a renderer never executes it. `open_url` is an http(s) link.
 */

/** The version tag of this format. */
export const UI_SCHEMA_VERSION = 'oar.ui/1' as const;

/** The business tool every `ToolAgentOutput` names (spec §7). */
const BUSINESS_TOOL = 'project_cli';

const Id = z.string().min(1);
const Scalar = z.union([z.string(), z.number(), z.boolean(), z.null()]);
const HttpUrl = z.url({ protocol: /^https?$/ }).regex(/^https?:\/\//i);

/** How a renderer may format a field's value (a hint: the value is always shown as text). */
export const UI_FIELD_FORMATS = ['text', 'datetime', 'email', 'phone'] as const;

export const UiFieldSchema = z
  .strictObject({
    label: z.string().describe('what the value is, as a person reads it'),
    value: Scalar,
    format: z.enum(UI_FIELD_FORMATS).optional(),
  })
  .describe('one labelled value');
export type UiField = z.infer<typeof UiFieldSchema>;

/** A declarative follow-up: a proposal the user may take (never executed by a renderer), or an http(s) link. */
export const UiComponentActionSchema = z.discriminatedUnion('type', [
  z
    .strictObject({
      id: Id,
      type: z.literal('call'),
      label: z.string().min(1),
      tool: z.literal(BUSINESS_TOOL),
      module: z.string().min(1),
      method: z.string().min(1),
      input: z.record(z.string(), z.unknown()),
    })
    .describe(
      'a proposed call of the business tool: shown, never executed by the renderer (it goes through the model and the permissions)',
    ),
  z.strictObject({ id: Id, type: z.literal('open_url'), label: z.string().min(1), url: HttpUrl }),
]);
export type UiComponentAction = z.infer<typeof UiComponentActionSchema>;

const Actions = z.array(UiComponentActionSchema);

export const UiCardSchema = z.strictObject({
  id: Id,
  type: z.literal('card'),
  title: z.string(),
  body: z.string().optional(),
  fields: z.array(UiFieldSchema),
  actions: Actions,
});

export const UiListSchema = z.strictObject({
  id: Id,
  type: z.literal('list'),
  title: z.string().optional(),
  items: z.array(
    z.strictObject({
      id: Id,
      title: z.string(),
      subtitle: z.string().optional(),
      meta: z.string().optional(),
    }),
  ),
  /** What to show when `items` is empty. */
  empty: z.string(),
});

export const UiTableSchema = z.strictObject({
  id: Id,
  type: z.literal('table'),
  title: z.string().optional(),
  columns: z.array(z.strictObject({ key: z.string(), label: z.string() })).min(1),
  /** `cells[i]` is the value of `columns[i]` (null when the row has none). */
  rows: z.array(z.strictObject({ id: Id, cells: z.array(Scalar) })),
});

export const UiKeyValueSchema = z.strictObject({
  id: Id,
  type: z.literal('key_value'),
  title: z.string().optional(),
  entries: z.array(UiFieldSchema),
});

export const UiCalendarEventSchema = z.strictObject({
  id: Id,
  type: z.literal('calendar_event'),
  title: z.string(),
  /** The event as data (its business id, ISO 8601 times). */
  event: z.strictObject({
    id: z.string(),
    start_at: z.string(),
    end_at: z.string().optional(),
    location: z.string().optional(),
    attendees: z.array(z.string()),
    status: z.string().optional(),
  }),
  /** The same facts, labelled for display, in display order. */
  fields: z.array(UiFieldSchema),
  actions: Actions,
});

export const UiContactSchema = z.strictObject({
  id: Id,
  type: z.literal('contact'),
  /** The contact's name. */
  title: z.string(),
  contact: z.strictObject({
    id: z.string(),
    name: z.string(),
    email: z.string().optional(),
    phone: z.string().optional(),
    organization: z.string().optional(),
  }),
  fields: z.array(UiFieldSchema),
});

export const UI_OUTCOMES = ['done', 'partial', 'failed'] as const;
const OUTCOME_LABELS = { done: 'Done', partial: 'Partially done', failed: 'Failed' } as const;

export const UiConfirmationSchema = z.strictObject({
  id: Id,
  type: z.literal('confirmation'),
  title: z.string(),
  message: z.string(),
  outcome: z.enum(UI_OUTCOMES),
  /** The outcome in words (`Done`, `Partially done`, `Failed`): never conveyed by colour alone. */
  outcome_label: z.string(),
  actions: Actions,
});

export const UiComponentSchema = z.discriminatedUnion('type', [
  UiCardSchema,
  UiListSchema,
  UiTableSchema,
  UiKeyValueSchema,
  UiCalendarEventSchema,
  UiContactSchema,
  UiConfirmationSchema,
]);
export type UiComponent = z.infer<typeof UiComponentSchema>;
export const UI_COMPONENT_TYPES = [
  'card',
  'list',
  'table',
  'key_value',
  'calendar_event',
  'contact',
  'confirmation',
] as const satisfies readonly UiComponent['type'][];

export const UiSchemaSchema = z
  .strictObject({
    version: z.literal(UI_SCHEMA_VERSION),
    /** The call the UI belongs to (`ToolAgentOutput.tool_call_id`). */
    tool_call_id: Id,
    status: z.enum(TOOL_CALL_STATUSES),
    components: z.array(UiComponentSchema).min(1),
  })
  .describe('OAR tool UI (ui_schema v1), compiled by the backend from a ToolAgentOutput’s ui_hints');
export type UiSchema = z.infer<typeof UiSchemaSchema>;

export interface UiCompileContext {
  toolCallId: string;
  status: (typeof TOOL_CALL_STATUSES)[number];
}

// ---- the codec --------------------------------------------------------------------------------------------------

function action(a: UiAction, id: string): UiComponentAction | undefined {
  if (a.type === 'call') {
    return {
      id,
      type: 'call',
      label: a.label,
      tool: BUSINESS_TOOL,
      module: a.module,
      method: a.method,
      input: a.input,
    };
  }
  // Only http(s) links reach a client: a `javascript:` or `data:` URL is a valid URL, and never a link.
  return HttpUrl.safeParse(a.url).success ? { id, type: 'open_url', label: a.label, url: a.url } : undefined;
}

function actions(list: UiAction[] | undefined, componentId: string): UiComponentAction[] {
  const out: UiComponentAction[] = [];
  for (const [i, a] of (list ?? []).entries()) {
    const compiled = action(a, `${componentId}/a${i}`);
    if (compiled) out.push(compiled);
  }
  return out;
}

const field = (label: string, value: string | undefined, format?: UiField['format']): UiField[] =>
  value === undefined ? [] : [{ label, value, ...(format ? { format } : {}) }];

function component(hint: UiHint, id: string): UiComponent {
  switch (hint.type) {
    case 'card':
      return {
        id,
        type: 'card',
        title: hint.title,
        ...(hint.body !== undefined ? { body: hint.body } : {}),
        fields: (hint.fields ?? []).map((f) => ({ label: f.label, value: f.value })),
        actions: actions(hint.actions, id),
      };
    case 'list':
      return {
        id,
        type: 'list',
        ...(hint.title !== undefined ? { title: hint.title } : {}),
        items: hint.items.map((item, i) => ({
          id: `${id}/i${i}`,
          title: item.title,
          ...(item.subtitle !== undefined ? { subtitle: item.subtitle } : {}),
          ...(item.meta !== undefined ? { meta: item.meta } : {}),
        })),
        empty: hint.empty ?? 'No items',
      };
    case 'table':
      return {
        id,
        type: 'table',
        ...(hint.title !== undefined ? { title: hint.title } : {}),
        columns: hint.columns.map((c) => ({ key: c.key, label: c.label })),
        rows: hint.rows.map((row, i) => ({
          id: `${id}/r${i}`,
          cells: hint.columns.map((c) => (Object.hasOwn(row, c.key) ? (row[c.key] ?? null) : null)),
        })),
      };
    case 'key_value':
      return {
        id,
        type: 'key_value',
        ...(hint.title !== undefined ? { title: hint.title } : {}),
        entries: hint.entries.map((f) => ({ label: f.label, value: f.value })),
      };
    case 'calendar_event': {
      const e = hint.event;
      const attendees = e.attendees ?? [];
      return {
        id,
        type: 'calendar_event',
        title: e.title,
        event: {
          id: e.id,
          start_at: e.start_at,
          ...(e.end_at !== undefined ? { end_at: e.end_at } : {}),
          ...(e.location !== undefined ? { location: e.location } : {}),
          attendees: [...attendees],
          ...(e.status !== undefined ? { status: e.status } : {}),
        },
        fields: [
          ...field('Starts', e.start_at, 'datetime'),
          ...field('Ends', e.end_at, 'datetime'),
          ...field('Location', e.location),
          ...field('Attendees', attendees.length > 0 ? attendees.join(', ') : undefined),
          ...field('Status', e.status),
        ],
        actions: actions(hint.actions, id),
      };
    }
    case 'contact': {
      const c = hint.contact;
      return {
        id,
        type: 'contact',
        title: c.name,
        contact: {
          id: c.id,
          name: c.name,
          ...(c.email !== undefined ? { email: c.email } : {}),
          ...(c.phone !== undefined ? { phone: c.phone } : {}),
          ...(c.organization !== undefined ? { organization: c.organization } : {}),
        },
        fields: [
          ...field('Email', c.email, 'email'),
          ...field('Phone', c.phone, 'phone'),
          ...field('Organization', c.organization),
        ],
      };
    }
    case 'confirmation':
      return {
        id,
        type: 'confirmation',
        title: hint.title,
        message: hint.message,
        outcome: hint.outcome,
        outcome_label: OUTCOME_LABELS[hint.outcome],
        actions: actions(hint.actions, id),
      };
  }
}

/**
 * Compile a call's UI hints into `ui_schema` v1; undefined when there is nothing to show (no hints, or none valid).
 * Pure and deterministic. Hints are parsed again (stored records are data from the past, possibly from an older
 * post-processor): a hint that does not parse as a `UiHint` is skipped, never guessed at, so the output always parses
 * with `UiSchemaSchema`. Component ids are `<toolCallId>/<index of the hint>`.
 */
export function compileUiSchema(hints: readonly UiHint[], context: UiCompileContext): UiSchema | undefined {
  const components: UiComponent[] = [];
  for (const [i, raw] of hints.entries()) {
    const hint = UiHintSchema.safeParse(raw);
    if (hint.success) components.push(component(hint.data, `${context.toolCallId}/${i}`));
  }
  if (components.length === 0) return undefined;
  return { version: UI_SCHEMA_VERSION, tool_call_id: context.toolCallId, status: context.status, components };
}

/**
 * The `ui_schema` of a stored `ToolAgentOutput` (as found on `tool.result` / `tool.failed` at
 * `payload.toolAgentOutput`), read leniently: undefined when the value is not such a record or has no valid hints.
 */
export function uiSchemaOfToolAgentOutput(record: unknown): UiSchema | undefined {
  if (typeof record !== 'object' || record === null || Array.isArray(record)) return undefined;
  const r = record as Record<string, unknown>;
  if (!Array.isArray(r.ui_hints) || typeof r.tool_call_id !== 'string' || r.tool_call_id === '') return undefined;
  const status = TOOL_CALL_STATUSES.find((s) => s === r.status) ?? 'success';
  return compileUiSchema(r.ui_hints as UiHint[], { toolCallId: r.tool_call_id, status });
}

// ---- plain text -------------------------------------------------------------------------------------------------

const OUTCOME_MARKS = { done: '✓', partial: '◐', failed: '✗' } as const;

function scalarText(value: z.infer<typeof Scalar>): string {
  if (value === null) return '—';
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  return String(value);
}

/** Width in terminal columns, counting each code point as one (good enough for labels and values). */
const width = (s: string) => [...s].length;
const pad = (s: string, n: number) => s + ' '.repeat(Math.max(0, n - width(s)));
/** One line: no control characters or line breaks from data can reshape the output. */
function oneLine(s: string): string {
  let out = '';
  let control = false;
  for (const ch of s) {
    const code = ch.codePointAt(0) ?? 0;
    const isControl = code < 0x20 || code === 0x7f;
    if (!isControl) out += ch;
    else if (!control) out += ' ';
    control = isControl;
  }
  return out;
}

function fieldLines(fields: UiField[]): string[] {
  const labelWidth = Math.max(0, ...fields.map((f) => width(oneLine(f.label))));
  return fields.map((f) => `${pad(`${oneLine(f.label)}:`, labelWidth + 1)} ${oneLine(scalarText(f.value))}`);
}

function actionLines(list: UiComponentAction[]): string[] {
  return list.map((a) =>
    a.type === 'call'
      ? `→ ${oneLine(a.label)} (proposed: ${oneLine(a.module)}.${oneLine(a.method)})`
      : `→ ${oneLine(a.label)} <${oneLine(a.url)}>`,
  );
}

function boxed(title: string, lines: string[]): string[] {
  return [`┌ ${oneLine(title)}`, ...lines.map((l) => `│ ${l}`), '└'];
}

function componentText(c: UiComponent): string[] {
  switch (c.type) {
    case 'card':
      return boxed(c.title, [
        ...(c.body !== undefined ? c.body.split('\n').map(oneLine) : []),
        ...fieldLines(c.fields),
        ...actionLines(c.actions),
      ]);
    case 'list': {
      const head = c.title !== undefined ? [oneLine(c.title)] : [];
      if (c.items.length === 0) return [...head, `  (${oneLine(c.empty)})`];
      return [
        ...head,
        ...c.items.map((item) => {
          const sub = item.subtitle !== undefined ? ` — ${oneLine(item.subtitle)}` : '';
          const meta = item.meta !== undefined ? ` (${oneLine(item.meta)})` : '';
          return `  • ${oneLine(item.title)}${sub}${meta}`;
        }),
      ];
    }
    case 'table': {
      const header = c.columns.map((col) => oneLine(col.label));
      const rows = c.rows.map((r) => c.columns.map((_, i) => oneLine(scalarText(r.cells[i] ?? null))));
      const widths = header.map((h, i) => Math.max(width(h), ...rows.map((r) => width(r[i] ?? ''))));
      const line = (cells: string[]) =>
        cells
          .map((cell, i) => pad(cell, widths[i] ?? 0))
          .join('  ')
          .trimEnd();
      return [
        ...(c.title !== undefined ? [oneLine(c.title)] : []),
        line(header),
        widths.map((w) => '─'.repeat(w)).join('  '),
        ...(rows.length === 0 ? ['(no rows)'] : rows.map(line)),
      ];
    }
    case 'key_value':
      return [...(c.title !== undefined ? [oneLine(c.title)] : []), ...fieldLines(c.entries).map((l) => `  ${l}`)];
    case 'calendar_event': {
      const when = `When: ${oneLine(c.event.start_at)}${c.event.end_at !== undefined ? ` → ${oneLine(c.event.end_at)}` : ''}`;
      const rest = c.fields.filter((f) => f.label !== 'Starts' && f.label !== 'Ends');
      return boxed(`Event: ${c.title}`, [when, ...fieldLines(rest), ...actionLines(c.actions)]);
    }
    case 'contact':
      return boxed(`Contact: ${c.title}`, fieldLines(c.fields));
    case 'confirmation':
      return [
        `${OUTCOME_MARKS[c.outcome]} ${oneLine(c.outcome_label)}: ${oneLine(c.title)}`,
        ...c.message.split('\n').map((l) => `  ${oneLine(l)}`),
        ...actionLines(c.actions).map((l) => `  ${l}`),
      ];
  }
}

/**
 * A plain-text rendering of `ui_schema` for terminals and logs: cards boxed, tables as aligned columns, lists as
 * bullets, an event with its times, a confirmation with its outcome as a mark and a word. Components are separated
 * by a blank line; data never adds line breaks outside a body or message.
 */
export function uiSchemaText(schema: UiSchema): string {
  return schema.components.map((c) => componentText(c).join('\n')).join('\n\n');
}
