import {
  type ActionResult,
  AGENT_PROTOCOL_TOOL_NAME,
  type Catalog,
  estimateTokens,
  type RenderedTranscript,
  type ReplayMode,
  renderTranscript,
  TRANSCRIPT_CLOSING_INSTRUCTION,
  type TranscriptTurnInput,
} from '@oar/protocol';
import type { AgentConfig } from '../../config/binding.js';
import { setRecent } from '../../kernel/lru.js';
import type { RevealedObservations } from '../../policy/revealed.js';
import type { RunAction, RunState, ThreadView, TurnState } from '../../read-models/thread-state.js';

/**
 * Context assembly: the system prompt (protocol instructions, the agent's own prompt, the catalog) and the
 * Markdown transcript rebuilt from durable records only. Nothing here reads provider history: what the model
 * saw before is reconstructed from the thread's read model, so a restarted process builds the same context.
 */

/** What the context needs of an agent: the one agent type (binding.ts), narrowed. */
export type AgentProfile = Pick<AgentConfig, 'name' | 'carrier'> &
  Partial<Pick<AgentConfig, 'description' | 'systemPrompt' | 'replay'>>;

function compactSchema(schema: Record<string, unknown>): string {
  const { $schema: _dialect, ...rest } = schema;
  return JSON.stringify(rest);
}

const OPERATION_LINES = [
  '- runtime expand_ref: a range of a stored output. Input: {"ref":"artifact://…|action:<id>.output","range":{"start_line","end_line","pattern"}}',
  '- runtime summarize / merge: one text of the outputs its context refs name. runtime wait / checkpoint: ordering points.',
  '- runtime start_job: run a batch, one turn per item, and wait for it. Input: {"prompt":"… {{field}} …","items":[…]|"items_file":"x.jsonl"|"items_ref":"action:<id>.output","policy":{"concurrency","maxAttempts"}}',
  '- human ask_user: a question for the user; its answer is the output. human confirm: approve/deny. Input: {"question":"…"}',
];

/**
 * The last system prompt of each agent with the catalog it was built from. Why: it is the same step after step
 * (the catalog of a step is a new object, but of the same entries), and building it stringifies every tool's
 * schema. Reused when the catalog lists the very same entry objects; any other catalog builds it again.
 */
const systemPrompts = new WeakMap<AgentProfile, { catalog: Catalog; text: string; tokens: number }>();

function sameEntries<T>(a: readonly T[] | undefined, b: readonly T[] | undefined): boolean {
  if (a === b) return true;
  if (!a || !b || a.length !== b.length) return false;
  return a.every((entry, i) => entry === b[i]);
}

function sameCatalog(a: Catalog, b: Catalog): boolean {
  return (
    sameEntries(a.tools, b.tools) &&
    sameEntries(a.pipelines, b.pipelines) &&
    sameEntries(a.services, b.services) &&
    a.agents.length === b.agents.length &&
    a.agents.every(
      (entry, i) =>
        entry.name === b.agents[i]?.name &&
        entry.description === b.agents[i]?.description &&
        sameEntries(entry.capabilities, b.agents[i]?.capabilities),
    )
  );
}

/** The agent's system prompt for `catalog`, with its token estimate (remembered: see `systemPrompts`). */
function systemPromptOf(agent: AgentProfile, catalog: Catalog): { text: string; tokens: number } {
  const memo = systemPrompts.get(agent);
  if (memo && sameCatalog(memo.catalog, catalog)) return memo;
  const text = systemPrompt(agent, catalog);
  const built = { catalog, text, tokens: estimateTokens(text) };
  systemPrompts.set(agent, built);
  return built;
}

export function systemPrompt(agent: AgentProfile, catalog: Catalog): string {
  const lines: string[] = [
    `You are "${agent.name}", an agent running inside OAR, the Open Agent Runtime.`,
    'You never execute anything yourself: you declare what should happen and the runtime validates, authorizes,',
    'executes and reports back. Each request shows the conversation as a transcript of turns; runtime observations',
    'follow each call. Observations may be summaries: request more with a runtime expand_ref action when needed.',
    '',
  ];
  if (agent.carrier === 'tool') {
    lines.push(
      `## Output protocol`,
      `Respond by calling the ${AGENT_PROTOCOL_TOOL_NAME} tool exactly once per message:`,
      '- {"kind":"act","message":"short progress note","calls":[{"id":"read_readme","type":"tool","name":"read","args":{"filePath":"README.md"}}]}',
      '  runs calls. Calls without mutual "depends" may run in parallel; "depends" names call ids that must finish first.',
      '  "type":"agent" delegates to an agent below ("name": its name or "auto"); args.prompt says what it must do.',
      '  A task for tools in words: {"type":"tool","name":"auto","capabilities":["search"],"prompt":"…"} (or a tool name',
      '  with partial args): a tool worker does it with the matching tools and reports once.',
      '  "type":"human" asks the user ("name":"ask_user" or "confirm", args.question); "type":"runtime" runs an operation',
      '  below (e.g. "name":"expand_ref", args.ref). "context":["action:<id>.summary"|"action:<id>.output"|"input:user.goal"]',
      '  hands earlier results to an agent, tool worker or human (depend on the ids of this message you name).',
      '  "result" picks what you get back: summary (default), full, structured, on_failure, on_demand, adaptive.',
      '- {"kind":"answer","message":"final Markdown answer"} when you have what you need.',
      '- {"kind":"done","message":"optional closing note"} to end the turn without a further answer.',
      'Call ids must be unique in the whole conversation. Never write tool calls as text.',
    );
  } else {
    lines.push(
      '## Output protocol',
      'To act, write exactly one fenced block opened with ```json agent-protocol containing',
      '{"type":"agent.protocol","version":"1","intent":"execute","payload":{"type":"action_graph","actions":[...]}}',
      'where each action is {"type":"action","id":"…","executor":{"type":"tool","target":"<tool>"},"input":{…},"depends_on":[…]}.',
      'Put long instructions in "## <section id>" Markdown sections after the block and point at them with "prompt_ref":"md:<section id>".',
      'A tool action with a prompt and no complete input is done by a tool worker with the tools its target or "capabilities" name;',
      '"context_refs" (md:<section>, action:<id>.summary|output, input:user.goal, artifact:<name>) hand it, an agent or a human context.',
      'When you are done, answer in plain Markdown without a block.',
    );
  }
  if (catalog.tools.length > 0) {
    lines.push('', '## Tools');
    for (const tool of catalog.tools) {
      const capabilities = tool.capabilities.length ? ` (capabilities: ${tool.capabilities.join(', ')})` : '';
      lines.push(`- ${tool.name}: ${tool.description}${capabilities} Input: ${compactSchema(tool.inputSchema)}`);
    }
  }
  if (catalog.agents.length > 0) {
    lines.push('', '## Agents');
    for (const sub of catalog.agents) {
      lines.push(
        `- ${sub.name}: ${sub.description}${sub.capabilities.length ? ` (capabilities: ${sub.capabilities.join(', ')})` : ''}`,
      );
    }
  }
  // Configured pipelines and services (docs/executors.md): called by name with executor type pipeline / service.
  for (const [heading, entries] of [
    ['Pipelines', catalog.pipelines],
    ['Services', catalog.services],
  ] as const) {
    if (!entries?.length) continue;
    const type = heading === 'Pipelines' ? 'pipeline' : 'service';
    lines.push(
      '',
      `## ${heading}`,
      `Call one as an action with executor {"type":"${type}","target":"<name>"} (a call with "type":"${type}" and "name":"<name>"); its input must match the schema.`,
    );
    for (const entry of entries) {
      const capabilities = entry.capabilities.length ? ` (capabilities: ${entry.capabilities.join(', ')})` : '';
      lines.push(`- ${entry.name}: ${entry.description}${capabilities} Input: ${compactSchema(entry.inputSchema)}`);
    }
  }
  // Runtime and human operations: always offered, so the model can expand a preview or ask the user.
  lines.push('', '## Runtime and human operations', ...OPERATION_LINES);
  if (agent.systemPrompt) lines.push('', '## Instructions', agent.systemPrompt);
  return lines.join('\n');
}

const PENDING_RESULT: Record<RunAction['status'], ActionResult['status']> = {
  pending: 'pending',
  waiting_permission: 'waiting',
  waiting_input: 'waiting',
  running: 'running',
  completed: 'completed',
  failed: 'failed',
  denied: 'denied',
  skipped: 'skipped',
  cancelled: 'cancelled',
  lost: 'lost',
};

/**
 * The transcript input of each run and turn, remembered by the read-model object it was built from. Why: the
 * context is assembled before every model step, and `renderTranscript` remembers its work per turn *object*; read
 * models are immutable values (a reducer replaces a RunState or TurnState when an event changes it, never mutates
 * it), so an unchanged run or turn yields the very same input object step after step and is neither rebuilt nor
 * validated nor rendered again, while a changed one is a new object and is rebuilt. WeakMaps: an entry goes with
 * its read-model object, so memory stays bounded by the read models the caller holds.
 */
const runTurns = new WeakMap<RunState, { runId: string; declared: boolean; turn: TranscriptTurnInput }>();
/**
 * A turn's user request and answer, by its TurnState object (a string cannot key a WeakMap, and a map keyed by
 * text would have to be bounded by hand). The active turn's TurnState is replaced at every step (step counters, run
 * ids), so this misses once per step for that one turn: its request is rendered again, a cost bounded by that
 * text, never by the length of the thread. Finished turns keep their TurnState and hit.
 */
const textTurns = new WeakMap<TurnState, { user: TranscriptTurnInput; answer?: TranscriptTurnInput }>();

/**
 * The active turn's request, by turn id: its TurnState is a new object at every step, but its request is not, and
 * the very same input object lets `renderTranscript` take the whole front of the thread from its previous rendering
 * (it is remembered by its first turn) instead of joining every turn again — at step 1,000 that was most of a step.
 */
const userTurns = new Map<string, { text: string; turn: TranscriptTurnInput }>();
/**
 * Only turns being stepped need this (a finished turn keeps its TurnState, and `textTurns` has it): a few dozen at
 * once in a busy process. Past that a turn's step renders its whole transcript, as before; memory stays flat.
 */
const MAX_USER_TURNS = 64;

function userTurn(turn: TurnState): TranscriptTurnInput {
  const text = userText(turn);
  const known = userTurns.get(turn.turnId);
  if (known?.text === text) return known.turn;
  const made: TranscriptTurnInput = { kind: 'user', text };
  setRecent(userTurns, turn.turnId, { text, turn: made }, MAX_USER_TURNS);
  return made;
}

/**
 * The user's message of a turn: its input, and its attached files by ref (control-plane/attachments.ts). A file is
 * never inlined: the model reads the part it needs with expand_ref, like any stored output.
 */
function userText(turn: TurnState): string {
  if (!turn.attachments?.length) return turn.input;
  const files = turn.attachments.map((a) => `- ${a.name} (${a.mimeType}, ${a.size} bytes): ${a.uri}`);
  return `${turn.input}\n\nAttached files (read them with a runtime expand_ref action on the ref):\n${files.join('\n')}`;
}

function runTurn(runId: string, run: RunState, declared: boolean): TranscriptTurnInput {
  const memo = runTurns.get(run);
  if (memo?.runId === runId && memo.declared === declared) return memo.turn;
  const { source: _source, ...declaration } = run.declaration;
  const turn: TranscriptTurnInput = {
    kind: 'protocol',
    runId,
    // The declaration as the model made it (normalized): what full and hybrid replay show of earlier graphs.
    ...(declared ? { declaration } : {}),
    ...(run.declaration.title || run.declaration.message
      ? { purpose: run.declaration.title ?? run.declaration.message }
      : {}),
    calls: run.order.flatMap((id) => {
      const action = run.declaration.actions.find((a) => a.id === id);
      const state = run.actions[id];
      if (!action || !state) return [];
      return [
        {
          action: {
            id: action.id,
            executor: { type: action.executor.type, target: action.executor.target },
            input: action.input,
            dependsOn: action.dependsOn,
            ...(action.operation ? { operation: action.operation } : {}),
            ...(action.title ? { title: action.title } : {}),
            ...(action.description ? { description: action.description } : {}),
            ...(action.reason ? { reason: action.reason } : {}),
          },
          result: state.result ?? { id, status: PENDING_RESULT[state.status], artifacts: [] },
        },
      ];
    }),
  };
  runTurns.set(run, { runId, declared, turn });
  return turn;
}

/**
 * A run's transcript input with the unredacted observations the side channel keeps for it (policy/revealed.ts) in
 * place of the recorded ones, or undefined when it keeps none that still stand for the recorded result. Memoized by
 * the run object and the very observations used, like `runTurn`: the same step after step while nothing changes.
 */
const revealedTurns = new WeakMap<
  RunState,
  { runId: string; declared: boolean; shown: (ActionResult | undefined)[]; turn: TranscriptTurnInput }
>();

function revealedRunTurn(
  runId: string,
  run: RunState,
  declared: boolean,
  turnId: string,
  revealed: RevealedObservations,
): TranscriptTurnInput | undefined {
  if (!revealed.hasRun(runId)) return undefined;
  const shown = run.order.map((id) => {
    const state = run.actions[id];
    // Only in place of a recorded result of the very attempt that produced it.
    return state?.result ? revealed.get(turnId, runId, id, state.attempt) : undefined;
  });
  if (shown.every((result) => result === undefined)) return undefined;
  const memo = revealedTurns.get(run);
  if (
    memo?.runId === runId &&
    memo.declared === declared &&
    memo.shown.length === shown.length &&
    memo.shown.every((result, i) => result === shown[i])
  ) {
    return memo.turn;
  }
  const recorded = runTurn(runId, run, declared);
  if (recorded.kind !== 'protocol') return undefined;
  const turn: TranscriptTurnInput = {
    ...recorded,
    calls: recorded.calls?.map((call) => {
      const raw = call.action ? shown[run.order.indexOf(call.action.id)] : undefined;
      return raw ? { ...call, result: raw } : call;
    }),
  };
  revealedTurns.set(run, { runId, declared, shown, turn });
  return turn;
}

/** The text of a thread's compaction summary, as stored (its artifact), with the ref it is stored under. */
export interface CompactionSummary {
  ref: string;
  text: string;
}

/** The summary turn of each stored summary, by ref: one object per summary, so the renderer's memo keeps it. */
const summaryTurns = new Map<string, { text: string; turns: number; turn: TranscriptTurnInput }>();
const MAX_SUMMARY_TURNS = 256;

function summaryTurn(summary: CompactionSummary, covered: number): TranscriptTurnInput {
  const memo = summaryTurns.get(summary.ref);
  if (memo && memo.text === summary.text && memo.turns === covered) return memo.turn;
  const turn: TranscriptTurnInput = { kind: 'summary', text: summary.text, ref: summary.ref, turns: covered };
  setRecent(summaryTurns, summary.ref, { text: summary.text, turns: covered, turn }, MAX_SUMMARY_TURNS);
  return turn;
}

/**
 * The thread's history as transcript turns: each user request, each executed graph with its results, each answer.
 * A compacted thread (`thread.compaction`) starts with its summary in place of the turns the summary covers; a
 * caller without the summary's text (`summary` omitted) gets every turn, as before any compaction.
 */
export function threadTranscript(
  thread: ThreadView,
  mode: ReplayMode = 'compressed',
  summary?: CompactionSummary,
  /** The unredacted side channel: only the model's own context passes it (never compaction, never a record). */
  revealed?: RevealedObservations,
): TranscriptTurnInput[] {
  // compressed replays calls and observations only; full and hybrid also the declarations they came from.
  const declared = mode !== 'compressed';
  const turns: TranscriptTurnInput[] = [];
  const boundary = summary && thread.compaction?.summaryRef === summary.ref ? thread.compaction : undefined;
  const through = boundary ? thread.turns.findIndex((t) => t.turnId === boundary.throughTurnId) : -1;
  if (boundary && summary) turns.push(summaryTurn(summary, through + 1));
  for (const [position, turn] of thread.turns.entries()) {
    if (position <= through) continue;
    if (turn.status === 'queued' || (turn.status === 'cancelled' && !turn.startedAt)) continue;
    let texts = textTurns.get(turn);
    if (!texts) {
      texts = {
        user: userTurn(turn),
        ...(turn.answer !== undefined ? { answer: { kind: 'answer', text: turn.answer } } : {}),
      };
      textTurns.set(turn, texts);
    }
    turns.push(texts.user);
    // The active turn's reads a rule explicitly allows are shown unredacted (policy/revealed.ts).
    const reveal = revealed && turn.turnId === thread.activeTurnId && revealed.size > 0 ? revealed : undefined;
    for (const runId of turn.runIds) {
      const run = thread.runs.get(runId);
      if (!run) continue;
      turns.push(
        (reveal && revealedRunTurn(runId, run, declared, turn.turnId, reveal)) || runTurn(runId, run, declared),
      );
    }
    if (texts.answer) turns.push(texts.answer);
  }
  return turns;
}

export interface AssembledContext {
  system: string;
  transcript: RenderedTranscript;
  tokenEstimate: number;
  /**
   * The transcript may show observations unredacted (policy/revealed.ts): it is for the model provider only, and
   * anything else given this context (a before_model_call hook) gets it redacted.
   */
  revealed?: boolean;
}

export function assembleContext(
  thread: ThreadView,
  agent: AgentProfile,
  catalog: Catalog,
  options: {
    budgetTokens: number;
    correction?: string;
    responsePolicy?: Record<string, unknown>;
    /** The stored summary of a compacted thread (see `threadTranscript`). */
    summary?: CompactionSummary;
    /** The driven thread's unredacted observations (the engine's `revealed`); absent: all as recorded. */
    revealed?: RevealedObservations;
  },
): AssembledContext {
  const { text: system, tokens: systemTokens } = systemPromptOf(agent, catalog);
  let closing = options.correction
    ? `${TRANSCRIPT_CLOSING_INSTRUCTION}\n\nYour previous output was rejected by the runtime and nothing was executed:\n${options.correction}\nSend a corrected output now.`
    : TRANSCRIPT_CLOSING_INSTRUCTION;
  // The graph's response_policy shapes the answer that follows its results (docs/protocol.md "Envelope").
  if (options.responsePolicy) {
    closing += `\n\nWhen you answer, follow the response_policy you declared: ${JSON.stringify(options.responsePolicy)}`;
  }
  const budget = Math.max(256, options.budgetTokens - systemTokens);
  const mode = agent.replay ?? 'compressed';
  const transcript = renderTranscript(
    { turns: threadTranscript(thread, mode, options.summary, options.revealed) },
    { mode, budgetTokens: budget, closingInstruction: closing },
  );
  const revealed = options.revealed?.holds(thread.activeTurnId) === true;
  return { system, transcript, tokenEstimate: systemTokens + transcript.tokens, ...(revealed ? { revealed } : {}) };
}
