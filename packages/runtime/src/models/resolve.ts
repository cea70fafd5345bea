import { basename, extname, resolve as resolvePath } from 'node:path';
import type { LanguageModelV3 } from '@ai-sdk/provider';
import { pointer } from '@oar/protocol';
import { z } from 'zod';
import { OarRuntimeError } from '../errors.js';
import type { ModelHandle } from '../runner/model-call.js';
import { type ModelPrice, ModelPriceSchema } from './prices.js';
import { createScriptedModel } from './script.js';
import { loadModelScript } from './script-schema.js';

export const MODEL_PROVIDERS = ['openai', 'anthropic', 'openai-compatible', 'script'] as const;
export type ModelProvider = (typeof MODEL_PROVIDERS)[number];

/** Where each hosted provider's key is read from when an entry names no `apiKeyEnv`. */
export const DEFAULT_API_KEY_ENV = { openai: 'OPENAI_API_KEY', anthropic: 'ANTHROPIC_API_KEY' } as const;
/** Where each hosted provider's base URL is read from when an entry names no `baseURL` (docs/models.md). */
export const DEFAULT_BASE_URL_ENV = { openai: 'OPENAI_BASE_URL', anthropic: 'ANTHROPIC_BASE_URL' } as const;

const nonBlank = (value: string | undefined) => (value === undefined || value.trim() === '' ? undefined : value.trim());

// The env var NAME pattern doubles as a guard: a pasted key (sk-..., with dashes) fails it, so keys cannot be
// smuggled into config files that get committed, logged or shown in the console.
export const EnvVarNameSchema = z
  .string()
  .regex(
    /^[A-Za-z_][A-Za-z0-9_]*$/,
    'must be the NAME of an environment variable (e.g. OPENAI_API_KEY), never the key itself',
  );

/** One configured model. Secrets are referenced by environment variable name only. */
/** A model's retry policy: attempts in all (the first included), the first backoff, the longest wait. */
export const ModelRetrySchema = z.strictObject({
  attempts: z.number().int().min(1).max(10).optional(),
  initialDelayMs: z.number().int().min(0).optional(),
  maxDelayMs: z.number().int().min(0).optional(),
});

export const ModelConfigSchema = z
  .strictObject({
    provider: z.enum(MODEL_PROVIDERS),
    /** The provider's model id, e.g. "gpt-4.1" or "deepseek-chat". Not used by `script`. */
    model: z.string().min(1).optional(),
    /** API base URL; required for openai-compatible, optional override (proxies, gateways) otherwise. */
    baseURL: z.url().optional(),
    /** Name of the env var holding the API key. Defaults: OPENAI_API_KEY, ANTHROPIC_API_KEY; none for compatible. */
    apiKeyEnv: EnvVarNameSchema.optional(),
    /** Script file for provider `script`, relative to the working directory. */
    file: z.string().min(1).optional(),
    /** Provider name for openai-compatible (the providerOptions key, shown in events); defaults to the entry name. */
    name: z.string().min(1).optional(),
    /** Extra, non-secret HTTP headers. */
    headers: z.record(z.string(), z.string()).optional(),
    /** Secret HTTP headers: header name → env var name (e.g. Azure's `api-key`). */
    headersEnv: z.record(z.string(), EnvVarNameSchema).optional(),
    /** Whether the endpoint accepts a forced tool choice; set false for openai-compatible servers that reject it. */
    forcedToolChoice: z.boolean().optional(),
    /** This model's retry policy (each field overrides the runtime's `limits`). */
    retry: ModelRetrySchema.optional(),
    /** One call's time limit in milliseconds (overrides `limits.modelTimeoutMs`). */
    timeoutMs: z.number().int().min(1).optional(),
    /** How long a stream may produce nothing before the call fails as a timeout (overrides `limits.modelIdleTimeoutMs`). */
    idleTimeoutMs: z.number().int().min(1).optional(),
    /** Whether the model can call tools (default true): a chain excludes it for an agent on the tool carrier. */
    toolCalling: z.boolean().optional(),
    /** USD per million tokens (the dated defaults of models/prices.ts when omitted; unknown for others). */
    price: ModelPriceSchema.optional(),
    /** Tokens of one request, prompt and output together (the defaults of models/windows.ts when omitted). */
    contextWindow: z.number().int().min(256).optional(),
    /** The most tokens one answer may have: sent to the provider, and reserved out of the context window. */
    maxOutputTokens: z.number().int().min(16).optional(),
  })
  .superRefine((entry, ctx) => {
    const need = (field: 'model' | 'baseURL' | 'file') => {
      if (entry[field] === undefined) {
        ctx.addIssue({ code: 'custom', path: [field], message: `provider "${entry.provider}" needs "${field}"` });
      }
    };
    if (entry.provider === 'script') need('file');
    else need('model');
    if (entry.provider === 'openai-compatible') need('baseURL');
    if (entry.provider !== 'script' && entry.file !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['file'], message: '"file" is only for provider "script"' });
    }
  });
export type ModelConfig = z.infer<typeof ModelConfigSchema>;

export const ModelsConfigSchema = z.record(z.string().min(1), ModelConfigSchema);
export type ModelsConfig = z.infer<typeof ModelsConfigSchema>;

/** The failure classes a chain falls back on by default; never `auth` or `invalid_request` (the next would fail too). */
export const FALLBACK_CLASSES = ['rate_limited', 'transient', 'context_overflow', 'timeout'] as const;

/**
 * A model choice: one spec, a chain of specs tried in order (`["openai:gpt-4.1", "local"]`), or a chain with the
 * failure classes that move a call on to the next candidate (docs/models.md "Chains and fallback").
 */
export const ModelChoiceSchema = z.union([
  z.string().min(1),
  z.array(z.string().min(1)).min(1).max(8),
  z.strictObject({
    chain: z.array(z.string().min(1)).min(1).max(8),
    fallbackOn: z.array(z.enum(FALLBACK_CLASSES)).optional(),
  }),
]);
export type ModelChoice = z.infer<typeof ModelChoiceSchema>;

/** A choice as its candidates in order and the classes that fall back. */
export function modelChain(choice: ModelChoice): { specs: string[]; fallbackOn: readonly string[] } {
  if (typeof choice === 'string') return { specs: [choice], fallbackOn: FALLBACK_CLASSES };
  if (Array.isArray(choice)) return { specs: choice, fallbackOn: FALLBACK_CLASSES };
  return { specs: choice.chain, fallbackOn: choice.fallbackOn ?? FALLBACK_CLASSES };
}

/** A choice as recorded in a binding: every script file of it an absolute path (see `absoluteModelSpec`). */
export function absoluteModelChoice(choice: ModelChoice, cwd: string): ModelChoice {
  if (typeof choice === 'string') return absoluteModelSpec(choice, cwd);
  if (Array.isArray(choice)) return choice.map((spec) => absoluteModelSpec(spec, cwd));
  return { ...choice, chain: choice.chain.map((spec) => absoluteModelSpec(spec, cwd)) };
}

/** A parsed model spec string (`openai:gpt-4.1`, `script:demo.json`, `my-model`, ...). */
export type ModelSpec =
  | { kind: 'hosted'; provider: 'openai' | 'anthropic'; model: string }
  | { kind: 'compatible'; name: string }
  | { kind: 'script'; file: string }
  | { kind: 'named'; name: string };

/** Parses a spec string. A bare string (no known provider prefix) is the name of a configured model. */
export function parseModelSpec(spec: string): ModelSpec {
  const trimmed = spec.trim();
  const colon = trimmed.indexOf(':');
  const prefix = colon > 0 ? trimmed.slice(0, colon) : '';
  const rest = trimmed.slice(colon + 1).trim();
  if (prefix === 'openai' || prefix === 'anthropic' || prefix === 'openai-compatible' || prefix === 'script') {
    if (rest === '') throw unknownModel(spec, `model spec "${spec}" names no model after "${prefix}:"`);
    if (prefix === 'openai-compatible') return { kind: 'compatible', name: rest };
    if (prefix === 'script') return { kind: 'script', file: rest };
    return { kind: 'hosted', provider: prefix, model: rest };
  }
  if (trimmed === '') throw unknownModel(spec, 'empty model spec');
  return { kind: 'named', name: trimmed };
}

export interface ResolveModelOptions {
  /** Configured models by name. */
  models?: Record<string, ModelConfig>;
  /** Base directory for script files. */
  cwd: string;
  /** Where API keys are read from (pass `process.env` in production; tests pass a plain object). */
  env: Record<string, string | undefined>;
  /** For script models: replay this sub-agent's steps from the script's `agents` section. */
  agent?: string;
}

export interface ModelInfo {
  provider: ModelProvider;
  modelId: string;
  spec: string;
  /** Whether the runtime may force `toolChoice: { type: 'tool', toolName: 'AgentProtocolOutput' }`. */
  supportsForcedToolChoice: boolean;
  /** The configured entry's retry policy and call timeout, when it sets them. */
  retry?: z.infer<typeof ModelRetrySchema>;
  timeoutMs?: number;
  idleTimeoutMs?: number;
  toolCalling?: boolean;
  price?: ModelPrice;
  contextWindow?: number;
  maxOutputTokens?: number;
}

export interface ResolvedModel {
  model: LanguageModelV3;
  info: ModelInfo;
}

/**
 * Resolves a spec string to a ready model. An exact configured name wins over prefix parsing, so an entry may
 * be called e.g. "openai:fast" and still be found.
 */
export async function resolveModel(spec: string, options: ResolveModelOptions): Promise<ResolvedModel> {
  const models = options.models ?? {};
  if (Object.hasOwn(models, spec)) return fromConfig(spec, spec, models[spec] as ModelConfig, options);
  const parsed = parseModelSpec(spec);
  switch (parsed.kind) {
    case 'hosted':
      return fromConfig(spec, spec, { provider: parsed.provider, model: parsed.model }, options);
    case 'script':
      return fromConfig(spec, spec, { provider: 'script', file: parsed.file }, options);
    case 'compatible': {
      const entry = configured(models, parsed.name, spec);
      if (entry.provider !== 'openai-compatible') {
        throw unknownModel(
          spec,
          `model "${parsed.name}" is configured with provider "${entry.provider}", not openai-compatible`,
        );
      }
      return fromConfig(spec, parsed.name, entry, options);
    }
    case 'named':
      return fromConfig(spec, parsed.name, configured(models, parsed.name, spec), options);
  }
}

function configured(models: Record<string, ModelConfig>, name: string, spec: string): ModelConfig {
  const entry = Object.hasOwn(models, name) ? models[name] : undefined;
  if (entry !== undefined) return entry;
  const known = Object.keys(models);
  throw unknownModel(
    spec,
    `unknown model "${spec}": use openai:<model>, anthropic:<model>, openai-compatible:<configured name>, script:<file> or a configured name${known.length > 0 ? ` (configured: ${known.join(', ')})` : ''}`,
  );
}

async function fromConfig(
  spec: string,
  entryName: string,
  raw: ModelConfig,
  options: ResolveModelOptions,
): Promise<ResolvedModel> {
  // Entries may come straight from a JSON config file, so they are validated here, not trusted by type.
  const checked = ModelConfigSchema.safeParse(raw);
  if (!checked.success) {
    const issues = checked.error.issues.map((issue) => ({
      path: pointer(issue.path as (string | number)[]),
      message: issue.message,
    }));
    throw new OarRuntimeError(
      'invalid_model_config',
      `model "${entryName}" is misconfigured: ${issues.map((i) => `${i.path || '/'}: ${i.message}`).join('; ')}`,
      { details: { model: entryName, issues } },
    );
  }
  const entry = checked.data;
  const info = (modelId: string, supportsForcedToolChoice: boolean): ModelInfo => ({
    provider: entry.provider,
    modelId,
    spec,
    supportsForcedToolChoice,
    ...(entry.retry ? { retry: entry.retry } : {}),
    ...(entry.timeoutMs !== undefined ? { timeoutMs: entry.timeoutMs } : {}),
    ...(entry.idleTimeoutMs !== undefined ? { idleTimeoutMs: entry.idleTimeoutMs } : {}),
    ...(entry.toolCalling !== undefined ? { toolCalling: entry.toolCalling } : {}),
    ...(entry.price ? { price: entry.price } : {}),
    ...(entry.contextWindow !== undefined ? { contextWindow: entry.contextWindow } : {}),
    ...(entry.maxOutputTokens !== undefined ? { maxOutputTokens: entry.maxOutputTokens } : {}),
  });
  const headers = secretHeaders(entry, options.env, entryName);
  switch (entry.provider) {
    case 'script': {
      const file = resolvePath(options.cwd, entry.file as string);
      const script = await loadModelScript(file);
      const name = basename(file, extname(file));
      const model = createScriptedModel(script, { agent: options.agent, name, source: file });
      return { model, info: info(model.modelId, true) };
    }
    case 'openai': {
      const apiKey = readSecret(entry.apiKeyEnv ?? DEFAULT_API_KEY_ENV.openai, options.env, entryName);
      // OPENAI_BASE_URL moves every "openai:" model to another server (a proxy, a gateway); read from the env this
      // resolution was given, like the key, so a test or an embedding host decides it, not this process's env.
      const baseURL = entry.baseURL ?? nonBlank(options.env[DEFAULT_BASE_URL_ENV.openai]);
      // Each provider's SDK is loaded when a model of it is resolved, not with the runtime (docs/architecture.md).
      const { createOpenAI } = await import('@ai-sdk/openai');
      const provider = createOpenAI({ apiKey, baseURL, headers });
      return { model: provider(entry.model as string), info: info(entry.model as string, true) };
    }
    case 'anthropic': {
      const apiKey = readSecret(entry.apiKeyEnv ?? DEFAULT_API_KEY_ENV.anthropic, options.env, entryName);
      const baseURL = entry.baseURL ?? nonBlank(options.env[DEFAULT_BASE_URL_ENV.anthropic]);
      const { createAnthropic } = await import('@ai-sdk/anthropic');
      const provider = createAnthropic({ apiKey, baseURL, headers });
      return { model: provider(entry.model as string), info: info(entry.model as string, true) };
    }
    case 'openai-compatible': {
      // Local servers (Ollama, vLLM, llama.cpp) often need no key, so a key is only required when one is named.
      const key = entry.apiKeyEnv === undefined ? undefined : readSecret(entry.apiKeyEnv, options.env, entryName);
      const { createOpenAICompatible } = await import('@ai-sdk/openai-compatible');
      const provider = createOpenAICompatible({
        name: entry.name ?? entryName,
        baseURL: entry.baseURL as string,
        apiKey: key,
        headers,
        // Without it streamed responses carry no usage, and usage feeds budgets and the event log.
        includeUsage: true,
      });
      return {
        model: provider.chatModel(entry.model as string),
        info: info(entry.model as string, entry.forcedToolChoice ?? true),
      };
    }
  }
}

function readSecret(envVar: string, env: Record<string, string | undefined>, model: string): string {
  const value = env[envVar];
  if (value === undefined || value.trim() === '') {
    throw new OarRuntimeError(
      'model_credentials_missing',
      `model "${model}" needs an API key in the environment variable ${envVar}, which is not set`,
      {
        details: {
          model,
          envVar,
          hint: `set ${envVar} in the environment of the process that runs the session, or name the variable that holds the key with "apiKeyEnv" in the model's entry under "models" in oar.config.json`,
        },
      },
    );
  }
  return value;
}

function secretHeaders(
  entry: ModelConfig,
  env: Record<string, string | undefined>,
  model: string,
): Record<string, string> | undefined {
  if (entry.headers === undefined && entry.headersEnv === undefined) return undefined;
  const headers: Record<string, string> = { ...entry.headers };
  for (const [header, envVar] of Object.entries(entry.headersEnv ?? {}))
    headers[header] = readSecret(envVar, env, model);
  return headers;
}

function unknownModel(spec: string, message: string): OarRuntimeError {
  return new OarRuntimeError('unknown_model', message, {
    details: {
      spec,
      hint: 'set "model" in oar.config.json to openai:MODEL, anthropic:MODEL, script:FILE or the name of an entry under "models"',
    },
  });
}

/**
 * A spec as it is recorded in a session binding: a script file becomes an absolute path (so the session finds it
 * from any working directory); every other spec stays as written.
 */
export function absoluteModelSpec(spec: string, cwd: string): string {
  const parsed = parseModelSpec(spec);
  return parsed.kind === 'script' ? `script:${resolvePath(cwd, parsed.file)}` : spec;
}

/** Configured models as recorded in a binding: script files as absolute paths. */
export function absoluteModels(models: ModelsConfig, baseDir: string): ModelsConfig {
  return Object.fromEntries(
    Object.entries(models).map(([name, entry]) => [
      name,
      entry.file === undefined ? entry : { ...entry, file: resolvePath(baseDir, entry.file) },
    ]),
  );
}

/**
 * The model of an agent under a session binding: the agent's own spec, else the binding's default, resolved with
 * the binding's configured models and the keys of `env`. A sub-agent's script model replays its own steps.
 */
export async function bindingModel(
  agent: { name: string; model?: ModelChoice },
  binding: { model?: ModelChoice; models: ModelsConfig; mainAgent: { name: string } },
  env: Record<string, string | undefined>,
): Promise<ModelHandle> {
  // The runner asks for one candidate of a chain at a time (agent.model is then that spec); a chain given here
  // directly resolves to its first candidate.
  const choice = agent.model ?? binding.model;
  const spec = choice === undefined ? undefined : modelChain(choice).specs[0];
  if (!spec) {
    throw new OarRuntimeError(
      'model_required',
      `no model is configured for agent "${agent.name}": the binding names none`,
      {
        details: {
          agent: agent.name,
          examples: ['openai:gpt-4.1', 'anthropic:claude-sonnet-4-5', 'script:./script.json'],
        },
      },
    );
  }
  const resolved = await resolveModel(spec, {
    models: binding.models,
    cwd: '/',
    env,
    ...(agent.name !== binding.mainAgent.name ? { agent: agent.name } : {}),
  });
  return modelHandle(resolved);
}

/** What the loop calls a model through: the resolved model and what its configuration says of it. */
export function modelHandle(resolved: ResolvedModel): ModelHandle {
  return {
    model: resolved.model,
    provider: resolved.info.provider,
    modelId: resolved.info.modelId,
    supportsForcedToolChoice: resolved.info.supportsForcedToolChoice,
    ...(resolved.info.retry ? { retry: resolved.info.retry } : {}),
    ...(resolved.info.timeoutMs !== undefined ? { timeoutMs: resolved.info.timeoutMs } : {}),
    ...(resolved.info.idleTimeoutMs !== undefined ? { idleTimeoutMs: resolved.info.idleTimeoutMs } : {}),
    ...(resolved.info.toolCalling !== undefined ? { toolCalling: resolved.info.toolCalling } : {}),
    ...(resolved.info.price ? { price: resolved.info.price } : {}),
    ...(resolved.info.contextWindow !== undefined ? { contextWindow: resolved.info.contextWindow } : {}),
    ...(resolved.info.maxOutputTokens !== undefined ? { maxOutputTokens: resolved.info.maxOutputTokens } : {}),
  };
}
