// The local-agent runner: a tool loop on the host's models.stream and tools.call (AgentRunner Protocol v1).
// It manages its own context: a system prompt, the conversation pulled with history.page, the current input.
import { AgentAPIError, defineRunner } from '@oar/runner-sdk';

const SYSTEM = 'You are a helpful agent. Use the tools when they help; answer plainly when you are done.';

const manifest = {
  id: 'plugin:oar/local-agent/default',
  name: 'default',
  label: { en_US: 'Local agent' },
  description: { en_US: 'A tool loop on the host models and tools; history pulled on demand.' },
  capabilities: { streaming: true, tool_calling: true, interrupt: true, self_managed_context: true },
  permissions: {
    models: ['invoke', 'stream'],
    tools: ['detail', 'call'],
    history: ['page'],
    artifacts: ['metadata', 'read'],
  },
  context: { ownership: 'self_managed', bootstrap: 'current_event' },
  config_schema: [
    { name: 'model', type: 'string', description: { en_US: 'Model resource id (default: the session model)' } },
    { name: 'system_prompt', type: 'text' },
    { name: 'max_steps', type: 'integer', default: 8 },
    { name: 'history_messages', type: 'integer', default: 20 },
  ],
};

async function run(ctx, { api, emit }) {
  // No model in the binding config: the first model resource, which is the session's bound model.
  const model = ctx.config.model ?? ctx.resources.models[0]?.model_id;
  if (!model) throw new Error('no model resource was granted to this run');
  const tools = ctx.resources.tools.map((t) => ({
    name: t.tool_name,
    description: t.description ?? '',
    parameters: t.parameters ?? { type: 'object' },
  }));
  const history =
    ctx.context.has_history_before && ctx.context.available_apis.history_page
      ? (await api.history.page({ limit: ctx.config.history_messages })).items.map(({ role, content }) => ({
          role,
          content,
        }))
      : [];
  const messages = [
    { role: 'system', content: ctx.config.system_prompt ?? SYSTEM },
    ...history,
    { role: 'user', content: ctx.input.text ?? '' },
  ];
  for (let step = 0; step < ctx.config.max_steps; step++) {
    const onDelta = (content) => void emit('message.delta', { chunk: { role: 'assistant', content } });
    const { message } = await api.models.stream(model, messages, onDelta, tools);
    messages.push(message);
    if (!message.tool_calls?.length) {
      await emit('message.completed', { message: { role: 'assistant', content: message.content } });
      return;
    }
    for (const call of message.tool_calls) {
      await emit('tool.call.started', { tool_call_id: call.id, tool_name: call.name });
      let content;
      try {
        const result = await api.tools.call(call.name, JSON.parse(call.arguments || '{}'));
        content = result.content;
        await emit('tool.call.completed', { tool_call_id: result.tool_call_id, tool_name: call.name, ok: result.ok });
      } catch (error) {
        if (!(error instanceof AgentAPIError)) throw error;
        content = `error ${error.code}: ${error.message}`;
        await emit('tool.call.completed', { tool_call_id: call.id, tool_name: call.name, ok: false });
      }
      messages.push({ role: 'tool', tool_call_id: call.id, name: call.name, content });
    }
  }
  throw new Error(`no answer within ${ctx.config.max_steps} model steps`);
}

export const runner = defineRunner({ runners: [{ manifest, run }] });

// Started by the host as a process: serve it on stdin/stdout. Imported (an in-process host, a test): do nothing.
if (import.meta.url === `file://${process.argv[1]}`) runner.serveStdio();
