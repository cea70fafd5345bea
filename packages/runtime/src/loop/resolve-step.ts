import {
  AGENT_PROTOCOL_TOOL_NAME,
  correctiveLine,
  oarError,
  type ParseOutcome,
  parseAssistantText,
  parseToolCall,
} from '@oar/protocol';
import { toolCallsLeft } from '../executors/tool-worker.js';
import { declarationFault } from '../facts/intents.js';
import { turnIds } from '../facts/turn-end.js';
import type { ModelOutput } from '../models/model-call.js';
import { actionIndex } from '../read-models/run.js';
import type { ThreadView, TurnState } from '../read-models/thread-state.js';
import type { AgentConfig, Engine } from '../scheduler/engine.js';
import { applyDeclaration } from './declaration.js';
import type { PreparedStep } from './step.js';
import { completeTurn, failTurn } from './turn-end.js';

/** Phase 3 of a model step (loop/model-step.ts): the model's output parsed, then applied, retried or failed. */
/** Phase 3: parse the output in the agent's carrier; apply a valid declaration, otherwise handle the fault. */
export async function resolveStep(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  step: PreparedStep,
  output: ModelOutput,
): Promise<void> {
  const outcome = parseOutput(thread, step, output);
  if (!outcome.ok || !outcome.declaration) {
    await rejectOutput(engine, thread, turn, step.agent, outcome, output);
    return;
  }
  // Well-formed but not applicable now (a retry of nothing, a report missing its sections): correctable as well.
  const fault = declarationFault(thread, turn, outcome.declaration);
  if (fault) {
    const rejected = { ...outcome, ok: false, errors: [fault] };
    await rejectOutput(engine, thread, turn, step.agent, rejected, output);
    return;
  }
  await applyDeclaration(engine, thread, turn, outcome.declaration, outcome);
}

/** The protocol tool call when the carrier is `tool` and the model made one, otherwise the text (DSL). */
function parseOutput(thread: ThreadView, step: PreparedStep, output: ModelOutput): ParseOutcome {
  const { agent, catalog } = step;
  const left = toolCallsLeft(thread);
  const catalogForParse = {
    catalog,
    history: actionIndex(thread.threadId, thread.runs.values()),
    // A tool worker's declaration may not exceed the tool calls it has left.
    ...(Number.isFinite(left) && left > 0 ? { limits: { maxActions: left } } : {}),
    // Only the finish reason `length` makes JSON that does not parse "cut off" (truncated_output).
    finishReason: output.finishReason,
  };
  return agent.carrier === 'tool' && output.toolCalls.length > 0
    ? parseToolCall(output.toolCalls, catalogForParse)
    : parseAssistantText(output.text, { ...catalogForParse, allowPlainText: agent.carrier === 'text' });
}

/**
 * Output that is no valid declaration: one corrective retry (the next model call names the fault), then the
 * plain-text fallback when configured and there is text, else a failed turn. Nothing of it is executed.
 */
async function rejectOutput(
  engine: Engine,
  thread: ThreadView,
  turn: TurnState,
  agent: AgentConfig,
  outcome: ParseOutcome,
  output: ModelOutput,
): Promise<void> {
  const ids = turnIds(thread, turn);
  const fault = describeFault(outcome, output, agent.carrier);
  const details = {
    errors: outcome.errors,
    repairs: outcome.repairs,
    recovered: outcome.recovered,
    finishReason: output.finishReason,
    correction: fault,
  };
  if (turn.correctiveRetries < 1) {
    await engine.append(thread.sessionId, [
      {
        type: 'runtime.warning',
        ...ids,
        payload: {
          code: 'protocol_violation',
          message: `the model output was rejected (${outcome.errors.map((e) => e.code).join(', ')}); one corrective retry`,
          retryable: true,
          details,
        },
      },
    ]);
    return;
  }
  const text = output.text.trim();
  if ((agent.onProtocolFailure ?? engine.onProtocolFailure) === 'plain_text' && text !== '') {
    await engine.append(thread.sessionId, [
      {
        type: 'runtime.warning',
        ...ids,
        payload: {
          code: 'protocol_fallback_plain_text',
          message: 'the corrective retry failed too; showing the model text as the answer, nothing executed',
          retryable: false,
          details,
        },
      },
    ]);
    await completeTurn(engine, thread, turn, { outcome: 'plain_text_fallback', answer: output.text });
    return;
  }
  await failTurn(
    engine,
    thread,
    turn,
    oarError('protocol_violation', 'the model broke the agent protocol twice; nothing was executed', {
      // The model's words are not lost: a failed turn carries them (bounded), and the CLI prints them.
      details: { ...details, ...(text !== '' ? { modelText: boundedText(text, MAX_FAILED_TEXT) } : {}) },
    }),
  );
}

/**
 * What the corrective request tells the model, in the carrier it uses: under the tool carrier, plain text is
 * answered with "call the tool", not with the text form's rules (which would teach it the wrong carrier).
 */
function describeFault(outcome: ParseOutcome, output: ModelOutput, carrier: AgentConfig['carrier']): string {
  const toolCarrierText = carrier === 'tool' && output.toolCalls.length === 0;
  // Under the tool carrier "no agent-protocol block" is the text form's complaint: the tool line replaces it.
  const errors = toolCarrierText ? outcome.errors.filter((e) => e.code !== 'missing_block') : outcome.errors;
  // correctiveLine joins each message and hint once (no "message.. hint"), the same for every issue code.
  const lines = errors.slice(0, 12).map(correctiveLine);
  if (toolCarrierText) {
    lines.unshift(
      `- [no_tool_call]: You answered in plain text, and plain text is never executed. Call the ${AGENT_PROTOCOL_TOOL_NAME} tool with your declaration.`,
      `  To answer the user, call it with {"kind": "answer", "message": "<your answer>"}; to act, with {"kind": "act", "calls": […]}.`,
    );
  }
  if (output.finishReason === 'length') {
    lines.unshift('- Your output was cut off (token limit): send a shorter declaration.');
  }
  return lines.join('\n');
}

/** How much of the model's text a failed turn carries (it is in model.completed whole). */
const MAX_FAILED_TEXT = 4_000;

function boundedText(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max)}…`;
}
