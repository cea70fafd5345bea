import { resolve as resolvePath } from 'node:path';
import { z } from 'zod';
import { OarRuntimeError } from '../kernel/errors.js';
import { ModelPriceSchema } from './prices.js';

/**
 * The models of a binding as configuration: providers, entries, choices and chains, and how a spec string reads.
 * No SDK here: resolving a spec into a callable model is models/resolve.ts, above the control plane.
 */
export const MODEL_PROVIDERS = ['openai', 'anthropic', 'cohere', 'openai-compatible', 'script'] as const;
export type ModelProvider = (typeof MODEL_PROVIDERS)[number];

/** Where each hosted provider's key is read from when an entry names no `apiKeyEnv`. */
export const DEFAULT_API_KEY_ENV = {
  openai: 'OPENAI_API_KEY',
  anthropic: 'ANTHROPIC_API_KEY',
  cohere: 'COHERE_API_KEY',
} as const;
/** Where each hosted provider's base URL is read from when an entry names no `baseURL` (docs/models.md). */
export const DEFAULT_BASE_URL_ENV = {
  openai: 'OPENAI_BASE_URL',
  anthropic: 'ANTHROPIC_BASE_URL',
  cohere: 'COHERE_BASE_URL',
} as const;

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
    /** USD per million tokens (the dated defaults of config/prices.ts when omitted; unknown for others). */
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

/** The providers a spec string names directly (`openai:gpt-4.1`), each with a default key and base URL variable. */
export type HostedProvider = keyof typeof DEFAULT_API_KEY_ENV;
const isHosted = (prefix: string): prefix is HostedProvider => Object.hasOwn(DEFAULT_API_KEY_ENV, prefix);

/** A parsed model spec string (`openai:gpt-4.1`, `script:demo.json`, `my-model`, ...). */
export type ModelSpec =
  | { kind: 'hosted'; provider: HostedProvider; model: string }
  | { kind: 'compatible'; name: string }
  | { kind: 'script'; file: string }
  | { kind: 'named'; name: string };

/** Parses a spec string. A bare string (no known provider prefix) is the name of a configured model. */
export function parseModelSpec(spec: string): ModelSpec {
  const trimmed = spec.trim();
  const colon = trimmed.indexOf(':');
  const prefix = colon > 0 ? trimmed.slice(0, colon) : '';
  const rest = trimmed.slice(colon + 1).trim();
  if (isHosted(prefix) || prefix === 'openai-compatible' || prefix === 'script') {
    if (rest === '') throw unknownModel(spec, `model spec "${spec}" names no model after "${prefix}:"`);
    if (prefix === 'openai-compatible') return { kind: 'compatible', name: rest };
    if (prefix === 'script') return { kind: 'script', file: rest };
    return { kind: 'hosted', provider: prefix, model: rest };
  }
  if (trimmed === '') throw unknownModel(spec, 'empty model spec');
  return { kind: 'named', name: trimmed };
}

export function unknownModel(spec: string, message: string): OarRuntimeError {
  return new OarRuntimeError('unknown_model', message, {
    details: {
      spec,
      hint: 'set "model" in oar.config.json to openai:MODEL, anthropic:MODEL, cohere:MODEL, script:FILE or the name of an entry under "models"',
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
