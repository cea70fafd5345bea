import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import SQLite from 'better-sqlite3';

/**
 * The example CLI's own SQLite store: contacts, events, invites and per-owner memory notes. Every row carries the
 * workspace and (except invites, which belong to the event's owner and name the invitee by email) the owner; every
 * query is scoped by both. The store is created and seeded on first use; a concurrent first use is safe (the seed
 * runs in an IMMEDIATE transaction and only once, recorded in `meta`).
 */

export type Database = SQLite.Database;

export interface Scope {
  /** The owner: the verified credential's `sub`, nothing else. */
  owner: string;
  /** The workspace: the credential's `ws`. */
  ws: string;
}

export interface EventRow {
  id: string;
  ws: string;
  owner: string;
  title: string;
  start_at: string;
  end_at: string;
  start_ms: number;
  end_ms: number;
  location: string | null;
  attendees: string;
  created_at: string;
  updated_at: string;
  deleted_at: string | null;
}

export interface Event {
  id: string;
  title: string;
  start_at: string;
  end_at: string;
  location: string | null;
  attendees: string[];
  status: 'confirmed';
}

export interface ContactRow {
  id: string;
  name: string;
  email: string | null;
  phone: string | null;
  organization: string | null;
}

export interface InviteRow {
  id: string;
  ws: string;
  event_id: string;
  from_owner: string;
  invitee: string;
  status: 'pending' | 'accepted' | 'rejected';
  created_at: string;
  answered_at: string | null;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS users (
  ws TEXT NOT NULL, owner TEXT NOT NULL, email TEXT NOT NULL,
  PRIMARY KEY (ws, owner)
);
CREATE TABLE IF NOT EXISTS contacts (
  id TEXT PRIMARY KEY, ws TEXT NOT NULL, owner TEXT NOT NULL, name TEXT NOT NULL,
  email TEXT, phone TEXT, organization TEXT
);
CREATE INDEX IF NOT EXISTS contacts_scope ON contacts (ws, owner);
CREATE TABLE IF NOT EXISTS events (
  id TEXT PRIMARY KEY, ws TEXT NOT NULL, owner TEXT NOT NULL, title TEXT NOT NULL,
  start_at TEXT NOT NULL, end_at TEXT NOT NULL, start_ms INTEGER NOT NULL, end_ms INTEGER NOT NULL,
  location TEXT, attendees TEXT NOT NULL DEFAULT '[]',
  created_at TEXT NOT NULL, updated_at TEXT NOT NULL, deleted_at TEXT
);
CREATE INDEX IF NOT EXISTS events_scope ON events (ws, owner, start_ms);
CREATE TABLE IF NOT EXISTS invites (
  id TEXT PRIMARY KEY, ws TEXT NOT NULL, event_id TEXT NOT NULL, from_owner TEXT NOT NULL,
  invitee TEXT NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL, answered_at TEXT,
  UNIQUE (event_id, invitee)
);
CREATE TABLE IF NOT EXISTS idempotency (
  ws TEXT NOT NULL, owner TEXT NOT NULL, key TEXT NOT NULL, result TEXT NOT NULL, created_at TEXT NOT NULL,
  PRIMARY KEY (ws, owner, key)
);
CREATE TABLE IF NOT EXISTS memory (
  ws TEXT NOT NULL, owner TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, updated_at TEXT NOT NULL,
  PRIMARY KEY (ws, owner, key)
);
`;

/** The seed: two owners of workspace `default`, their contacts and events on 2026-12-01..03, one pending invite. */
const SEED_WS = 'default';
const SEED_AT = '2026-11-20T09:00:00.000Z';
const SEED = {
  users: [
    { owner: 'user:ada', email: 'ada@example.com' },
    { owner: 'user:bob', email: 'bob@example.com' },
  ],
  contacts: [
    {
      id: 'ct_grace',
      owner: 'user:ada',
      name: 'Grace Hopper',
      email: 'grace@example.com',
      phone: '+1 555 0100',
      organization: 'Navy',
    },
    {
      id: 'ct_alan',
      owner: 'user:ada',
      name: 'Alan Turing',
      email: 'alan@example.org',
      phone: null,
      organization: 'NPL',
    },
    {
      id: 'ct_linus',
      owner: 'user:ada',
      name: 'Linus Lee',
      email: 'linus@example.net',
      phone: null,
      organization: null,
    },
    {
      id: 'ct_bob_ada',
      owner: 'user:bob',
      name: 'Ada Lovelace',
      email: 'ada@example.com',
      phone: null,
      organization: null,
    },
  ],
  events: [
    {
      id: 'evt_ada_standup',
      owner: 'user:ada',
      title: 'Team standup',
      start_at: '2026-12-01T09:30:00+08:00',
      end_at: '2026-12-01T09:45:00+08:00',
      location: 'Room 3',
      attendees: ['grace@example.com'],
    },
    {
      id: 'evt_ada_review',
      owner: 'user:ada',
      title: 'Design review',
      start_at: '2026-12-01T14:00:00+01:00',
      end_at: '2026-12-01T15:00:00+01:00',
      location: 'Berlin office',
      attendees: ['alan@example.org', 'linus@example.net'],
    },
    {
      id: 'evt_ada_lunch',
      owner: 'user:ada',
      title: 'Lunch with Grace',
      start_at: '2026-12-02T12:00:00+08:00',
      end_at: '2026-12-02T13:00:00+08:00',
      location: null,
      attendees: ['grace@example.com'],
    },
    {
      id: 'evt_ada_retro',
      owner: 'user:ada',
      title: 'Sprint retro',
      start_at: '2026-12-03T16:00:00+01:00',
      end_at: '2026-12-03T17:00:00+01:00',
      location: 'Video call',
      attendees: [],
    },
    {
      id: 'evt_bob_dentist',
      owner: 'user:bob',
      title: 'Dentist',
      start_at: '2026-12-01T10:00:00+01:00',
      end_at: '2026-12-01T11:00:00+01:00',
      location: 'Dr. Weiss',
      attendees: [],
    },
    {
      id: 'evt_bob_planning',
      owner: 'user:bob',
      title: 'Quarter planning',
      start_at: '2026-12-02T09:00:00+01:00',
      end_at: '2026-12-02T11:00:00+01:00',
      location: 'HQ',
      attendees: ['ada@example.com'],
    },
  ],
  invites: [
    { id: 'inv_planning_ada', event_id: 'evt_bob_planning', from_owner: 'user:bob', invitee: 'ada@example.com' },
  ],
};

export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(6).toString('hex')}`;
}

export function now(): string {
  return new Date().toISOString();
}

/** Open (creating and seeding on first use) the store at `path`. */
export function openStore(path: string): Database {
  const fresh = !existsSync(path);
  const db = new SQLite(path);
  db.pragma('busy_timeout = 5000');
  if (fresh) db.pragma('journal_mode = WAL');
  db.exec(SCHEMA);
  const seed = db.transaction(() => {
    if (db.prepare('SELECT 1 FROM meta WHERE key = ?').get('seeded')) return;
    const user = db.prepare('INSERT INTO users (ws, owner, email) VALUES (?, ?, ?)');
    for (const u of SEED.users) user.run(SEED_WS, u.owner, u.email);
    const contact = db.prepare(
      'INSERT INTO contacts (id, ws, owner, name, email, phone, organization) VALUES (?, ?, ?, ?, ?, ?, ?)',
    );
    for (const c of SEED.contacts) contact.run(c.id, SEED_WS, c.owner, c.name, c.email, c.phone, c.organization);
    const event = db.prepare(
      `INSERT INTO events (id, ws, owner, title, start_at, end_at, start_ms, end_ms, location, attendees, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    );
    for (const e of SEED.events) {
      event.run(
        e.id,
        SEED_WS,
        e.owner,
        e.title,
        e.start_at,
        e.end_at,
        Date.parse(e.start_at),
        Date.parse(e.end_at),
        e.location,
        JSON.stringify(e.attendees),
        SEED_AT,
        SEED_AT,
      );
    }
    const invite = db.prepare(
      `INSERT INTO invites (id, ws, event_id, from_owner, invitee, status, created_at) VALUES (?, ?, ?, ?, ?, 'pending', ?)`,
    );
    for (const i of SEED.invites) invite.run(i.id, SEED_WS, i.event_id, i.from_owner, i.invitee, SEED_AT);
    db.prepare('INSERT INTO meta (key, value) VALUES (?, ?)').run('seeded', SEED_AT);
  });
  seed.immediate();
  return db;
}

export function toEvent(row: EventRow): Event {
  let attendees: string[] = [];
  try {
    const parsed: unknown = JSON.parse(row.attendees);
    if (Array.isArray(parsed)) attendees = parsed.filter((a): a is string => typeof a === 'string');
  } catch {
    attendees = [];
  }
  return {
    id: row.id,
    title: row.title,
    start_at: row.start_at,
    end_at: row.end_at,
    location: row.location,
    attendees,
    status: 'confirmed',
  };
}
