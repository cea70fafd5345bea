#!/usr/bin/env node
import {
  CliError,
  type CredentialClaims,
  defineCli,
  type MethodContext,
  type MethodFacts,
  main,
  method,
  PartialResult,
} from '@oar/tool-cli';
import { z } from 'zod';
import {
  type ContactRow,
  type Database,
  type EventRow,
  type InviteRow,
  newId,
  now,
  openStore,
  type Scope,
  toEvent,
} from './store.js';

/**
 * An example business CLI behind OAR's `project_cli` tool (Agent Tool Protocol), on `@oar/tool-cli`: calendar
 * (events and invites), contacts and per-owner memory notes in its own SQLite store (`--store PATH`, created and
 * seeded on first use). Identity is the verified credential only: every query is scoped to `credential.sub` in
 * `credential.ws`; no method takes an owner in its input.
 */

const READ: MethodFacts = {
  readOnly: true,
  destructive: false,
  idempotent: true,
  concurrencySafe: true,
  interrupt: 'cancel',
};
const WRITE: MethodFacts = {
  readOnly: false,
  destructive: false,
  idempotent: false,
  concurrencySafe: false,
  interrupt: 'block',
};
const IDEMPOTENT_WRITE: MethodFacts = { ...WRITE, idempotent: true };
/** A write done once per idempotency key (`once` below): after a crash OAR retries it under the same key. */
const WRITE_ONCE_BY_KEY: MethodFacts = { ...WRITE, idempotentByKey: true };
const DESTRUCTIVE: MethodFacts = { ...WRITE, destructive: true, idempotent: true };

const DateTime = z.iso.datetime({ offset: true });
const Id = z.string().min(1).max(100);
const Email = z.email();

/** Who acts: the verified credential's subject in its workspace. */
function scopeOf(context: MethodContext): Scope {
  const credential: CredentialClaims | undefined = context.credential;
  if (!credential) throw new CliError('CREDENTIAL_MISSING', 'this CLI needs a credential');
  return { owner: credential.sub, ws: credential.ws };
}

/** Run `body` against the store named by `--store`, closing it afterwards. */
function withStore<T>(context: MethodContext, body: (db: Database, scope: Scope) => T): T {
  const scope = scopeOf(context);
  const path = context.config.store;
  if (!path) throw new CliError('USAGE_ERROR', 'expected the config flag --store PATH before MODULE METHOD');
  const db = openStore(path);
  try {
    return body(db, scope);
  } finally {
    db.close();
  }
}

/**
 * Do a write once per idempotency key (OAR's `OAR_IDEMPOTENCY_KEY`, the same for a retry of the same call): the first
 * call's result is stored with the key in the same transaction as the write, and a repeated key gets that result
 * back without writing again. Without a key (a call from a shell) the write simply runs.
 */
function once<T>(db: Database, scope: Scope, key: string | undefined, write: () => T): T {
  if (!key) return write();
  const run = db.transaction((): T => {
    const done = db
      .prepare('SELECT result FROM idempotency WHERE ws = ? AND owner = ? AND key = ?')
      .get(scope.ws, scope.owner, key) as { result: string } | undefined;
    if (done) return JSON.parse(done.result) as T;
    const result = write();
    db.prepare('INSERT INTO idempotency (ws, owner, key, result, created_at) VALUES (?, ?, ?, ?, ?)').run(
      scope.ws,
      scope.owner,
      key,
      JSON.stringify(result),
      now(),
    );
    return result;
  });
  // IMMEDIATE: two calls with one key wait for each other instead of both finding nothing and both writing.
  return run.immediate();
}

function notFound(module: string, methodName: string, kind: 'event' | 'invite', id: string): CliError {
  return new CliError('HANDLER_FAILED', `${kind} ${id} not found`, {
    module,
    method: methodName,
    details: { reason: 'not_found', [`${kind}_id`]: id },
  });
}

function ownEvent(db: Database, scope: Scope, id: string): EventRow | undefined {
  return db
    .prepare('SELECT * FROM events WHERE id = ? AND ws = ? AND owner = ? AND deleted_at IS NULL')
    .get(id, scope.ws, scope.owner) as EventRow | undefined;
}

/** The email addresses the acting owner receives invites at. */
function ownEmails(db: Database, scope: Scope): string[] {
  const rows = db.prepare('SELECT email FROM users WHERE ws = ? AND owner = ?').all(scope.ws, scope.owner) as {
    email: string;
  }[];
  return rows.map((r) => r.email.toLowerCase());
}

interface InviteView {
  id: string;
  event_id: string;
  from: string;
  invitee: string;
  status: InviteRow['status'];
  title: string | null;
  start_at: string | null;
  end_at: string | null;
}

const INVITE_VIEW = `SELECT i.id, i.event_id, i.from_owner AS "from", i.invitee, i.status,
  e.title, e.start_at, e.end_at, e.start_ms, e.end_ms
  FROM invites i LEFT JOIN events e ON e.id = i.event_id AND e.deleted_at IS NULL`;

function inviteView(row: InviteView & Record<string, unknown>): InviteView {
  return {
    id: row.id,
    event_id: row.event_id,
    from: row.from,
    invitee: row.invitee,
    status: row.status,
    title: row.title,
    start_at: row.start_at,
    end_at: row.end_at,
  };
}

/** Invites addressed to the acting owner whose event overlaps [startMs, endMs) (pending ones only). */
function pendingInvites(db: Database, scope: Scope, startMs: number, endMs: number): InviteView[] {
  const emails = ownEmails(db, scope);
  if (emails.length === 0) return [];
  const rows = db
    .prepare(
      `${INVITE_VIEW} WHERE i.ws = ? AND i.status = 'pending' AND e.id IS NOT NULL
       AND e.start_ms < ? AND e.end_ms > ? AND i.invitee IN (${emails.map(() => '?').join(', ')})
       ORDER BY e.start_ms`,
    )
    .all(scope.ws, endMs, startMs, ...emails) as (InviteView & Record<string, unknown>)[];
  return rows.map(inviteView);
}

/** The UTC span of a calendar day as written (`2026-12-01`), widened by the widest offsets (−12:00…+14:00). */
function daySpan(date: string): [number, number] {
  const midnight = Date.parse(`${date}T00:00:00Z`);
  return [midnight - 14 * 3_600_000, midnight + 36 * 3_600_000];
}

const ReadInput = z
  .strictObject({
    mode: z.enum(['day', 'range', 'event']),
    date: z.iso.date().optional(),
    start_at: DateTime.optional(),
    end_at: DateTime.optional(),
    event_id: Id.optional(),
  })
  .superRefine((input, ctx) => {
    const need = (field: 'date' | 'start_at' | 'end_at' | 'event_id', why: string) => {
      if (input[field] === undefined) ctx.addIssue({ code: 'custom', path: [field], message: why });
    };
    const forbid = (fields: ('date' | 'start_at' | 'end_at' | 'event_id')[]) => {
      for (const field of fields) {
        if (input[field] !== undefined) {
          ctx.addIssue({ code: 'custom', path: [field], message: `not used with mode "${input.mode}"` });
        }
      }
    };
    if (input.mode === 'day') {
      need('date', 'mode "day" needs date (YYYY-MM-DD)');
      forbid(['start_at', 'end_at', 'event_id']);
    } else if (input.mode === 'range') {
      need('start_at', 'mode "range" needs start_at (a datetime with offset)');
      need('end_at', 'mode "range" needs end_at (a datetime with offset)');
      forbid(['date', 'event_id']);
      if (input.start_at && input.end_at && Date.parse(input.end_at) <= Date.parse(input.start_at)) {
        ctx.addIssue({ code: 'custom', path: ['end_at'], message: 'end_at must be after start_at' });
      }
    } else {
      need('event_id', 'mode "event" needs event_id');
      forbid(['date', 'start_at', 'end_at']);
    }
  });

const CreateInput = z
  .strictObject({
    title: z.string().trim().min(1).max(200),
    start_at: DateTime,
    end_at: DateTime,
    location: z.string().max(200).optional(),
    attendees: z.array(Email).max(50).optional(),
  })
  .refine((input) => Date.parse(input.end_at) > Date.parse(input.start_at), {
    path: ['end_at'],
    message: 'end_at must be after start_at',
  });

const UpdateInput = z
  .strictObject({
    event_id: Id,
    title: z.string().trim().min(1).max(200).optional(),
    start_at: DateTime.optional(),
    end_at: DateTime.optional(),
    location: z.string().max(200).optional(),
  })
  .refine(
    (input) =>
      input.title !== undefined ||
      input.start_at !== undefined ||
      input.end_at !== undefined ||
      input.location !== undefined,
    { message: 'nothing to update: give at least one of title, start_at, end_at, location' },
  );

const InviteInput = z.strictObject({ invite_id: Id });

function answerInvite(context: MethodContext, inviteId: string, answer: 'accepted' | 'rejected') {
  const methodName = answer === 'accepted' ? 'accept_invite' : 'reject_invite';
  return withStore(context, (db, scope) => {
    const emails = ownEmails(db, scope);
    const row =
      emails.length === 0
        ? undefined
        : (db
            .prepare(
              `${INVITE_VIEW} WHERE i.id = ? AND i.ws = ? AND i.invitee IN (${emails.map(() => '?').join(', ')})`,
            )
            .get(inviteId, scope.ws, ...emails) as (InviteView & Record<string, unknown>) | undefined);
    if (!row) throw notFound('calendar', methodName, 'invite', inviteId);
    const changed = row.status !== answer;
    if (changed) {
      db.prepare('UPDATE invites SET status = ?, answered_at = ? WHERE id = ?').run(answer, now(), inviteId);
    }
    const invite = { ...inviteView(row), status: answer };
    return { id: invite.id, status: answer, changed, invite };
  });
}

const cli = defineCli({
  name: 'business-cli',
  version: '0.1.0',
  description: 'Example business CLI: calendar events and invites, contacts, memory notes (its own SQLite store)',
  credential: { algorithm: 'HS256', keyEnv: 'BUSINESS_CLI_KEY' },
  modules: {
    calendar: {
      read: method({
        description:
          'Events of a day (date, as written in each event’s own offset), of a range (start_at..end_at, overlapping), or one event (event_id); day and range also list pending invites to you',
        input: ReadInput,
        facts: READ,
        handler: (input, context) =>
          withStore(context, (db, scope) => {
            if (input.mode === 'event') {
              const id = input.event_id as string;
              const row = ownEvent(db, scope, id);
              if (!row) throw notFound('calendar', 'read', 'event', id);
              return { mode: 'event', id, event: toEvent(row) };
            }
            let rows: EventRow[];
            let invites: InviteView[];
            if (input.mode === 'day') {
              const date = input.date as string;
              rows = db
                .prepare(
                  `SELECT * FROM events WHERE ws = ? AND owner = ? AND deleted_at IS NULL
                   AND substr(start_at, 1, 10) = ? ORDER BY start_ms`,
                )
                .all(scope.ws, scope.owner, date) as EventRow[];
              const [from, to] = daySpan(date);
              invites = pendingInvites(db, scope, from, to).filter((i) => i.start_at?.slice(0, 10) === date);
            } else {
              const from = Date.parse(input.start_at as string);
              const to = Date.parse(input.end_at as string);
              rows = db
                .prepare(
                  `SELECT * FROM events WHERE ws = ? AND owner = ? AND deleted_at IS NULL
                   AND start_ms < ? AND end_ms > ? ORDER BY start_ms`,
                )
                .all(scope.ws, scope.owner, to, from) as EventRow[];
              invites = pendingInvites(db, scope, from, to);
            }
            const items = rows.map(toEvent);
            return {
              mode: input.mode,
              ...(input.mode === 'day' ? { date: input.date } : { start_at: input.start_at, end_at: input.end_at }),
              items,
              count: items.length,
              invites,
            };
          }),
      }),
      create: method({
        description: 'Create an event (times need an offset; end_at after start_at)',
        input: CreateInput,
        facts: WRITE_ONCE_BY_KEY,
        handler: (input, context) =>
          withStore(context, (db, scope) =>
            once(db, scope, context.idempotencyKey, () => {
              const id = newId('evt');
              const at = now();
              const attendees = [...new Set((input.attendees ?? []).map((a) => a.toLowerCase()))];
              db.prepare(
                `INSERT INTO events (id, ws, owner, title, start_at, end_at, start_ms, end_ms, location, attendees, created_at, updated_at)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
              ).run(
                id,
                scope.ws,
                scope.owner,
                input.title,
                input.start_at,
                input.end_at,
                Date.parse(input.start_at),
                Date.parse(input.end_at),
                input.location ?? null,
                JSON.stringify(attendees),
                at,
                at,
              );
              return { id, created: true, event: toEvent(ownEvent(db, scope, id) as EventRow) };
            }),
          ),
      }),
      update: method({
        description: 'Change the title, times or location of one of your events (the fields given; the rest stay)',
        input: UpdateInput,
        facts: IDEMPOTENT_WRITE,
        handler: (input, context) =>
          withStore(context, (db, scope) => {
            const row = ownEvent(db, scope, input.event_id);
            if (!row) throw notFound('calendar', 'update', 'event', input.event_id);
            const next = {
              title: input.title ?? row.title,
              start_at: input.start_at ?? row.start_at,
              end_at: input.end_at ?? row.end_at,
              location: input.location ?? row.location,
            };
            if (Date.parse(next.end_at) <= Date.parse(next.start_at)) {
              throw new CliError('INVALID_ACTION_INPUT', 'end_at must be after start_at (after the update)', {
                module: 'calendar',
                method: 'update',
                details: { start_at: next.start_at, end_at: next.end_at },
              });
            }
            const changed: string[] = [];
            for (const field of ['title', 'start_at', 'end_at', 'location'] as const) {
              if (next[field] !== row[field]) changed.push(field);
            }
            if (changed.length > 0) {
              db.prepare(
                `UPDATE events SET title = ?, start_at = ?, end_at = ?, start_ms = ?, end_ms = ?, location = ?, updated_at = ?
                 WHERE id = ? AND ws = ? AND owner = ?`,
              ).run(
                next.title,
                next.start_at,
                next.end_at,
                Date.parse(next.start_at),
                Date.parse(next.end_at),
                next.location,
                now(),
                row.id,
                scope.ws,
                scope.owner,
              );
            }
            return { id: row.id, changed, event: toEvent(ownEvent(db, scope, row.id) as EventRow) };
          }),
      }),
      delete: method({
        description: 'Delete one of your events (and withdraw its invites); deleting it again is a no-op',
        input: z.strictObject({ event_id: Id }),
        facts: DESTRUCTIVE,
        handler: (input, context) =>
          withStore(context, (db, scope) => {
            const row = db
              .prepare('SELECT * FROM events WHERE id = ? AND ws = ? AND owner = ?')
              .get(input.event_id, scope.ws, scope.owner) as EventRow | undefined;
            if (!row) throw notFound('calendar', 'delete', 'event', input.event_id);
            if (row.deleted_at) return { id: row.id, deleted: true, already_deleted: true, title: row.title };
            db.transaction(() => {
              db.prepare('UPDATE events SET deleted_at = ? WHERE id = ?').run(now(), row.id);
              db.prepare(
                "UPDATE invites SET status = 'rejected', answered_at = ? WHERE event_id = ? AND status = 'pending'",
              ).run(now(), row.id);
            })();
            return { id: row.id, deleted: true, already_deleted: false, title: row.title };
          }),
      }),
      share: method({
        description:
          'Invite people (email addresses) to one of your events; invalid addresses are reported as not done',
        input: z.strictObject({ event_id: Id, with: z.array(z.string().max(320)).min(1).max(50) }),
        facts: WRITE,
        handler: (input, context) =>
          withStore(context, (db, scope) => {
            const row = ownEvent(db, scope, input.event_id);
            if (!row) throw notFound('calendar', 'share', 'event', input.event_id);
            const mine = new Set(ownEmails(db, scope));
            const invites: { id: string; invitee: string; status: string; new: boolean }[] = [];
            const notDone: { address: string; reason: string }[] = [];
            const existing = db.prepare('SELECT * FROM invites WHERE event_id = ? AND invitee = ?');
            const insert = db.prepare(
              `INSERT INTO invites (id, ws, event_id, from_owner, invitee, status, created_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)`,
            );
            db.transaction(() => {
              for (const raw of input.with) {
                const address = raw.trim().toLowerCase();
                if (!Email.safeParse(address).success) {
                  notDone.push({ address: raw, reason: 'not a valid email address' });
                } else if (mine.has(address)) {
                  notDone.push({ address: raw, reason: 'that is you, the owner of the event' });
                } else if (invites.some((i) => i.invitee === address)) {
                  // the same address twice in one call: one invite
                } else {
                  const found = existing.get(row.id, address) as InviteRow | undefined;
                  if (found) {
                    invites.push({ id: found.id, invitee: address, status: found.status, new: false });
                  } else {
                    const id = newId('inv');
                    insert.run(id, scope.ws, row.id, scope.owner, address, now());
                    invites.push({ id, invitee: address, status: 'pending', new: true });
                  }
                }
              }
            })();
            const data = {
              event_id: row.id,
              title: row.title,
              invites,
              count: invites.length,
              created: invites.filter((i) => i.new).length,
            };
            if (notDone.length === 0) return data;
            if (invites.length === 0) {
              throw new CliError('HANDLER_FAILED', 'no invite was sent: none of the addresses can be invited', {
                module: 'calendar',
                method: 'share',
                details: { not_done: notDone },
              });
            }
            return new PartialResult(data, notDone, `${notDone.length} of ${input.with.length} addresses not invited`);
          }),
      }),
      accept_invite: method({
        description: 'Accept an invite addressed to you (invite_id from calendar.read); accepting again is a no-op',
        input: InviteInput,
        facts: IDEMPOTENT_WRITE,
        handler: (input, context) => answerInvite(context, input.invite_id, 'accepted'),
      }),
      reject_invite: method({
        description: 'Decline an invite addressed to you (invite_id from calendar.read); declining again is a no-op',
        input: InviteInput,
        facts: IDEMPOTENT_WRITE,
        handler: (input, context) => answerInvite(context, input.invite_id, 'rejected'),
      }),
    },
    contacts: {
      read: method({
        description: 'Your contacts: all, those whose name, email or organization contains query, or one by contact_id',
        input: z.strictObject({ query: z.string().trim().min(1).max(100).optional(), contact_id: Id.optional() }),
        facts: READ,
        handler: (input, context) =>
          withStore(context, (db, scope) => {
            const where = ['ws = ?', 'owner = ?'];
            const params: string[] = [scope.ws, scope.owner];
            if (input.contact_id !== undefined) {
              where.push('id = ?');
              params.push(input.contact_id);
            }
            if (input.query !== undefined) {
              const like = `%${input.query.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
              where.push(
                "(lower(name) LIKE ? ESCAPE '\\' OR lower(coalesce(email, '')) LIKE ? ESCAPE '\\' OR lower(coalesce(organization, '')) LIKE ? ESCAPE '\\')",
              );
              params.push(like, like, like);
            }
            const items = db
              .prepare(
                `SELECT id, name, email, phone, organization FROM contacts WHERE ${where.join(' AND ')} ORDER BY name`,
              )
              .all(...params) as ContactRow[];
            return {
              ...(input.query !== undefined ? { query: input.query } : {}),
              ...(input.contact_id !== undefined ? { contact_id: input.contact_id } : {}),
              items,
              count: items.length,
            };
          }),
      }),
    },
    memory: {
      update: method({
        description: 'Set one of your memory notes (key → value); setting the same value again is a no-op',
        input: z.strictObject({ key: z.string().trim().min(1).max(100), value: z.string().max(4000) }),
        facts: IDEMPOTENT_WRITE,
        handler: (input, context) =>
          withStore(context, (db, scope) => {
            const before = db
              .prepare('SELECT value FROM memory WHERE ws = ? AND owner = ? AND key = ?')
              .get(scope.ws, scope.owner, input.key) as { value: string } | undefined;
            const at = now();
            db.prepare(
              `INSERT INTO memory (ws, owner, key, value, updated_at) VALUES (?, ?, ?, ?, ?)
               ON CONFLICT (ws, owner, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
            ).run(scope.ws, scope.owner, input.key, input.value, at);
            return {
              key: input.key,
              value: input.value,
              previous: before?.value ?? null,
              created: before === undefined,
              changed: before?.value !== input.value,
              updated_at: at,
            };
          }),
      }),
    },
  },
});

await main(cli);
