// Tools for the fault trials (scripts/trials.ts): each call appends "<label>" to counts.txt in the workspace,
// then waits delayMs, so the trial can count exactly how often a side effect happened across crashes, races and
// resumes. Four kinds, as the durability rules distinguish them:
//   count          a write that is not idempotent: after a crash mid-call it must become `lost`, never re-run;
//   count_idem     an idempotent write: re-run after a crash mid-call, never after it completed;
//   count_shared   read-only and concurrency-safe (so several run at once), hence re-runnable like an idempotent one;
//   count_by_key   not idempotent, but it deduplicates by its idempotency key (as a payment API does): retried after a
//                  crash under the same key, it must count once — exactly once through the world's deduplication.
// A line is "<label>" or, for count_by_key, "<label>\t<key>": one append holds the effect and the key it was done
// under, so no crash can separate them.
import { appendFile, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';

function counting(name, flags) {
  return {
    name,
    description: `Appends "<label>" to counts.txt, then waits delayMs (${flags.isIdempotent ? 'idempotent' : 'not idempotent'}).`,
    input: z.strictObject({ label: z.string(), delayMs: z.number().int().min(0).default(0) }),
    isDestructive: false,
    interruptBehavior: 'cancel',
    capabilities: ['test'],
    ...flags,
    async execute(input, context) {
      const file = join(context.workspaceRoot, 'counts.txt');
      if (flags.isIdempotentByKey) {
        const key = context.idempotencyKey;
        if (!key) throw new Error('count_by_key needs an idempotency key');
        const done = await readFile(file, 'utf8').catch(() => '');
        if (done.split('\n').some((line) => line.endsWith(`\t${key}`)))
          return { text: `counted ${input.label} (key seen)` };
        await appendFile(file, `${input.label}\t${key}\n`);
      } else await appendFile(file, `${input.label}\n`);
      await new Promise((resolve, reject) => {
        if (context.signal.aborted) return reject(new Error('aborted'));
        const timer = setTimeout(resolve, input.delayMs);
        context.signal.addEventListener(
          'abort',
          () => {
            clearTimeout(timer);
            reject(new Error('aborted'));
          },
          { once: true },
        );
      });
      return { text: `counted ${input.label}` };
    },
  };
}

export const tools = [
  counting('count', { isReadOnly: false, isConcurrencySafe: false, isIdempotent: false }),
  counting('count_idem', { isReadOnly: false, isConcurrencySafe: false, isIdempotent: true }),
  counting('count_shared', { isReadOnly: true, isConcurrencySafe: true, isIdempotent: true }),
  counting('count_by_key', {
    isReadOnly: false,
    isConcurrencySafe: false,
    isIdempotent: false,
    isIdempotentByKey: true,
  }),
];
