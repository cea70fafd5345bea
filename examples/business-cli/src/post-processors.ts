import type { UiAction, UiHint } from '@oar/protocol';

/**
 * The OAR-side post-processors of the example business CLI (Agent Tool Protocol §7): per `module.method`, the UI
 * hints worth showing for a call's result. OAR loads this module by path (`tools.cli.postProcessors`) and calls
 * the one for the method after a successful or partial call; the hints go into `ToolAgentOutput.ui_hints`.
 *
 * Pure functions of the call: no I/O, no clock, and defensive — data of an unexpected shape yields `undefined`
 * (no hints), never an exception. Actions are declarative follow-up calls of `project_cli` (they go through the
 * model and OAR's permissions like any call), never code. Only a type is imported: the module has no runtime
 * dependency.
 */

export interface PostProcessorCall {
  module: string;
  method: string;
  input: Record<string, unknown>;
  /** The CLI's `data` (JSON-native). */
  data: unknown;
  status: 'success' | 'partial';
  /** A partial success: what was not done, and why (when OAR passes it). */
  partial?: { notDone: unknown[]; reason: string };
}

export type PostProcessor = (call: PostProcessorCall) => UiHint[] | undefined;

type Json = Record<string, unknown>;
type CalendarEvent = Extract<UiHint, { type: 'calendar_event' }>['event'];
type Contact = Extract<UiHint, { type: 'contact' }>['contact'];

const MAX_ITEMS = 50;
const MAX_CARDS = 5;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

function objects(value: unknown): Json[] | undefined {
  return Array.isArray(value) ? value.filter(isObject) : undefined;
}

/** `2026-12-01T09:30:00+08:00` → `2026-12-01 09:30 (+08:00)`: as written, in the event's own offset. */
function when(iso: string): string {
  const match = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})(?::\d{2}(?:\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/.exec(iso);
  if (!match) return iso;
  const zone = match[3] === undefined ? '' : match[3] === 'Z' ? ' (UTC)' : ` (${match[3]})`;
  return `${match[1]} ${match[2]}${zone}`;
}

function span(start: string, end: string | undefined): string {
  if (!end) return when(start);
  // Same day and zone: `2026-12-01 09:30–09:45 (+08:00)`.
  const a = when(start);
  const b = when(end);
  const sameDay = a.slice(0, 10) === b.slice(0, 10) && a.slice(16) === b.slice(16) && a.length >= 16;
  return sameDay ? `${a.slice(0, 16)}–${b.slice(11)}` : `${a} – ${b}`;
}

function toEvent(value: unknown): CalendarEvent | undefined {
  if (!isObject(value)) return undefined;
  const id = str(value.id);
  const title = typeof value.title === 'string' ? value.title : undefined;
  const startAt = str(value.start_at);
  if (!id || title === undefined || !startAt) return undefined;
  const event: CalendarEvent = { id, title, start_at: startAt };
  const endAt = str(value.end_at);
  if (endAt) event.end_at = endAt;
  const location = str(value.location);
  if (location) event.location = location;
  if (Array.isArray(value.attendees)) {
    event.attendees = value.attendees.filter((a): a is string => typeof a === 'string');
  }
  const status = str(value.status);
  if (status) event.status = status;
  return event;
}

function call(label: string, module: string, method: string, input: Json): UiAction {
  return { type: 'call', label, module, method, input };
}

function eventActions(id: string): UiAction[] {
  return [
    call('Share…', 'calendar', 'share', { event_id: id }),
    call('Delete', 'calendar', 'delete', { event_id: id }),
  ];
}

function eventHint(value: unknown): UiHint[] | undefined {
  const event = toEvent(value);
  if (!event) return undefined;
  return [{ type: 'calendar_event', event, actions: eventActions(event.id) }];
}

/** Pending invites to the acting owner (calendar.read day/range): one card each, with accept / decline. */
function inviteCards(value: unknown): UiHint[] {
  const invites = objects(value) ?? [];
  return invites.flatMap((invite): UiHint[] => {
    const id = str(invite.id);
    if (!id) return [];
    const title = str(invite.title) ?? 'an event';
    const startAt = str(invite.start_at);
    const fields = [
      ...(str(invite.from) ? [{ label: 'From', value: invite.from as string }] : []),
      ...(startAt ? [{ label: 'When', value: span(startAt, str(invite.end_at)) }] : []),
      ...(str(invite.status) ? [{ label: 'Status', value: invite.status as string }] : []),
    ];
    return [
      {
        type: 'card',
        title: `Invite: ${title}`,
        fields,
        actions: [
          call('Accept', 'calendar', 'accept_invite', { invite_id: id }),
          call('Decline', 'calendar', 'reject_invite', { invite_id: id }),
        ],
      },
    ];
  });
}

const calendarRead: PostProcessor = ({ data }) => {
  if (!isObject(data)) return undefined;
  if (data.mode === 'event') return eventHint(data.event);
  const items = objects(data.items);
  if (!items) return undefined;
  const events = items.map(toEvent).filter((e): e is CalendarEvent => e !== undefined);
  const invites = inviteCards(data.invites).slice(0, MAX_CARDS);
  if (data.mode === 'range') {
    const from = str(data.start_at);
    const to = str(data.end_at);
    const table: UiHint = {
      type: 'table',
      title: from && to ? `Events ${span(from, to)}` : 'Events',
      columns: [
        { key: 'title', label: 'Title' },
        { key: 'start_at', label: 'Start' },
        { key: 'end_at', label: 'End' },
        { key: 'location', label: 'Location' },
        { key: 'id', label: 'Id' },
      ],
      rows: events.slice(0, MAX_ITEMS).map((e) => ({
        title: e.title,
        start_at: when(e.start_at),
        end_at: e.end_at ? when(e.end_at) : null,
        location: e.location ?? null,
        id: e.id,
      })),
    };
    return [table, ...invites];
  }
  const date = str(data.date);
  const list: UiHint = {
    type: 'list',
    title: date ? `Events on ${date}` : 'Events',
    items: events.slice(0, MAX_ITEMS).map((e) => ({
      id: e.id,
      title: e.title,
      subtitle: span(e.start_at, e.end_at),
      ...(e.location ? { meta: e.location } : {}),
    })),
    empty: date ? `No events on ${date}` : 'No events',
  };
  return [list, ...invites];
};

const calendarWrite: PostProcessor = ({ data }) => (isObject(data) ? eventHint(data.event) : undefined);

const calendarDelete: PostProcessor = ({ data, input }) => {
  if (!isObject(data) || data.deleted !== true) return undefined;
  const id = str(data.id) ?? str(input.event_id) ?? 'the event';
  const title = str(data.title);
  const name = title ? `“${title}” (${id})` : id;
  return [
    {
      type: 'confirmation',
      title: 'Event deleted',
      message: data.already_deleted === true ? `${name} was already deleted.` : `${name} was deleted.`,
      outcome: 'done',
    },
  ];
};

function describeNotDone(value: unknown): string | undefined {
  if (isObject(value)) {
    const address = str(value.address);
    const reason = str(value.reason);
    if (address) return reason ? `${address} (${reason})` : address;
    return undefined;
  }
  return typeof value === 'string' ? value : undefined;
}

const calendarShare: PostProcessor = ({ data, status, partial }) => {
  if (!isObject(data)) return undefined;
  const invites = objects(data.invites);
  if (!invites) return undefined;
  const title = str(data.title);
  const invited = invites.map((i) => str(i.invitee)).filter((a): a is string => a !== undefined);
  const target = title ? `“${title}”` : (str(data.event_id) ?? 'the event');
  const parts = [
    invited.length > 0 ? `Invited ${invited.join(', ')} to ${target}.` : `No one was invited to ${target}.`,
  ];
  if (status === 'partial') {
    const notDone = (partial?.notDone ?? []).map(describeNotDone).filter((d): d is string => d !== undefined);
    parts.push(
      notDone.length > 0
        ? `Not invited: ${notDone.join('; ')}.`
        : `Some addresses were not invited${partial ? ` (${partial.reason})` : ''}.`,
    );
  }
  return [
    {
      type: 'confirmation',
      title: status === 'partial' ? 'Some invites sent' : 'Invites sent',
      message: parts.join(' '),
      outcome: status === 'partial' ? 'partial' : 'done',
    },
  ];
};

function inviteAnswer(answer: 'accepted' | 'rejected'): PostProcessor {
  return ({ data }) => {
    if (!isObject(data)) return undefined;
    const id = str(data.id);
    if (!id) return undefined;
    const invite = isObject(data.invite) ? data.invite : {};
    const title = str(invite.title);
    const startAt = str(invite.start_at);
    const what = title ? `“${title}”${startAt ? ` (${span(startAt, str(invite.end_at))})` : ''}` : `invite ${id}`;
    const verb = answer === 'accepted' ? 'accepted' : 'declined';
    const undo =
      answer === 'accepted'
        ? call('Decline instead', 'calendar', 'reject_invite', { invite_id: id })
        : call('Accept instead', 'calendar', 'accept_invite', { invite_id: id });
    return [
      {
        type: 'confirmation',
        title: answer === 'accepted' ? 'Invite accepted' : 'Invite declined',
        message: data.changed === false ? `You had already ${verb} ${what}.` : `You ${verb} ${what}.`,
        outcome: 'done',
        actions: [undo],
      },
    ];
  };
}

function toContact(value: Json): Contact | undefined {
  const id = str(value.id);
  const name = typeof value.name === 'string' ? value.name : undefined;
  if (!id || name === undefined) return undefined;
  const contact: Contact = { id, name };
  const email = str(value.email);
  if (email) contact.email = email;
  const phone = str(value.phone);
  if (phone) contact.phone = phone;
  const organization = str(value.organization);
  if (organization) contact.organization = organization;
  return contact;
}

const contactsRead: PostProcessor = ({ data }) => {
  if (!isObject(data)) return undefined;
  const items = objects(data.items);
  if (!items) return undefined;
  const contacts = items.map(toContact).filter((c): c is Contact => c !== undefined);
  // A few matches: a contact card each; more (or none): one list.
  if (contacts.length > 0 && contacts.length <= 3) return contacts.map((contact) => ({ type: 'contact', contact }));
  const query = str(data.query);
  return [
    {
      type: 'list',
      title: query ? `Contacts matching “${query}”` : 'Contacts',
      items: contacts.slice(0, MAX_ITEMS).map((c) => ({
        id: c.id,
        title: c.name,
        ...(c.email ? { subtitle: c.email } : {}),
        ...(c.organization ? { meta: c.organization } : {}),
      })),
      empty: query ? `No contact matches “${query}”` : 'No contacts',
    },
  ];
};

const memoryUpdate: PostProcessor = ({ data }) => {
  if (!isObject(data)) return undefined;
  const key = str(data.key);
  if (!key || typeof data.value !== 'string') return undefined;
  const entries = [{ label: key, value: data.value }];
  if (typeof data.previous === 'string' && data.previous !== data.value) {
    entries.push({ label: 'previously', value: data.previous });
  }
  return [{ type: 'key_value', title: data.created === true ? 'Memory note saved' : 'Memory note updated', entries }];
};

/** A post-processor that never throws: an unexpected failure is no hints, not a failed call. */
function safe(processor: PostProcessor): PostProcessor {
  return (input) => {
    try {
      const hints = processor(input);
      return hints && hints.length > 0 ? hints : undefined;
    } catch {
      return undefined;
    }
  };
}

/** The post-processor of each method, keyed `module.method`: all nine methods of the CLI. */
export const postProcessors: Record<string, PostProcessor> = {
  'calendar.read': safe(calendarRead),
  'calendar.create': safe(calendarWrite),
  'calendar.update': safe(calendarWrite),
  'calendar.delete': safe(calendarDelete),
  'calendar.share': safe(calendarShare),
  'calendar.accept_invite': safe(inviteAnswer('accepted')),
  'calendar.reject_invite': safe(inviteAnswer('rejected')),
  'contacts.read': safe(contactsRead),
  'memory.update': safe(memoryUpdate),
};
