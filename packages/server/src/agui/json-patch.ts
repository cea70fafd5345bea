import type { JsonPatchOperation } from '@ag-ui/core';

/**
 * The RFC 6902 patch that turns `from` into `to` (both plain JSON values): what a STATE_DELTA carries between two
 * successive thread read models. Objects are compared key by key; arrays element by element over their common
 * length, then the tail is added or removed (from the end, so every index stays valid while the patch applies);
 * anything else that differs is replaced. Applying the patch to `from` yields a value deep-equal to `to`.
 */
export function jsonPatch(from: unknown, to: unknown): JsonPatchOperation[] {
  const ops: JsonPatchOperation[] = [];
  diff(from, to, '', ops);
  return ops;
}

/** A JSON Pointer reference token (RFC 6901): `~` as `~0`, `/` as `~1`. */
export function pointerToken(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function diff(from: unknown, to: unknown, path: string, ops: JsonPatchOperation[]): void {
  if (from === to) return;
  if (Array.isArray(from) && Array.isArray(to)) {
    const common = Math.min(from.length, to.length);
    for (let i = 0; i < common; i++) diff(from[i], to[i], `${path}/${i}`, ops);
    for (let i = from.length - 1; i >= common; i--) ops.push({ op: 'remove', path: `${path}/${i}` });
    for (let i = common; i < to.length; i++) ops.push({ op: 'add', path: `${path}/${i}`, value: to[i] });
    return;
  }
  if (isObject(from) && isObject(to)) {
    for (const key of Object.keys(from)) {
      if (!(key in to) || to[key] === undefined) {
        if (from[key] !== undefined) ops.push({ op: 'remove', path: `${path}/${pointerToken(key)}` });
      }
    }
    for (const [key, value] of Object.entries(to)) {
      if (value === undefined) continue;
      const child = `${path}/${pointerToken(key)}`;
      if (!(key in from) || from[key] === undefined) ops.push({ op: 'add', path: child, value });
      else diff(from[key], value, child, ops);
    }
    return;
  }
  // Scalars (and a change of kind): equal JSON scalars were caught by `===` above.
  ops.push({ op: 'replace', path, value: to });
}
