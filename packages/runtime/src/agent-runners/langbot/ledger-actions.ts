import { z } from 'zod';
import {
  type Call,
  clamp,
  type Data,
  fail,
  Int,
  type LangbotRunInfo,
  NOT_SUPPORTED,
  OptionalText,
  parse,
} from './action-support.js';
import { runEvent, runRecord } from './record-shapes.js';

/** LangBot's run-ledger actions: the calling run's own record and facts; the rest refused with the reason. */

/** A ledger action names its run as `target_run_id` (default: the calling run); OAR lets a run read only its own. */
function ownRun(data: Data, run: LangbotRunInfo, action: string): void {
  const target = data.target_run_id;
  if (target !== undefined && target !== null && target !== run.runId) {
    throw fail('unauthorized', `${action}: a run reads only its own record on OAR`, {
      target_run_id: String(target).slice(0, 128),
    });
  }
}

/** run_get of the calling run: its record as the host froze it at the start (it is running while it can ask). */
async function runGet({ data, run }: Call): Promise<Data> {
  ownRun(data, run, 'run_get');
  return runRecord(run);
}

/**
 * run_events_page of the calling run → events.page, keeping the facts of the run's turn (what OAR records of a run:
 * its task, tool calls, model calls, audits), each as an AgentRunEvent. Newest page first, in order within the page;
 * `after_cursor` (forward paging) has no OAR counterpart and is refused.
 */
async function runEventsPage({ data, host, run }: Call): Promise<Data> {
  ownRun(data, run, 'run_events_page');
  const args = parse(
    z.looseObject({ before_cursor: OptionalText, after_cursor: OptionalText, limit: Int.nullable().optional() }),
    data,
    'run_events_page',
  );
  if (args.after_cursor) throw fail('invalid_argument', 'run_events_page pages backward only on OAR (before_cursor)');
  if (!run.turnId)
    throw fail(NOT_SUPPORTED, 'run_events_page is not available for this run', { action: 'run_events_page' });
  const page = (await host.call('events.page', {
    ...(args.before_cursor ? { before_cursor: args.before_cursor } : {}),
    limit: clamp(args.limit ?? 50, 1, 200),
  })) as { items?: Data[]; next_cursor?: string | null; has_more?: boolean };
  return {
    items: (page.items ?? []).filter((e) => e.turn_id === run.turnId).map((e) => runEvent(e, run.runId)),
    next_cursor: page.next_cursor ?? null,
    prev_cursor: null,
    has_more: page.has_more === true,
  };
}

/** Ledger and control-plane actions OAR does not take, each with the reason the refusal gives. */
export const REFUSED: Record<string, string> = {
  run_cancel: 'a run ends with its own result (run.failed with code cancelled) or at its deadline',
  run_append_result: "a run's results go on its result stream; the ledger (OAR's event log) is written by the host",
  run_finalize: 'a run is finalized by its run.completed or run.failed result, which the host records',
  run_list: "a run reads only its own record on OAR (other runs' facts are in the event log: event_page)",
  run_claim: 'OAR has no external runtime queue: the host starts each run itself',
  run_renew_claim: 'OAR has no external runtime queue: the host starts each run itself',
  run_release_claim: 'OAR has no external runtime queue: the host starts each run itself',
  runner_list: 'runners are listed by the host (oar runners list), not by a run',
  runtime_register: 'OAR has no runtime registry',
  runtime_heartbeat: 'OAR has no runtime registry',
  runtime_list: 'OAR has no runtime registry',
  runtime_reconcile: 'OAR has no runtime registry',
  run_stats: 'control-plane statistics are not a run API on OAR',
  runtime_stats: 'control-plane statistics are not a run API on OAR',
  runner_stats: 'control-plane statistics are not a run API on OAR',
};

export const LEDGER_ACTIONS: Record<string, (call: Call) => Promise<Data>> = {
  run_get: runGet,
  run_events_page: runEventsPage,
};
