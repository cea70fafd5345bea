import type { Declaration, ParseOutcome } from '@oar/protocol';
import { artifactCreated } from '../facts/action.js';
import { decidedActions, decidedRun, finalReport, nextAttemptFacts, renderPlan } from '../facts/intents.js';
import { edgeLinked } from '../facts/task-end.js';
import { turnIds } from '../facts/turn-end.js';
import { newId } from '../kernel/ids.js';
import type { EventDraft } from '../log/draft.js';
import type { ThreadView, TurnState } from '../read-models/thread-state.js';
import type { Engine } from '../scheduler/engine.js';
import { completeTurn } from './turn-end.js';

/** A declaration the model made, applied: its action graph recorded and scheduled, its plan and report stored. */
export async function applyDeclaration(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  declaration: Declaration,
  outcome: ParseOutcome,
): Promise<void> {
  const facts = { repairs: outcome.repairs, recovered: outcome.recovered, form: declaration.source.form };
  const { intent, decision } = declaration;
  if (intent === 'respond' || intent === 'stop' || intent === 'report') {
    const report = finalReport(declaration);
    const extra = report ? { ...facts, report: await storeReport(engine, thread, turn, report.report) } : facts;
    await completeTurn(engine, thread, turn, {
      outcome: intent === 'stop' ? 'done' : 'answered',
      answer: report?.answer ?? declaration.message ?? '',
      extra,
    });
    return;
  }
  if (intent === 'plan') {
    await recordPlan(engine, thread, turn, declaration, facts);
    return;
  }
  if (intent === 'cancel' || (intent === 'decide' && decision?.decision === 'abort')) {
    await completeTurn(engine, thread, turn, {
      outcome: intent === 'cancel' ? 'cancelled' : 'aborted',
      answer: declaration.message ?? '',
      extra: { ...facts, ...(decision ? { decision } : {}) },
    });
    return;
  }
  const decided = decision ? decidedRun(thread, turn, decision) : undefined;
  if (intent === 'decide' && decision) {
    const next =
      decided && ['retry', 'skip'].includes(decision.decision) ? decidedActions(decided, decision) : undefined;
    const decisionFact: EventDraft = {
      type: 'run.status',
      ...turnIds(thread, turn),
      payload: {
        phase: 'decision',
        title: `decision: ${decision.decision}`,
        decision,
        ...(decided ? { decidedRunId: decided.runId } : {}),
        ...(next?.skipped.length ? { skipped: next.skipped } : {}),
        ...facts,
      },
    };
    // replan and continue (and a skip that leaves nothing to run): the next model step sees the failure and goes on.
    if (!decided || !next || next.actions.length === 0) {
      await engine.append(thread.sessionId, [decisionFact]);
      return;
    }
    const ids = { turnId: turn.turnId, runId: newId('run') };
    const attempt = { ...declaration, intent: 'execute' as const, actions: next.actions };
    await engine.append(thread.sessionId, [
      decisionFact,
      ...nextAttemptFacts(thread, decided, attempt, ids, {
        reason: decision.decision === 'retry' ? 'decided_retry' : 'decided_skip',
        retryOf: decided.runId,
        ...(next.skipped.length ? { skipped: next.skipped } : {}),
      }),
    ]);
    return;
  }
  if (declaration.actions.length === 0) {
    // A decision without actions (continue / skip / replan): record it; the next model step follows.
    await engine.append(thread.sessionId, [
      {
        type: 'run.status',
        ...turnIds(thread, turn),
        payload: { phase: 'decision', title: 'decision', decision: declaration.decision ?? null, ...facts },
      },
    ]);
    return;
  }
  const revised = intent === 'revise' ? decidedRun(thread, turn) : undefined;
  if (revised) {
    // The revision replaces what had not started; what ran keeps its facts in the revised run.
    const started = revised.order.filter(
      (id) => revised.actions[id]?.startedAt || revised.actions[id]?.status === 'completed',
    );
    const diff = {
      kept: started,
      replaced: revised.order.filter((id) => !started.includes(id)),
      added: declaration.actions.map((a) => a.id),
    };
    await engine.append(thread.sessionId, [
      ...nextAttemptFacts(
        thread,
        revised,
        declaration,
        { turnId: turn.turnId, runId: newId('run') },
        {
          reason: 'revised',
          revisionOf: revised.runId,
          diff,
          ...facts,
        },
      ),
    ]);
    return;
  }
  const runId = newId('run');
  const taskId = newId('task');
  const title = declaration.title ?? declaration.message?.slice(0, 120) ?? `${declaration.actions.length} action(s)`;
  const ids = { ...turnIds(thread, turn), taskId, runId };
  // A graph declared in a task's turn (start_task) is that task's child, recorded on both sides.
  const parentTaskId = turn.task?.taskId ?? thread.parent?.delegationTaskId;
  // The graph is persisted (run.status declared) in the same transaction as its task, before anything runs.
  await engine.append(thread.sessionId, [
    {
      type: 'task.created',
      ...ids,
      ...(parentTaskId ? { parentTaskId } : {}),
      payload: { title, objective: declaration.message ?? title, taskKind: 'action_graph' },
    },
    ...(turn.task ? [edgeLinked(turn.task.taskId, 'child', taskId)] : []),
    { type: 'task.attempt.started', ...ids, payload: { attempt: 1, status: 'running' } },
    {
      type: 'run.status',
      ...ids,
      status: 'running',
      payload: { phase: 'declared', title, declaration, ...facts },
    },
  ]);
}

/**
 * A plan is recorded and shown, never executed (docs/protocol.md "Intents"): its graph is the turn's answer. The
 * user decides in the next turn; the model then declares the work with intent execute.
 */
async function recordPlan(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  declaration: Declaration,
  facts: Record<string, unknown>,
): Promise<void> {
  const ids = { ...turnIds(thread, turn), taskId: newId('task'), runId: newId('run') };
  const title = declaration.title ?? `plan of ${declaration.actions.length} action(s)`;
  await engine.append(thread.sessionId, [
    { type: 'task.created', ...ids, payload: { title, objective: declaration.message ?? title, taskKind: 'plan' } },
    // Phase `planned`, not `declared`: no run of the thread is created, so nothing is scheduled and no id is used.
    { type: 'run.status', ...ids, payload: { phase: 'planned', title, declaration, ...facts } },
    { type: 'task.completed', ...ids, payload: { summary: 'planned; nothing executed' } },
  ]);
  await completeTurn(engine, thread, turn, { outcome: 'planned', answer: renderPlan(declaration), extra: facts });
}

/** The structured report of an answer, stored as an artifact of the turn; what the turn's completion names. */
async function storeReport(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  report: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  const artifact = await engine.artifacts.put(
    thread.sessionId,
    { text: JSON.stringify(report, null, 2), mime: 'application/json', name: `${turn.turnId}/final_report` },
    engine.limits.maxArtifactBytes,
  );
  await engine.append(thread.sessionId, [artifactCreated(turnIds(thread, turn), artifact)]);
  return { ...report, artifact: artifact.uri };
}
