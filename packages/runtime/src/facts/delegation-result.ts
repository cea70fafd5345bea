import type { ActionResult } from '@oar/protocol';
import type { EventDraft } from '../log/draft.js';
import { isTerminalActionStatus, type ThreadView } from '../read-models/thread-state.js';
import { artifactCreated, observeIn } from './action.js';
import type { ArtifactWriter } from './writer.js';

/**
 * What a delegated node (a sub-agent or a tool worker) hands back to the action that started it. Its full output
 * is stored as the action's artifact (named `<run>/<action>` like a tool's, so `action:X.output` and
 * `artifact:X` reach it), and the parent model sees it shaped by the action's result policy, like any output.
 */

/** One tool call a tool worker made, as its structured result lists it. */
export interface WorkerCall {
  id: string;
  tool: string;
  input: Record<string, unknown>;
  status: string;
  summary?: string;
  artifacts: string[];
}

const MAX_CALL_SUMMARY = 300;

/** The calls of a tool worker's thread in the order it declared them, with how each ended. */
export function workerCalls(thread: ThreadView): WorkerCall[] {
  const calls: WorkerCall[] = [];
  for (const run of thread.runs.values()) {
    for (const id of run.order) {
      const action = run.declaration.actions.find((a) => a.id === id);
      const state = run.actions[id];
      if (!action || !state) continue;
      const summary = state.result?.summary;
      calls.push({
        id,
        tool: action.executor.target,
        input: action.input,
        status: state.status,
        ...(summary !== undefined ? { summary: summary.slice(0, MAX_CALL_SUMMARY) } : {}),
        artifacts: state.result?.artifacts ?? [],
      });
    }
  }
  return calls;
}

/** The structured part of a delegated node's result: a tool worker's calls (a sub-agent has none to report). */
export function delegationStructured(thread: ThreadView, summary: string): Record<string, unknown> | undefined {
  return thread.toolWorker ? { summary, toolCalls: workerCalls(thread) } : undefined;
}

/**
 * The observation of a child's answer for the parent action still waiting on it, and the facts of storing that
 * answer as the action's artifact; undefined when the parent action no longer waits (it ended some other way).
 */
export async function delegationResult(
  engine: Pick<ArtifactWriter, 'loadThread' | 'artifacts' | 'limits'>,
  thread: ThreadView,
  answer: string,
): Promise<{ observation: ActionResult; drafts: EventDraft[] } | undefined> {
  const parent = thread.parent;
  if (!parent) return undefined;
  const view = await engine.loadThread(thread.sessionId, parent.threadId);
  const run = view.runs.get(parent.runId);
  const action = run?.declaration.actions.find((a) => a.id === parent.actionId);
  const status = run?.actions[parent.actionId]?.status;
  if (!run || !action || status === undefined || isTerminalActionStatus(status)) return undefined;
  const structured = delegationStructured(thread, answer);
  const text = structured ? `${answer}\n\n${JSON.stringify(structured.toolCalls, null, 2)}` : answer;
  const artifact = await engine.artifacts.put(
    thread.sessionId,
    { text, mime: 'text/markdown', name: `${run.runId}/${action.id}` },
    engine.limits.maxArtifactBytes,
  );
  const observation = observeIn(engine.limits, run, action, {
    text: answer,
    summary: answer,
    ...(structured ? { structured } : {}),
    artifacts: [artifact.uri],
    status: 'completed',
  });
  const { threadId, turnId, taskId, runId } = parent;
  const drafts = [artifactCreated({ threadId, turnId, taskId, runId }, artifact)];
  return { observation, drafts };
}
