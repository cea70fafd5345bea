import type { RuntimeEvent } from '@oar/protocol';
import { AgentAPIError, type AgentRunContext, defineRunner, type RunTools } from '@oar/runner-sdk';
import { type RunnerBinding, registerInProcessRunner } from '../../src/index.js';
import { payload } from '../engine/helpers.js';

/** What a probe runner does in its run: calls through the proxy, results through `emit`. */
export type Probe = (ctx: AgentRunContext, tools: RunTools) => Promise<void>;

/**
 * An in-process runner whose run is `probe`, registered under a fresh name; returns its binding. `manifest` fields
 * replace the defaults (a `permissions` given replaces the default permissions whole).
 */
export function inProcess(
  probe: Probe,
  manifest: Record<string, unknown> = {},
  binding: Partial<RunnerBinding> = {},
  id = 'plugin:test/probe/probe',
): RunnerBinding {
  const name = `probe${Math.random().toString(36).slice(2, 8)}`;
  registerInProcessRunner(
    name,
    defineRunner({
      runners: [
        {
          manifest: {
            id,
            name: 'probe',
            label: { en_US: 'Probe' },
            capabilities: {},
            permissions: {
              models: ['invoke', 'stream'],
              tools: ['detail', 'call'],
              history: ['page'],
              artifacts: ['metadata', 'read'],
            },
            context: {},
            ...manifest,
          },
          run: probe,
        },
      ],
    }),
  );
  return { id, package: `inprocess:${name}`, config: {}, ...binding };
}

/** The audit events of the proxy calls (run.status phase runner_api), in order. */
export const audits = (events: RuntimeEvent[]) =>
  events
    .filter((e) => payload(e).phase === 'runner_api')
    .map(
      (e) =>
        payload(e).runner as {
          action: string;
          result: string;
          code?: string;
          resource: string | null;
          scope: string | null;
          runId: string | null;
        },
    );

/** Call `fn` and return the AgentAPIError code it fails with (or 'ok'). */
export async function codeOf(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
    return 'ok';
  } catch (error) {
    if (error instanceof AgentAPIError) return error.code;
    throw error;
  }
}
