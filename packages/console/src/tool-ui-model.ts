/**
 * Tool UI: what the console draws of a business-tool call's `ui_schema` (v1, `oar.ui/1`; `oar schema ui` prints its
 * JSON Schema). The console never sees UI hints and never compiles anything: the server compiles `ui_schema` from the
 * stored hints when history is read (`GET /v1/sessions/{id}/history?at=N`, `messages[].ui_schema`), and this module
 * turns it into a plain view model — every value as text, every link checked — that tool-ui.tsx renders as
 * ordinary elements (never innerHTML). A `call` action is a proposal: it is shown as a disabled button, never run.
 * Pure, so it is unit-tested in Node.
 */

export const UI_SCHEMA_VERSION = 'oar.ui/1';

/** A tool message of the history endpoint (the fields the console reads). */
export interface ToolMessage {
  role: 'tool';
  messageId: string;
  toolCallId: string;
  toolName: string;
  status: string;
  content: string;
  ui_schema?: unknown;
  sequence: number;
}

export interface FieldView {
  label: string;
  text: string;
  format?: 'text' | 'datetime' | 'email' | 'phone';
}

export type ActionView =
  | { id: string; kind: 'proposal'; label: string; title: string }
  | { id: string; kind: 'link'; label: string; href: string };

export type BlockView =
  | { id: string; kind: 'card'; title: string; body?: string; fields: FieldView[]; actions: ActionView[] }
  | {
      id: string;
      kind: 'list';
      title?: string;
      items: { id: string; title: string; subtitle?: string; meta?: string }[];
      empty: string;
    }
  | { id: string; kind: 'table'; title?: string; columns: string[]; rows: { id: string; cells: string[] }[] }
  | { id: string; kind: 'key_value'; title?: string; fields: FieldView[] }
  | { id: string; kind: 'calendar_event'; title: string; fields: FieldView[]; actions: ActionView[] }
  | { id: string; kind: 'contact'; title: string; fields: FieldView[] }
  | {
      id: string;
      kind: 'confirmation';
      title: string;
      message: string;
      outcome: 'done' | 'partial' | 'failed';
      outcomeLabel: string;
      mark: string;
      actions: ActionView[];
    }
  | { id: string; kind: 'unsupported'; type: string };

export interface ToolUiView {
  toolCallId: string;
  status: string;
  blocks: BlockView[];
}

type Rec = Record<string, unknown>;
const rec = (v: unknown): Rec => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Rec) : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const text = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** A JSON scalar as a person reads it. */
export function scalarText(v: unknown): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (typeof v === 'string' || typeof v === 'number') return String(v);
  return JSON.stringify(v);
}

const FORMATS = new Set(['text', 'datetime', 'email', 'phone']);

function fields(v: unknown): FieldView[] {
  return arr(v).map((raw) => {
    const f = rec(raw);
    const format = text(f.format);
    return {
      label: text(f.label) ?? '',
      text: scalarText(f.value),
      ...(format && FORMATS.has(format) ? { format: format as FieldView['format'] } : {}),
    };
  });
}

/** Only http(s) links are links; anything else (javascript:, data:…) is dropped. */
export function safeHref(url: unknown): string | undefined {
  if (typeof url !== 'string') return undefined;
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.href : undefined;
  } catch {
    return undefined;
  }
}

function actions(v: unknown): ActionView[] {
  const out: ActionView[] = [];
  for (const [i, raw] of arr(v).entries()) {
    const a = rec(raw);
    const id = text(a.id) ?? `a${i}`;
    const label = text(a.label) ?? 'action';
    if (a.type === 'call') {
      const target = `${text(a.module) ?? '?'}.${text(a.method) ?? '?'}`;
      out.push({
        id,
        kind: 'proposal',
        label,
        title: `Proposed follow-up (${target}): the console never runs it — ask the agent, whose call goes through permissions`,
      });
    } else if (a.type === 'open_url') {
      const href = safeHref(a.url);
      if (href) out.push({ id, kind: 'link', label, href });
    }
  }
  return out;
}

const MARKS = { done: '✓', partial: '◐', failed: '✕' } as const;

function block(raw: unknown, index: number): BlockView {
  const c = rec(raw);
  const id = text(c.id) ?? `c${index}`;
  const title = text(c.title);
  switch (c.type) {
    case 'card':
      return {
        id,
        kind: 'card',
        title: title ?? '',
        ...(text(c.body) !== undefined ? { body: text(c.body) } : {}),
        fields: fields(c.fields),
        actions: actions(c.actions),
      };
    case 'list':
      return {
        id,
        kind: 'list',
        ...(title !== undefined ? { title } : {}),
        items: arr(c.items).map((rawItem, i) => {
          const item = rec(rawItem);
          return {
            id: text(item.id) ?? `i${i}`,
            title: text(item.title) ?? '',
            ...(text(item.subtitle) !== undefined ? { subtitle: text(item.subtitle) } : {}),
            ...(text(item.meta) !== undefined ? { meta: text(item.meta) } : {}),
          };
        }),
        empty: text(c.empty) ?? 'No items',
      };
    case 'table': {
      const columns = arr(c.columns).map((col) => text(rec(col).label) ?? text(rec(col).key) ?? '');
      return {
        id,
        kind: 'table',
        ...(title !== undefined ? { title } : {}),
        columns,
        rows: arr(c.rows).map((rawRow, i) => {
          const row = rec(rawRow);
          const cells = arr(row.cells);
          return { id: text(row.id) ?? `r${i}`, cells: columns.map((_, j) => scalarText(cells[j])) };
        }),
      };
    }
    case 'key_value':
      return { id, kind: 'key_value', ...(title !== undefined ? { title } : {}), fields: fields(c.entries) };
    case 'calendar_event':
      return { id, kind: 'calendar_event', title: title ?? '', fields: fields(c.fields), actions: actions(c.actions) };
    case 'contact':
      return { id, kind: 'contact', title: title ?? '', fields: fields(c.fields) };
    case 'confirmation': {
      const outcome = c.outcome === 'partial' || c.outcome === 'failed' ? c.outcome : 'done';
      return {
        id,
        kind: 'confirmation',
        title: title ?? '',
        message: text(c.message) ?? '',
        outcome,
        outcomeLabel: text(c.outcome_label) ?? outcome,
        mark: MARKS[outcome],
        actions: actions(c.actions),
      };
    }
    default:
      return { id, kind: 'unsupported', type: typeof c.type === 'string' ? c.type : 'unknown' };
  }
}

/** The view of a `ui_schema`, or undefined when it is absent or not v1. */
export function toolUiView(schema: unknown): ToolUiView | undefined {
  const s = rec(schema);
  if (s.version !== UI_SCHEMA_VERSION) return undefined;
  const blocks = arr(s.components).map(block);
  if (blocks.length === 0) return undefined;
  return { toolCallId: text(s.tool_call_id) ?? '', status: text(s.status) ?? 'success', blocks };
}

/** The tool message of a call among the history's messages. */
export function toolMessageFor(messages: unknown, toolCallId: string): ToolMessage | undefined {
  return arr(messages).find((m) => rec(m).role === 'tool' && rec(m).toolCallId === toolCallId) as
    | ToolMessage
    | undefined;
}
