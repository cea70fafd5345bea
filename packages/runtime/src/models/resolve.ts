import { basename, extname, resolve as resolvePath } from 'node:path';
import type { LanguageModelV3, RerankingModelV3 } from '@ai-sdk/provider';
import { pointer } from '@oar/protocol';
import type { z } from 'zod';
import {
  DEFAULT_API_KEY_ENV,
  DEFAULT_BASE_URL_ENV,
  type ModelChoice,
  type ModelConfig,
  ModelConfigSchema,
  type ModelProvider,
  type ModelRetrySchema,
  type ModelsConfig,
  modelChain,
  parseModelSpec,
  unknownModel,
} from '../config/models.js';
import type { ModelPrice } from '../config/prices.js';
import { OarRuntimeError } from '../kernel/errors.js';
import type { ModelHandle } from './model-call.js';
import { createScriptedModel } from './script.js';
import { loadModelScript } from './script-schema.js';

const nonBlank = (value: string | undefined) => (value === undefined || value.trim() === '' ? undefined : value.trim());

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
  /** The same model id as a reranking model, where the provider offers reranking (Cohere and its compatibles). */
  reranker?: RerankingModelV3;
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
    case 'cohere': {
      // COHERE_BASE_URL (or baseURL) also reaches servers that speak Cohere's rerank API (vLLM, TEI, Jina's).
      const apiKey = readSecret(entry.apiKeyEnv ?? DEFAULT_API_KEY_ENV.cohere, options.env, entryName);
      const baseURL = entry.baseURL ?? nonBlank(options.env[DEFAULT_BASE_URL_ENV.cohere]);
      const { createCohere } = await import('@ai-sdk/cohere');
      const provider = createCohere({ apiKey, baseURL, headers });
      const modelId = entry.model as string;
      return { model: provider(modelId), reranker: provider.rerankingModel(modelId), info: info(modelId, true) };
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
    ...(resolved.reranker ? { reranker: resolved.reranker } : {}),
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
