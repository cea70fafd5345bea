import { expect } from 'vitest';
import { bwrapAvailable } from '../../src/tools/exec/sandbox.js';

/**
 * Whether the sandbox tests can run: bubblewrap installed and able to start (user namespaces). In CI they must
 * (`.ci/run` installs bubblewrap), so there its absence is a failure, never a skip; locally the tests skip visibly.
 */
export async function sandboxUnavailable(): Promise<string | undefined> {
  const probe = await bwrapAvailable();
  if (probe.ok) return undefined;
  if (process.env.CI) throw new Error(`the exec sandbox tests need bubblewrap in CI: ${probe.reason}`);
  console.warn(`SKIPPED: the exec sandbox tests need bubblewrap (${probe.reason})`);
  return probe.reason;
}

/** The payload of an event, typed loosely for assertions. */
export function fields(event: { payload?: unknown } | undefined): Record<string, unknown> {
  expect(event).toBeDefined();
  return (event?.payload ?? {}) as Record<string, unknown>;
}
