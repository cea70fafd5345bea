/**
 * A provider failure in OAR's terms: what to put in oar.config.json or which environment variable to set. The AI
 * SDK's own messages advise AI SDK code (`openai.chat('model-id')`, `createOpenAI(...)`), which an OAR user never
 * writes; they are replaced here, and every failure a person can fix gets a `hint` naming the setting.
 */

/** Which model failed, as the runner knows it (the handle's provider and model id). */
export interface FailedModel {
  provider: string;
  modelId: string;
}

/** The classes of failure a hint is written for (model-errors.ts's classes, plus a server that cannot be reached). */
export type HintedFailure =
  | { kind: 'auth'; statusCode?: number }
  | { kind: 'not_found'; url?: string }
  | { kind: 'rate_limited' }
  | { kind: 'unreachable'; url?: string }
  | { kind: 'wrong_api'; url?: string };

/** The variable each hosted provider's key is read from, and the one that moves it to another server. */
const KEY_ENV: Record<string, string> = { openai: 'OPENAI_API_KEY', anthropic: 'ANTHROPIC_API_KEY' };
const BASE_URL_ENV: Record<string, string> = { openai: 'OPENAI_BASE_URL', anthropic: 'ANTHROPIC_BASE_URL' };

/** Where a person configures a model in oar.config.json. */
const ENTRY = `the model's entry under "models" in oar.config.json`;
const compatibleEntry = (model: FailedModel | undefined, url: string | undefined) =>
  `{"provider": "openai-compatible", "baseURL": "${url ? baseOf(url) : 'http://HOST/v1'}", "model": "${model?.modelId ?? 'MODEL'}"}`;

/** The base URL of a request URL: the path without its endpoint (`/v1/responses` → `/v1`). */
function baseOf(url: string): string {
  return url.replace(/\/(responses|chat\/completions|completions|messages)(\?.*)?$/, '');
}

/** Where the base URL of `model` comes from, in OAR's terms. */
function baseUrlSource(model: FailedModel | undefined): string {
  const env = model ? BASE_URL_ENV[model.provider] : undefined;
  return `"baseURL" of ${ENTRY}${env ? ` (or ${env})` : ''}`;
}

/** What to do about a failure, naming the setting or variable. */
export function providerHint(failure: HintedFailure, model: FailedModel | undefined): string {
  switch (failure.kind) {
    case 'auth': {
      const env = model ? KEY_ENV[model.provider] : undefined;
      return `check the API key: ${env ? `set ${env}, or ` : ''}name the variable that holds it with "apiKeyEnv" in ${ENTRY}; the key must be allowed to use this model`;
    }
    case 'not_found':
      return `check the model id${model ? ` "${model.modelId}"` : ''} ("model" of the entry, or the part after "${model?.provider ?? 'openai'}:") and ${baseUrlSource(model)}${model?.provider === 'openai' ? `; a server that is not OpenAI's may not speak the Responses API "openai:" uses: configure it as ${compatibleEntry(model, failure.url)}` : ''}`;
    case 'rate_limited':
      return `wait and run again, or give this model more patience with "retry": {"attempts": 5, "maxDelayMs": 120000} in ${ENTRY}; a chain ("model": ["first", "fallback"]) moves on to the next model`;
    case 'unreachable':
      return `nothing answered${failure.url ? ` at ${failure.url}` : ''}: start the model's server, or correct ${baseUrlSource(model)}`;
    case 'wrong_api':
      return `for a server that speaks Chat Completions, add ${compatibleEntry(model, failure.url)} under "models" in oar.config.json and use its name as the model`;
  }
}

/** The AI SDK's "received Chat Completions while using the Responses API" error, by its wording. */
export function isWrongApi(message: string): boolean {
  return /Chat Completions stream while using the OpenAI Responses API/i.test(message);
}

/**
 * A provider message without the AI SDK's code advice: the sentences that name SDK calls or packages are dropped
 * (the hint says what to do in OAR's terms instead).
 */
export function withoutSdkAdvice(message: string): string {
  const sentences = message.split(/(?<=\.)\s+/);
  const kept = sentences.filter((s) => !/openai\.chat\(|createOpenAI|@ai-sdk\/|'apiKey' parameter|\.chat\('/.test(s));
  return (kept.length > 0 ? kept : sentences.slice(0, 1)).join(' ');
}
