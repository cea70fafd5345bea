import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AGENT_PROTOCOL_TOOL_NAME, carrierParametersJsonSchema, ProtocolOutputSchema } from '@oar/protocol';
import { generateText, jsonSchema, streamText, tool } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveModel } from '../../src/models/resolve.js';

/**
 * A fake OpenAI-compatible server speaking the real /chat/completions wire format (JSON and SSE), so the
 * openai-compatible path is tested through the real provider package, HTTP and all, without a network.
 */
const declaration = {
  kind: 'act',
  message: 'Reading.',
  calls: [{ id: 'r1', type: 'tool', name: 'read', args: { filePath: 'README.md' } }],
};
const argumentsJson = JSON.stringify(declaration);
const usage = { prompt_tokens: 321, completion_tokens: 45, total_tokens: 366 };

interface Seen {
  body: Record<string, unknown>;
  headers: IncomingHttpHeaders;
  url: string | undefined;
}
const seen: Seen[] = [];

function completion() {
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1_700_000_000,
    model: 'fake-model',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: 'call_fake_1',
              type: 'function',
              function: { name: AGENT_PROTOCOL_TOOL_NAME, arguments: argumentsJson },
            },
          ],
        },
        finish_reason: 'tool_calls',
      },
    ],
    usage,
  };
}

function chunks(): unknown[] {
  const base = { id: 'chatcmpl-2', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'fake-model' };
  const third = Math.ceil(argumentsJson.length / 3);
  const pieces = [0, 1, 2].map((i) => argumentsJson.slice(i * third, (i + 1) * third));
  return [
    {
      ...base,
      choices: [
        {
          index: 0,
          delta: {
            role: 'assistant',
            content: null,
            tool_calls: [
              {
                index: 0,
                id: 'call_fake_2',
                type: 'function',
                function: { name: AGENT_PROTOCOL_TOOL_NAME, arguments: '' },
              },
            ],
          },
          finish_reason: null,
        },
      ],
    },
    ...pieces.map((piece) => ({
      ...base,
      choices: [
        { index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: piece } }] }, finish_reason: null },
      ],
    })),
    { ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
    // include_usage: the last chunk carries usage and no choices.
    { ...base, choices: [], usage },
  ];
}

let server: Server;
let baseURL: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (chunk) => {
      raw += chunk;
    });
    req.on('end', () => {
      const body = JSON.parse(raw) as Record<string, unknown>;
      seen.push({ body, headers: req.headers, url: req.url });
      if (req.url !== '/v1/chat/completions') {
        res.writeHead(404).end();
        return;
      }
      if (body.stream === true) {
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        for (const chunk of chunks()) res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        res.end('data: [DONE]\n\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(completion()));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const tools = {
  [AGENT_PROTOCOL_TOOL_NAME]: tool({
    description: 'Declare what the runtime should do next.',
    inputSchema: jsonSchema<Record<string, unknown>>(carrierParametersJsonSchema()),
  }),
};

async function fakeModel() {
  return resolveModel('openai-compatible:fake', {
    cwd: process.cwd(),
    env: { FAKE_KEY: 'fake-secret' },
    models: {
      fake: {
        provider: 'openai-compatible',
        model: 'fake-model',
        baseURL,
        apiKeyEnv: 'FAKE_KEY',
        headers: { 'x-oar-test': 'yes' },
      },
    },
  });
}

describe('openai-compatible through a fake /chat/completions server', () => {
  it('returns the AgentProtocolOutput tool call and usage (JSON response)', async () => {
    const { model } = await fakeModel();
    seen.length = 0;
    const result = await generateText({
      model,
      tools,
      toolChoice: { type: 'tool', toolName: AGENT_PROTOCOL_TOOL_NAME },
      prompt: 'Read the README.',
    });
    expect(result.toolCalls).toHaveLength(1);
    expect(result.toolCalls[0]?.toolName).toBe(AGENT_PROTOCOL_TOOL_NAME);
    expect(result.toolCalls[0]?.toolCallId).toBe('call_fake_1');
    expect(ProtocolOutputSchema.parse(result.toolCalls[0]?.input)).toEqual(declaration);
    expect(result.finishReason).toBe('tool-calls');
    expect(result.usage.inputTokens).toBe(321);
    expect(result.usage.outputTokens).toBe(45);

    // What went over the wire: the key from the env var, the extra header, the tool and the forced choice.
    const request = seen[0]!;
    expect(request.headers.authorization).toBe('Bearer fake-secret');
    expect(request.headers['x-oar-test']).toBe('yes');
    expect(request.body.model).toBe('fake-model');
    expect(request.body.tool_choice).toEqual({ type: 'function', function: { name: AGENT_PROTOCOL_TOOL_NAME } });
    const sentTools = request.body.tools as Array<{ type: string; function: { name: string; parameters: unknown } }>;
    expect(sentTools[0]?.function.name).toBe(AGENT_PROTOCOL_TOOL_NAME);
    expect(sentTools[0]?.function.parameters).toMatchObject({ type: 'object', required: ['kind'] });
  });

  it('assembles the streamed tool call and reads usage from the final SSE chunk', async () => {
    const { model } = await fakeModel();
    seen.length = 0;
    const result = streamText({ model, tools, prompt: 'Read the README.' });
    const deltas: string[] = [];
    for await (const part of result.fullStream) if (part.type === 'tool-input-delta') deltas.push(part.delta);
    expect(deltas.join('')).toBe(argumentsJson);
    const calls = await result.toolCalls;
    expect(calls[0]?.toolCallId).toBe('call_fake_2');
    expect(calls[0]?.input).toEqual(declaration);
    expect(await result.finishReason).toBe('tool-calls');
    const total = await result.usage;
    expect(total.inputTokens).toBe(321);
    expect(total.outputTokens).toBe(45);
    expect(seen[0]?.body.stream_options).toEqual({ include_usage: true });
  });
});
