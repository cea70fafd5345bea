import { pointer } from '@oar/protocol';

/** One change between two JSON values, at a JSON pointer: what a hook's rewrite did, as the record shows it. */
export interface JsonChange {
  path: string;
  op: 'add' | 'remove' | 'replace';
  before?: unknown;
  after?: unknown;
}

/** The most changes a diff lists; past it the record says so (`truncated`) and the before/after refs tell all. */
export const MAX_CHANGES = 200;

/**
 * The changes that turn `before` into `after`: objects compared key by key, arrays element by element (a shorter
 * or longer array shows its removed or added tail), anything else replaced whole.
 */
export function jsonDiff(before: unknown, after: unknown): { changes: JsonChange[]; truncated: boolean } {
  const changes: JsonChange[] = [];
  let truncated = false;
  const push = (change: JsonChange) => {
    if (changes.length >= MAX_CHANGES) truncated = true;
    else changes.push(change);
  };
  const walk = (a: unknown, b: unknown, path: (string | number)[]) => {
    if (truncated) return;
    if (Array.isArray(a) && Array.isArray(b)) {
      for (let i = 0; i < Math.max(a.length, b.length); i++) {
        if (i >= b.length) push({ path: pointer([...path, i]), op: 'remove', before: a[i] });
        else if (i >= a.length) push({ path: pointer([...path, i]), op: 'add', after: b[i] });
        else walk(a[i], b[i], [...path, i]);
      }
      return;
    }
    if (isObject(a) && isObject(b)) {
      for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
        if (!(key in b)) push({ path: pointer([...path, key]), op: 'remove', before: a[key] });
        else if (!(key in a)) push({ path: pointer([...path, key]), op: 'add', after: b[key] });
        else walk(a[key], b[key], [...path, key]);
      }
      return;
    }
    if (JSON.stringify(a) !== JSON.stringify(b)) push({ path: pointer(path), op: 'replace', before: a, after: b });
  };
  walk(before, after, []);
  return { changes, truncated };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
