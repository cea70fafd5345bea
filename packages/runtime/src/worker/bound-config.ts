import { existsSync } from 'node:fs';
import type { AgentConfig, SessionBinding } from '../config/binding.js';
import { OarRuntimeError } from '../kernel/errors.js';
import type { ModelHandle } from '../models/model-call.js';
import { bindingRedactor } from '../redaction/sources.js';
import type { BoundConfig } from '../scheduler/engine.js';
import { cliTool, loadCliTool } from '../tools/cli/cli-tool.js';
import { execTool } from '../tools/exec/exec-tool.js';
import { PROCESS_TOOL, processTool } from '../tools/exec/process-tool.js';
import type { McpPool } from '../tools/mcp/pool.js';
import { loadToolModule } from '../tools/modules.js';
import { ToolRegistry } from '../tools/registry.js';

/** What this process can offer a binding: the tools registered in code and a way to reach models. */
export interface Host {
  tools: ToolRegistry;
  /** The store's SQLite file, which `exec` hides from commands (none for PostgreSQL). */
  storeFile?: string;
  /** The model of an agent under a binding (its spec is `agent.model ?? binding.model`). */
  model(agent: AgentConfig, binding: SessionBinding): ModelHandle | Promise<ModelHandle>;
  /** The MCP servers this process reaches (docs/mcp.md); without it a binding naming servers is unavailable here. */
  mcp?: McpPool;
}

/**
 * Make a binding runnable here: its tools (code-registered first, then its tool modules) and its models. A tool
 * the binding names that this process cannot provide is an honest `binding_unavailable`, never a silent omission.
 */
export async function bindConfig(binding: SessionBinding, bindingHash: string, host: Host): Promise<BoundConfig> {
  if (!existsSync(binding.workspaceRoot)) {
    throw new OarRuntimeError('workspace_unavailable', `workspace ${binding.workspaceRoot} does not exist`, {
      details: { workspace: binding.workspaceRoot },
    });
  }
  const fromModules = new Map<string, Awaited<ReturnType<typeof loadToolModule>>[number]>();
  for (const spec of binding.toolModules)
    for (const tool of await loadToolModule(spec)) fromModules.set(tool.name, tool);
  // The business CLI's tool: its manifest asked once per bound config (a CLI that cannot answer is unavailable).
  if (binding.cli) fromModules.set(binding.cli.name, cliTool(await loadCliTool(binding.cli)));
  // The command tools: `exec` knows whether the sandbox can start here (an unsandboxed call is asked by default).
  if (binding.exec) {
    const exec = await execTool({
      config: binding.exec,
      ...(host.storeFile ? { storeFile: host.storeFile } : {}),
      maxOutputBytes: binding.limits.maxArtifactBytes,
    });
    fromModules.set(exec.name, exec);
    fromModules.set(PROCESS_TOOL, processTool());
  }
  const tools = new ToolRegistry();
  for (const name of binding.tools) {
    const tool = host.tools.get(name) ?? fromModules.get(name);
    if (!tool) {
      throw new OarRuntimeError(
        'binding_unavailable',
        `the session is bound to tool "${name}", which this process does not provide (register it, or list its module in the binding)`,
        { retryable: true, details: { tool: name, toolModules: binding.toolModules } },
      );
    }
    tools.register(tool);
  }
  // MCP servers' tools join as `server.tool`, kept in step with their `list_changed` notifications.
  if (binding.mcpServers?.length) {
    if (!host.mcp) {
      throw new OarRuntimeError(
        'binding_unavailable',
        'the session is bound to MCP servers, which this process does not reach',
        {
          details: { servers: binding.mcpServers.map((server) => server.name) },
        },
      );
    }
    await host.mcp.bind(binding.mcpServers, tools, binding.workspaceRoot);
  }
  // A pipeline runs bound tools only: one naming a tool the session does not have could never run.
  for (const pipeline of binding.pipelines ?? []) {
    for (const step of pipeline.steps) {
      if (tools.get(step.tool)) continue;
      throw new OarRuntimeError(
        'binding_unavailable',
        `pipeline "${pipeline.name}" step "${step.id}" uses tool "${step.tool}", which the session is not bound to`,
        { details: { pipeline: pipeline.name, step: step.id, tool: step.tool, tools: binding.tools } },
      );
    }
  }
  const models = new Map<string, Promise<ModelHandle>>();
  // The secrets are read once per binding in this process (a `.env` created later is matched from the next start).
  const redactor = await bindingRedactor(binding);
  return {
    redactor,
    binding,
    bindingHash,
    workspaceRoot: binding.workspaceRoot,
    tools,
    agents: binding.agents,
    mainAgent: binding.mainAgent,
    permissions: binding.permissions,
    limits: binding.limits,
    onProtocolFailure: binding.onProtocolFailure,
    model(agent) {
      // By agent and spec: the candidates of a chain are resolved one spec at a time under the agent's name.
      const key = `${agent.name}\u0000${JSON.stringify(agent.model ?? null)}`;
      let handle = models.get(key);
      if (!handle) {
        handle = Promise.resolve().then(() => host.model(agent, binding));
        // A model that cannot be reached now (a key not set yet) is tried again next time, not remembered.
        handle.catch(() => models.delete(key));
        models.set(key, handle);
      }
      return handle;
    },
  };
}
