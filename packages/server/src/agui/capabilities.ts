import type { AgentCapabilities } from '@ag-ui/core';
import type { ServerDeps } from '../route.js';

/**
 * What the agent behind `POST /v1/agui` supports, as AG-UI 1.0's `AgentCapabilities` (a client's
 * `getCapabilities()`): streaming over SSE, human-in-the-loop through the interrupt protocol (approvals and
 * questions, answered in `RunAgentInput.resume`), delegation to sub-agents (SUBAGENT_* events), state snapshots
 * and JSON Patch deltas of the thread read model. Only what OAR does is declared; reasoning is not streamed, so it
 * is declared unsupported. With a session, the tools and sub-agents are that session's binding; without, the
 * binding new sessions get.
 */
export async function aguiCapabilities(deps: ServerDeps, sessionId?: string): Promise<AgentCapabilities> {
  const binding = deps.runtime.defaultBinding;
  let tools: { name: string; description: string }[] | undefined;
  let agents = binding.agents.map((a) => ({ name: a.name, description: a.description }));
  if (sessionId !== undefined) {
    const inventory = await deps.runtime.getToolInventory({ sessionId });
    tools = inventory.tools.map((t) => ({ name: t.name, description: t.description }));
    agents = inventory.agents.map((a) => ({ name: a.name, description: a.description }));
  }
  return {
    identity: {
      name: binding.mainAgent.name,
      type: 'oar',
      description: binding.mainAgent.description,
      provider: 'OAR — the Open Agent Runtime',
    },
    transport: { streaming: true, websocket: false, httpBinary: false, pushNotifications: false, resumable: false },
    tools: {
      supported: true,
      ...(tools ? { items: tools } : {}),
      parallelCalls: true,
      clientProvided: false,
    },
    output: { structuredOutput: false, supportedMimeTypes: ['text/plain', 'text/markdown'] },
    state: { snapshots: true, deltas: true, memory: false, persistentState: true },
    multiAgent: { supported: agents.length > 0, delegation: agents.length > 0, handoffs: false, subagents: agents },
    reasoning: { supported: false, streaming: false, encrypted: false },
    execution: { maxIterations: binding.limits.maxSteps },
    humanInTheLoop: {
      supported: true,
      approvals: true,
      interventions: true,
      feedback: false,
      interrupts: true,
      approveWithEdits: false,
    },
    custom: {
      oar: {
        threadId:
          'the OAR session id (in a named workspace with its prefix, WORKSPACE:THREAD); POST /v1/agui creates the session in the key’s workspace when it does not exist',
        runId: 'the client turn id: a retried POST with the same runId streams the same turn again',
        resumePayload: { decision: ['approve', 'deny', 'approve_for_session'], reason: 'string', text: 'string' },
        runError:
          'RUN_ERROR.code is an OAR error code; rawEvent.error is the structured {code, message, retryable, details}',
        state: 'STATE_SNAPSHOT / STATE_DELTA carry the thread read model (GET /v1/sessions/{id}/threads/{threadId})',
      },
    },
  };
}
