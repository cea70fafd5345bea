import {
  AgentRunnerCapabilitiesSchema,
  AgentRunnerContextPolicySchema,
  AgentRunnerPermissionsSchema,
  ARTIFACT_OPS,
  EVENT_OPS,
  FILE_KINDS,
  HISTORY_OPS,
  KNOWLEDGE_OPS,
  MODEL_OPS,
  STORAGE_AREAS,
  TOOL_OPS,
} from '@oar/runner-sdk';
import { z } from 'zod';

/**
 * A LangBot plugin's runners as OAR manifests. LangBot lists runners from the plugin container
 * (`get_plugin_container`): each component of kind AgentRunner, its id `plugin:{author}/{name}/{runner}`, and its
 * spec's capabilities, permissions and config form. Read liberally: what OAR does not understand (a capability such
 * as `interactions`, a permission such as `models: count_tokens`, a missing `context` policy, a form field type of
 * LangBot's UI) is a note shown by `oar runners list`, never a rejection; the mapped manifest keeps only what both
 * sides understand, which is all a run is then granted. OAR's own manifest schema stays strict for its own wire.
 */

const I18n = z.record(z.string(), z.unknown());
const Metadata = z.looseObject({
  name: z.string(),
  author: z.string().optional(),
  label: I18n.nullable().optional(),
  description: I18n.nullable().optional(),
});
/** A component container: its ComponentManifest (`owner`, `rel_path`, and the YAML itself under `manifest`). */
const ComponentContainer = z.looseObject({
  manifest: z.looseObject({
    manifest: z.looseObject({
      kind: z.string(),
      metadata: Metadata,
      spec: z.record(z.string(), z.unknown()).nullable().optional(),
    }),
  }),
});

/** The container `get_plugin_container` answers (only the fields OAR reads). */
export const PluginContainerSchema = z.looseObject({
  manifest: z.looseObject({
    manifest: z.looseObject({ metadata: Metadata.extend({ author: z.string() }) }),
  }),
  components: z.array(z.unknown()).default([]),
});
export type PluginContainer = z.infer<typeof PluginContainerSchema>;

/** A note about a runner's manifest: what OAR read differently from LangBot (shown, never a skip). */
export interface ManifestNote {
  runner?: string;
  pointer: string;
  reason: string;
}

export const AGENT_RUNNER_KIND = 'AgentRunner';
/**
 * The most notes one plugin's listing gives, each cut to a readable length: what the plugin declares is its own
 * (a container of ten thousand unknown capabilities, or one named with a megabyte) and lands in `oar runners list`.
 */
export const MAX_NOTES = 50;
const MAX_NOTE_CHARS = 300;

const KNOWN_PERMISSIONS: Record<string, readonly string[]> = {
  models: MODEL_OPS,
  tools: TOOL_OPS,
  knowledge_bases: KNOWLEDGE_OPS,
  history: HISTORY_OPS,
  events: EVENT_OPS,
  artifacts: ARTIFACT_OPS,
  storage: STORAGE_AREAS,
  files: FILE_KINDS,
};
/**
 * The capabilities OAR grants: the spec's, and `steering` (LangBot's name, which OAR's steering.pull reads from the
 * manifest: agent-runners/steering.ts) — kept, so a LangBot runner that declares it may pull steered input.
 */
const KNOWN_CAPABILITIES = [...Object.keys(AgentRunnerCapabilitiesSchema.shape), 'steering'];
const FORM_TYPES = ['string', 'text', 'integer', 'number', 'boolean', 'select', 'array', 'object'];
/** LangBot's form field types that are names of OAR's under another spelling or a UI widget over one. */
const FORM_TYPE_ALIASES: Record<string, string> = { int: 'integer', float: 'number', bool: 'boolean' };

/** Each AgentRunner component of the container as a raw OAR manifest (checked by discovery), with notes. */
export function runnersOfContainer(container: PluginContainer): { runners: unknown[]; notes: ManifestNote[] } {
  const { author, name: plugin } = container.manifest.manifest.metadata;
  const runners: unknown[] = [];
  const notes: ManifestNote[] = [];
  container.components.forEach((raw, index) => {
    const component = ComponentContainer.safeParse(raw);
    if (!component.success) {
      notes.push({ pointer: `/components/${index}`, reason: 'a component the container does not describe' });
      return;
    }
    const { kind, metadata, spec } = component.data.manifest.manifest;
    if (kind !== AGENT_RUNNER_KIND) return;
    const id = `plugin:${author}/${plugin}/${metadata.name}`;
    const note = (pointer: string, reason: string) =>
      notes.push({ runner: id, pointer: printable(pointer), reason: printable(reason) });
    const s = spec ?? {};
    runners.push({
      id,
      name: metadata.name,
      label: strings(metadata.label) ?? { en_US: metadata.name },
      ...(strings(metadata.description) ? { description: strings(metadata.description) } : {}),
      capabilities: capabilities(s.capabilities, note),
      permissions: permissions(s.permissions, note),
      context: context(s.context, note),
      config_schema: configSchema(s.config, note),
      metadata: { plugin_author: author, plugin_name: plugin, runner_name: metadata.name, wire: 'langbot' },
    });
  });
  if (notes.length <= MAX_NOTES) return { runners, notes };
  const left = notes.length - MAX_NOTES + 1;
  return {
    runners,
    notes: [...notes.slice(0, MAX_NOTES - 1), { pointer: '', reason: `${left} more notes about this plugin left out` }],
  };
}

/** A note's text as a terminal shows it safely: control characters (an escape sequence the plugin wrote) as "?". */
function printable(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is replaced
  return text.slice(0, MAX_NOTE_CHARS).replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
}

/** An i18n object's string values (LangBot's I18nObject may carry other keys). */
function strings(value: Record<string, unknown> | null | undefined): Record<string, string> | undefined {
  if (!value) return undefined;
  const out = Object.fromEntries(Object.entries(value).filter(([, v]) => typeof v === 'string')) as Record<
    string,
    string
  >;
  return Object.keys(out).length > 0 ? out : undefined;
}

type Note = (pointer: string, reason: string) => void;

function record(value: unknown): Record<string, unknown> {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

function capabilities(value: unknown, note: Note): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  for (const [key, on] of Object.entries(record(value))) {
    if (!KNOWN_CAPABILITIES.includes(key)) {
      if (on === true) note(`/capabilities/${key}`, `capability "${key}" is not one OAR grants; ignored`);
      continue;
    }
    if (typeof on !== 'boolean') {
      note(`/capabilities/${key}`, `capability "${key}" is not a boolean; ignored`);
      continue;
    }
    out[key] = on;
  }
  // LangBot's host keeps the state.updated of every runner (its orchestrator's state store): there, every runner
  // may keep state, which is what OAR's stateful_session grants. The rest are the spec's defaults, as LangBot assumes.
  if (!('stateful_session' in out)) out.stateful_session = true;
  return AgentRunnerCapabilitiesSchema.parse(out) as Record<string, boolean>;
}

function permissions(value: unknown, note: Note): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [key, ops] of Object.entries(record(value))) {
    const known = KNOWN_PERMISSIONS[key];
    if (!known) {
      note(`/permissions/${key}`, `permission "${key}" is not one OAR grants; ignored`);
      continue;
    }
    if (!Array.isArray(ops)) {
      note(`/permissions/${key}`, `permission "${key}" is not a list; ignored`);
      continue;
    }
    out[key] = [];
    for (const op of ops) {
      if (typeof op === 'string' && known.includes(op)) out[key].push(op);
      else if (key === 'models' && op === 'count_tokens') {
        // OAR counts tokens for any run that may call its models (tokens.count): no permission of its own.
        note(
          '/permissions/models',
          '"count_tokens" is no permission on OAR: a run granted models invoke or stream may count tokens (OAR\'s own estimate)',
        );
      } else note(`/permissions/${key}`, `"${String(op)}" is not an operation OAR grants under ${key}; ignored`);
    }
  }
  return AgentRunnerPermissionsSchema.parse(out) as Record<string, string[]>;
}

function context(value: unknown, note: Note): Record<string, unknown> {
  if (value === undefined || value === null) {
    note('/context', 'no context policy (LangBot has none): the default, self_managed with the current event');
    return AgentRunnerContextPolicySchema.parse({});
  }
  const parsed = AgentRunnerContextPolicySchema.safeParse(value);
  if (parsed.success) return parsed.data;
  note('/context', `the context policy is not OAR's (${parsed.error.issues[0]?.message}): the default instead`);
  return AgentRunnerContextPolicySchema.parse({});
}

function configSchema(value: unknown, note: Note): Record<string, unknown>[] {
  if (!Array.isArray(value)) return [];
  const out: Record<string, unknown>[] = [];
  value.forEach((raw, index) => {
    const item = record(raw);
    if (typeof item.name !== 'string' || !/^[A-Za-z_][A-Za-z0-9_.-]*$/.test(item.name)) {
      note(`/config_schema/${index}`, 'a config field without a usable name; left out');
      return;
    }
    const type = typeof item.type === 'string' ? item.type : 'string';
    let mapped = FORM_TYPE_ALIASES[type] ?? type;
    if (!FORM_TYPES.includes(mapped)) {
      // LangBot's UI widgets (model selectors, prompt editors …) hold a value OAR checks by its JSON type.
      mapped = /multi|prompt-editor|list/.test(type) ? 'array' : 'string';
      note(`/config_schema/${index}/type`, `form type "${type}" is read as ${mapped}`);
    }
    const label = strings(record(item.label));
    const description = strings(record(item.description));
    out.push({
      ...item,
      type: mapped,
      ...(label ? { label } : { label: undefined }),
      ...(description ? { description } : { description: undefined }),
      required: item.required === true,
      // LangBot's "no default" is null; OAR's is an absent default.
      ...(item.default === null ? { default: undefined } : {}),
      // A select without options is a free string to OAR's check.
      ...(mapped === 'select' && !Array.isArray(item.options) ? { type: 'string' } : {}),
    });
  });
  return out;
}
