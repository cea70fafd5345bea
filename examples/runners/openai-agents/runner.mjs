// An adapter around a real agent library, the OpenAI Agents SDK, as an OAR AgentRunner (docs/runners.md).
// - The library's model is a custom `Model` whose every call goes back through the host (`models.invoke`), so OAR
//   records it and the session's bound model answers it; its tools are the run's granted tools (`tools.call`).
// - The library keeps its own session: its history items are host-owned state (`runner` scope, under the session
//   id), and the pointer `external.session_id` is conversation state (`state.updated`). Turn 2 continues turn 1's
//   session from there, with no host bootstrap.
import { randomUUID } from 'node:crypto';
import { AgentAPIError, defineRunner } from '@oar/runner-sdk';
import { Agent, Runner, setTracingDisabled, tool, Usage } from '@openai/agents';

setTracingDisabled(true);

const manifest = {
  id: 'plugin:oar/openai-agents/default',
  name: 'default',
  label: { en_US: 'OpenAI Agents SDK' },
  description: { en_US: 'The OpenAI Agents SDK loop on the host models and tools, with its own session.' },
  capabilities: { tool_calling: true, stateful_session: true, self_managed_context: true },
  permissions: { models: ['invoke'], tools: ['call'] },
  context: { ownership: 'self_managed', bootstrap: 'none' },
  config_schema: [
    { name: 'model', type: 'string' },
    { name: 'instructions', type: 'text', default: 'You are a helpful agent. Use the tools when they help.' },
    { name: 'max_turns', type: 'integer', default: 8 },
  ],
};

const text = (content) =>
  typeof content === 'string'
    ? content
    : (content ?? []).map((part) => part.text ?? (typeof part.output === 'string' ? part.output : '')).join('');

/** The library's input items as OAR chat messages (assistant tool calls folded into one assistant message). */
function toMessages(system, items) {
  const messages = system ? [{ role: 'system', content: system }] : [];
  for (const item of items) {
    if (item.type === 'function_call') {
      const last = messages.at(-1);
      const call = { id: item.callId, name: item.name, arguments: item.arguments };
      if (last?.role === 'assistant') last.tool_calls = [...(last.tool_calls ?? []), call];
      else messages.push({ role: 'assistant', content: '', tool_calls: [call] });
    } else if (item.type === 'function_call_result') {
      const output = typeof item.output === 'string' ? item.output : (item.output?.text ?? JSON.stringify(item.output));
      messages.push({ role: 'tool', tool_call_id: item.callId, name: item.name, content: output });
    } else if (item.role === 'user' || item.role === 'assistant' || item.role === 'system') {
      messages.push({ role: item.role, content: text(item.content) });
    }
  }
  return messages;
}

/** A Model of the library whose calls are the host's models.invoke. */
class ProxyModel {
  constructor(api, modelId) {
    this.api = api;
    this.modelId = modelId;
  }

  async getResponse(request) {
    const items = typeof request.input === 'string' ? [{ role: 'user', content: request.input }] : request.input;
    const tools = (request.tools ?? [])
      .filter((t) => t.type === 'function')
      .map((t) => ({ name: t.name, description: t.description, parameters: t.parameters }));
    const { message, usage } = await this.api.models.invoke(
      this.modelId,
      toMessages(request.systemInstructions, items),
      tools,
    );
    const output = [];
    if (message.content) {
      output.push({
        type: 'message',
        role: 'assistant',
        status: 'completed',
        content: [{ type: 'output_text', text: message.content }],
      });
    }
    for (const call of message.tool_calls ?? []) {
      output.push({
        type: 'function_call',
        callId: call.id,
        name: call.name,
        arguments: call.arguments,
        status: 'completed',
      });
    }
    return {
      usage: new Usage({
        requests: 1,
        inputTokens: usage.input_tokens,
        outputTokens: usage.output_tokens,
        totalTokens: usage.input_tokens + usage.output_tokens,
      }),
      output,
      responseId: randomUUID(),
    };
  }

  // biome-ignore lint/correctness/useYield: this adapter does not stream
  async *getStreamedResponse() {
    throw new Error('streaming is not supported by this adapter');
  }
}

async function run(ctx, { api, emit }) {
  const modelId = ctx.config.model ?? ctx.resources.models[0]?.model_id;
  if (!modelId) throw new Error('no model resource was granted to this run');
  const tools = ctx.resources.tools.map((t) =>
    tool({
      name: t.tool_name,
      description: t.description ?? '',
      parameters: t.parameters ?? { type: 'object', properties: {}, additionalProperties: true },
      strict: false,
      execute: async (input) => {
        try {
          const args = typeof input === 'string' ? JSON.parse(input || '{}') : (input ?? {});
          return (await api.tools.call(t.tool_name, args)).content;
        } catch (error) {
          if (error instanceof AgentAPIError) return `error ${error.code}: ${error.message}`;
          throw error;
        }
      },
    }),
  );
  // The library's session: continued from the host-owned state when this conversation has one.
  const sessionId = ctx.state.conversation['external.session_id'] ?? `oa_${randomUUID()}`;
  const history = (await api.state.get('runner', `session.${sessionId}`)).value ?? [];
  const agent = new Agent({
    name: 'oar-openai-agents',
    instructions: ctx.config.instructions,
    model: new ProxyModel(api, modelId),
    tools,
  });
  const result = await new Runner({ tracingDisabled: true }).run(
    agent,
    [...history, { role: 'user', content: ctx.input.text ?? '' }],
    { maxTurns: ctx.config.max_turns },
  );
  await api.state.set('runner', `session.${sessionId}`, result.history);
  await emit('state.updated', { scope: 'conversation', key: 'external.session_id', value: sessionId });
  await emit('message.completed', { message: { role: 'assistant', content: String(result.finalOutput ?? '') } });
}

export const runner = defineRunner({ runners: [{ manifest, run }] });

if (import.meta.url === `file://${process.argv[1]}`) runner.serveStdio();
