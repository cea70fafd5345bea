import { ACTION_ID_PATTERN, AGENT_PROTOCOL_TOOL_NAME, MAX_ACTION_ID_LENGTH } from './carrier.js';
import type { ProtocolIssue } from './errors.js';
import { isRecord, readJson } from './json-text.js';
import { findFencedBlocks, isProtocolFence } from './markdown.js';

/**
 * Direct-request recovery. A model that calls a catalog tool natively, or writes a tool call as text, instead
 * of declaring through the protocol, is recovered only when the request is unambiguous: the tool is in the
 * catalog and its arguments parse (schema validation follows in the normal path). Everything else fails closed.
 */

/** A tool call as a provider returns it: a name and the arguments (an object, or the JSON string on the wire). */
export interface NativeCall {
  name: string;
  arguments: unknown;
}

export type TextCallForm = 'fenced_json' | 'xml_invoke' | 'xml_tool_call' | 'tool_call_marker';

export interface TextCall extends NativeCall {
  form: TextCallForm;
}

/** Recognize the common shapes of one native call: {name, arguments|args|input}, OpenAI's {function:{…}}, AI SDK's {toolName, input}. */
export function asNativeCall(value: unknown): NativeCall | undefined {
  if (!isRecord(value) || 'kind' in value) return undefined;
  if (isRecord(value.function) && typeof value.function.name === 'string') {
    return { name: value.function.name, arguments: value.function.arguments ?? {} };
  }
  const name =
    typeof value.name === 'string' ? value.name : typeof value.toolName === 'string' ? value.toolName : undefined;
  if (name === undefined) return undefined;
  for (const key of ['arguments', 'args', 'input', 'parameters']) {
    if (key in value) return { name, arguments: value[key] };
  }
  return undefined;
}

function callsIn(value: unknown): NativeCall[] | undefined {
  const list = Array.isArray(value) ? value : [value];
  const calls = list.map(asNativeCall);
  return calls.length > 0 && calls.every((c) => c !== undefined) ? (calls as NativeCall[]) : undefined;
}

const XML_INVOKE = /<invoke\s+name\s*=\s*"([^"]+)"\s*>/g;
const XML_PARAMETER = /<parameter\s+name\s*=\s*"([^"]+)"\s*>/g;
const XML_TOOL_CALL = /<(tool_call|function_call)>/g;
const MARKER = /\[TOOL_CALL\]/g;

/**
 * Each `open` tag with the text up to its closing tag (the first one after it), like `open([\s\S]*?)close` but in
 * linear time: with the lazy regex, every unclosed opening tag scans to the end of the text, so a message of many
 * opening tags costs quadratic time (seconds for a few hundred KB). A closing tag missing after one opening tag is
 * missing after every later one too, so each kind of closing tag is searched for in vain at most once.
 */
function* tagged(text: string, open: RegExp, close: (opening: RegExpExecArray) => string) {
  const missing = new Set<string>();
  open.lastIndex = 0;
  for (let opening = open.exec(text); opening !== null; opening = open.exec(text)) {
    const closing = close(opening);
    if (missing.has(closing)) continue;
    const start = opening.index + opening[0].length;
    const end = text.indexOf(closing, start);
    if (end < 0) {
      missing.add(closing);
      continue;
    }
    yield { opening, body: text.slice(start, end) };
    open.lastIndex = end + closing.length;
  }
}

/** A parameter value is JSON when it parses as JSON (numbers, objects, arrays), otherwise the literal text. */
function parameterValue(raw: string): unknown {
  const trimmed = raw.trim();
  const read = readJson(trimmed);
  return read.ok && typeof read.value !== 'string' ? read.value : trimmed;
}

/**
 * Find text tool-call blocks. Returns the calls found and issues for call-like blocks that could not be read;
 * a caller must fail closed when any issue is present.
 */
export function findTextCalls(text: string): { calls: TextCall[]; issues: ProtocolIssue[] } {
  const calls: TextCall[] = [];
  const issues: ProtocolIssue[] = [];
  const unreadable = (form: TextCallForm, detail: string) =>
    issues.push({
      code: 'unrecoverable_tool_call',
      path: '',
      message: `found a ${form.replace(/_/g, ' ')} tool-call block that could not be read: ${detail}`,
      hint: `Do not write tool calls as text. Call ${AGENT_PROTOCOL_TOOL_NAME} with {"kind":"act","calls":[{"id":"…","type":"tool","name":"…","args":{…}}]}.`,
    });

  for (const { opening, body } of tagged(text, XML_INVOKE, () => '</invoke>')) {
    const args: Record<string, unknown> = {};
    for (const p of tagged(body, XML_PARAMETER, () => '</parameter>')) {
      args[p.opening[1] ?? ''] = parameterValue(p.body);
    }
    calls.push({ name: opening[1] ?? '', arguments: args, form: 'xml_invoke' });
  }
  const jsonCalls = (body: string, form: TextCallForm) => {
    const read = readJson(body.trim());
    const found = read.ok ? callsIn(read.value) : undefined;
    if (found) calls.push(...found.map((c) => ({ ...c, form })));
    else unreadable(form, read.ok ? 'no {"name", "arguments"} object inside' : read.message);
  };
  for (const { body } of tagged(text, XML_TOOL_CALL, (opening) => `</${opening[1]}>`)) jsonCalls(body, 'xml_tool_call');
  for (const { body } of tagged(text, MARKER, () => '[/TOOL_CALL]')) jsonCalls(body, 'tool_call_marker');

  // Fenced JSON is ordinary content unless it has the shape of a call; only that shape is treated as one.
  for (const block of findFencedBlocks(text)) {
    if (isProtocolFence(block.info)) continue;
    const language = block.info.split(/\s+/)[0] ?? '';
    if (!['', 'json', 'tool_call', 'tool'].includes(language)) continue;
    const read = readJson(block.content.trim());
    const found = read.ok ? callsIn(read.value) : undefined;
    if (found) calls.push(...found.map((c) => ({ ...c, form: 'fenced_json' as const })));
  }
  return { calls, issues };
}

/** A call id for a recovered request: the tool name made id-safe, numbered to stay unique in the thread. */
export function recoveredCallId(name: string, used: Set<string>): string {
  let base = name.replace(/[^A-Za-z0-9_.:-]/g, '_').slice(0, MAX_ACTION_ID_LENGTH - 8);
  if (!ACTION_ID_PATTERN.test(base)) base = `call_${base}`;
  let n = 1;
  while (used.has(`${base}_${n}`)) n++;
  const id = `${base}_${n}`;
  used.add(id);
  return id;
}
