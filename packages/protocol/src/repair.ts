import type { ProtocolIssue, Repair } from './errors.js';
import { isRecord, MAX_JSON_DEPTH, readJson } from './json-text.js';

/**
 * Repairs of the known carrier malformations. Each is applied only where its meaning is unambiguous and is
 * recorded as `{code, detail}` so adherence and repair rates can be measured per model. Anything else is left
 * for schema validation to reject.
 */
export const REPAIR_CODES = {
  /** arguments arrived as `{input: "<json string>"}` */
  inputWrapperUnwrapped: 'input_wrapper_unwrapped',
  /** `calls` arrived as a JSON string instead of an array */
  callsStringParsed: 'calls_string_parsed',
  /** `"none"` (or an empty string) listed as a dependency */
  dependsNoneRemoved: 'depends_none_removed',
  /** whitespace-only string items inside `calls` */
  blankCallRemoved: 'blank_call_removed',
  /** raw newlines/tabs inside JSON strings of a stringified payload */
  controlCharactersEscaped: 'control_characters_escaped',
  /** `answer` or `text` used instead of `message` on answer/done */
  messageAliasRenamed: 'message_alias_renamed',
} as const;

export interface RepairOutcome {
  value: unknown;
  repairs: Repair[];
  issues: ProtocolIssue[];
}

/** What the parser knows about how the model's output ended. */
export interface OutputEnd {
  /**
   * The model's finish reason for this output, as the runtime normalized it (`stop`, `length`, `tool-calls`…).
   * Only `length` — the model hit its output-token limit — makes a payload that fails to parse `truncated_output`;
   * without it a broken payload is `invalid_json`, however it ends (the parser never guesses a cut).
   */
  finishReason?: string;
}

/** Parse a stringified payload, recording the control-character repair when it was needed. */
export function readStringified(
  text: string,
  path: string,
  what: string,
  repairs: Repair[],
  end: OutputEnd = {},
): { ok: true; value: unknown } | { ok: false; issue: ProtocolIssue } {
  const read = readJson(text);
  if (read.ok) {
    if (read.controlCharactersEscaped) {
      repairs.push({
        code: REPAIR_CODES.controlCharactersEscaped,
        detail: `escaped raw newlines/tabs inside JSON strings of ${what}`,
      });
    }
    return { ok: true, value: read.value };
  }
  if (read.tooDeep) return { ok: false, issue: nestingTooDeep(path, what) };
  if (end.finishReason === 'length') {
    return {
      ok: false,
      issue: {
        code: 'truncated_output',
        path,
        message: `${what} is not valid JSON (${read.message}): the output was cut off at the model's output-token limit`,
        hint: 'Your output was cut off before the JSON closed. Send a shorter declaration (fewer calls, shorter message).',
      },
    };
  }
  return {
    ok: false,
    issue: {
      code: 'invalid_json',
      path,
      message: read.unbalanced
        ? `${what} is not valid JSON: it ends before every string, array and object is closed (${read.message})`
        : `${what} is not valid JSON: ${read.message}`,
      hint: read.unbalanced
        ? 'Send the arguments as one complete JSON object: close every string, array and object you open.'
        : 'Send the arguments as one valid JSON object: double-quoted keys and strings, no comments, no trailing commas.',
    },
  };
}

/** The issue for JSON nested deeper than MAX_JSON_DEPTH (checked before parsing; see json-text.ts). */
export function nestingTooDeep(path: string, what: string): ProtocolIssue {
  return {
    code: 'nesting_too_deep',
    path,
    message: `${what} nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels (the limit is ${MAX_JSON_DEPTH})`,
    hint: `Keep JSON nesting within ${MAX_JSON_DEPTH} levels; pass deeply structured data as a string instead.`,
  };
}

const isNoneDependency = (item: unknown) =>
  typeof item === 'string' && (item.trim() === '' || item.trim().toLowerCase() === 'none');

function repairCall(call: unknown, index: number, repairs: Repair[]): unknown {
  if (!isRecord(call) || !('depends' in call)) return call;
  const depends = call.depends;
  if (isNoneDependency(depends)) {
    repairs.push({ code: REPAIR_CODES.dependsNoneRemoved, detail: `calls[${index}].depends was "${depends}"` });
    const { depends: _dropped, ...rest } = call;
    return rest;
  }
  if (Array.isArray(depends) && depends.some(isNoneDependency)) {
    repairs.push({ code: REPAIR_CODES.dependsNoneRemoved, detail: `removed "none" from calls[${index}].depends` });
    return { ...call, depends: depends.filter((item) => !isNoneDependency(item)) };
  }
  return call;
}

/**
 * Apply the carrier repairs to `AgentProtocolOutput` arguments (an object, or the JSON string a provider sent).
 * Returns the repaired value; structural validation happens afterwards against `ProtocolOutputSchema`.
 */
export function repairCarrierArguments(raw: unknown, end: OutputEnd = {}): RepairOutcome {
  const repairs: Repair[] = [];
  const issues: ProtocolIssue[] = [];
  let value = raw;

  if (typeof value === 'string') {
    const read = readStringified(value, '', 'the AgentProtocolOutput arguments', repairs, end);
    if (!read.ok) return { value, repairs, issues: [read.issue] };
    value = read.value;
  }

  if (isRecord(value) && Object.keys(value).length === 1 && typeof value.input === 'string') {
    const read = readStringified(value.input, '/input', 'the "input" wrapper', repairs, end);
    if (!read.ok) return { value, repairs, issues: [read.issue] };
    repairs.push({
      code: REPAIR_CODES.inputWrapperUnwrapped,
      detail: 'arguments were wrapped as {input: "<json string>"}',
    });
    value = read.value;
  }

  if (!isRecord(value)) return { value, repairs, issues };
  const out: Record<string, unknown> = { ...value };

  if (typeof out.calls === 'string') {
    const read = readStringified(out.calls, '/calls', '"calls"', repairs, end);
    if (!read.ok) {
      issues.push(read.issue);
      return { value: out, repairs, issues };
    }
    repairs.push({ code: REPAIR_CODES.callsStringParsed, detail: '"calls" was sent as a JSON string' });
    out.calls = read.value;
  }

  if (Array.isArray(out.calls)) {
    const blank = out.calls.filter((item) => typeof item === 'string' && item.trim() === '').length;
    if (blank > 0) {
      repairs.push({
        code: REPAIR_CODES.blankCallRemoved,
        detail: `removed ${blank} whitespace-only item(s) from calls`,
      });
    }
    out.calls = out.calls
      .filter((item) => !(typeof item === 'string' && item.trim() === ''))
      .map((call, index) => repairCall(call, index, repairs));
  }

  if ((out.kind === 'answer' || out.kind === 'done') && out.message === undefined) {
    // Only one alias present is unambiguous; with both, the schema rejects the unknown keys.
    const aliases = (['answer', 'text'] as const).filter((key) => key in out);
    const alias = aliases[0];
    if (aliases.length === 1 && alias !== undefined && typeof out[alias] === 'string') {
      out.message = out[alias];
      delete out[alias];
      repairs.push({ code: REPAIR_CODES.messageAliasRenamed, detail: `"${alias}" used instead of "message"` });
    }
  }

  return { value: out, repairs, issues };
}
