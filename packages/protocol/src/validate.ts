import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { z } from 'zod';
import { type Catalog, type CatalogAgent, type CatalogTool, withCapabilities } from './catalog.js';
import {
  ACTION_REFERENCE_PATTERN,
  type Action,
  type Declaration,
  EXECUTOR_TYPES,
  type ExecutorType,
  type Intent,
} from './declaration.js';
import { ProtocolIssueSchema, pointer } from './errors.js';

/**
 * Graph validation of a normalized declaration: ids, dependencies, cycles, size limits, executor targets against
 * the catalog and registry, tool input against the tool's JSON Schema, and intent/graph consistency.
 *
 * It never throws on anything shaped like a Declaration (callers may pass unchecked data) and reports every
 * violation at once, because the model gets exactly one corrective retry: a fault it is not told about now
 * costs the whole turn later.
 */

/** Stable issue codes; keys equal values so callers can switch on either. */
export const VALIDATION_CODES = {
  invalid_action_id: 'invalid_action_id',
  duplicate_action_id: 'duplicate_action_id',
  action_id_reused: 'action_id_reused',
  unknown_dependency: 'unknown_dependency',
  self_dependency: 'self_dependency',
  dependency_not_completed: 'dependency_not_completed',
  dependency_cycle: 'dependency_cycle',
  dependency_chain_too_long: 'dependency_chain_too_long',
  executor_type_auto: 'executor_type_auto',
  unknown_executor: 'unknown_executor',
  unknown_tool: 'unknown_tool',
  tool_target_unresolved: 'tool_target_unresolved',
  invalid_tool_args: 'invalid_tool_args',
  invalid_tool_schema: 'invalid_tool_schema',
  invalid_input: 'invalid_input',
  unknown_agent: 'unknown_agent',
  no_agent_for_capabilities: 'no_agent_for_capabilities',
  no_agents_available: 'no_agents_available',
  too_many_actions: 'too_many_actions',
  args_too_large: 'args_too_large',
  too_many_dependencies: 'too_many_dependencies',
  empty_action_graph: 'empty_action_graph',
  unexpected_actions: 'unexpected_actions',
  reference_not_dependency: 'reference_not_dependency',
  unresolved_reference: 'unresolved_reference',
  dependency_against_order: 'dependency_against_order',
} as const;
export type ValidationCode = (typeof VALIDATION_CODES)[keyof typeof VALIDATION_CODES];

/** Control operations the runtime itself executes (executor type `runtime`). */
export const RUNTIME_OPERATIONS = [
  'summarize',
  'merge',
  'expand_ref',
  'wait',
  'checkpoint',
  'read_skill',
  'start_job',
] as const;
/** Human decisions the runtime can request (executor type `human`); `auto` is also accepted for this type. */
export const HUMAN_OPERATIONS = ['ask_user', 'confirm'] as const;

export const ValidationLimitsSchema = z.object({
  /** Actions in one declaration. */
  maxActions: z.number().int().positive(),
  /** Serialized (JSON, UTF-8) bytes of one action's input. Large payloads belong in artifacts or md: sections. */
  maxArgsBytes: z.number().int().positive(),
  /** Entries in one action's dependsOn. */
  maxDependsPerAction: z.number().int().positive(),
  /** Characters in an action id. */
  maxIdLength: z.number().int().positive(),
  /** Actions on the longest dependency chain inside the declaration (each level is a serial round trip). */
  maxDepth: z.number().int().positive(),
});
export type ValidationLimits = z.infer<typeof ValidationLimitsSchema>;

export const DEFAULT_VALIDATION_LIMITS: ValidationLimits = Object.freeze({
  maxActions: 32,
  maxArgsBytes: 65_536,
  // A fan-in action (merge, report) may legitimately wait on every other action of a full-size graph.
  maxDependsPerAction: 32,
  maxIdLength: 128,
  // Equal to maxActions: by default only the action count bounds chains; embedders lower it to cap latency.
  maxDepth: 32,
});

export const ValidationHistorySchema = z.object({
  /** Ids of actions of earlier turns in this thread that completed successfully (may be depended on). */
  completedActionIds: z.array(z.string()).optional(),
  /** Ids of every action earlier in this thread, whatever its outcome (may not be reused). */
  usedActionIds: z.array(z.string()).optional(),
});
export type ValidationHistory = z.infer<typeof ValidationHistorySchema>;

/**
 * The same history as sets, for a caller that keeps them up to date across calls (a runtime validating every step
 * of a long thread would otherwise build sets of every earlier id at each step). `used` includes every completed id.
 */
export interface ValidationHistoryIndex {
  readonly completed: ReadonlySet<string>;
  readonly used: ReadonlySet<string>;
}

/** Executor names beyond the catalog. Runtime and human default to RUNTIME_OPERATIONS / HUMAN_OPERATIONS. */
export const ExecutorRegistrySchema = z.object({
  pipeline: z.array(z.string()).optional(),
  service: z.array(z.string()).optional(),
  runtime: z.array(z.string()).optional(),
  human: z.array(z.string()).optional(),
});
export type ExecutorRegistry = z.infer<typeof ExecutorRegistrySchema>;

/** A ProtocolIssue plus machine-readable details (e.g. the ids of a cycle). Assignable to ProtocolIssue. */
export const ValidationIssueSchema = ProtocolIssueSchema.extend({
  details: z.record(z.string(), z.unknown()).optional(),
});
export type ValidationIssue = z.infer<typeof ValidationIssueSchema>;

/** An `auto` target the validator filled in; callers record these like repairs. */
export const TargetResolutionSchema = z.object({
  actionId: z.string(),
  path: z.string(),
  target: z.string(),
  reason: z.string(),
});
export type TargetResolution = z.infer<typeof TargetResolutionSchema>;

export type ValidateDeclarationOptions = {
  catalog: Catalog;
  history?: ValidationHistory | ValidationHistoryIndex;
  limits?: Partial<ValidationLimits>;
  executors?: ExecutorRegistry;
};

export type ValidationResult = {
  ok: boolean;
  issues: ValidationIssue[];
  /** The input with resolvable `auto` targets filled in (the same object when nothing was resolved). */
  declaration: Declaration;
  resolutions: TargetResolution[];
};

// Bounds on how much one bad declaration can make us report: enough to fix everything in one retry,
// not so much that the corrective prompt drowns the model.
const MAX_ARG_ISSUES_PER_ACTION = 20;
const MAX_REPORTED_CYCLES = 32;
const MAX_LISTED_NAMES = 20;
const MAX_SCHEMA_SUMMARY_CHARS = 600;

const ID_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.:-]*$/;
const INTENTS_NEEDING_ACTIONS: ReadonlySet<Intent> = new Set(['execute', 'plan', 'revise']);
const INTENTS_WITHOUT_ACTIONS: ReadonlySet<Intent> = new Set(['respond', 'stop']);

export function validateDeclaration(declaration: Declaration, options: ValidateDeclarationOptions): ValidationResult {
  const ctx = createContext(declaration, options);
  checkDeclarationRules(ctx, declaration?.intent);
  const graph = checkActions(ctx, indexActionIds(ctx.actions, ctx.history.used));
  checkGraph(ctx, graph);
  checkDeclaredOrder(ctx, graph, declaration?.execution?.strategy);
  return {
    ok: ctx.issues.length === 0,
    issues: ctx.issues,
    declaration: applyResolvedTargets(declaration, ctx.resolvedTargets),
    resolutions: ctx.resolutions,
  };
}

type AddIssue = (
  code: ValidationCode,
  /** Segments, or a ready JSON pointer (Ajv's instancePath is already escaped). */
  path: ReadonlyArray<string | number> | string,
  message: string,
  hint: string,
  details?: Record<string, unknown>,
) => void;

/**
 * What every phase reads, and the one sink they all report to. Built once so that every phase sees the same
 * tolerant reading of unchecked options, and so issues keep the order in which the phases find them.
 */
type ValidationContext = {
  readonly limits: ValidationLimits;
  readonly catalog: NormalizedCatalog;
  readonly executors: ExecutorRegistry;
  readonly history: { readonly completed: ReadonlySet<string>; readonly used: ReadonlySet<string> };
  /** Empty when the declaration has no actions array (unchecked input). */
  readonly actions: readonly unknown[];
  readonly issues: ValidationIssue[];
  readonly add: AddIssue;
  readonly resolutions: TargetResolution[];
  /** Action index → the target that replaces its `auto`; applied to a copy only after every phase has run. */
  readonly resolvedTargets: Map<number, string>;
};

/** The first occurrence owns an id, so later duplicates and dependencies resolve to it. */
type ActionIds = {
  /** Per action, its id, or '' when it has no string id. */
  readonly ids: readonly string[];
  readonly firstIndexOf: ReadonlyMap<string, number>;
  /** Ids a suggested replacement must avoid: this declaration's and the thread's. */
  readonly taken: { has(id: string): boolean };
};

/** One action as the per-action checks see it; tolerant of a non-object action and of a missing id. */
type ActionScope = {
  readonly index: number;
  readonly id: string;
  /** How messages name the action: by id, or by position when it has none. */
  readonly label: string;
  readonly action: Record<string, unknown>;
  readonly at: (...rest: Array<string | number>) => Array<string | number>;
};

type ExecutorRequest = { readonly type: ExecutorType; readonly target: string; readonly capabilities: string[] };

type DependencyGraph = {
  readonly ids: readonly string[];
  /** Per action, the indices of the actions of this declaration it waits on; history adds no edges. */
  readonly edges: number[][];
};

/** The history as sets: an index as given, or lists made into sets (a completed id counts as used). */
function historySets(history: ValidationHistory | ValidationHistoryIndex | undefined): ValidationContext['history'] {
  if (history !== undefined && isHistoryIndex(history)) return history;
  const completed = new Set(stringsOf(history?.completedActionIds));
  return { completed, used: new Set([...stringsOf(history?.usedActionIds), ...completed]) };
}

/** An index is told from lists by its sets (anything with `has`), never by `instanceof`: one test for every caller. */
export function isHistoryIndex(history: object): history is ValidationHistoryIndex {
  const { used, completed } = history as Partial<Record<'used' | 'completed', { has?: unknown }>>;
  return typeof used?.has === 'function' && typeof completed?.has === 'function';
}

function createContext(declaration: Declaration, options: ValidateDeclarationOptions): ValidationContext {
  const issues: ValidationIssue[] = [];
  return {
    limits: { ...DEFAULT_VALIDATION_LIMITS, ...definedOnly(options.limits) },
    catalog: normalizeCatalog(options.catalog),
    executors: options.executors ?? {},
    history: historySets(options.history),
    actions: Array.isArray(declaration?.actions) ? declaration.actions : [],
    issues,
    add: (code, path, message, hint, details) => {
      const at = typeof path === 'string' ? path : pointer(path);
      issues.push({ code, path: at, message, hint, ...(details ? { details } : {}) });
    },
    resolutions: [],
    resolvedTargets: new Map(),
  };
}

// ---- phase 1: the declaration as a whole

function checkDeclarationRules(ctx: ValidationContext, intent: Intent): void {
  const { actions, limits, add } = ctx;
  if (INTENTS_NEEDING_ACTIONS.has(intent) && actions.length === 0) {
    add(
      'empty_action_graph',
      ['actions'],
      `Intent '${intent}' declares no actions.`,
      `Intent '${intent}' needs at least one action. Add the calls you want to run, or answer the user directly (an answer carries no calls).`,
    );
  }
  if (INTENTS_WITHOUT_ACTIONS.has(intent) && actions.length > 0) {
    add(
      'unexpected_actions',
      ['actions'],
      `Intent '${intent}' must not declare actions, but ${actions.length} were declared.`,
      `Either drop the ${actions.length} action(s) and keep intent '${intent}', or run them first (act with these calls, intent 'execute') and answer after their results arrive.`,
    );
  }
  if (actions.length > limits.maxActions) {
    add(
      'too_many_actions',
      ['actions'],
      `The declaration has ${actions.length} actions; at most ${limits.maxActions} are allowed in one declaration.`,
      `Send at most ${limits.maxActions} actions now (the most important first) and declare the rest in a later turn after these results arrive.`,
      { count: actions.length, max: limits.maxActions },
    );
  }
}

// ---- phase 2: who owns which id (reports nothing: the per-action phase reports against it)

function indexActionIds(actions: readonly unknown[], used: ReadonlySet<string>): ActionIds {
  const ids = actions.map((a) => (isRecord(a) && typeof a.id === 'string' ? a.id : ''));
  const firstIndexOf = new Map<string, number>();
  ids.forEach((id, index) => {
    if (id !== '' && !firstIndexOf.has(id)) firstIndexOf.set(id, index);
  });
  // Only an error message asks (for a fresh id to suggest): a view, not a copy of every id the thread used.
  const own = new Set(ids);
  return { ids, firstIndexOf, taken: { has: (id: string) => own.has(id) || used.has(id) } };
}

// ---- phase 3: each action on its own

/**
 * Action by action rather than check by check: issues come out in declaration order with each action's faults
 * together, which is the order callers and the corrective prompt rely on.
 */
function checkActions(ctx: ValidationContext, ids: ActionIds): DependencyGraph {
  const edges = ctx.actions.map((raw, index) => {
    const id = ids.ids[index] ?? '';
    const scope: ActionScope = {
      index,
      id,
      label: id === '' ? `#${index}` : `'${id}'`,
      action: isRecord(raw) ? raw : {},
      at: (...rest) => ['actions', index, ...rest],
    };
    checkActionId(ctx, scope, ids);
    checkExecutor(ctx, scope);
    // Shape and size apply to every executor type; tools also got schema validation in checkExecutor.
    checkInputEnvelope(ctx, scope);
    const edges = resolveDependencies(ctx, scope, ids);
    checkReferences(ctx, scope, ids);
    return edges;
  });
  return { ids: ids.ids, edges };
}

function checkActionId(ctx: ValidationContext, scope: ActionScope, ids: ActionIds): void {
  const { limits, history, add } = ctx;
  const { index, id, at } = scope;
  const fault = idFault(id, limits.maxIdLength);
  if (fault !== undefined) {
    const suggestion = freshId(sanitizeId(id, index, limits.maxIdLength), ids.taken, limits.maxIdLength);
    add(
      'invalid_action_id',
      at('id'),
      `Action ${index} id ${JSON.stringify(id)} ${fault}.`,
      `Use an id of letters, digits, '_', '.', ':' or '-' that starts with a letter, digit or '_' and has at most ${limits.maxIdLength} characters, e.g. '${suggestion}'.`,
    );
    return;
  }
  const first = ids.firstIndexOf.get(id);
  if (first !== undefined && first !== index) {
    add(
      'duplicate_action_id',
      at('id'),
      `Action id '${id}' is already used by action ${first} of this declaration.`,
      `Every action needs its own id. Rename this one, e.g. to '${freshId(id, ids.taken, limits.maxIdLength)}' (ids in this declaration: ${listNames(uniq(ids.ids.filter(Boolean)))}).`,
      { id, firstIndex: first },
    );
  }
  if (history.used.has(id)) {
    add(
      'action_id_reused',
      at('id'),
      `Action id '${id}' was already used earlier in this thread.`,
      `Ids are never reused within a thread. Pick a new id, e.g. '${freshId(id, ids.taken, limits.maxIdLength)}' (already used: ${listNames([...history.used])}).`,
      { id },
    );
  }
}

/** Why an id is unusable, as the end of a sentence about it, or undefined when it is fine. */
function idFault(id: string, maxLength: number): string | undefined {
  if (id === '') return 'is missing or empty';
  if (id.length > maxLength) return `is ${id.length} characters long (max ${maxLength})`;
  if (ID_PATTERN.test(id)) return undefined;
  return /^[A-Za-z0-9_.:-]*$/.test(id)
    ? `starts with '${id[0]}' (must start with a letter, digit or _)`
    : 'contains characters other than letters, digits, _ . : -';
}

function checkExecutor(ctx: ValidationContext, scope: ActionScope): void {
  const { add } = ctx;
  const { action, label, at } = scope;
  const executor = isRecord(action.executor) ? action.executor : undefined;
  if (!executor) {
    add(
      'unknown_executor',
      at('executor'),
      `Action ${label} has no executor.`,
      `Give the action an executor type (${EXECUTOR_TYPES.join(', ')}) and a target.`,
    );
    return;
  }
  const type: unknown = executor.type;
  if (type === 'auto') {
    add(
      'executor_type_auto',
      at('executor', 'type'),
      `Action ${label} has executor type 'auto'; the type must name an executor class.`,
      `Set the type to one of ${EXECUTOR_TYPES.join(', ')}; put 'auto' in the target instead to let the runtime pick the concrete executor of that type.`,
    );
    return;
  }
  if (!isExecutorType(type)) {
    add(
      'unknown_executor',
      at('executor', 'type'),
      `Action ${label} has unknown executor type ${JSON.stringify(type)}.`,
      `Set the executor type to one of ${EXECUTOR_TYPES.join(', ')}.`,
    );
    return;
  }
  const target = typeof executor.target === 'string' ? executor.target : '';
  TARGET_CHECKS[type](ctx, scope, { type, target, capabilities: stringsOf(executor.capabilities) });
}

function isExecutorType(value: unknown): value is ExecutorType {
  return typeof value === 'string' && (EXECUTOR_TYPES as readonly string[]).includes(value);
}

/** Each executor type resolves and checks its target against a different source: catalog, registry or defaults. */
const TARGET_CHECKS: Record<
  ExecutorType,
  (ctx: ValidationContext, scope: ActionScope, request: ExecutorRequest) => void
> = {
  tool: checkToolTarget,
  agent: checkAgentTarget,
  runtime: checkRuntimeTarget,
  human: checkHumanTarget,
  pipeline: checkRegisteredTarget,
  service: checkRegisteredTarget,
};

const NO_TOOLS_HINT = 'No tools are available in this turn; do this work another way or answer without tools.';

/**
 * A tool action either is a complete call (a tool and an input its schema accepts) and runs directly, or is a
 * semantic action — a task in words (`prompt`) for the tools with the requested capabilities, or for the one named
 * tool whose input is still partial — which the runtime's tool worker carries out with those tools.
 */
function checkToolTarget(ctx: ValidationContext, scope: ActionScope, request: ExecutorRequest): void {
  const semantic = hasTask(scope.action);
  if (request.target !== 'auto') {
    const tool = findNamedTool(ctx, scope, request.target);
    if (tool && !(semantic && !inputFits(tool, scope.action.input))) checkToolInput(ctx, scope, tool);
    return;
  }
  const candidates = withCapabilities(ctx.catalog.tools, request.capabilities);
  const [only] = candidates;
  if (candidates.length === 1 && only && !(semantic && !inputFits(only, scope.action.input))) {
    resolveTarget(ctx, scope, only.name, `only tool with capabilities [${request.capabilities.join(', ')}]`);
    checkToolInput(ctx, scope, only);
  } else if (!semantic || candidates.length === 0) {
    reportUnresolvedTool(ctx, scope, request.capabilities, candidates);
  }
}

/** Whether the action states its task in words: the prompt (resolved from md:) or a prompt_ref resolved later. */
export function hasTask(action: Record<string, unknown> | Action): boolean {
  const { prompt, promptRef } = action as Record<string, unknown>;
  return (typeof prompt === 'string' && prompt.trim() !== '') || typeof promptRef === 'string';
}

/** Whether `input` is a complete call of `tool` (its schema accepts it); a broken schema never fits. */
function inputFits(tool: CatalogTool, input: unknown): boolean {
  const compiled = compileToolSchema(tool.inputSchema);
  if (!compiled.ok || !isRecord(input)) return false;
  try {
    return compiled.validate(input) === true;
  } catch {
    return false;
  }
}

function reportUnresolvedTool(
  ctx: ValidationContext,
  scope: ActionScope,
  capabilities: string[],
  candidates: CatalogTool[],
): void {
  const { catalog, add } = ctx;
  const wanted = capabilities.length > 0 ? `capabilities [${capabilities.join(', ')}]` : 'no capabilities';
  add(
    'tool_target_unresolved',
    scope.at('executor', 'target'),
    candidates.length === 0
      ? `No tool has all of ${wanted} requested by action ${scope.label}.`
      : `${candidates.length} tools match ${wanted} requested by action ${scope.label}, so 'auto' is ambiguous.`,
    candidates.length === 0
      ? catalog.tools.length === 0
        ? NO_TOOLS_HINT
        : `Name a tool instead of 'auto'. Available tools and their capabilities: ${listTools(catalog.tools)}.`
      : `Name one of the matching tools instead of 'auto' (${listNames(candidates.map((t) => t.name))}), or state the task in a prompt and a tool worker will do it with them.`,
    { capabilities, candidates: candidates.map((t) => t.name) },
  );
}

function findNamedTool(ctx: ValidationContext, scope: ActionScope, target: string): CatalogTool | undefined {
  const tool = ctx.catalog.toolByName.get(target);
  if (!tool) {
    const toolNames = ctx.catalog.tools.map((t) => t.name);
    ctx.add(
      'unknown_tool',
      scope.at('executor', 'target'),
      `Action ${scope.label} calls tool '${target}', which is not available in this turn.`,
      toolNames.length === 0
        ? NO_TOOLS_HINT
        : `${didYouMean(target, toolNames)}Use one of the available tools: ${listNames(toolNames)}.`,
      { target },
    );
  }
  return tool;
}

function checkAgentTarget(ctx: ValidationContext, scope: ActionScope, { target, capabilities }: ExecutorRequest) {
  const { catalog, add } = ctx;
  const { label, at } = scope;
  if (target !== 'auto') {
    if (catalog.agentByName.has(target)) return;
    const agentNames = catalog.agents.map((a) => a.name);
    add(
      'unknown_agent',
      at('executor', 'target'),
      `Action ${label} delegates to agent '${target}', which is not available in this turn.`,
      agentNames.length === 0
        ? 'No agents are available in this turn; do this work with tools or yourself.'
        : `${didYouMean(target, agentNames)}Name one of the available agents (${listNames(agentNames)}) or use 'auto' with the capabilities you need.`,
      { target },
    );
  } else if (catalog.agents.length === 0) {
    add(
      'no_agents_available',
      at('executor', 'target'),
      `Action ${label} asks for an agent, but no agents are available in this turn.`,
      'Do this work with tools or yourself instead of delegating it to an agent.',
    );
  } else if (!catalog.agents.some((a) => capabilities.every((c) => a.capabilities.includes(c)))) {
    add(
      'no_agent_for_capabilities',
      at('executor', 'capabilities'),
      `No agent has all of the capabilities [${capabilities.join(', ')}] requested by action ${label}.`,
      `Request fewer capabilities or name an agent. Available agents and their capabilities: ${listAgents(catalog.agents)}.`,
      { capabilities },
    );
  }
}

function checkRuntimeTarget(ctx: ValidationContext, scope: ActionScope, { type, target }: ExecutorRequest) {
  const offered: readonly string[] = ctx.executors.runtime ?? RUNTIME_OPERATIONS;
  const { action, label, at } = scope;
  const operation = typeof action.operation === 'string' ? action.operation : '';
  if (target === 'auto' && offered.includes(operation)) {
    // The operation field already names what the runtime should do; no need to bounce the declaration.
    resolveTarget(ctx, scope, operation, `runtime operation named by the action's operation field`);
  } else if (!offered.includes(target)) {
    ctx.add(
      'unknown_executor',
      at('executor', 'target'),
      target === 'auto'
        ? `Action ${label} asks for runtime operation 'auto' without naming the operation.`
        : `Action ${label} asks for runtime operation '${target}', which the runtime does not offer.`,
      `Name the runtime operation in the target: ${listNames([...offered])}.`,
      { type, target },
    );
  }
}

function checkHumanTarget(ctx: ValidationContext, scope: ActionScope, { type, target }: ExecutorRequest) {
  const offered: readonly string[] = ctx.executors.human ?? HUMAN_OPERATIONS;
  if (target === 'auto' || offered.includes(target)) return;
  ctx.add(
    'unknown_executor',
    scope.at('executor', 'target'),
    `Action ${scope.label} asks for human operation '${target}', which is not available.`,
    `Name one of the human operations (${listNames([...offered])}) or use 'auto'.`,
    { type, target },
  );
}

/**
 * Pipeline and service: offered by the registry (names only) or the catalog (names with an input schema, checked
 * like a tool's). Neither says enough to choose between entries, so 'auto' is not resolved.
 */
function checkRegisteredTarget(ctx: ValidationContext, scope: ActionScope, { type, target }: ExecutorRequest) {
  const listed = type === 'pipeline' ? ctx.catalog.pipelineByName : ctx.catalog.serviceByName;
  const entry = listed.get(target);
  if (entry) {
    checkToolInput(ctx, scope, entry, type);
    return;
  }
  const offered = uniq([
    ...((type === 'pipeline' ? ctx.executors.pipeline : ctx.executors.service) ?? []),
    ...listed.keys(),
  ]);
  if (offered.includes(target)) return;
  ctx.add(
    'unknown_executor',
    scope.at('executor', 'target'),
    `Action ${scope.label} asks for ${type} '${target}', which is not available in this turn.`,
    offered.length === 0
      ? `No ${type} executors are available in this turn; use a tool or agent instead.`
      : `${didYouMean(target, offered)}Name one of the available ${type} executors: ${listNames(offered)}.`,
    { type, target },
  );
}

function resolveTarget(ctx: ValidationContext, scope: ActionScope, target: string, reason: string): void {
  ctx.resolvedTargets.set(scope.index, target);
  ctx.resolutions.push({ actionId: scope.id, path: pointer(scope.at('executor', 'target')), target, reason });
}

function checkInputEnvelope(ctx: ValidationContext, scope: ActionScope): void {
  const { limits, add } = ctx;
  const { label } = scope;
  const input = scope.action.input;
  const path = scope.at('input');
  if (!isRecord(input)) {
    add(
      'invalid_input',
      path,
      `Action ${label} input must be a JSON object, got ${describeType(input)}.`,
      'Send the input as a JSON object of named arguments, e.g. {"path": "README.md"}.',
    );
    return;
  }
  const size = inputBytes(input);
  if (size === undefined) {
    add(
      'invalid_input',
      path,
      `Action ${label} input cannot be serialized as JSON.`,
      'Send plain JSON values only (strings, numbers, booleans, null, arrays, objects).',
    );
  } else if (size > limits.maxArgsBytes) {
    add(
      'args_too_large',
      path,
      `Action ${label} input is ${size} bytes; at most ${limits.maxArgsBytes} bytes are allowed.`,
      `Keep the input under ${limits.maxArgsBytes} bytes: put long text in a Markdown section referenced with md:, or refer to an existing artifact or action result instead of inlining it.`,
      { bytes: size, max: limits.maxArgsBytes },
    );
  }
}

/** `noun` names what is called in the messages: a tool, or a configured pipeline or service (same schema check). */
function checkToolInput(ctx: ValidationContext, scope: ActionScope, tool: CatalogTool, noun = 'tool'): void {
  const { limits, add } = ctx;
  const { label, at } = scope;
  const input = scope.action.input;
  const compiled = compileToolSchema(tool.inputSchema);
  const Noun = `${noun.charAt(0).toUpperCase()}${noun.slice(1)}`;
  if (!compiled.ok) {
    add(
      'invalid_tool_schema',
      at('executor', 'target'),
      `${Noun} '${tool.name}' has an input schema that does not compile (${compiled.error}). This is a fault in the ${noun} catalog, not in your declaration.`,
      `${Noun} '${tool.name}' cannot be called in this turn because its definition is broken; use another ${noun} or do this work another way.`,
      { tool: tool.name, error: compiled.error },
    );
    return;
  }
  // Oversized or non-object input is reported by checkInputEnvelope; validating it too would only cost time.
  if (!isRecord(input)) return;
  const size = inputBytes(input);
  if (size === undefined || size > limits.maxArgsBytes) return;
  let errors: ErrorObject[] = [];
  try {
    if (compiled.validate(input)) return;
    errors = compiled.validate.errors ?? [];
  } catch (error) {
    errors = [
      {
        keyword: 'exception',
        instancePath: '',
        schemaPath: '#',
        params: {},
        message: `could not be validated: ${errorText(error)}`,
      },
    ];
  }
  const expected = schemaSummary(tool.inputSchema);
  const shown = errors.slice(0, MAX_ARG_ISSUES_PER_ACTION);
  shown.forEach((e, n) => {
    const more =
      n === shown.length - 1 && errors.length > shown.length
        ? ` (+${errors.length - shown.length} more errors in this input)`
        : '';
    const where = e.instancePath === '' ? 'input' : `input${e.instancePath}`;
    add(
      'invalid_tool_args',
      `${pointer(at('input'))}${e.instancePath}`,
      `Action ${label}: ${where} ${e.message ?? 'is invalid'}${ajvDetail(e)} (${noun} '${tool.name}').${more}`,
      `${ajvFix(e)}Expected input for ${noun} '${tool.name}': ${expected}`,
      { tool: tool.name, keyword: e.keyword, params: e.params },
    );
  });
}

/** This action's edges to other actions of the declaration, each once; faulty dependencies are reported instead. */
function resolveDependencies(ctx: ValidationContext, scope: ActionScope, ids: ActionIds): number[] {
  const { limits, add } = ctx;
  const dependsOn: unknown[] = Array.isArray(scope.action.dependsOn) ? scope.action.dependsOn : [];
  if (dependsOn.length > limits.maxDependsPerAction) {
    add(
      'too_many_dependencies',
      scope.at('dependsOn'),
      `Action ${scope.label} depends on ${dependsOn.length} actions; at most ${limits.maxDependsPerAction} are allowed.`,
      `Keep at most ${limits.maxDependsPerAction} dependencies per action, e.g. by merging intermediate results first and depending on that merge.`,
      { count: dependsOn.length, max: limits.maxDependsPerAction },
    );
  }
  const edges = new Set<number>();
  dependsOn.forEach((dep, k) => {
    const to = resolveDependency(ctx, scope, ids, dep, scope.at('dependsOn', k));
    if (to !== undefined) edges.add(to);
  });
  return [...edges];
}

/** The index `dep` names in this declaration, or undefined when history satisfies it or it was reported. */
function resolveDependency(
  ctx: ValidationContext,
  scope: ActionScope,
  ids: ActionIds,
  dep: unknown,
  path: Array<string | number>,
): number | undefined {
  const { history, add } = ctx;
  const { id, label } = scope;
  if (typeof dep === 'string') {
    if (dep === id && id !== '') {
      add('self_dependency', path, `Action ${label} depends on itself.`, `Remove '${id}' from its own dependencies.`);
      return undefined;
    }
    // This declaration's action wins over history: a reused id is reported once, at the id, not at every dependent.
    const target = ids.firstIndexOf.get(dep);
    if (target !== undefined) return target;
    // Its result already exists, so there is nothing to wait for.
    if (history.completed.has(dep)) return undefined;
    if (history.used.has(dep)) {
      add(
        'dependency_not_completed',
        path,
        `Action ${label} depends on '${dep}', an earlier action in this thread that did not complete.`,
        `'${dep}' failed, was canceled or has not finished, so nothing can wait on it. Remove the dependency, or add a new action with a new id that redoes that work and depend on it.`,
        { dependency: dep },
      );
      return undefined;
    }
  }
  const known = uniq(ids.ids.filter((x) => x !== '' && x !== id));
  const name = typeof dep === 'string' ? dep : JSON.stringify(dep);
  add(
    'unknown_dependency',
    path,
    `Action ${label} depends on '${name}', which is neither an action of this declaration nor a completed action of this thread.`,
    `${typeof dep === 'string' ? didYouMean(dep, [...known, ...history.completed]) : ''}Depend only on ids of this declaration (${listNames(known)}) or of completed earlier actions (${listNames([...history.completed])}); otherwise remove '${name}'.`,
    { dependency: dep },
  );
  return undefined;
}

/**
 * An `action:` reference (in context_refs or prompt_ref) reads a result that must exist when the action starts:
 * an action of this declaration the action depends on, or an action of the thread that completed earlier.
 */
function checkReferences(ctx: ValidationContext, scope: ActionScope, ids: ActionIds): void {
  const { action } = scope;
  const refs: Array<[unknown, Array<string | number>]> = Array.isArray(action.contextRefs)
    ? action.contextRefs.map((ref, k) => [ref, scope.at('contextRefs', k)])
    : [];
  if (typeof action.promptRef === 'string') refs.push([action.promptRef, scope.at('promptRef')]);
  const dependsOn = Array.isArray(action.dependsOn) ? action.dependsOn : [];
  for (const [ref, path] of refs) {
    const target = typeof ref === 'string' ? ACTION_REFERENCE_PATTERN.exec(ref)?.[1] : undefined;
    if (target === undefined) continue;
    if (ids.firstIndexOf.has(target)) {
      if (dependsOn.includes(target)) continue;
      ctx.add(
        'reference_not_dependency',
        path,
        `"${ref}" reads action '${target}' of this declaration, which ${scope.label} does not depend on.`,
        `Add '${target}' to the dependencies of ${scope.label} so its result exists when ${scope.label} starts.`,
        { ref, target },
      );
    } else if (!ctx.history.completed.has(target)) {
      ctx.add(
        'unresolved_reference',
        path,
        `"${ref}" names action '${target}', which is neither in this declaration nor completed earlier in this thread.`,
        `Reference only actions of this declaration (and depend on them) or completed earlier actions (${listNames([...ctx.history.completed])}).`,
        { ref, target },
      );
    }
  }
}

// ---- phase 4: the dependency graph as a whole

function checkGraph(ctx: ValidationContext, graph: DependencyGraph): void {
  const cycles = findCycles(graph.edges);
  for (const found of cycles) reportCycle(ctx, graph, found);
  // A longest chain is only defined for an acyclic graph.
  if (cycles.length === 0 && ctx.actions.length > 0) checkChainDepth(ctx, graph);
}

function reportCycle(
  ctx: ValidationContext,
  graph: DependencyGraph,
  { cycle, truncated }: { cycle: number[]; truncated: boolean },
): void {
  const names = [...cycle, cycle[0] ?? 0].map((i) => nodeName(graph, i));
  const first = cycle[0] ?? 0;
  const next = cycle[1 % cycle.length] ?? first;
  // Point at the very dependency that closes the cycle, so the fix is one deletion at that path.
  const firstAction = ctx.actions[first];
  const firstDeps = isRecord(firstAction) && Array.isArray(firstAction.dependsOn) ? firstAction.dependsOn : [];
  const depIndex = firstDeps.indexOf(graph.ids[next]);
  const chain = names.join(' → ');
  ctx.add(
    'dependency_cycle',
    ['actions', first, 'dependsOn', ...(depIndex >= 0 ? [depIndex] : [])],
    `Actions form a dependency cycle: ${chain} (each depends on the next), so none of them can start.${truncated ? ' More cycles exist than are reported.' : ''}`,
    `Break the cycle ${chain} by removing one of these dependencies; an action may only depend on actions that can finish before it starts.`,
    { cycle: names },
  );
}

/**
 * The order a graph's execution adds (runtime scheduler/ordering.ts) runs forward in declaration order: one action
 * after another under `sequential`, everything after a `wait` or `checkpoint` barrier. A dependency on an action
 * declared later cannot be kept in such an order — it would wait forever — so it is refused here.
 */
function checkDeclaredOrder(ctx: ValidationContext, graph: DependencyGraph, strategy: string | undefined): void {
  const barriers = ctx.actions.flatMap((action, index) => (isBarrierAction(action) ? [index] : []));
  if (strategy !== 'sequential' && barriers.length === 0) return;
  graph.edges.forEach((deps, index) => {
    for (const dep of deps) {
      if (dep <= index) continue;
      const barrier = barriers.find((b) => index < b && b <= dep);
      if (strategy !== 'sequential' && barrier === undefined) continue;
      const between =
        strategy === 'sequential'
          ? 'the graph runs in declaration order (sequential)'
          : `the barrier "${nodeName(graph, barrier ?? 0)}" runs between them`;
      const action = ctx.actions[index];
      const declared = isRecord(action) && Array.isArray(action.dependsOn) ? action.dependsOn : [];
      const at = declared.indexOf(graph.ids[dep]);
      ctx.add(
        'dependency_against_order',
        ['actions', index, 'dependsOn', ...(at >= 0 ? [at] : [])],
        `Action ${nodeName(graph, index)} depends on ${nodeName(graph, dep)}, declared after it, but ${between}: it would wait forever.`,
        `Declare ${nodeName(graph, dep)} before ${nodeName(graph, index)}, or drop the dependency.`,
        { action: nodeName(graph, index), dependency: nodeName(graph, dep) },
      );
    }
  });
}

/**
 * A runtime `wait` or `checkpoint` declared without dependencies: a barrier, ordering what is declared before it and
 * after it (docs/protocol.md "Execution strategy"). Tolerant of unchecked input: validation asks before the shape is.
 */
export function isBarrierAction(action: unknown): boolean {
  if (!isRecord(action) || !isRecord(action.executor) || action.executor.type !== 'runtime') return false;
  if (Array.isArray(action.dependsOn) && action.dependsOn.length > 0) return false;
  const target = action.executor.target === 'auto' ? action.operation : action.executor.target;
  return target === 'wait' || target === 'checkpoint';
}

function checkChainDepth(ctx: ValidationContext, graph: DependencyGraph): void {
  const { maxDepth } = ctx.limits;
  const chain = longestChain(graph.edges);
  if (chain.length <= maxDepth) return;
  const names = chain.map((i) => nodeName(graph, i));
  ctx.add(
    'dependency_chain_too_long',
    ['actions', chain[chain.length - 1] ?? 0, 'dependsOn'],
    `The longest dependency chain has ${chain.length} actions (${names.join(' → ')}); at most ${maxDepth} are allowed.`,
    `Shorten the chain to at most ${maxDepth} actions: let independent steps run in parallel, or declare the later steps in a later turn.`,
    { chain: names, max: maxDepth },
  );
}

function nodeName(graph: DependencyGraph, index: number): string {
  return graph.ids[index] || `#${index}`;
}

// ---- phase 5: the result

function applyResolvedTargets(declaration: Declaration, resolvedTargets: ReadonlyMap<number, string>): Declaration {
  if (resolvedTargets.size === 0) return declaration;
  // Copy, never mutate: the caller keeps the model's original declaration for the record.
  return {
    ...declaration,
    actions: declaration.actions.map((a, i): Action => {
      const target = resolvedTargets.get(i);
      return target === undefined ? a : { ...a, executor: { ...a.executor, target } };
    }),
  };
}

// ---- JSON Schema compilation

type CompiledSchema = { ok: true; validate: ValidateFunction } | { ok: false; error: string };

/**
 * Validate a value against a JSON Schema (2020-12; draft-07 keywords accepted) with the validator the catalog uses:
 * the same compile cache, formats and error wording. A schema that does not compile is reported as such.
 */
export function validateJsonSchema(
  schema: Record<string, unknown>,
  value: unknown,
): { ok: true } | { ok: false; issues: { path: string; message: string }[] } {
  const compiled = compileToolSchema(schema);
  if (!compiled.ok)
    return { ok: false, issues: [{ path: '', message: `the schema does not compile: ${compiled.error}` }] };
  if (compiled.validate(value)) return { ok: true };
  const errors = compiled.validate.errors ?? [];
  // A format's regular expression says nothing a reader can use: where the same value also fails a `format`,
  // that one speaks for it (`must match format "date-time"`).
  const formatted = new Set(errors.filter((e) => e.keyword === 'format').map((e) => e.instancePath));
  const issues = errors
    .filter((e) => !(e.keyword === 'pattern' && formatted.has(e.instancePath)))
    .map((e) => ({ path: e.instancePath, message: truncate(`${e.message ?? e.keyword}${ajvDetail(e)}`, 200) }));
  return { ok: false, issues };
}

// Keyed by the catalog's schema object: catalogs are built once per turn (or less), schemas compile once.
const compiledSchemas = new WeakMap<object, CompiledSchema>();
/** The same cache by content: a catalog parsed again carries equal schemas in new objects. */
const compiledByText = new Map<string, CompiledSchema>();
const MAX_COMPILED_BY_TEXT = 512;
let sharedAjv: Ajv2020 | undefined;

// ajv-formats is CommonJS; under NodeNext its default import is the module object, whose `default` is the plugin
// (the plugin function also carries `.default` pointing at itself, so this works under every interop mode).
const addFormats = addFormatsModule.default;

function getAjv(): Ajv2020 {
  if (!sharedAjv) {
    sharedAjv = new Ajv2020({
      allErrors: true,
      // Catalog schemas come from MCP servers and other vendors that use extra keywords; ignore, don't reject.
      strict: false,
      // A pure library does not print.
      logger: false,
    });
    addFormats(sharedAjv);
  }
  return sharedAjv;
}

const DIALECT_2020 = /^https?:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/;

function compileToolSchema(schema: unknown): CompiledSchema {
  if (!isRecord(schema)) return { ok: false, error: `input schema must be a JSON object, got ${describeType(schema)}` };
  const cached = compiledSchemas.get(schema);
  if (cached) return cached;
  // Catalogs are usually re-parsed per call (new objects, same content): compile each distinct schema once.
  const text = JSON.stringify(schema);
  const same = compiledByText.get(text);
  if (same) {
    compiledSchemas.set(schema, same);
    return same;
  }
  let result: CompiledSchema;
  // Ajv2020 only knows the 2020-12 meta-schema; tools commonly declare draft-07. The keywords tools actually
  // use mean the same in both, so compile under 2020-12 rather than rejecting the tool.
  const source =
    typeof schema.$schema === 'string' && !DIALECT_2020.test(schema.$schema) ? withoutKey(schema, '$schema') : schema;
  let ajv: Ajv2020 | undefined;
  try {
    ajv = getAjv();
    result = { ok: true, validate: ajv.compile(source) };
  } catch (error) {
    result = { ok: false, error: errorText(error) };
  } finally {
    // Ajv registers every compiled schema (by object and by `$id`) on the instance. Unregister it: two tools may
    // share a `$id` (the second compile would fail), and a long-lived process with per-turn catalogs would grow
    // without bound. The compiled function keeps working; our WeakMap is the cache.
    try {
      ajv?.removeSchema(source);
    } catch {
      // Nothing registered (compile failed early): nothing to undo.
    }
  }
  compiledByText.set(text, result);
  // A bounded cache: a long-lived process that sees ever new schemas keeps only the most recent ones.
  if (compiledByText.size > MAX_COMPILED_BY_TEXT) {
    const oldest = compiledByText.keys().next().value;
    if (oldest !== undefined) compiledByText.delete(oldest);
  }
  compiledSchemas.set(schema, result);
  return result;
}

function ajvDetail(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'additionalProperties':
      return ` ('${String(p.additionalProperty)}')`;
    case 'unevaluatedProperties':
      return ` ('${String(p.unevaluatedProperty)}')`;
    case 'enum':
      return `: ${truncate(JSON.stringify(p.allowedValues), 200)}`;
    case 'const':
      return `: ${truncate(JSON.stringify(p.allowedValue), 200)}`;
    default:
      return '';
  }
}

function ajvFix(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return `Add the required property '${String(p.missingProperty)}'. `;
    case 'additionalProperties':
      return `Remove the property '${String(p.additionalProperty)}'. `;
    case 'unevaluatedProperties':
      return `Remove the property '${String(p.unevaluatedProperty)}'. `;
    case 'type':
      return `Send ${e.instancePath === '' ? 'the input' : `'${e.instancePath.slice(1)}'`} as ${String(p.type)}. `;
    default:
      return '';
  }
}

/** A short TypeScript-like rendering of a schema, e.g. `{ path: string, limit?: integer }`; the model reads it. */
function schemaSummary(schema: unknown): string {
  return truncate(summarize(schema, 0), MAX_SCHEMA_SUMMARY_CHARS);
}

function summarize(schema: unknown, depth: number): string {
  if (schema === true || schema === undefined) return 'any';
  if (schema === false) return 'never';
  if (!isRecord(schema)) return 'any';
  if ('const' in schema) return truncate(JSON.stringify(schema.const) ?? 'any', 60);
  if (Array.isArray(schema.enum)) return schema.enum.map((v) => truncate(JSON.stringify(v) ?? 'null', 40)).join(' | ');
  for (const key of ['anyOf', 'oneOf'] as const) {
    const variants = schema[key];
    if (Array.isArray(variants) && variants.length > 0) return variants.map((v) => summarize(v, depth + 1)).join(' | ');
  }
  const types = Array.isArray(schema.type)
    ? stringsOf(schema.type)
    : typeof schema.type === 'string'
      ? [schema.type]
      : [];
  if (types.includes('object') || isRecord(schema.properties)) {
    const properties = isRecord(schema.properties) ? schema.properties : {};
    const entries = Object.entries(properties);
    if (depth >= 3 || entries.length === 0) return 'object';
    const required = new Set(stringsOf(schema.required));
    return `{ ${entries.map(([k, v]) => `${k}${required.has(k) ? '' : '?'}: ${summarize(v, depth + 1)}`).join(', ')} }`;
  }
  if (types.includes('array')) {
    const item = summarize(schema.items, depth + 1);
    return item.includes(' | ') ? `(${item})[]` : `${item}[]`;
  }
  if (types.length > 0) {
    return types
      .map((t) => (t === 'string' && typeof schema.format === 'string' ? `string(${schema.format})` : t))
      .join(' | ');
  }
  if (typeof schema.$ref === 'string') return `ref(${schema.$ref})`;
  return 'any';
}

// ---- graph algorithms (iterative: unchecked input may be far larger than the limits)

/**
 * One cycle per back edge of a depth-first search in declaration order. Every cycle of the graph contains a back
 * edge, so the reported cycles cover all of them, and no cycle is reported twice. Each cycle is rotated to start
 * at its lowest declaration index so the message is stable.
 */
function findCycles(edges: number[][]): Array<{ cycle: number[]; truncated: boolean }> {
  const state = new Uint8Array(edges.length); // 0 unvisited, 1 on stack, 2 done
  const found: number[][] = [];
  const seen = new Set<string>();
  let truncated = false;
  for (let root = 0; root < edges.length; root++) {
    if (state[root] !== 0) continue;
    const stack: Array<{ node: number; next: number }> = [{ node: root, next: 0 }];
    const path: number[] = [root];
    state[root] = 1;
    while (stack.length > 0) {
      const frame = stack[stack.length - 1];
      if (!frame) break;
      const out = edges[frame.node] ?? [];
      if (frame.next >= out.length) {
        state[frame.node] = 2;
        stack.pop();
        path.pop();
        continue;
      }
      const to = out[frame.next++] ?? 0;
      if (state[to] === 0) {
        state[to] = 1;
        stack.push({ node: to, next: 0 });
        path.push(to);
      } else if (state[to] === 1) {
        const cycle = path.slice(path.lastIndexOf(to));
        const min = cycle.indexOf(Math.min(...cycle));
        const rotated = [...cycle.slice(min), ...cycle.slice(0, min)];
        const key = rotated.join(',');
        if (!seen.has(key)) {
          seen.add(key);
          if (found.length < MAX_REPORTED_CYCLES) found.push(rotated);
          else truncated = true;
        }
      }
    }
  }
  return found.map((cycle, i) => ({ cycle, truncated: truncated && i === found.length - 1 }));
}

/** The longest dependency chain of an acyclic graph, from the action that starts it to the one that ends it. */
function longestChain(edges: number[][]): number[] {
  const n = edges.length;
  const depth = new Array<number>(n).fill(0);
  const next = new Array<number>(n).fill(-1);
  const state = new Uint8Array(n);
  // Post-order over dependencies: a node's depth is known once all it depends on are done.
  for (let root = 0; root < n; root++) {
    if (state[root] !== 0) continue;
    const stack: Array<{ node: number; i: number }> = [{ node: root, i: 0 }];
    state[root] = 1;
    while (stack.length > 0) {
      const frame = stack[stack.length - 1];
      if (!frame) break;
      const out = edges[frame.node] ?? [];
      if (frame.i < out.length) {
        const to = out[frame.i++] ?? 0;
        if (state[to] === 0) {
          state[to] = 1;
          stack.push({ node: to, i: 0 });
        }
        continue;
      }
      let best = 0;
      let bestNext = -1;
      for (const to of out) {
        const d = depth[to] ?? 0;
        if (d > best) {
          best = d;
          bestNext = to;
        }
      }
      depth[frame.node] = best + 1;
      next[frame.node] = bestNext;
      state[frame.node] = 2;
      stack.pop();
    }
  }
  let start = 0;
  for (let i = 1; i < n; i++) if ((depth[i] ?? 0) > (depth[start] ?? 0)) start = i;
  // depth counts from the dependent down to its deepest dependency; report in execution order.
  const chain: number[] = [];
  for (let at = start; at !== -1 && chain.length <= n; at = next[at] ?? -1) chain.push(at);
  return chain.reverse();
}

// ---- helpers

type NormalizedCatalog = {
  tools: CatalogTool[];
  agents: CatalogAgent[];
  toolByName: Map<string, CatalogTool>;
  agentByName: Map<string, CatalogAgent>;
  /** Configured pipelines and services; checked like tools (same fields), under their own executor type. */
  pipelineByName: Map<string, CatalogTool>;
  serviceByName: Map<string, CatalogTool>;
};

/** Tolerates an unparsed catalog (missing arrays or capabilities); the first entry of a duplicated name wins. */
function normalizeCatalog(catalog: Catalog | undefined): NormalizedCatalog {
  const tools = (Array.isArray(catalog?.tools) ? catalog.tools : [])
    .filter((t) => isRecord(t) && typeof t.name === 'string')
    .map((t) => ({ ...t, capabilities: stringsOf(t.capabilities) }));
  const agents = (Array.isArray(catalog?.agents) ? catalog.agents : [])
    .filter((a) => isRecord(a) && typeof a.name === 'string')
    .map((a) => ({ ...a, capabilities: stringsOf(a.capabilities) }));
  const toolByName = new Map<string, CatalogTool>();
  for (const t of tools) if (!toolByName.has(t.name)) toolByName.set(t.name, t);
  const agentByName = new Map<string, CatalogAgent>();
  for (const a of agents) if (!agentByName.has(a.name)) agentByName.set(a.name, a);
  return {
    tools: [...toolByName.values()],
    agents: [...agentByName.values()],
    toolByName,
    agentByName,
    pipelineByName: executorsByName(catalog?.pipelines),
    serviceByName: executorsByName(catalog?.services),
  };
}

/** Pipelines or services by name, as tolerant as the tool list (the first entry of a duplicated name wins). */
function executorsByName(entries: unknown): Map<string, CatalogTool> {
  const byName = new Map<string, CatalogTool>();
  for (const e of Array.isArray(entries) ? entries : []) {
    if (!isRecord(e) || typeof e.name !== 'string' || byName.has(e.name)) continue;
    byName.set(e.name, {
      name: e.name,
      description: typeof e.description === 'string' ? e.description : '',
      capabilities: stringsOf(e.capabilities),
      inputSchema: isRecord(e.inputSchema) ? e.inputSchema : { type: 'object' },
    });
  }
  return byName;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function stringsOf(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

function uniq(values: string[]): string[] {
  return [...new Set(values)];
}

function definedOnly<T extends object>(value: T | undefined): Partial<T> {
  if (!value) return {};
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function withoutKey(record: Record<string, unknown>, key: string): Record<string, unknown> {
  const { [key]: _omitted, ...rest } = record;
  return rest;
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

function errorText(error: unknown): string {
  return truncate(error instanceof Error ? error.message : String(error), 300);
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** JSON.stringify size in UTF-8 bytes, counted by hand: `types: []` leaves TextEncoder undeclared here. */
function inputBytes(input: unknown): number | undefined {
  let json: string | undefined;
  try {
    json = JSON.stringify(input);
  } catch {
    return undefined;
  }
  if (json === undefined) return undefined;
  let bytes = 0;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < json.length) {
      const d = json.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

function listNames(names: readonly string[]): string {
  if (names.length === 0) return 'none';
  const shown = names.slice(0, MAX_LISTED_NAMES).join(', ');
  return names.length > MAX_LISTED_NAMES ? `${shown} … (+${names.length - MAX_LISTED_NAMES} more)` : shown;
}

function listTools(tools: readonly CatalogTool[]): string {
  return listWithCapabilities(tools);
}

function listAgents(agents: readonly CatalogAgent[]): string {
  return listWithCapabilities(agents);
}

function listWithCapabilities(entries: ReadonlyArray<{ name: string; capabilities: string[] }>): string {
  const shown = entries.slice(0, MAX_LISTED_NAMES).map((e) => `${e.name} [${e.capabilities.join(', ')}]`);
  const more = entries.length > MAX_LISTED_NAMES ? ` … (+${entries.length - MAX_LISTED_NAMES} more)` : '';
  return `${shown.join(', ')}${more}`;
}

/** Turns an invalid id into a valid one for the hint, so the model sees a concrete replacement. */
function sanitizeId(id: string, index: number, maxLength: number): string {
  const cleaned = id.replace(/[^A-Za-z0-9_.:-]/g, '_').replace(/^[.:-]+/, '');
  return cleaned === '' ? `action_${index + 1}` : cleaned.slice(0, maxLength);
}

function freshId(id: string, taken: { has(id: string): boolean }, maxLength: number): string {
  if (!taken.has(id)) return id;
  for (let n = 2; ; n++) {
    const suffix = `_${n}`;
    const candidate = `${id.slice(0, maxLength - suffix.length)}${suffix}`;
    if (!taken.has(candidate)) return candidate;
  }
}

/** "Did you mean 'read_file'? " when a known name is a likely typo of the given one, else ''. */
function didYouMean(name: string, known: Iterable<string>): string {
  if (name.length === 0 || name.length > 64) return '';
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(name.length / 3)) + 1;
  for (const candidate of known) {
    if (Math.abs(candidate.length - name.length) >= bestDistance || candidate.length > 64) continue;
    const d = editDistance(name.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best === undefined ? '' : `Did you mean '${best}'? `;
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      row[j] = Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + cost);
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}
