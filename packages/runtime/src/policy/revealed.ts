import type { ActionResult } from '@oar/protocol';
import { setRecent } from '../kernel/lru.js';

/**
 * The unredacted side channel (docs/security.md, "What the model sees"). The record holds every observation
 * redacted, and the model's context is rebuilt from the record; an observation of a read a permission rule
 * explicitly allows (policy/reveal.ts) is also kept here, unredacted, so the next model requests of the same turn
 * show it whole. Memory only, never persisted: nothing here is appended, stored, traced or exported, and the model
 * provider's request is its only reader (loop/context/context.ts). After a restart, a lease moving to another worker, or
 * once the turn is over, it is empty and the model sees the redacted form, as recorded.
 *
 * Bounded: only the driven thread's current turn is kept (remembering a call of another turn forgets the rest),
 * at most MAX_ENTRIES observations and MAX_CHARS characters, least recently used first out.
 */

/** One call's observation as the model may see it, and which attempt of which action it is the result of. */
export interface RevealedObservation {
  turnId: string;
  runId: string;
  actionId: string;
  /** The action's attempt that produced it: a later attempt's result (recorded) is not this one. */
  attempt: number;
  observation: ActionResult;
}

const MAX_ENTRIES = 64;
const MAX_CHARS = 2_000_000;

function keyOf(runId: string, actionId: string): string {
  return `${runId}\u0000${actionId}`;
}

/** The characters an observation holds (what the memory bound counts). */
function sizeOf(observation: ActionResult): number {
  return JSON.stringify(observation).length;
}

export class RevealedObservations {
  private readonly entries = new Map<string, RevealedObservation & { chars: number }>();
  private chars = 0;
  /** Runs with at least one entry, so a transcript of runs without any costs one lookup per run. */
  private readonly runs = new Map<string, number>();

  constructor(
    private readonly maxEntries = MAX_ENTRIES,
    private readonly maxChars = MAX_CHARS,
  ) {}

  /** Keep `entry` (replacing an earlier one of the same action); entries of other turns are dropped. */
  remember(entry: RevealedObservation): void {
    for (const [key, kept] of this.entries) if (kept.turnId !== entry.turnId) this.drop(key);
    const chars = sizeOf(entry.observation);
    const key = keyOf(entry.runId, entry.actionId);
    this.drop(key);
    // Larger than the whole bound: the model sees it redacted, as recorded.
    if (chars > this.maxChars) return;
    setRecent(this.entries, key, { ...entry, chars }, Number.POSITIVE_INFINITY);
    this.chars += chars;
    this.runs.set(entry.runId, (this.runs.get(entry.runId) ?? 0) + 1);
    while (this.entries.size > this.maxEntries || this.chars > this.maxChars) {
      const oldest = this.entries.keys().next();
      if (oldest.done) break;
      this.drop(oldest.value);
    }
  }

  /** Forget an action's entry (its new attempt was not explicitly allowed, or failed). */
  forget(runId: string, actionId: string): void {
    this.drop(keyOf(runId, actionId));
  }

  /** Whether any observation of this run is kept. */
  hasRun(runId: string): boolean {
    return this.runs.has(runId);
  }

  /**
   * The unredacted observation of an action of `turnId`, if it is the one recorded: the same attempt. Anything
   * else (another turn, a retry since) gets undefined, and the recorded (redacted) form stands.
   */
  get(turnId: string, runId: string, actionId: string, attempt: number): ActionResult | undefined {
    const entry = this.entries.get(keyOf(runId, actionId));
    if (!entry || entry.turnId !== turnId || entry.attempt !== attempt) return undefined;
    return entry.observation;
  }

  /** Whether anything of `turnId` is kept: its context may hold unredacted text. */
  holds(turnId: string | undefined): boolean {
    if (turnId === undefined) return false;
    for (const entry of this.entries.values()) if (entry.turnId === turnId) return true;
    return false;
  }

  get size(): number {
    return this.entries.size;
  }

  clear(): void {
    this.entries.clear();
    this.runs.clear();
    this.chars = 0;
  }

  private drop(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.chars -= entry.chars;
    const left = (this.runs.get(entry.runId) ?? 1) - 1;
    if (left > 0) this.runs.set(entry.runId, left);
    else this.runs.delete(entry.runId);
  }
}
