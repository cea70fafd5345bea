/**
 * What the session commands' declarations (runtime-commands.ts) and their actions (runtime-actions.ts) both need to
 * know of their options: kept apart so the actions, loaded when a command runs, never import the declarations.
 */

export interface GlobalOptions {
  config?: string;
  store?: string;
  model?: string;
  workspace?: string;
  /** Bind the main agent of a new session to this runner (docs/runners.md). */
  runner?: string;
}

/** `oar limit`'s limit flags: the flag, the limit it sets (`scope.dimension`), what it is. */
export const LIMIT_FLAGS = [
  ['--turn-tokens', 'turn.tokens', 'tokens per turn'],
  ['--turn-cost', 'turn.costUsd', 'US dollars per turn'],
  ['--turn-calls', 'turn.modelCalls', 'model calls per turn'],
  ['--turn-time', 'turn.wallTimeMs', 'wall time per turn, in ms'],
  ['--session-tokens', 'session.tokens', 'tokens per session'],
  ['--session-cost', 'session.costUsd', 'US dollars per session'],
  ['--session-calls', 'session.modelCalls', 'model calls per session'],
  ['--session-time', 'session.wallTimeMs', "wall time of the session's turns, in ms"],
] as const;

export const camel = (flag: string) => flag.replace(/^--/, '').replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
