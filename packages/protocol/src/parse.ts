import { z } from 'zod';
import { AGENT_PROTOCOL_TOOL_NAME, ProtocolOutputSchema } from './carrier.js';
import { type Catalog, type CatalogInput, CatalogSchema } from './catalog.js';
import { type Declaration, DeclarationSchema } from './declaration.js';
import { DSL_TYPE, DslEnvelopeSchema } from './dsl.js';
import { type ProtocolIssue, ProtocolIssueSchema, pointer, type Repair, RepairSchema } from './errors.js';
import { isRecord, valueTooDeep } from './json-text.js';
import { findFencedBlocks, findSections, isProtocolFence } from './markdown.js';
import { normalizeCarrier, normalizeDsl } from './normalize.js';
import { asNativeCall, findTextCalls, type NativeCall, recoveredCallId } from './recovery.js';
import { nestingTooDeep, readStringified, repairCarrierArguments } from './repair.js';
import { schemaIssues } from './schema-issues.js';
import {
  type ExecutorRegistry,
  isHistoryIndex,
  type ValidationHistoryIndex,
  type ValidationLimits,
  validateDeclaration,
} from './validate.js';

/**
 * The two entry points a runtime calls with a finished assistant message: `parseToolCall` for the native
 * tool-call carrier, `parseAssistantText` for raw text (full DSL block, or recovery of a text tool call).
 * Both parse, repair, normalize and validate, and never throw: the result is a Declaration or issues.
 */

export interface ThreadHistory {
  /** Action ids that completed earlier in the thread: valid dependency and action: reference targets. */
  completedActionIds?: string[];
  /** Every action id used earlier in the thread (completed or not): new declarations may not reuse them. */
  usedActionIds?: string[];
}

export interface ParseOptions {
  catalog?: CatalogInput;
  /** The thread's history: as lists, or as sets a caller keeps up to date (`ValidationHistoryIndex`). */
  history?: ThreadHistory | ValidationHistoryIndex;
  limits?: Partial<ValidationLimits>;
  /** An agent not enabled for the protocol never executes what it writes: its text is plain content. */
  protocolEnabled?: boolean;
  /** Text carrier: treat a message with no protocol block and no tool call as the final answer. */
  allowPlainText?: boolean;
  /** Graph validation against the catalog (default true). Recovered requests are always validated. */
  validate?: boolean;
  /** Pipeline / service / runtime / human names beyond the catalog (the catalog's pipelines and services count). */
  executors?: ExecutorRegistry;
  /**
   * The model's finish reason for this output (`stop`, `length`, `tool-calls`…), when the caller knows it. Only
   * `length` makes JSON that fails to parse `truncated_output`; otherwise it is `invalid_json`.
   */
  finishReason?: string;
}

export const ParseOutcomeSchema = z.object({
  ok: z.boolean(),
  declaration: DeclarationSchema.optional(),
  errors: z.array(ProtocolIssueSchema),
  repairs: z.array(RepairSchema),
  recovered: z.boolean(),
});
export type ParseOutcome = z.infer<typeof ParseOutcomeSchema>;

export const PARSE_CODES = {
  emptyOutput: 'empty_output',
  invalidJson: 'invalid_json',
  truncatedOutput: 'truncated_output',
  invalidSchema: 'invalid_schema',
  missingBlock: 'missing_block',
  multipleBlocks: 'multiple_blocks',
  unterminatedBlock: 'unterminated_block',
  unresolvedReference: 'unresolved_reference',
  invalidReference: 'invalid_reference',
  referenceNotDependency: 'reference_not_dependency',
  duplicateSection: 'duplicate_section',
  multipleDeclarations: 'multiple_declarations',
  mixedCalls: 'mixed_calls',
  unknownDirectCall: 'unknown_direct_call',
  unrecoverableToolCall: 'unrecoverable_tool_call',
  recoveryRejected: 'recovery_rejected',
  callsRequired: 'calls_required',
  callsNotAllowed: 'calls_not_allowed',
  messageRequired: 'message_required',
  intentPayloadMismatch: 'intent_payload_mismatch',
  outputTooLarge: 'output_too_large',
  nestingTooDeep: 'nesting_too_deep',
} as const;

/**
 * The most characters of model output one parse accepts: the assistant text, or the tool-call arguments of one
 * message taken together. Well above any real declaration (validation allows 64 KiB of input per action) and any
 * provider's output-token limit; checked before anything else so an oversized output costs one length comparison.
 */
export const MAX_OUTPUT_CHARS = 1024 * 1024;

export { jsonTextTooDeep, MAX_JSON_DEPTH, valueTooDeep } from './json-text.js';

function outputTooLarge(size: number): ParseOutcome {
  return failure([
    {
      code: PARSE_CODES.outputTooLarge,
      path: '',
      message: `the model output has ${size} characters; at most ${MAX_OUTPUT_CHARS} are accepted (the limit is ${MAX_OUTPUT_CHARS})`,
      hint: 'Send a much shorter declaration: fewer calls, and no large content inline (write big files in parts).',
    },
  ]);
}

/** Characters of the strings a tool-call input carries (arguments strings, or the input itself). */
function toolCallChars(input: unknown): number {
  if (typeof input === 'string') return input.length;
  if (!Array.isArray(input)) {
    const call = asNativeCall(input);
    return typeof call?.arguments === 'string' ? call.arguments.length : 0;
  }
  let total = 0;
  for (const item of input) total += toolCallChars(asNativeCall(item)?.arguments);
  return total;
}

const CARRIER_HINT = `Call ${AGENT_PROTOCOL_TOOL_NAME} with {"kind":"act","calls":[{"id":"…","type":"tool","name":"<catalog tool>","args":{…}}]}, or {"kind":"answer","message":"…"} when you are done.`;

function failure(errors: ProtocolIssue[], repairs: Repair[] = [], recovered = false): ParseOutcome {
  return { ok: false, errors, repairs, recovered };
}

interface Context {
  catalog: Catalog;
  options: ParseOptions;
}

function context(options: ParseOptions): Context | ParseOutcome {
  const catalog = CatalogSchema.safeParse(options.catalog ?? {});
  if (!catalog.success) {
    return failure(
      schemaIssues(catalog.error, ['catalog']).map((i) => ({
        ...i,
        code: 'invalid_catalog',
        hint: 'Fix the catalog.',
      })),
    );
  }
  return { catalog: catalog.data, options };
}

/** Every id the thread used, as a set of the caller's own (recovery adds the ids it makes up). */
function usedIds(options: ParseOptions): Set<string> {
  const history = options.history;
  if (history && isHistoryIndex(history)) return new Set(history.used);
  return new Set([...(history?.usedActionIds ?? []), ...(history?.completedActionIds ?? [])]);
}

/** Validation closes every path; a recovered request that fails it is rejected as a whole (fail closed). */
function finish(ctx: Context, declaration: Declaration, repairs: Repair[]): ParseOutcome {
  const recovered = declaration.source.recovered;
  if (ctx.options.validate === false && !recovered) return { ok: true, declaration, errors: [], repairs, recovered };
  const result = validateDeclaration(declaration, {
    catalog: ctx.catalog,
    history: ctx.options.history ?? {},
    ...(ctx.options.limits ? { limits: ctx.options.limits } : {}),
    ...(ctx.options.executors ? { executors: ctx.options.executors } : {}),
  });
  if (result.ok) return { ok: true, declaration: result.declaration, errors: [], repairs, recovered };
  const errors = recovered
    ? [
        {
          code: PARSE_CODES.recoveryRejected,
          path: '',
          message: 'a direct tool request was found but could not be recovered safely',
          hint: CARRIER_HINT,
        },
        ...result.issues,
      ]
    : result.issues;
  return failure(errors, repairs, recovered);
}

function carrierDeclaration(
  ctx: Context,
  raw: unknown,
  source: Pick<Declaration['source'], 'carrier' | 'form' | 'recovered'>,
  basePath: (string | number)[] = [],
): ParseOutcome {
  // Text is depth-checked before JSON.parse (readJson); an object that arrived parsed is checked here, before zod.
  if (typeof raw !== 'string' && valueTooDeep(raw)) {
    return failure(
      [nestingTooDeep(pointer(basePath), `the ${AGENT_PROTOCOL_TOOL_NAME} arguments`)],
      [],
      source.recovered,
    );
  }
  const repaired = repairCarrierArguments(raw, { finishReason: ctx.options.finishReason });
  if (repaired.issues.length > 0) return failure(repaired.issues, repaired.repairs, source.recovered);
  const parsed = ProtocolOutputSchema.safeParse(repaired.value);
  if (!parsed.success) return failure(schemaIssues(parsed.error, basePath), repaired.repairs, source.recovered);
  return finish(ctx, normalizeCarrier(parsed.data, source), repaired.repairs);
}

/**
 * Recover direct calls to catalog tools — and to catalog agents, as delegations — as one `act`; any call outside
 * the catalog makes the whole set fail (fail closed). A tool wins when a tool and an agent share a name.
 */
function recoverCalls(ctx: Context, calls: NativeCall[], carrier: 'tool' | 'text', repairs: Repair[]): ParseOutcome {
  const tools = new Set(ctx.catalog.tools.map((t) => t.name));
  const agents = new Set(ctx.catalog.agents.map((a) => a.name));
  const known = new Set([...tools, ...agents]);
  const unknown = calls.filter((c) => !known.has(c.name));
  if (unknown.length > 0) {
    const available = [...known].slice(0, 30).join(', ') || '(none)';
    return failure(
      unknown.map((c) => ({
        code: PARSE_CODES.unknownDirectCall,
        path: '',
        message: `"${c.name}" is neither ${AGENT_PROTOCOL_TOOL_NAME} nor a tool or agent in the catalog`,
        hint: `${CARRIER_HINT} Available tools: ${available}.`,
      })),
      repairs,
      true,
    );
  }
  const used = usedIds(ctx.options);
  const outCalls: unknown[] = [];
  for (const call of calls) {
    let args = call.arguments;
    if (typeof args === 'string') {
      const read = readStringified(args, '', `the arguments of "${call.name}"`, repairs, {
        finishReason: ctx.options.finishReason,
      });
      if (!read.ok) return failure([read.issue], repairs, true);
      args = read.value;
    }
    if (!isRecord(args)) {
      return failure(
        [
          {
            code: PARSE_CODES.recoveryRejected,
            path: '',
            message: `the arguments of "${call.name}" are not an object`,
            hint: CARRIER_HINT,
          },
        ],
        repairs,
        true,
      );
    }
    const type = tools.has(call.name) ? 'tool' : 'agent';
    outCalls.push({ id: recoveredCallId(call.name, used), type, name: call.name, args });
  }
  const form = carrier === 'tool' ? 'direct_tool_call' : 'text_tool_call';
  const outcome = carrierDeclaration(ctx, { kind: 'act', calls: outCalls }, { carrier, form, recovered: true });
  return { ...outcome, repairs: [...repairs, ...outcome.repairs] };
}

/**
 * Parse what a model sent through the tool-call channel: the arguments of an `AgentProtocolOutput` call
 * (object or JSON string), one native call `{name, arguments}`, or the list of all native calls of a message.
 */
export function parseToolCall(input: unknown, options: ParseOptions = {}): ParseOutcome {
  const ctx = context(options);
  if ('ok' in ctx) return ctx;
  if (options.protocolEnabled === false) {
    return failure([
      {
        code: 'protocol_disabled',
        path: '',
        message: 'this agent is not enabled for the agent protocol; its tool calls are not executed',
        hint: 'Answer in plain text.',
      },
    ]);
  }
  const chars = toolCallChars(input);
  if (chars > MAX_OUTPUT_CHARS) return outputTooLarge(chars);
  const single = asNativeCall(input);
  const calls = Array.isArray(input) ? input.map(asNativeCall) : single ? [single] : undefined;
  if (calls === undefined)
    return carrierDeclaration(ctx, input, { carrier: 'tool', form: 'carrier', recovered: false });

  if (calls.length === 0) {
    return failure([{ code: PARSE_CODES.emptyOutput, path: '', message: 'no tool call was made', hint: CARRIER_HINT }]);
  }
  const unreadable = calls.indexOf(undefined);
  if (unreadable >= 0) {
    return failure([
      {
        code: PARSE_CODES.invalidSchema,
        path: `/${unreadable}`,
        message: 'this item is not a tool call {name, arguments}',
        hint: CARRIER_HINT,
      },
    ]);
  }
  const native = calls as NativeCall[];
  const protocolCalls = native.filter((c) => c.name === AGENT_PROTOCOL_TOOL_NAME);
  if (protocolCalls.length > 1) {
    return failure([
      {
        code: PARSE_CODES.multipleDeclarations,
        path: '',
        message: `${protocolCalls.length} ${AGENT_PROTOCOL_TOOL_NAME} calls in one message`,
        hint: `Make exactly one ${AGENT_PROTOCOL_TOOL_NAME} call per message and put all calls in its "calls" array.`,
      },
    ]);
  }
  if (protocolCalls.length === 1 && native.length > 1) {
    return failure([
      {
        code: PARSE_CODES.mixedCalls,
        path: '',
        message: `${AGENT_PROTOCOL_TOOL_NAME} was called together with other tools`,
        hint: `Call only ${AGENT_PROTOCOL_TOOL_NAME}; declare every tool use inside its "calls" array.`,
      },
    ]);
  }
  const protocolCall = protocolCalls[0];
  if (protocolCall) {
    return carrierDeclaration(ctx, protocolCall.arguments, { carrier: 'tool', form: 'carrier', recovered: false });
  }
  return recoverCalls(ctx, native, 'tool', []);
}

function plainText(text: string, carrier: 'text' = 'text'): ParseOutcome {
  return {
    ok: true,
    declaration: {
      intent: 'respond',
      message: text,
      persist: false,
      execution: { mode: 'ephemeral', strategy: 'dag' },
      actions: [],
      source: { carrier, form: 'plain_text', recovered: false },
    },
    errors: [],
    repairs: [],
    recovered: false,
  };
}

/** Parse raw assistant text: exactly one ```json agent-protocol block with its Markdown sections, or recovery. */
export function parseAssistantText(text: string, options: ParseOptions = {}): ParseOutcome {
  const ctx = context(options);
  if ('ok' in ctx) return ctx;
  if (typeof text !== 'string' || text.trim() === '') {
    return failure([
      { code: PARSE_CODES.emptyOutput, path: '', message: 'the assistant message is empty', hint: CARRIER_HINT },
    ]);
  }
  // Protocol-looking text from an agent not enabled for the protocol is content, never instructions.
  if (options.protocolEnabled === false) return plainText(text);
  if (text.length > MAX_OUTPUT_CHARS) return outputTooLarge(text.length);

  const blocks = findFencedBlocks(text);
  const protocolBlocks = blocks.filter((b) => isProtocolFence(b.info));
  if (protocolBlocks.length > 1) {
    return failure([
      {
        code: PARSE_CODES.multipleBlocks,
        path: '',
        message: `${protocolBlocks.length} agent-protocol blocks in one message`,
        hint: 'Send exactly one ```json agent-protocol block per message; put every action in its payload.actions.',
      },
    ]);
  }
  const block = protocolBlocks[0];
  if (block) {
    if (!block.closed) {
      return failure([
        {
          code: PARSE_CODES.unterminatedBlock,
          path: '',
          message: 'the agent-protocol block is not closed: the message was cut off or the fence is missing',
          hint: 'Close the block with ``` and keep the declaration short enough to finish.',
        },
      ]);
    }
    const repairs: Repair[] = [];
    const read = readStringified(block.content, '', 'the agent-protocol block', repairs, {
      finishReason: options.finishReason,
    });
    if (!read.ok) return failure([read.issue], repairs);
    const envelope = DslEnvelopeSchema.safeParse(read.value);
    if (!envelope.success) return failure(schemaIssues(envelope.error), repairs);
    const { sections, duplicates } = sectionMap(text, blocks);
    const referenced = duplicateReferences(read.value, duplicates);
    if (referenced.length > 0) return failure(referenced, repairs);
    const normalized = normalizeDsl(envelope.data, sections, { knownActionIds: usedIds(options) });
    if (!normalized.declaration) return failure(normalized.issues, repairs);
    return finish(ctx, normalized.declaration, repairs);
  }

  const found = findTextCalls(text);
  if (found.issues.length > 0) return failure(found.issues, [], true);
  const protocolCalls = found.calls.filter((c) => c.name === AGENT_PROTOCOL_TOOL_NAME);
  if (found.calls.length > 0) {
    if (protocolCalls.length > 1 || (protocolCalls.length === 1 && found.calls.length > 1)) {
      return failure(
        [
          {
            code: protocolCalls.length > 1 ? PARSE_CODES.multipleDeclarations : PARSE_CODES.mixedCalls,
            path: '',
            message: 'the text holds several tool-call blocks that cannot be combined safely',
            hint: CARRIER_HINT,
          },
        ],
        [],
        true,
      );
    }
    const protocolCall = protocolCalls[0];
    if (protocolCall) {
      return carrierDeclaration(ctx, protocolCall.arguments, {
        carrier: 'text',
        form: 'text_tool_call',
        recovered: true,
      });
    }
    return recoverCalls(ctx, found.calls, 'text', []);
  }

  if (options.allowPlainText) return plainText(text);
  const untagged = blocks.some((b) => b.content.includes(`"${DSL_TYPE}"`));
  return failure([
    {
      code: PARSE_CODES.missingBlock,
      path: '',
      message: untagged
        ? 'a fenced block holds an agent.protocol declaration but its fence is not tagged agent-protocol'
        : 'the message holds no agent-protocol block',
      hint: untagged
        ? 'Open the block with ```json agent-protocol so the runtime recognizes it.'
        : 'Declare what to do in one ```json agent-protocol block (type "agent.protocol", version "1", intent, payload).',
    },
  ]);
}

function sectionMap(text: string, blocks: ReturnType<typeof findFencedBlocks>) {
  const sections = new Map<string, string>();
  const duplicates = new Set<string>();
  for (const section of findSections(text, blocks)) {
    if (sections.has(section.id)) duplicates.add(section.id);
    else sections.set(section.id, section.body);
  }
  return { sections, duplicates };
}

/** Two sections with the same id make an md: reference ambiguous; the runtime refuses to pick one. */
function duplicateReferences(envelope: unknown, duplicates: Set<string>): ProtocolIssue[] {
  if (duplicates.size === 0) return [];
  const issues: ProtocolIssue[] = [];
  const payload = isRecord(envelope) && isRecord(envelope.payload) ? envelope.payload : {};
  const actions = Array.isArray(payload.actions) ? payload.actions : [];
  actions.forEach((action, index) => {
    if (!isRecord(action)) return;
    const refs = [action.prompt_ref, ...(Array.isArray(action.context_refs) ? action.context_refs : [])];
    for (const ref of refs) {
      if (typeof ref !== 'string' || !ref.startsWith('md:')) continue;
      const id = ref.slice(3).trim().toLowerCase();
      if (duplicates.has(id)) {
        issues.push({
          code: PARSE_CODES.duplicateSection,
          path: `/payload/actions/${index}`,
          message: `"${ref}" is ambiguous: the message has more than one "## ${id}" section`,
          hint: `Keep exactly one "## ${id}" section.`,
        });
      }
    }
  });
  return issues;
}
