import type { ArtifactRetention } from '../config/retention.js';
import { OarRuntimeError } from '../kernel/errors.js';
import type { EventDraft } from '../log/draft.js';
import type { EventLog } from '../log/event-log.js';
import { isTerminalTurnStatus, type RunStatus } from '../read-models/thread-state.js';
import { storedThreads } from '../read-models/work.js';
import { type ExpiryCandidate, expiryCandidates, tombstoneArtifacts } from '../store/artifacts.js';
import type { Db } from '../store/store.js';

/**
 * Artifact retention (docs/reliability.md "Artifact retention"): artifacts older than the policy's `maxAgeDays`
 * lose their content and keep their row as a tombstone, and each session whose artifacts expired records it as
 * `output.expired` — in the same transaction as the tombstones, so the log never says an artifact expired that did
 * not, nor the other way round. Run by `oar artifacts expire` and, when configured, by long-lived workers
 * (worker/artifact-sweeper.ts).
 *
 * Never expired, whatever their age: names the policy keeps (`keep`, by default file before-images), and what a
 * session still needs — the current compaction summary of each thread, the artifacts of open runs (a pending
 * decision's action, a running graph) and of lost actions nobody has reconciled, the attachments of turns not
 * finished, and everything created since the oldest unfinished turn was submitted (its tools' outputs, which its
 * model may still expand). What is needed is decided twice: when the sweep plans, and again under the session's
 * row lock as the tombstones are written (a session that changed in between is left for the next sweep).
 */

/** Why an artifact old enough to expire was kept. */
export type KeepReason = 'compaction_summary' | 'running_turn' | 'pending_action' | 'unreconciled_action';

/** The policy as the sweep applies it (`ArtifactRetentionSchema` with its defaults). */
export type ArtifactRetentionPolicy = Pick<ArtifactRetention, 'maxAgeDays' | 'keep' | 'batchSize'>;

export interface ExpireArtifactsReport {
  dryRun: boolean;
  /** The cutoff: artifacts created before it were old enough. */
  expiredBefore: string;
  /** What was expired (a dry run: what would be), oldest first. */
  expired: ExpiryCandidate[];
  /** Old enough, but still needed (see KeepReason). */
  kept: (ExpiryCandidate & { reason: KeepReason })[];
  /** Sessions whose state changed while the sweep looked at them: the next sweep tries them again. */
  skipped: string[];
  /** Bytes of content deleted (a dry run: that would be). */
  bytes: number;
  /** `output.expired` events recorded. */
  events: number;
  /** The batch limit ended the sweep: more artifacts may be old enough (run it again). */
  more: boolean;
}

const DAY_MS = 86_400_000;
/** Artifacts one `output.expired` lists at most: a sweep of one session's thousands records several events. */
const PER_EVENT = 100;
/** The run statuses of a graph not done yet (read-models/thread-state.ts RUN_STATUSES less the terminal ones). */
const OPEN_RUN_STATUSES: RunStatus[] = ['running', 'waiting'];
/** How many pages of still-needed artifacts a sweep reads past before it stops (`more`): a sweep stays bounded. */
const MAX_PAGES = 20;

export async function expireArtifacts(
  log: EventLog,
  policy: ArtifactRetentionPolicy,
  options: { dryRun?: boolean; now?: Date } = {},
): Promise<ExpireArtifactsReport> {
  const now = options.now ?? new Date();
  const dryRun = options.dryRun === true;
  const expiredBefore = new Date(now.getTime() - policy.maxAgeDays * DAY_MS).toISOString();
  const keep = keepMatcher(policy.keep);
  const report: ExpireArtifactsReport = {
    dryRun,
    expiredBefore,
    expired: [],
    kept: [],
    skipped: [],
    bytes: 0,
    events: 0,
    more: false,
  };
  let after: { createdAt: string; artifactId: string } | undefined;
  for (let page = 0; ; page++) {
    if (page === MAX_PAGES) {
      report.more = true;
      break;
    }
    const rows = await expiryCandidates(log.store.db, {
      before: expiredBefore,
      skipPrefixes: keep.prefixes,
      limit: policy.batchSize,
      ...(after ? { after } : {}),
    });
    const last = rows.at(-1);
    if (last) after = { createdAt: last.createdAt, artifactId: last.artifactId };
    for (const [sessionId, candidates] of bySession(rows.filter((row) => !keep.matches(row.name)))) {
      const room = policy.batchSize - report.expired.length;
      if (room <= 0) break;
      const needed = await neededArtifacts(log.store.db, sessionId);
      const plan: ExpiryCandidate[] = [];
      for (const candidate of candidates) {
        const reason = needed.reason(candidate);
        if (reason) report.kept.push({ ...candidate, reason });
        else plan.push(candidate);
      }
      if (plan.length > room) report.more = true;
      const chosen = plan.slice(0, room);
      if (chosen.length === 0) continue;
      const events = dryRun ? 0 : await expireInSession(log, sessionId, chosen, { policy, expiredBefore, now });
      if (events === undefined) {
        report.skipped.push(sessionId);
        continue;
      }
      report.events += events;
      report.expired.push(...chosen);
      report.bytes += chosen.reduce((sum, c) => sum + c.size, 0);
    }
    if (report.expired.length >= policy.batchSize) {
      // Exactly at the limit with nothing left is rare; saying `more` then costs one empty sweep.
      report.more = true;
      break;
    }
    if (rows.length < policy.batchSize) break;
  }
  return report;
}

/** The session's state moved under the sweep: what it planned may be needed now. */
class SweepConflict extends Error {}

/**
 * Tombstone `plan` and record it, in one append guarded by the session's row lock: the guard decides again what is
 * needed, from committed state, and writes the tombstones only when nothing planned is needed now and every planned
 * artifact still holds its content (another sweeper may have been first). Returns the events recorded, or undefined
 * when the session changed (nothing written).
 */
async function expireInSession(
  log: EventLog,
  sessionId: string,
  plan: ExpiryCandidate[],
  context: { policy: ArtifactRetentionPolicy; expiredBefore: string; now: Date },
): Promise<number | undefined> {
  const expiredAt = context.now.toISOString();
  const ids = plan.map((c) => c.artifactId);
  const drafts: EventDraft[] = [];
  for (let i = 0; i < plan.length; i += PER_EVENT) {
    const chunk = plan.slice(i, i + PER_EVENT);
    drafts.push({
      type: 'output.expired',
      payload: {
        artifactIds: chunk.map((c) => c.artifactId),
        artifacts: chunk.map((c) => ({
          artifactId: c.artifactId,
          ...(c.name ? { name: c.name } : {}),
          size: c.size,
          sha256: c.sha256,
          createdAt: c.createdAt,
        })),
        count: chunk.length,
        bytes: chunk.reduce((sum, c) => sum + c.size, 0),
        reason: 'retention',
        expiredBefore: context.expiredBefore,
        policy: { maxAgeDays: context.policy.maxAgeDays, keep: [...context.policy.keep] },
      },
    });
  }
  try {
    await log.append(sessionId, drafts, {
      guard: async (tx) => {
        const needed = await neededArtifacts(tx, sessionId);
        if (plan.some((c) => needed.reason(c))) throw new SweepConflict();
        if ((await tombstoneArtifacts(tx, sessionId, ids, expiredAt)) !== ids.length) throw new SweepConflict();
      },
    });
    return drafts.length;
  } catch (error) {
    if (error instanceof SweepConflict) return undefined;
    // An artifact of no session (a store written before artifacts were tied to their first event) has no log to
    // record its end in: it is tombstoned all the same.
    if (error instanceof OarRuntimeError && error.code === 'session_not_found') {
      await tombstoneArtifacts(log.store.db, sessionId, ids, expiredAt);
      return 0;
    }
    throw error;
  }
}

/** What a session still needs, from its committed read models: `reason` says why an artifact is kept, if it is. */
async function neededArtifacts(
  db: Db,
  sessionId: string,
): Promise<{ reason(candidate: ExpiryCandidate): KeepReason | undefined }> {
  const ids = new Map<string, KeepReason>();
  const note = (text: string | undefined, reason: KeepReason) => {
    for (const id of artifactIdsIn(text ?? '')) if (!ids.has(id)) ids.set(id, reason);
  };
  const runs = new Map<string, KeepReason>();
  let since: string | undefined;
  for (const thread of await storedThreads(db, sessionId)) {
    note(thread.compaction?.summaryRef, 'compaction_summary');
    // A rollback under way writes these before-images back when it is run again.
    for (const file of thread.rollback?.files ?? []) note(file.beforeRef, 'pending_action');
    for (const turn of thread.turns) {
      if (isTerminalTurnStatus(turn.status)) continue;
      if (since === undefined || turn.submittedAt < since) since = turn.submittedAt;
      for (const attachment of turn.attachments ?? []) note(attachment.artifactId, 'running_turn');
      for (const runId of turn.runIds) runs.set(runId, 'running_turn');
    }
    for (const queued of thread.queue) note(queued.input, 'running_turn');
    for (const decision of thread.pending) {
      note(JSON.stringify(decision), 'pending_action');
      if (decision.runId) runs.set(decision.runId, 'pending_action');
    }
    for (const lost of thread.unreconciled ?? []) {
      note(JSON.stringify(lost), 'unreconciled_action');
      runs.set(lost.runId, 'unreconciled_action');
    }
  }
  // The runs named above, and every run still open (its graph may yet read any output of its actions).
  const runRows = await db
    .selectFrom('oar_read_models')
    .select(['key', 'status', 'body'])
    .where('session_id', '=', sessionId)
    .where('kind', '=', 'run')
    .where((eb) =>
      eb.or([eb('status', 'in', OPEN_RUN_STATUSES), ...(runs.size > 0 ? [eb('key', 'in', [...runs.keys()])] : [])]),
    )
    .execute();
  for (const run of runRows) {
    // An open run not named above: waiting for a decision, or running its graph.
    note(run.body, runs.get(run.key) ?? (run.status === 'waiting' ? 'pending_action' : 'running_turn'));
  }
  return {
    reason: (candidate) =>
      ids.get(candidate.artifactId) ??
      (since !== undefined && candidate.createdAt >= since ? 'running_turn' : undefined),
  };
}

/**
 * The artifact ids a text names (refs `artifact://art_…`, bare ids): read generously — keeping an artifact one
 * sweep too long costs nothing, expiring one still named costs its reader the content.
 */
function artifactIdsIn(text: string): Set<string> {
  const found = new Set<string>();
  for (const match of text.matchAll(/art_[A-Za-z0-9_]+/g)) {
    found.add(match[0]);
    // An id followed by `_…` in prose: the id proper has no underscore after its prefix (kernel/ids.ts).
    found.add(match[0].replace(/^(art_[A-Za-z0-9]+).*$/, '$1'));
  }
  return found;
}

/**
 * The `keep` patterns: `*` matches any run of characters, the rest is literal. Patterns of the form `prefix*` are
 * also handed to the query (`prefixes`), so what they keep is never read at all; the rest are tested here.
 */
export function keepMatcher(patterns: readonly string[]): {
  prefixes: string[];
  matches(name: string | undefined): boolean;
} {
  const prefixes = patterns
    .filter((p) => p.endsWith('*') && p.indexOf('*') === p.length - 1)
    .map((p) => p.slice(0, -1));
  return {
    prefixes,
    matches: (name) => name !== undefined && patterns.some((pattern) => starMatch(pattern, name)),
  };
}

/** Whether `text` matches `pattern`, whose only wildcard is `*` (leftmost matching of each literal part is exact). */
function starMatch(pattern: string, text: string): boolean {
  const parts = pattern.split('*');
  if (parts.length === 1) return pattern === text;
  const first = parts[0] ?? '';
  const lastPart = parts.at(-1) ?? '';
  if (!text.startsWith(first) || text.length < first.length + lastPart.length) return false;
  let at = first.length;
  for (const part of parts.slice(1, -1)) {
    const found = text.indexOf(part, at);
    if (found === -1) return false;
    at = found + part.length;
  }
  return text.length - lastPart.length >= at && text.endsWith(lastPart);
}

function bySession(rows: readonly ExpiryCandidate[]): Map<string, ExpiryCandidate[]> {
  const sessions = new Map<string, ExpiryCandidate[]>();
  for (const row of rows) {
    const list = sessions.get(row.sessionId);
    if (list) list.push(row);
    else sessions.set(row.sessionId, [row]);
  }
  return sessions;
}
