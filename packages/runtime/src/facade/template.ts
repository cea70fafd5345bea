import {
  type AgentConfig,
  AgentSchema,
  bindingWith,
  DEFAULT_LIMITS,
  SecretsConfigSchema,
  type SessionBinding,
} from '../config/binding.js';
import { BudgetsSchema } from '../config/budgets.js';
import { CliToolConfigSchema } from '../config/cli.js';
import { ExecConfigSchema } from '../config/exec.js';
import { HooksSchema } from '../config/hooks.js';
import { McpServersSchema } from '../config/mcp.js';
import { absoluteModelChoice } from '../config/models.js';
import { PermissionsConfigSchema } from '../config/permissions.js';
import { PipelinesSchema, ServicesSchema } from '../config/pipelines.js';
import { EXEC_TOOL } from '../tools/exec/exec-tool.js';
import { PROCESS_TOOL } from '../tools/exec/process-tool.js';
import type { ToolRegistry } from '../tools/registry.js';
import type { RuntimeOptions } from './options.js';

/** The binding new sessions get: the runtime's options, parsed and made to mean the same from any directory. */
export function templateBinding(options: RuntimeOptions, tools: ToolRegistry): SessionBinding {
  const cli = options.cli ? CliToolConfigSchema.parse(options.cli) : undefined;
  const exec = options.exec ? ExecConfigSchema.parse(options.exec) : undefined;
  return bindingWith(
    {
      mainAgent: withAbsoluteModel(
        AgentSchema.parse({ name: 'main', description: 'The main agent', ...options.mainAgent }),
      ),
      agents: (options.agents ?? []).map((agent) => withAbsoluteModel(AgentSchema.parse(agent))),
      // A binding must mean the same from any directory: a relative script path is made absolute here.
      ...(options.defaultModel ? { model: absoluteModelChoice(options.defaultModel, process.cwd()) } : {}),
      models: options.models ?? {},
      ...(options.toolWorkerModel
        ? { toolWorkerModel: absoluteModelChoice(options.toolWorkerModel, process.cwd()) }
        : {}),
      workspaceRoot: options.workspaceRoot,
      // The business CLI's tool is always offered with it.
      tools: [
        ...new Set([
          ...(options.bindTools ?? tools.list().map((tool) => tool.name)),
          ...(cli ? [cli.name] : []),
          ...(exec ? [EXEC_TOOL, PROCESS_TOOL] : []),
        ]),
      ],
      toolModules: options.toolModules ?? [],
      permissions: PermissionsConfigSchema.parse(options.permissions ?? {}),
      limits: { ...DEFAULT_LIMITS, ...options.limits },
      queuePolicy: options.queuePolicy ?? 'queue',
      onProtocolFailure: options.onProtocolFailure ?? 'fail',
      // Recorded only when some are named, so a binding without any keeps the hash it had before the field.
      ...(options.secrets?.env?.length
        ? { secrets: SecretsConfigSchema.parse({ env: [...new Set(options.secrets.env)].sort() }) }
        : {}),
      // Likewise recorded only when there are some.
      ...(options.pipelines?.length ? { pipelines: PipelinesSchema.parse(options.pipelines) } : {}),
      ...(options.services?.length ? { services: ServicesSchema.parse(options.services) } : {}),
      ...(cli ? { cli } : {}),
      ...(exec ? { exec } : {}),
      // Recorded only when there are some, like pipelines; an own `undefined` otherwise (left out of the record
      // and the hash), so `oar session update --from-config` with a file that has none clears a session's.
      hooks: options.hooks?.length ? HooksSchema.parse(options.hooks) : undefined,
      mcpServers: options.mcpServers?.length ? McpServersSchema.parse(options.mcpServers) : undefined,
      ...(options.budgets && Object.keys(options.budgets).length > 0
        ? { budgets: BudgetsSchema.parse(options.budgets) }
        : {}),
    },
    undefined,
  );
}

function withAbsoluteModel(agent: AgentConfig): AgentConfig {
  return agent.model ? { ...agent, model: absoluteModelChoice(agent.model, process.cwd()) } : agent;
}
