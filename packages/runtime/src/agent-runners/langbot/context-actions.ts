import { z } from 'zod';
import { type Call, clamp, type Data, fail, Int, OptionalText, parse, Text } from './action-support.js';
import { eventRecord, steeringItem, transcriptItem } from './record-shapes.js';

/** LangBot's context actions → history.*, events.*, steering.pull, prompt.get, state.* (records: record-shapes.ts). */

async function historyPage({ data, host, run }: Call): Promise<Data> {
  const args = parse(
    z.looseObject({
      conversation_id: OptionalText,
      before_cursor: OptionalText,
      after_cursor: OptionalText,
      limit: Int.nullable().optional(),
      direction: z.enum(['backward', 'forward']).nullable().optional(),
      include_attachments: z.boolean().nullable().optional(),
    }),
    data,
    'history_page',
  );
  const page = (await host.call('history.page', {
    ...(args.conversation_id ? { conversation_id: args.conversation_id } : {}),
    ...(args.before_cursor ? { before_cursor: args.before_cursor } : {}),
    ...(args.after_cursor ? { after_cursor: args.after_cursor } : {}),
    // LangBot's host caps the limit itself; so does this mapping, at OAR's cap.
    limit: clamp(args.limit ?? 50, 1, 200),
    direction: args.direction ?? 'backward',
    include_artifacts: args.include_attachments === true,
  })) as { items?: Data[]; next_cursor?: string | null; has_more?: boolean };
  const conversation = args.conversation_id ?? run.conversationId;
  return {
    items: (page.items ?? []).map((item) => transcriptItem(item, conversation)),
    next_cursor: page.next_cursor ?? null,
    prev_cursor: null,
    has_more: page.has_more === true,
  };
}

const ROLES = ['system', 'user', 'assistant', 'tool'] as const;

async function historySearch({ data, host, run }: Call): Promise<Data> {
  const args = parse(
    z.looseObject({
      query: Text,
      top_k: Int.nullable().optional(),
      filters: z
        .looseObject({ roles: z.array(z.enum(ROLES)).nullable().optional(), conversation_id: OptionalText })
        .nullable()
        .optional(),
    }),
    data,
    'history_search',
  );
  const filters = args.filters ?? {};
  // A filter OAR does not apply would widen the results unasked: refused by name.
  const unknown = Object.keys(filters).filter((k) => k !== 'roles' && k !== 'conversation_id');
  if (unknown.length) {
    throw fail('invalid_argument', `history_search filters ${unknown.slice(0, 5).join(', ')} are not applied by OAR`, {
      filters: unknown.slice(0, 10),
    });
  }
  const found = (await host.call('history.search', {
    query: args.query,
    top_k: clamp(args.top_k ?? 10, 1, 50),
    filters: {
      ...(filters.roles ? { roles: filters.roles } : {}),
      ...(filters.conversation_id ? { conversation_id: filters.conversation_id } : {}),
    },
  })) as { items?: Data[] };
  const items = (found.items ?? []).map((item) => transcriptItem(item, filters.conversation_id ?? run.conversationId));
  return { items, total_count: items.length, query: args.query };
}

async function eventGet({ data, host }: Call): Promise<Data> {
  const args = parse(z.looseObject({ event_id: Text }), data, 'event_get');
  return eventRecord((await host.call('events.get', { event_id: args.event_id })) as Data);
}

/**
 * event_page → events.page of the run's own conversation. OAR's events.page has no conversation argument (it is
 * always the run's), so another conversation is refused here; `event_types` filters the page's items (a page may
 * then hold fewer than `limit`, its cursor still pages on).
 */
async function eventPage({ data, host, run }: Call): Promise<Data> {
  const args = parse(
    z.looseObject({
      conversation_id: OptionalText,
      event_types: z.array(Text).nullable().optional(),
      before_cursor: OptionalText,
      limit: Int.nullable().optional(),
    }),
    data,
    'event_page',
  );
  if (args.conversation_id && args.conversation_id !== run.conversationId) {
    throw fail('unauthorized', 'events of another conversation are not granted to this run', {
      conversation_id: args.conversation_id.slice(0, 128),
    });
  }
  const page = (await host.call('events.page', {
    ...(args.before_cursor ? { before_cursor: args.before_cursor } : {}),
    limit: clamp(args.limit ?? 50, 1, 200),
  })) as { items?: Data[]; next_cursor?: string | null; has_more?: boolean };
  const types = args.event_types?.length ? new Set(args.event_types) : undefined;
  return {
    items: (page.items ?? []).filter((e) => !types || types.has(String(e.event_type))).map(eventRecord),
    next_cursor: page.next_cursor ?? null,
    prev_cursor: null,
    has_more: page.has_more === true,
  };
}

/** steering_pull → steering.pull: `one` / `one-at-a-time` claim one queued input, `all` every one (≤ limit). */
async function steeringPull({ data, host, run }: Call): Promise<Data> {
  const args = parse(
    z.looseObject({ mode: z.string().nullable().optional(), limit: Int.nullable().optional() }),
    data,
    'steering_pull',
  );
  const mode = args.mode ?? 'all';
  if (!['all', 'one', 'one-at-a-time'].includes(mode)) {
    throw fail('invalid_argument', 'steering_pull mode is "all", "one" or "one-at-a-time"', {
      mode: mode.slice(0, 32),
    });
  }
  if (args.limit !== null && args.limit !== undefined && args.limit < 1) {
    throw fail('invalid_argument', 'steering_pull limit must be > 0');
  }
  const pulled = (await host.call('steering.pull', {
    mode: mode === 'all' ? 'all' : 'one',
    ...(args.limit ? { limit: Math.min(args.limit, 100) } : {}),
  })) as { items?: Data[]; claimed_at?: string | null };
  return { items: (pulled.items ?? []).map((item) => steeringItem(item, pulled.claimed_at, run)) };
}

async function getPrompt({ host }: Call): Promise<Data> {
  const prompt = (await host.call('prompt.get', {})) as { messages?: { role: string; content: string }[] };
  return { prompt: (prompt.messages ?? []).map((m) => ({ role: m.role, content: m.content })) };
}

const ScopeKey = z.looseObject({ scope: Text, key: Text });

async function stateGet({ data, host }: Call): Promise<Data> {
  const args = parse(ScopeKey, data, 'state_get');
  const got = (await host.call('state.get', { scope: args.scope, key: args.key })) as Data;
  return { value: got.value ?? null };
}

async function stateSet({ data, host }: Call): Promise<Data> {
  const args = parse(z.looseObject({ scope: Text, key: Text, value: z.unknown() }), data, 'state_set');
  // LangBot stores null as a value; OAR's state has no null (setting it deletes): the same outcome for a reader.
  await host.call('state.set', { scope: args.scope, key: args.key, value: args.value ?? null });
  return { success: true };
}

/** state_delete answers whether the key was there (LangBot's `success`): read first, then delete. */
async function stateDelete({ data, host }: Call): Promise<Data> {
  const args = parse(ScopeKey, data, 'state_delete');
  const before = (await host.call('state.get', { scope: args.scope, key: args.key })) as Data;
  await host.call('state.delete', { scope: args.scope, key: args.key });
  return { success: before.value !== null && before.value !== undefined };
}

async function stateList({ data, host }: Call): Promise<Data> {
  const args = parse(
    z.looseObject({ scope: Text, prefix: OptionalText, limit: Int.nullable().optional() }),
    data,
    'state_list',
  );
  const listed = (await host.call('state.list', {
    scope: args.scope,
    ...(args.prefix ? { prefix: args.prefix } : {}),
    // LangBot's host takes any limit and caps it at 100; so does this mapping.
    limit: clamp(args.limit ?? 100, 1, 100),
  })) as { keys?: string[]; has_more?: boolean };
  return { keys: listed.keys ?? [], has_more: listed.has_more === true };
}

export const CONTEXT_ACTIONS: Record<string, (call: Call) => Promise<Data>> = {
  history_page: historyPage,
  history_search: historySearch,
  event_get: eventGet,
  event_page: eventPage,
  steering_pull: steeringPull,
  get_prompt: getPrompt,
  state_get: stateGet,
  state_set: stateSet,
  state_delete: stateDelete,
  state_list: stateList,
};
