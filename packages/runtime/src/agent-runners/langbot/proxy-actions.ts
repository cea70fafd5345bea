import { PeerError, toWireError, type WireError } from '@oar/runner-sdk';
import { z } from 'zod';
import {
  type Call,
  clamp,
  type Data,
  fail,
  Int,
  type LangbotHostApi,
  type LangbotRunInfo,
  NOT_SUPPORTED,
  parse,
  Text,
} from './action-support.js';
import { CONTEXT_ACTIONS } from './context-actions.js';
import { LEDGER_ACTIONS, REFUSED } from './ledger-actions.js';
import { MODEL_ACTIONS } from './model-actions.js';
import { STORAGE_ACTIONS, storageAction } from './storage-actions.js';

export { type LangbotHostApi, type LangbotRunInfo, NOT_SUPPORTED } from './action-support.js';

/**
 * LangBot's AgentRunner proxy actions (its plugin SDK's `AgentRunAPIProxy`: one wire action each, `run_id` in the
 * data) answered through OAR's governed host API. Every action becomes one or more `AGENT_API` calls of the run
 * (`host.call`), so the run's frozen access, rate limit, deadline, budgets, audit and facts apply exactly as for a
 * runner on OAR's own wire; these modules only reshape requests and answers (model-actions.ts, context-actions.ts,
 * ledger-actions.ts, storage-actions.ts; tools and knowledge here). Refusals are thrown as
 * `PeerError({code, message, retryable, details})` — the AgentAPIError LangBot's SDK raises from an error response.
 */

// --- tools and knowledge ---------------------------------------------------------------------------------------------

async function getToolDetail({ data, host }: Call): Promise<Data> {
  const args = parse(z.looseObject({ tool_name: Text }), data, 'get_tool_detail');
  const detail = (await host.call('tools.get_detail', { tool_name: args.tool_name })) as Data;
  const description = typeof detail.description === 'string' ? detail.description : '';
  return {
    tool: { name: detail.tool_name, description, human_desc: description, parameters: detail.parameters ?? {} },
  };
}

/**
 * call_tool: the governed tool path; `result` is the tool's text output. A tool's own failure is an answer
 * (`ok: false` with its error), as on OAR's wire: the facts of the failed call are recorded, and the runner decides
 * what its model sees.
 */
async function callTool({ data, host }: Call): Promise<Data> {
  const args = parse(
    z.looseObject({ tool_name: Text, parameters: z.record(z.string(), z.unknown()).nullable().optional() }),
    data,
    'call_tool',
  );
  const result = (await host.call('tools.call', {
    tool_name: args.tool_name,
    parameters: args.parameters ?? {},
  })) as Data;
  return {
    // The text is what a model is shown (as OAR's own loop shows it); a tool's structured output rides along.
    result: result.content,
    ok: result.ok,
    ...(result.structured !== undefined ? { structured: result.structured } : {}),
    tool_call_id: result.tool_call_id,
    ...(result.artifact_id ? { artifact_id: result.artifact_id } : {}),
    ...(result.error ? { error: result.error } : {}),
  };
}

/**
 * retrieve_knowledge_base → knowledge.retrieve. LangBot's RetrievalResultEntry wants a distance (lower is closer):
 * OAR's score (higher is closer, bm25) becomes 1 / (1 + score). OAR's retrieval has no filters: non-empty ones are
 * refused rather than ignored (ignoring them would widen the results unasked).
 */
async function retrieveKnowledge({ data, host }: Call): Promise<Data> {
  const args = parse(
    z.looseObject({
      kb_id: Text,
      query_text: Text,
      top_k: Int.nullable().optional(),
      filters: z.record(z.string(), z.unknown()).nullable().optional(),
    }),
    data,
    'retrieve_knowledge_base',
  );
  if (args.filters && Object.keys(args.filters).length) {
    throw fail('invalid_argument', "OAR's knowledge retrieval takes no filters", {
      filters: Object.keys(args.filters).slice(0, 10),
    });
  }
  const answer = (await host.call('knowledge.retrieve', {
    kb_id: args.kb_id,
    query_text: args.query_text,
    top_k: clamp(args.top_k ?? 5, 1, 50),
  })) as { results?: { content: string; metadata?: Data; score: number }[] };
  return {
    results: (answer.results ?? []).map((r, index) => ({
      id: `${args.kb_id}:${index}`,
      content: [{ type: 'text', text: r.content }],
      metadata: r.metadata ?? {},
      distance: 1 / (1 + Math.max(0, r.score)),
      score: r.score,
    })),
  };
}

// --- dispatch --------------------------------------------------------------------------------------------------------

const HANDLERS: Record<string, (call: Call) => Promise<Data>> = {
  ...MODEL_ACTIONS,
  get_tool_detail: getToolDetail,
  call_tool: callTool,
  retrieve_knowledge_base: retrieveKnowledge,
  ...CONTEXT_ACTIONS,
  ...LEDGER_ACTIONS,
  ...Object.fromEntries(STORAGE_ACTIONS.map((action) => [action, (call: Call) => storageAction(action, call)])),
};

/**
 * LangBot's `ctx.context.available_apis` from OAR's (the run context's `context.available_apis`, which already says
 * what the run is granted): LangBot's SDK refuses a call locally when its flag is false, so each flag is true exactly
 * when this mapping answers the action for the run — `prompt_get` and `run_get` always, `steering_pull` with the
 * manifest's `steering` capability, `run_events_page` with `event_page`, the ledger's writes and lists never.
 */
export function langbotAvailableApis(oar: Record<string, unknown>, steering: boolean): Record<string, boolean> {
  const flag = (name: string) => oar[name] === true;
  return {
    prompt_get: true,
    history_page: flag('history_page'),
    history_search: flag('history_search'),
    event_get: flag('event_get'),
    event_page: flag('event_page'),
    state: flag('state'),
    storage: flag('storage'),
    steering_pull: steering,
    run_get: true,
    run_list: false,
    run_events_page: flag('event_page'),
    run_cancel: false,
    run_append_result: false,
    run_finalize: false,
  };
}

/** Whether `action` is a LangBot run-scoped proxy action this module answers (mapped, or refused with a reason). */
export function isLangbotProxyAction(action: string): boolean {
  return Object.hasOwn(HANDLERS, action) || Object.hasOwn(REFUSED, action);
}

/**
 * Answers one LangBot proxy action of `run` through `host`; throws `PeerError(wireError(code, message))` for every
 * refusal — the host's own (its AgentAPIError codes), a bad shape (`invalid_argument`), and what OAR does not do
 * (`not_supported`, with the reason). An unknown action is `not_supported` too: never a crash. `onData`: for
 * `invoke_llm_stream`, each chunk's LangBot `data`, in order.
 */
export async function answerLangbotAction(
  action: string,
  data: Record<string, unknown>,
  host: LangbotHostApi,
  run: LangbotRunInfo,
  onData?: (data: Record<string, unknown>) => Promise<void> | void,
): Promise<Record<string, unknown>> {
  const name = action.slice(0, 64);
  try {
    // The data's run_id is the runner's claim: the run is the connection's, and a claim of another is refused.
    if (typeof data.run_id === 'string' && data.run_id !== run.runId) {
      throw fail('unauthorized', 'the run_id is not the run of this connection', { run_id: data.run_id.slice(0, 128) });
    }
    const handler = HANDLERS[action];
    if (handler) return await handler({ data, host, run, onData });
    const reason = REFUSED[action];
    throw fail(NOT_SUPPORTED, reason ? `${name} is not supported on OAR: ${reason}` : `unknown action ${name}`, {
      action: name,
    });
  } catch (error) {
    throw asPeerError(error, name);
  }
}

/** Any failure as the structured error LangBot's SDK reads: `{code, message, retryable, details}`. */
function asPeerError(error: unknown, action: string): PeerError {
  if (error instanceof PeerError) return error;
  const wire: WireError = toWireError(error);
  return new PeerError({ ...wire, details: { ...wire.details, action } });
}
