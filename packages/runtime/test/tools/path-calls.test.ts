import { pbkdf2 } from 'node:crypto';
import { statfsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { callsFor, pathCalls } from '../../src/tools/path-calls.js';
import { tempDir } from '../support/temp-dirs.js';

const NFS = 0x6969;
const FUSE = 0x65735546;

/**
 * Occupy every thread of libuv's pool (4 by default) with work that takes a while, and report the order in which
 * it and a path call finish: a call that goes through the pool can only finish after one of them.
 */
async function orderAgainstBusyPool(call: () => Promise<unknown>): Promise<string[]> {
  const order: string[] = [];
  const size = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
  const busy = Array.from(
    { length: size },
    (_, i) =>
      new Promise<void>((resolve, reject) =>
        pbkdf2('secret', 'salt', 400_000, 32, 'sha256', (error) => {
          if (error) reject(error);
          order.push(`pool ${i}`);
          resolve();
        }),
      ),
  );
  await call().then(() => order.push('path call'));
  await Promise.all(busy);
  return order;
}

describe('path calls by file system', () => {
  it('a local workspace root resolves without a trip through the thread pool', async () => {
    const root = tempDir('oar-path-calls-');
    const calls = await pathCalls(root);
    expect(calls).toBe(callsFor(Number(statfsSync(root).type)));
    expect(calls).toBe(callsFor(0xef53)); // ext4
    const order = await orderAgainstBusyPool(() => calls.realpath(root));
    expect(order[0]).toBe('path call');
  });

  it('a network or FUSE file system goes through the pool, so a stalled server cannot freeze the process', async () => {
    const root = tempDir('oar-path-calls-');
    for (const type of [NFS, FUSE]) {
      const calls = callsFor(type);
      expect(calls).not.toBe(await pathCalls(root));
      const order = await orderAgainstBusyPool(() => calls.realpath(root));
      expect(order.indexOf('path call')).toBeGreaterThan(0);
      await expect(calls.realpath(root)).resolves.toBe(await (await pathCalls(root)).realpath(root));
    }
  });

  it('both report a missing path the same way', async () => {
    const missing = `${tempDir('oar-path-calls-')}/nope`;
    for (const calls of [callsFor(0xef53), callsFor(NFS)]) {
      await expect(calls.realpath(missing)).rejects.toMatchObject({ code: 'ENOENT' });
      await expect(calls.lstat(missing)).rejects.toMatchObject({ code: 'ENOENT' });
    }
  });
});
