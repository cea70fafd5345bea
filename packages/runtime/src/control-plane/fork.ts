import type { RuntimeEvent } from '@oar/protocol';
import { actionJobId } from '../facts/job-start.js';
import { notFound, OarRuntimeError } from '../kernel/errors.js';
import { newId } from '../kernel/ids.js';
import type { EventDraft } from '../log/draft.js';
import type { PendingArtifact } from '../store/artifacts.js';
import { DEFAULT_WORKSPACE } from '../store/workspaces.js';
import type { CommandContext } from './command-context.js';
import { newSessionId } from './sessions.js';

/**
 * `fork_session` (OAR; the standard's history family): a new session whose history is another session's up to one
 * of its events (docs/engine.md "Forking a session"). The fork is a session like any other: its own id, its own
 * binding (the one in force at that event, changeable from then on), and what was in progress there is in progress
 * in the fork — a worker takes it up under the crash-consistency contract (docs/reliability.md): a call that was
 * running is re-run if it is idempotent and `lost` otherwise, a question waits for its answer. The source is not
 * touched. The artifacts the copied history refers to are copied with it (new ids: artifacts never cross sessions).
 */

export interface ForkSessionInput {
  sessionId: string;
  /** The last event of the source the fork keeps (a sequence of the source; default: its last event). */
  at?: number;
  /** The fork's id (default: a new one, in the source's workspace). */
  forkId?: string;
  title?: string;
}

export interface ForkSessionResult {
  sessionId: string;
  forkedFrom: { sessionId: string; sequence: number; eventId: string };
  /** Events copied (the fork's own `session.updated` marker follows them). */
  events: number;
  artifacts: number;
  /** The fork's thread for each thread of the source (thread ids are renamed, as artifact and process ids are). */
  threads: Record<string, string>;
}

/** Envelope fields the log assigns to the fork's events itself. */
const ASSIGNED = new Set(['sessionId', 'sequence', 'eventId', 'runtimeId', 'schemaVersion']);

export async function forkSession(ctx: CommandContext, input: ForkSessionInput): Promise<ForkSessionResult> {
  const source = await ctx.session(input.sessionId);
  const row = await ctx.log.store.db
    .selectFrom('oar_sessions')
    .select('last_sequence')
    .where('id', '=', input.sessionId)
    .executeTakeFirst();
  const last = Number(row?.last_sequence ?? 0);
  const at = input.at ?? last;
  if (!Number.isInteger(at) || at < 1 || at > last) {
    throw new OarRuntimeError('invalid_input', `at must be an event sequence of the session: 1-${last}`, {
      details: { at, lastSequence: last },
    });
  }
  const workspaceId = source.workspaceId ?? DEFAULT_WORKSPACE;
  const forkId = await newSessionId(ctx, workspaceId, input.forkId);
  const history = await ctx.log.read(input.sessionId, { limit: at });
  const through = history.at(-1);
  if (!through || history[0]?.type !== 'session.created') throw notFound('session', input.sessionId);
  const { artifacts, renamed } = await copiedArtifacts(ctx, input.sessionId, forkId, history);
  // Threads and processes get ids of their own too: a worker keeps the threads it drives, and a runtime the
  // processes it runs, by id — a fork must never be taken for its source (or its source's process for its own).
  const threads = new Map(
    [...new Set(history.flatMap((e) => (e.type === 'thread.started' && e.threadId ? [e.threadId] : [])))].map(
      (id) => [id, newId('thr')] as const,
    ),
  );
  const processes = history.flatMap((e) => (e.type === 'process.started' && e.processId ? [e.processId] : []));
  for (const id of processes) renamed.set(id, newId('proc'));
  // A job copied into the fork is the fork's own (its items' threads are): it goes on there under another id — a
  // model's start_job action's under the id the action derives in the fork, so the action, run again there, finds
  // the copy instead of starting a second job.
  for (const e of history) if (e.type === 'job.created' && e.jobId) renamed.set(e.jobId, forkedJobId(e, forkId));
  for (const [from, to] of threads) renamed.set(from, to);
  const rename = renaming(renamed);
  const drafts = history.map((event) => draftOf(event, rename));
  const forkedFrom = { sessionId: input.sessionId, sequence: through.sequence, eventId: through.eventId };
  // The history is already clean (recorded through a redactor): copied as it is, neither redacted again nor restamped.
  const redactor = await ctx.redactorFor(input.sessionId);
  const title = input.title ?? `${source.title ?? input.sessionId} (fork at ${at})`;
  await ctx.log.createSession(forkId, title, drafts, {
    redactor,
    cleanedBy: redactor,
    copiedHistory: true,
    artifacts,
    ...(workspaceId !== DEFAULT_WORKSPACE ? { workspaceId } : {}),
  });
  await ctx.append(forkId, [
    {
      type: 'session.updated',
      payload: { changed: ['forkedFrom', 'title'], forkedFrom, title },
    },
  ]);
  return {
    sessionId: forkId,
    forkedFrom,
    events: history.length,
    artifacts: artifacts.length,
    threads: Object.fromEntries(threads),
  };
}

function forkedJobId(created: RuntimeEvent, forkId: string): string {
  const by = (created.payload as { startedBy?: { runId?: unknown; actionId?: unknown } } | undefined)?.startedBy;
  return typeof by?.runId === 'string' && typeof by.actionId === 'string'
    ? actionJobId(forkId, by.runId, by.actionId)
    : newId('job');
}

/** Every id of `renamed` replaced in a text (ids are random: a textual replacement cannot hit anything else). */
function renaming(renamed: ReadonlyMap<string, string>): (text: string) => string {
  if (renamed.size === 0) return (text) => text;
  const pattern = new RegExp([...renamed.keys()].map((id) => id.replace(/[^A-Za-z0-9_]/g, '\\$&')).join('|'), 'g');
  return (text) => text.replace(pattern, (id) => renamed.get(id) ?? id);
}

/** An event of the source as a draft of the fork: the fields the log assigns dropped, ids renamed. */
function draftOf(event: RuntimeEvent, rename: (text: string) => string): EventDraft {
  const kept = Object.fromEntries(Object.entries(event).filter(([key]) => !ASSIGNED.has(key)));
  return JSON.parse(rename(JSON.stringify(kept))) as EventDraft;
}

/** The artifacts the copied history recorded (`artifact.changed`), as rows of the fork under new ids. */
async function copiedArtifacts(
  ctx: CommandContext,
  sourceId: string,
  forkId: string,
  history: RuntimeEvent[],
): Promise<{ artifacts: PendingArtifact[]; renamed: Map<string, string> }> {
  const ids = [
    ...new Set(history.flatMap((e) => (e.type === 'artifact.changed' && e.artifactId ? [e.artifactId] : []))),
  ];
  if (ids.length === 0) return { artifacts: [], renamed: new Map() };
  const rows = await ctx.log.store.db
    .selectFrom('oar_artifacts')
    .selectAll()
    .where('session_id', '=', sourceId)
    .where('id', 'in', ids)
    .execute();
  const renamed = new Map(rows.map((row) => [row.id, newId('art')]));
  const artifacts = rows.map((row): PendingArtifact => {
    const id = renamed.get(row.id) as string;
    return {
      row: { ...row, id, session_id: forkId },
      stored: {
        artifactId: id,
        uri: `artifact://${id}`,
        mime: row.mime,
        size: row.size,
        sha256: row.sha256,
        preview: row.preview,
        ...(row.name !== null ? { name: row.name } : {}),
      },
    };
  });
  return { artifacts, renamed };
}
