import { randomFillSync } from 'node:crypto';

/**
 * A new event id: a UUID of version 7 (RFC 9562), its first 48 bits the time in ms, the rest random. Why not a
 * random (v4) one: `event_id` is uniquely indexed, and random keys land on a random leaf of that index, so each of a
 * step's dozen events dirtied a page of its own, written to the WAL at every commit and again at every checkpoint.
 * Ids that follow time land together at the index's end. Event ids stay opaque (the profile asks only for a
 * non-empty string); nothing orders by them.
 */
export function timeOrderedId(): string {
  if (idOffset + 16 > idPool.length) {
    randomFillSync(idPool);
    idOffset = 0;
  }
  const bytes = idPool.subarray(idOffset, idOffset + 16);
  idOffset += 16;
  const ms = Date.now();
  bytes[0] = Math.floor(ms / 2 ** 40) & 0xff;
  bytes[1] = Math.floor(ms / 2 ** 32) & 0xff;
  bytes[2] = (ms >>> 24) & 0xff;
  bytes[3] = (ms >>> 16) & 0xff;
  bytes[4] = (ms >>> 8) & 0xff;
  bytes[5] = ms & 0xff;
  bytes[6] = 0x70 | ((bytes[6] as number) & 0x0f); // version 7
  bytes[8] = 0x80 | ((bytes[8] as number) & 0x3f); // variant 10
  const hex = Buffer.from(bytes).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Random bytes for `timeOrderedId`, filled 256 ids at a time (one call into the CSPRNG instead of one per id). */
const idPool = new Uint8Array(16 * 256);
let idOffset = idPool.length;
