import type { AgentConfig } from './binding.js';

/** An agent of a configuration by name: the main agent or one of the others. */
export function agentByName(
  config: { readonly mainAgent: AgentConfig; readonly agents: readonly AgentConfig[] },
  name: string,
): AgentConfig | undefined {
  if (name === config.mainAgent.name) return config.mainAgent;
  return config.agents.find((agent) => agent.name === name);
}
