import { langbotModelResources } from './llm-shapes.js';
import { langbotAvailableApis } from './proxy-actions.js';

/**
 * OAR's run context (AgentRunContext of OAR's wire) in the shape LangBot's SDK validates (its AgentRunContext).
 * The two come from the same protocol document, so most of it is the same; what differs: LangBot's input is a
 * closed model (no `message_chain`, attachments are its InputAttachment), its trigger sources name the host adapter
 * `host_adapter`, its raw event ref is `{ref_id}`, its models/tools/knowledge carry `operations`, and it has no
 * `files`/`bootstrap` (the bootstrap messages go under `adapter.extra` so nothing OAR gave is lost). LangBot's SDK
 * refuses a call locally unless the context says it may be made, so the models list `count_tokens` beside their
 * granted operations and `context.available_apis` carries LangBot's flags (`prompt_get`, `run_get`, `steering_pull`
 * with the manifest's `steering` capability): the flags say exactly what the LangBot mapping answers for this run.
 */
export function langbotRunContext(
  context: Record<string, unknown>,
  /** The runner's manifest as listed (manifest.ts): its `steering`, and the tool and knowledge operations it grants. */
  manifest: { capabilities?: Record<string, unknown>; permissions?: Record<string, unknown> } = {},
): Record<string, unknown> {
  const permissions = record(manifest.permissions);
  const input = record(context.input);
  const event = record(context.event);
  const trigger = record(context.trigger);
  const resources = record(context.resources);
  const rawRef = record(event.raw_ref);
  // LangBot runners name a model by its uuid (`llm_model_uuid`): a stable one per configured model id.
  const models = list(resources.models).flatMap((m) =>
    typeof m.model_id === 'string'
      ? langbotModelResources([m.model_id], strings(m.operations)).map((model) => ({
          ...model,
          model_type: 'llm',
          provider: m.provider ?? null,
        }))
      : [],
  );
  const tools = list(resources.tools).map((t) => ({
    tool_name: t.tool_name,
    description: t.description ?? null,
    parameters: t.parameters ?? null,
    // OAR lists only the tools the run may use; their operations are the manifest's (the run's access takes them as
    // they are), so LangBot's SDK refuses locally exactly what the host would.
    operations: strings(permissions.tools),
  }));
  const knowledgeBases = list(resources.knowledge_bases).map((kb) => ({
    kb_id: kb.kb_id,
    kb_name: kb.name ?? null,
    operations: strings(permissions.knowledge_bases),
  }));
  const storage = record(resources.storage);
  const oarContext = record(context.context);
  const bootstrap = context.bootstrap;
  const adapter = record(context.adapter);
  return {
    run_id: context.run_id,
    trigger: {
      type: trigger.type,
      source: trigger.source === 'pipeline_adapter' ? 'host_adapter' : trigger.source,
      timestamp: trigger.timestamp ?? null,
    },
    event: {
      ...event,
      raw_ref: typeof rawRef.artifact_id === 'string' ? { ref_id: rawRef.artifact_id } : null,
    },
    conversation: context.conversation ?? null,
    actor: context.actor ?? null,
    subject: context.subject ?? null,
    input: {
      text: input.text ?? null,
      contents: Array.isArray(input.contents) ? input.contents : [],
      attachments: list(input.attachments).map((a) => ({
        id: a.artifact_id,
        type: 'file',
        name: a.name ?? null,
        mime_type: a.mime_type ?? null,
        size: a.size ?? null,
        source: 'artifact',
      })),
    },
    delivery: context.delivery,
    resources: {
      models,
      tools,
      knowledge_bases: knowledgeBases,
      storage: {
        plugin_storage: storage.plugin_storage === true,
        workspace_storage: storage.workspace_storage === true,
      },
      platform_capabilities: record(resources.platform_capabilities),
    },
    context: {
      ...oarContext,
      available_apis: langbotAvailableApis(
        record(oarContext.available_apis),
        record(manifest.capabilities).steering === true,
      ),
    },
    state: context.state,
    runtime: context.runtime,
    config: record(context.config),
    adapter: { extra: { ...adapter, ...(bootstrap ? { bootstrap } : {}), host: 'oar' } },
    metadata: record(context.metadata),
  };
}

function record(value: unknown): Record<string, unknown> {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

function list(value: unknown): Record<string, unknown>[] {
  return Array.isArray(value)
    ? value.filter((v) => v && typeof v === 'object').map((v) => v as Record<string, unknown>)
    : [];
}
