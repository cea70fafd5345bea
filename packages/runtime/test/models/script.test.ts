import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { APICallError } from '@ai-sdk/provider';
import { AGENT_PROTOCOL_TOOL_NAME, carrierParametersJsonSchema, ProtocolOutputSchema } from '@oar/protocol';
import {
  generateText,
  InvalidToolInputError,
  jsonSchema,
  NoSuchToolError,
  streamText,
  ToolChoiceViolationError,
  tool,
} from 'ai';
import { describe, expect, it } from 'vitest';
import { OarRuntimeError } from '../../src/kernel/errors.js';
import { createScriptedModel, loadModelScript, type ModelScript, parseModelScript } from '../../src/models/script.js';
import { removeAfterFile } from '../support/temp-dirs.js';

const tools = {
  [AGENT_PROTOCOL_TOOL_NAME]: tool({
    description: 'Declare what the runtime should do next.',
    inputSchema: jsonSchema<Record<string, unknown>>(carrierParametersJsonSchema()),
  }),
};

const answer = { kind: 'answer', message: 'Hello from the script.' };
const model = (script: ModelScript, options: Parameters<typeof createScriptedModel>[1] = {}) =>
  createScriptedModel(script, { name: 'test', ...options });

const tmp = removeAfterFile(mkdtempSync(join(tmpdir(), 'oar-script-')));
function file(name: string, content: string): string {
  const path = join(tmp, name);
  writeFileSync(path, content);
  return path;
}

async function caught(promise: PromiseLike<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('scripted model through generateText', () => {
  it('turns a protocol step into a native AgentProtocolOutput call whose input parses', async () => {
    const result = await generateText({ model: model({ steps: [{ protocol: answer }] }), tools, prompt: 'hi' });
    expect(result.finishReason).toBe('tool-calls');
    expect(result.toolCalls).toHaveLength(1);
    const call = result.toolCalls[0]!;
    expect(call.toolName).toBe(AGENT_PROTOCOL_TOOL_NAME);
    expect(call.toolCallId).toBe('call_0_0');
    expect(ProtocolOutputSchema.parse(call.input)).toEqual(answer);
    expect(result.usage.inputTokens).toBeGreaterThan(0);
    expect(result.usage.outputTokens).toBe(Math.ceil(JSON.stringify(answer).length / 4));
  });

  it('answers with the first alternative whose ifPrompt matches what the model is shown, else the step', async () => {
    const script: ModelScript = parseModelScript({
      steps: [
        {
          text: 'default',
          alternatives: [
            { ifPrompt: 'Status: denied', text: 'it was denied' },
            { ifPrompt: 'Status: (completed|denied)', text: 'it ran' },
          ],
        },
      ],
    });
    const say = async (prompt: string) => (await generateText({ model: model(script), prompt })).text;
    expect(await say('### Result for w\n\nStatus: denied')).toBe('it was denied');
    expect(await say('### Result for w\n\nStatus: completed')).toBe('it ran');
    expect(await say('nothing happened yet')).toBe('default');
    expect(() => parseModelScript({ steps: [{ text: 'x', alternatives: [{ ifPrompt: '(', text: 'y' }] }] })).toThrow(
      /a regular expression/,
    );
  });

  it('turns a text step into assistant text with finish reason stop', async () => {
    const text = '```agent-protocol\nkind: answer\n```';
    const result = await generateText({ model: model({ steps: [{ text }] }), tools, prompt: 'hi' });
    expect(result.text).toBe(text);
    expect(result.toolCalls).toEqual([]);
    expect(result.finishReason).toBe('stop');
  });

  it('honours scripted usage and finish reason overrides (cut-off output)', async () => {
    const step = {
      text: 'The answer is',
      finishReason: 'length' as const,
      usage: { inputTokens: 7, outputTokens: 4096 },
    };
    const result = await generateText({ model: model({ steps: [step] }), prompt: 'hi' });
    expect(result.finishReason).toBe('length');
    expect(result.usage.inputTokens).toBe(7);
    expect(result.usage.outputTokens).toBe(4096);
  });

  it('emits text before tool calls when a step combines them', async () => {
    const result = await generateText({
      model: model({ steps: [{ text: 'Let me look.', protocol: answer }] }),
      tools,
      prompt: 'hi',
    });
    expect(result.content.map((part) => part.type)).toEqual(['text', 'tool-call']);
  });

  it('passes malformed native tool arguments through as an invalid tool call plus a tool-error', async () => {
    const script: ModelScript = {
      steps: [
        {
          toolCalls: [
            { name: AGENT_PROTOCOL_TOOL_NAME, arguments: '{"kind": "answer", "message": "cut' },
            { name: 'read', arguments: { filePath: 'README.md' } },
          ],
        },
      ],
    };
    const result = await generateText({ model: model(script), tools, prompt: 'hi' });

    const [bad, unknown] = result.toolCalls as Array<
      (typeof result.toolCalls)[number] & { invalid?: boolean; error?: unknown }
    >;
    expect(bad?.invalid).toBe(true);
    expect(bad?.input).toBe('{"kind": "answer", "message": "cut');
    expect(InvalidToolInputError.isInstance(bad?.error)).toBe(true);
    expect(unknown?.invalid).toBe(true);
    expect(unknown?.toolName).toBe('read');
    expect(unknown?.input).toEqual({ filePath: 'README.md' });
    expect(NoSuchToolError.isInstance(unknown?.error)).toBe(true);

    // AI SDK also appends a tool-error content part per invalid call (nothing executes: no tool has execute).
    const errors = result.content.filter((part) => part.type === 'tool-error');
    expect(errors.map((part) => part.toolCallId)).toEqual(['call_0_0', 'call_0_1']);
    expect((bad!.error as InvalidToolInputError).toolInput).toBe('{"kind": "answer", "message": "cut');

    // The assistant message AI SDK builds for history replaces a non-JSON input with {}: the verbatim string
    // survives only in toolCalls[i].input / error.toolInput, so the runtime must record it from there.
    const assistant = result.response.messages.find((message) => message.role === 'assistant');
    const parts = assistant?.content as Array<{ type: string; toolCallId?: string; input?: unknown }>;
    expect(parts.find((part) => part.toolCallId === 'call_0_0')?.input).toEqual({});
  });

  it('lets experimental_repairToolCall see the verbatim malformed input', async () => {
    const seen: string[] = [];
    const result = await generateText({
      model: model({ steps: [{ toolCalls: [{ name: AGENT_PROTOCOL_TOOL_NAME, arguments: '{"kind":"answer",' }] }] }),
      tools,
      prompt: 'hi',
      experimental_repairToolCall: async ({ toolCall }) => {
        seen.push(toolCall.input);
        return { ...toolCall, input: JSON.stringify({ kind: 'done' }) };
      },
    });
    expect(seen).toEqual(['{"kind":"answer",']);
    expect(result.toolCalls[0]?.input).toEqual({ kind: 'done' });
  });

  it('does not validate tool input against the JSON Schema (jsonSchema() has no validator)', async () => {
    const result = await generateText({
      model: model({ steps: [{ protocol: { kind: 'act', bogus: true } }] }),
      tools,
      prompt: 'hi',
    });
    const call = result.toolCalls[0] as { invalid?: boolean; input: unknown };
    expect(call.invalid).toBeUndefined();
    expect(call.input).toEqual({ kind: 'act', bogus: true });
  });

  it('throws ToolChoiceViolationError when a forced tool choice gets text back', async () => {
    const error = await caught(
      generateText({
        model: model({ steps: [{ text: 'kind: answer' }] }),
        tools,
        toolChoice: { type: 'tool', toolName: AGENT_PROTOCOL_TOOL_NAME },
        prompt: 'hi',
      }),
    );
    expect(ToolChoiceViolationError.isInstance(error)).toBe(true);
    expect((error as ToolChoiceViolationError).content).toEqual([{ type: 'text', text: 'kind: answer' }]);
  });

  it('throws an APICallError for an error step, retryable by status code or explicitly', async () => {
    const script: ModelScript = {
      steps: [
        { error: { message: 'overloaded', statusCode: 529 } },
        { error: { message: 'bad request', statusCode: 400 } },
        { error: { message: 'flaky', retryable: true } },
      ],
    };
    const m = model(script);
    const first = await caught(generateText({ model: m, prompt: 'hi', maxRetries: 0 }));
    expect(APICallError.isInstance(first)).toBe(true);
    expect((first as APICallError).statusCode).toBe(529);
    expect((first as APICallError).isRetryable).toBe(true);
    const second = (await caught(generateText({ model: m, prompt: 'hi', maxRetries: 0 }))) as APICallError;
    expect(second.message).toBe('bad request');
    expect(second.isRetryable).toBe(false);
    const third = (await caught(generateText({ model: m, prompt: 'hi', maxRetries: 0 }))) as APICallError;
    expect(third.isRetryable).toBe(true);
  });

  it('lets the SDK retry consume the next step when no modelCall is given (fail once, then succeed)', async () => {
    const m = model({ steps: [{ error: { message: 'rate limited', statusCode: 429 } }, { protocol: answer }] });
    const result = await generateText({ model: m, tools, prompt: 'hi', maxRetries: 1 });
    expect(result.toolCalls[0]?.input).toEqual(answer);
  });

  it('waits delayMs and rejects at once when aborted', async () => {
    const m = model({ steps: [{ text: 'slow', delayMs: 10_000 }, { text: 'fast' }] });
    const controller = new AbortController();
    const started = Date.now();
    const pending = caught(generateText({ model: m, prompt: 'hi', abortSignal: controller.signal, maxRetries: 0 }));
    setTimeout(() => controller.abort(), 20);
    const error = (await pending) as Error;
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(error.name).toBe('AbortError');
    // The aborted call never answered, so the same step is replayed next.
    const short = model({ steps: [{ text: 'slow', delayMs: 30 }] });
    const result = await generateText({ model: short, prompt: 'hi' });
    expect(result.text).toBe('slow');
  });

  it('rejects immediately for an already aborted signal', async () => {
    const controller = new AbortController();
    controller.abort();
    const error = (await caught(
      generateText({ model: model({ steps: [{ text: 'x' }] }), prompt: 'hi', abortSignal: controller.signal }),
    )) as Error;
    expect(error.name).toBe('AbortError');
  });

  it('selects the step from providerOptions.oar.modelCall and continues counting from there', async () => {
    const m = model({ steps: [{ text: 'zero' }, { text: 'one' }, { text: 'two' }] });
    const resumed = await generateText({ model: m, prompt: 'hi', providerOptions: { oar: { modelCall: 1 } } });
    expect(resumed.text).toBe('one');
    expect((await generateText({ model: m, prompt: 'hi' })).text).toBe('two');
    const again = await generateText({ model: m, prompt: 'hi', providerOptions: { oar: { modelCall: 0 } } });
    expect(again.text).toBe('zero');
  });

  it('fails with script_exhausted naming the script and the step', async () => {
    const m = createScriptedModel({ steps: [{ text: 'only' }] }, { name: 'hello', source: '/x/hello.json' });
    await generateText({ model: m, prompt: 'hi' });
    const error = await caught(generateText({ model: m, prompt: 'hi' }));
    expect(error).toBeInstanceOf(OarRuntimeError);
    const oar = (error as OarRuntimeError).error;
    expect(oar.code).toBe('script_exhausted');
    expect(oar.message).toMatch(/^script_exhausted: model script \/x\/hello\.json has 1 step\(s\) but step index 1/);
    expect(oar.retryable).toBe(false);
    expect(oar.details).toMatchObject({ step: 1, steps: 1 });
  });

  it('replays the agents section for a sub-agent and refuses an unscripted agent', async () => {
    const script: ModelScript = {
      steps: [{ text: 'main' }],
      agents: { reviewer: { steps: [{ text: 'review' }] } },
    };
    const reviewer = model(script, { agent: 'reviewer' });
    expect(reviewer.modelId).toBe('test:reviewer');
    expect((await generateText({ model: reviewer, prompt: 'hi' })).text).toBe('review');
    expect(() => model(script, { agent: 'planner' })).toThrow(
      /no steps for agent "planner".*scripted agents: reviewer/,
    );
    try {
      model(script, { agent: 'planner' });
    } catch (error) {
      expect((error as OarRuntimeError).code).toBe('script_agent_missing');
    }
  });
});

describe('scripted model through streamText', () => {
  it('streams a protocol step as tool-input parts and a tool call', async () => {
    const result = streamText({
      model: model({ steps: [{ protocol: answer, usage: { inputTokens: 3 } }] }),
      tools,
      prompt: 'hi',
    });
    const types: string[] = [];
    let inputText = '';
    for await (const part of result.fullStream) {
      types.push(part.type);
      if (part.type === 'tool-input-delta') inputText += part.delta;
    }
    expect(types).toEqual([
      'start',
      'start-step',
      'tool-input-start',
      'tool-input-delta',
      'tool-input-delta',
      'tool-input-delta',
      'tool-input-end',
      'tool-call',
      'finish-step',
      'finish',
    ]);
    expect(JSON.parse(inputText)).toEqual(answer);
    const calls = await result.toolCalls;
    expect(calls[0]?.input).toEqual(answer);
    expect(await result.finishReason).toBe('tool-calls');
    expect((await result.usage).inputTokens).toBe(3);
  });

  it('streams a text step as several text deltas', async () => {
    const text = 'I will read the README first, then answer.';
    const result = streamText({ model: model({ steps: [{ text }] }), prompt: 'hi' });
    const deltas: string[] = [];
    for await (const delta of result.textStream) deltas.push(delta);
    expect(deltas.length).toBeGreaterThan(1);
    expect(deltas.join('')).toBe(text);
    expect(await result.finishReason).toBe('stop');
  });

  it('streams malformed tool arguments as an invalid tool call followed by a tool-error part', async () => {
    const result = streamText({
      model: model({ steps: [{ toolCalls: [{ name: AGENT_PROTOCOL_TOOL_NAME, arguments: '{"kind":' }] }] }),
      tools,
      prompt: 'hi',
    });
    const parts: Array<{ type: string; invalid?: boolean; input?: unknown }> = [];
    for await (const part of result.fullStream) parts.push(part as (typeof parts)[number]);
    const call = parts.find((part) => part.type === 'tool-call');
    expect(call?.invalid).toBe(true);
    expect(call?.input).toBe('{"kind":');
    expect(parts.some((part) => part.type === 'tool-error')).toBe(true);
  });

  it('surfaces a provider error step as an error part (and rejects the result promises)', async () => {
    const errors: unknown[] = [];
    const result = streamText({
      model: model({ steps: [{ error: { message: 'boom', statusCode: 500 } }] }),
      prompt: 'hi',
      maxRetries: 0,
      onError: ({ error }) => {
        errors.push(error);
      },
    });
    const parts: Array<{ type: string; error?: unknown }> = [];
    for await (const part of result.fullStream) parts.push(part);
    const errorPart = parts.find((part) => part.type === 'error');
    expect(APICallError.isInstance(errorPart?.error)).toBe(true);
    expect(errors).toHaveLength(1);
    await expect(result.text).rejects.toThrow();
  });
});

describe('model script files', () => {
  it('loads a valid file', async () => {
    const path = file('ok.json', JSON.stringify({ steps: [{ protocol: answer }, { text: 'x', delayMs: 5 }] }));
    const script = await loadModelScript(path);
    expect(script.steps).toHaveLength(2);
  });

  it('rejects an invalid file with invalid_model_script and the issues', async () => {
    const path = file(
      'bad.json',
      JSON.stringify({ steps: [{ protocl: answer }, { text: 'x', error: { message: 'y' } }] }),
    );
    const error = (await caught(loadModelScript(path))) as OarRuntimeError;
    expect(error).toBeInstanceOf(OarRuntimeError);
    expect(error.error.code).toBe('invalid_model_script');
    expect(error.error.retryable).toBe(false);
    expect(error.error.message).toContain(path);
    const issues = error.error.details?.issues as Array<{ path: string; message: string }>;
    expect(issues.map((issue) => issue.path)).toEqual(expect.arrayContaining(['/steps/0', '/steps/1/error']));
  });

  it('rejects bad JSON and missing files with invalid_model_script', async () => {
    const bad = (await caught(loadModelScript(file('broken.json', '{"steps": [')))) as OarRuntimeError;
    expect(bad.error.code).toBe('invalid_model_script');
    expect(bad.message).toMatch(/not valid JSON/);
    const missing = (await caught(loadModelScript(join(tmp, 'nope.json')))) as OarRuntimeError;
    expect(missing.error.code).toBe('invalid_model_script');
  });

  it('validates in-memory scripts the same way', () => {
    expect(() => parseModelScript({ steps: [{}] }, 'inline')).toThrow(
      /a step needs one of protocol, text, toolCalls or error/,
    );
  });
});
