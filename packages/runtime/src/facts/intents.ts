import type { Action, Decision, Declaration, ProtocolIssue } from '@oar/protocol';
import type { EventDraft } from '../log/draft.js';
import type { RunState, ThreadView, TurnState } from '../read-models/thread-state.js';

/**
 * What the declarations that steer a graph rather than start one mean for the record (docs/protocol.md "Intents"):
 * `decide` on an ended graph (retry, skip, replan, continue, abort), `revise` (a new attempt of the graph's task
 * in place of what had not started), `plan` (shown, never executed), and `final_report_spec` (an answer checked
 * against its declared sections). Each is checked first: one that cannot apply is a correctable fault, like a
 * schema error, so the model hears why instead of the runtime guessing.
 */

/** The graph a decision or revision is about: the run it names, else the turn's latest. */
export function decidedRun(thread: ThreadView, turn: TurnState, decision?: Decision): RunState | undefined {
  if (decision?.runId) return thread.runs.get(decision.runId);
  const runId = turn.runIds.at(-1);
  return runId === undefined ? undefined : thread.runs.get(runId);
}

const notCompleted = (run: RunState) => run.order.filter((id) => run.actions[id]?.status !== 'completed');

/** Why the declaration cannot apply to the thread as it is, if it cannot. */
export function declarationFault(
  thread: ThreadView,
  turn: TurnState,
  declaration: Declaration,
): ProtocolIssue | undefined {
  const decision = declaration.decision;
  if (declaration.intent === 'revise' && !decidedRun(thread, turn)) {
    return fault('/intent', 'there is no graph in this turn to revise', 'Declare the graph with intent "execute".');
  }
  if (declaration.reportSpec && declaration.reportSpec.sections.length > 0) {
    const missing = missingSections(declaration);
    if (missing.length > 0) {
      return fault(
        '/payload/sections',
        `the answer lacks the report section(s) it declared: ${missing.join(', ')}`,
        `Write each declared section as a "## <id>" Markdown section after the block: ${missing.map((id) => `## ${id}`).join(', ')}.`,
      );
    }
  }
  if (declaration.intent !== 'decide' || !decision || !['retry', 'skip'].includes(decision.decision)) return undefined;
  const run = decidedRun(thread, turn, decision);
  if (!run) {
    return fault(
      '/payload/run_id',
      decision.runId ? `run "${decision.runId}" is not a graph of this thread` : 'this turn has no graph to decide on',
      'Name the run_id of an ended graph of this thread, or declare a new graph with intent "execute".',
    );
  }
  const open = notCompleted(run);
  const unknown = (decision.actionIds ?? []).filter((id) => !open.includes(id));
  if (open.length === 0 || unknown.length > 0) {
    return fault(
      '/payload/action_ids',
      open.length === 0
        ? `every action of run "${run.runId}" completed: there is nothing to ${decision.decision}`
        : `${unknown.join(', ')} ${unknown.length === 1 ? 'is' : 'are'} not an unfinished action of run "${run.runId}"`,
      open.length === 0
        ? 'Answer, or declare new work with intent "execute".'
        : `Name unfinished actions of that run: ${open.join(', ')}.`,
    );
  }
  return undefined;
}

function fault(path: string, message: string, hint: string): ProtocolIssue {
  return { code: 'decision_not_applicable', path, message, hint };
}

/** The declared report sections the message does not contain (by normalized section id). */
function missingSections(declaration: Declaration): string[] {
  const sections = declaration.source.sections ?? {};
  return (declaration.reportSpec?.sections ?? [])
    .map((s) => s.id)
    .filter((id) => (sections[id.trim().toLowerCase()] ?? '').trim() === '');
}

/** The structured report of an answer with a final_report_spec, and the answer composed from its sections. */
export function finalReport(declaration: Declaration): { answer: string; report: Record<string, unknown> } | undefined {
  const spec = declaration.reportSpec;
  if (!spec || spec.sections.length === 0) return undefined;
  const sections = declaration.source.sections ?? {};
  const entries = spec.sections.map((s) => ({
    id: s.id,
    ...(s.title ? { title: s.title } : {}),
    text: (sections[s.id.trim().toLowerCase()] ?? '').trim(),
  }));
  const body = entries.map((e) => `## ${e.title ?? e.id}\n\n${e.text}`).join('\n\n');
  const lead = declaration.message?.trim();
  return {
    answer: lead ? `${lead}\n\n${body}` : body,
    report: { ...(spec.format ? { format: spec.format } : {}), sections: entries },
  };
}

/** The actions of a retry: the named unfinished ones (all unfinished when none is named) and what waits on them. */
function retried(run: RunState, named?: string[]): Set<string> {
  const open = new Set(notCompleted(run));
  const chosen = new Set((named?.length ? named : [...open]).filter((id) => open.has(id)));
  // Dependants of a retried action ended without running (skipped, cancelled): they get their chance too.
  for (let grew = true; grew; ) {
    grew = false;
    for (const action of run.declaration.actions) {
      if (chosen.has(action.id) || !open.has(action.id)) continue;
      if (action.dependsOn.some((dep) => chosen.has(dep))) {
        chosen.add(action.id);
        grew = true;
      }
    }
  }
  return chosen;
}

/**
 * The actions of the next attempt a decision makes of `run`. `retry`: the unfinished actions named (or all) and
 * their dependants, as declared. `skip`: every unfinished action but the skipped ones (the named ones, else the
 * failed, denied and lost ones), whose dependants run without waiting on them.
 */
export function decidedActions(run: RunState, decision: Decision): { actions: Action[]; skipped: string[] } {
  if (decision.decision === 'retry') {
    const chosen = retried(run, decision.actionIds);
    return { actions: run.declaration.actions.filter((a) => chosen.has(a.id)), skipped: [] };
  }
  const open = notCompleted(run);
  const skipped = decision.actionIds?.length
    ? decision.actionIds
    : open.filter((id) => ['failed', 'denied', 'lost'].includes(run.actions[id]?.status ?? ''));
  const actions = run.declaration.actions
    .filter((a) => open.includes(a.id) && !skipped.includes(a.id))
    .map((a) => ({ ...a, dependsOn: a.dependsOn.filter((dep) => !skipped.includes(dep)) }));
  return { actions, skipped };
}

/**
 * The facts of a graph's next attempt: the same task, a new run of `actions` (a retry, a skip or a revision),
 * linked to the attempt it follows. The attempt number counts the task's runs in the thread.
 */
export function nextAttemptFacts(
  thread: ThreadView,
  previous: RunState,
  declaration: Declaration,
  ids: { turnId: string; runId: string },
  link: Record<string, unknown> & { reason: string },
): EventDraft[] {
  const attempt = [...thread.runs.values()].filter((r) => r.taskId === previous.taskId).length + 1;
  const runIds = { threadId: thread.threadId, turnId: ids.turnId, taskId: previous.taskId, runId: ids.runId };
  const title = declaration.title ?? previous.declaration.title ?? `attempt ${attempt}`;
  return [
    { type: 'task.retrying', ...runIds, payload: { nextAttempt: attempt, reason: link.reason } },
    { type: 'task.attempt.started', ...runIds, payload: { attempt, status: 'running' } },
    { type: 'run.status', ...runIds, status: 'running', payload: { phase: 'declared', title, declaration, ...link } },
  ];
}

/** A plan as the user reads it: each action with its executor and what it waits on. */
export function renderPlan(declaration: Declaration): string {
  const lines = declaration.actions.map((a) => {
    const executor = `${a.executor.type}:${a.executor.target}`;
    const after = a.dependsOn.length > 0 ? ` (after ${a.dependsOn.join(', ')})` : '';
    return `- **${a.id}**${a.title ? ` ${a.title}` : ''} — \`${executor}\`${after}${a.description ? `: ${a.description}` : ''}`;
  });
  const head = declaration.message?.trim() || `Plan: ${declaration.title ?? `${declaration.actions.length} action(s)`}`;
  return `${head}\n\n${lines.join('\n')}\n\nNothing has run yet.`;
}
