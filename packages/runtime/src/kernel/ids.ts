import { randomUUID } from 'node:crypto';

/** Prefixed random ids: the prefix says what an id names when it shows up in a log line or a URL. */
export type IdKind =
  | 'ses'
  | 'thr'
  | 'turn'
  | 'run'
  | 'task'
  | 'job'
  | 'sch'
  | 'act'
  | 'sub'
  | 'art'
  | 'ev'
  | 'rt'
  | 'wrk'
  | 'cmp'
  | 'ws'
  | 'key'
  | 'slot'
  | 'proc'
  | 'preq'
  | 'rbk';

export function newId(kind: IdKind): string {
  return `${kind}_${randomUUID().replace(/-/g, '').slice(0, 20)}`;
}
