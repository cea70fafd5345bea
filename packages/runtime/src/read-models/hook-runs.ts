import type { RuntimeEvent } from '@oar/protocol';
import { z } from 'zod';

/**
 * A hook run as the turn read model keeps it (the standard's `hookRuns` of a turn): who decided what about which
 * call, and for a rewrite which fields it changed. The full facts (the values before and after) stay on the event.
 */
export const HookRunSchema = z.object({
  sequence: z.number().int(),
  hookName: z.string(),
  point: z.string(),
  status: z.enum(['completed', 'failed']),
  decision: z.string().optional(),
  reason: z.string().optional(),
  toolName: z.string().optional(),
  toolCallId: z.string().optional(),
  /** A rewrite's changed paths (JSON pointers). */
  changed: z.array(z.string()).optional(),
  /** A failure's error code and the policy that decided instead. */
  errorCode: z.string().optional(),
  onFailure: z.string().optional(),
});
export type HookRun = z.infer<typeof HookRunSchema>;

/** The most hook runs a turn's read model keeps (the newest; the log keeps them all). */
export const MAX_TURN_HOOK_RUNS = 50;

/** The read model's entry for a `hook.completed` / `hook.failed` event. */
export function hookRunOf(event: RuntimeEvent): HookRun {
  const p = (event.payload ?? {}) as Record<string, unknown>;
  const str = (value: unknown) => (typeof value === 'string' ? value : undefined);
  const rewrite = p.rewrite as { changes?: { path?: unknown }[] } | undefined;
  const error = p.error as { code?: unknown } | undefined;
  const entry: HookRun = {
    sequence: event.sequence,
    hookName: str(p.hookName) ?? '',
    point: str(p.point) ?? '',
    status: event.type === 'hook.failed' ? 'failed' : 'completed',
  };
  const optional: Partial<HookRun> = {
    decision: str(p.decision),
    reason: str(p.reason),
    toolName: str(p.toolName),
    toolCallId: event.toolCallId,
    changed: rewrite?.changes?.map((c) => String(c.path ?? '')),
    errorCode: str(error?.code),
    onFailure: str(p.onFailure),
  };
  for (const [key, value] of Object.entries(optional)) {
    if (value !== undefined) (entry as Record<string, unknown>)[key] = value;
  }
  return entry;
}
