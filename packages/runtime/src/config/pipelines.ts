import type { CatalogExecutor } from '@oar/protocol';
import { z } from 'zod';
import { EnvVarNameSchema } from './models.js';

/**
 * Pipelines and services as the config file declares them and a session's binding records them (docs/executors.md).
 * Everything here is data: no expressions, no secrets (a service's credentials are named by environment variable).
 */

const NamePattern = /^[A-Za-z0-9_.-]+$/;
const ExecutorNameSchema = z.string().regex(NamePattern, 'names use letters, digits, "_", "." and "-"');

/** An input JSON Schema (2020-12) of an object: the protocol's `input` is always a JSON object. */
const InputSchemaSchema = z
  .record(z.string(), z.unknown())
  .refine((schema) => schema.type === 'object', 'an input schema must describe an object ("type": "object")')
  .default({ type: 'object' });

// ---- pipeline input mapping ---------------------------------------------------------------------------------

/**
 * A step's `input` is a JSON template. Objects of exactly these shapes are references, resolved when the step runs;
 * every other value is literal (objects and arrays are walked):
 *   {"$input": "a.b"}                       the pipeline input at a path ("" = the whole input)
 *   {"$step": "id", "path": "structured.x"} an earlier step's output ({text, structured, summary}; path default "text")
 *   {"$literal": value}                      `value` as is, even if it looks like a reference
 * `"default": value` may follow `$input` / `$step`: used when the path is missing (otherwise the step fails).
 * Any other object with a `$` key is a config error, so a misspelt reference is never sent as literal data.
 */
export type MappingRef =
  | { kind: 'input'; path: string; default?: unknown; hasDefault: boolean }
  | { kind: 'step'; step: string; path: string; default?: unknown; hasDefault: boolean }
  | { kind: 'literal'; value: unknown };

/** The reference an object is, undefined for a plain object, or an error message for a malformed one. */
export function mappingRef(value: Record<string, unknown>): MappingRef | string | undefined {
  const keys = Object.keys(value);
  if (!keys.some((key) => key.startsWith('$'))) return undefined;
  const hasDefault = 'default' in value;
  const only = (allowed: string[]) => keys.every((key) => allowed.includes(key));
  if ('$literal' in value) {
    return keys.length === 1 ? { kind: 'literal', value: value.$literal } : '"$literal" takes no other keys';
  }
  if ('$input' in value) {
    if (!only(['$input', 'default'])) return '"$input" takes only "default" besides it';
    if (typeof value.$input !== 'string') return '"$input" must be a path string ("" for the whole input)';
    return { kind: 'input', path: value.$input, hasDefault, ...(hasDefault ? { default: value.default } : {}) };
  }
  if ('$step' in value) {
    if (!only(['$step', 'path', 'default'])) return '"$step" takes only "path" and "default" besides it';
    if (typeof value.$step !== 'string' || value.$step === '') return '"$step" must name a step id';
    if (value.path !== undefined && typeof value.path !== 'string') return '"path" must be a string';
    return {
      kind: 'step',
      step: value.$step,
      path: typeof value.path === 'string' ? value.path : 'text',
      hasDefault,
      ...(hasDefault ? { default: value.default } : {}),
    };
  }
  return `unknown reference key(s) ${keys.filter((k) => k.startsWith('$')).join(', ')} (use $input, $step or $literal)`;
}

/** Every reference in a template, with its JSON-pointer-ish location, or the malformed ones as messages. */
export function mappingRefs(template: unknown, at = ''): { refs: MappingRef[]; errors: string[] } {
  const refs: MappingRef[] = [];
  const errors: string[] = [];
  const walk = (value: unknown, where: string) => {
    if (Array.isArray(value)) {
      for (const [i, item] of value.entries()) walk(item, `${where}/${i}`);
      return;
    }
    if (value === null || typeof value !== 'object') return;
    const ref = mappingRef(value as Record<string, unknown>);
    if (typeof ref === 'string') errors.push(`${where || '/'}: ${ref}`);
    else if (ref) refs.push(ref);
    else for (const [key, item] of Object.entries(value)) walk(item, `${where}/${key}`);
  };
  walk(template, at);
  return { refs, errors };
}

// ---- pipelines ----------------------------------------------------------------------------------------------

export const PipelineStepSchema = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9_-]+$/, 'step ids use letters, digits, "_" and "-"'),
  /** A tool bound to the session (built in or from a tool module). */
  tool: z.string().min(1),
  /** The tool's input: a JSON template with $input / $step / $literal references (see `mappingRef`). */
  input: z.record(z.string(), z.unknown()).default({}),
  /** Steps that must complete first; a `$step` reference must name one of them (directly or transitively). */
  depends: z.array(z.string()).default([]),
});
export type PipelineStep = z.infer<typeof PipelineStepSchema>;

export const PipelineSchema = z
  .strictObject({
    name: ExecutorNameSchema,
    description: z.string().default(''),
    capabilities: z.array(z.string()).default([]),
    inputSchema: InputSchemaSchema,
    steps: z.array(PipelineStepSchema).min(1).max(64),
  })
  .superRefine((pipeline, ctx) => {
    for (const problem of pipelineProblems(pipeline.steps)) ctx.addIssue({ code: 'custom', message: problem });
  });
export type PipelineConfig = z.infer<typeof PipelineSchema>;

/** Ids, dependencies, cycles and references: every fault of a pipeline's steps, as messages. */
function pipelineProblems(steps: readonly PipelineStep[]): string[] {
  const problems: string[] = [];
  const ids = new Set<string>();
  for (const step of steps) {
    if (ids.has(step.id)) problems.push(`step id "${step.id}" is used twice`);
    ids.add(step.id);
  }
  for (const step of steps) {
    for (const dep of step.depends) {
      if (!ids.has(dep)) problems.push(`step "${step.id}" depends on unknown step "${dep}"`);
      if (dep === step.id) problems.push(`step "${step.id}" depends on itself`);
    }
  }
  if (problems.length > 0) return problems;
  const order = stepOrder(steps);
  if (!order) return ['the steps\' "depends" form a cycle'];
  const upstream = upstreamSteps(steps);
  for (const step of steps) {
    const { refs, errors } = mappingRefs(step.input);
    for (const error of errors) problems.push(`step "${step.id}" input ${error}`);
    for (const ref of refs) {
      if (ref.kind !== 'step') continue;
      if (!upstream.get(step.id)?.has(ref.step)) {
        problems.push(`step "${step.id}" reads step "${ref.step}", which is not among its "depends" (directly or not)`);
      }
    }
  }
  return problems;
}

/** The steps in an order that respects `depends` (declaration order among ready steps), or undefined on a cycle. */
export function stepOrder<S extends Pick<PipelineStep, 'id' | 'depends'>>(steps: readonly S[]): S[] | undefined {
  const done = new Set<string>();
  const order: S[] = [];
  while (order.length < steps.length) {
    const next = steps.find((step) => !done.has(step.id) && step.depends.every((dep) => done.has(dep)));
    if (!next) return undefined;
    done.add(next.id);
    order.push(next);
  }
  return order;
}

/** Each step's transitive dependencies. */
function upstreamSteps(steps: readonly PipelineStep[]): Map<string, Set<string>> {
  const byId = new Map(steps.map((step) => [step.id, step]));
  const memo = new Map<string, Set<string>>();
  const visit = (id: string): Set<string> => {
    const known = memo.get(id);
    if (known) return known;
    const all = new Set<string>();
    memo.set(id, all);
    for (const dep of byId.get(id)?.depends ?? []) {
      all.add(dep);
      for (const up of visit(dep)) all.add(up);
    }
    return all;
  };
  for (const step of steps) visit(step.id);
  return memo;
}

// ---- services -----------------------------------------------------------------------------------------------

export const HTTP_METHODS = ['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'POST', 'PATCH'] as const;
/** Repeating one of these has the effect of doing it once (RFC 9110 §9.2.2): only they are retried. */
export const IDEMPOTENT_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);
/** Methods whose input goes into the query string; the others send it as a JSON body. */
export const QUERY_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'DELETE']);

/** Credentials, named by environment variable only: the value is read when the call is made and never recorded. */
export const ServiceAuthSchema = z.discriminatedUnion('type', [
  /** `Authorization: Bearer <value of tokenEnv>`. */
  z.strictObject({ type: z.literal('bearer'), tokenEnv: EnvVarNameSchema }),
  /** `<header>: <value of valueEnv>` (an API-key header). */
  z.strictObject({
    type: z.literal('header'),
    header: z.string().regex(/^[A-Za-z0-9-]+$/, 'a header name'),
    valueEnv: EnvVarNameSchema,
  }),
]);
export type ServiceAuth = z.infer<typeof ServiceAuthSchema>;

/** Static headers must not carry credentials: those go through `auth`, so they are named, not written down. */
const CREDENTIAL_HEADERS = new Set(['authorization', 'proxy-authorization', 'cookie', 'x-api-key', 'api-key']);

export const DEFAULT_SERVICE_TIMEOUT_MS = 30_000;
export const DEFAULT_SERVICE_RETRIES = 2;
export const DEFAULT_SERVICE_RETRY_DELAY_MS = 250;
export const DEFAULT_SERVICE_MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

/** A service URL: http(s), with `{field}` placeholders. */
const ServiceUrlSchema = z
  .string()
  .refine((url) => /^https?:\/\//i.test(url) && URL.canParse(url.replaceAll(/\{[A-Za-z0-9_]+\}/g, 'x')), {
    message: 'an http:// or https:// URL',
  });

export const ServiceSchema = z
  .strictObject({
    name: ExecutorNameSchema,
    description: z.string().default(''),
    capabilities: z.array(z.string()).default([]),
    /** http(s) URL; `{field}` placeholders are filled from the input (URL-encoded) and taken out of it. */
    url: ServiceUrlSchema,
    method: z.enum(HTTP_METHODS).default('GET'),
    inputSchema: InputSchemaSchema,
    /** Static, non-secret headers. */
    headers: z.record(z.string().regex(/^[A-Za-z0-9-]+$/, 'a header name'), z.string()).default({}),
    auth: ServiceAuthSchema.optional(),
    /** One attempt's time limit. */
    timeoutMs: z.number().int().min(1).max(600_000).default(DEFAULT_SERVICE_TIMEOUT_MS),
    /** Further attempts after a retryable failure; idempotent methods only (default 2 for them, 0 for others). */
    retries: z.number().int().min(0).max(10).optional(),
    /** The first retry's delay; each later one doubles it. */
    retryDelayMs: z.number().int().min(0).max(60_000).default(DEFAULT_SERVICE_RETRY_DELAY_MS),
    /**
     * The server deduplicates by the `Idempotency-Key` header OAR sends (the same on every retry of one call): a call
     * left in flight by a crash is then retried under the same key instead of becoming `lost`, and a non-idempotent
     * method may have `retries`.
     */
    idempotentByKey: z.boolean().default(false),
    /**
     * How to ask the server whether a call left in flight by a crash took effect: a GET of this URL (its
     * `{idempotencyKey}` and `{field}` placeholders filled), sent with the call's credentials and `Idempotency-Key`.
     * 2xx: it happened (the body is the evidence); 404 or 410: it did not; anything else: a person decides.
     */
    reconcile: z
      .strictObject({
        url: ServiceUrlSchema,
      })
      .optional(),
    /** A larger response body fails the call (`service_response_too_large`). */
    maxResponseBytes: z
      .number()
      .int()
      .min(1)
      .max(256 * 1024 * 1024)
      .default(DEFAULT_SERVICE_MAX_RESPONSE_BYTES),
  })
  .superRefine((service, ctx) => {
    if (service.retries && !IDEMPOTENT_METHODS.has(service.method) && !service.idempotentByKey) {
      ctx.addIssue({
        code: 'custom',
        path: ['retries'],
        message: `${service.method} is not idempotent and is never retried (a retry could repeat its effect) unless the server deduplicates by key (idempotentByKey)`,
      });
    }
    for (const name of Object.keys(service.headers)) {
      if (CREDENTIAL_HEADERS.has(name.toLowerCase())) {
        ctx.addIssue({
          code: 'custom',
          path: ['headers', name],
          message: `"${name}" carries credentials: name its environment variable in "auth" instead`,
        });
      }
    }
  });
export type ServiceConfig = z.infer<typeof ServiceSchema>;

/** The attempts a service call may make: retries only for idempotent methods, or a server that dedupes by key. */
export function serviceAttempts(service: ServiceConfig): number {
  if (IDEMPOTENT_METHODS.has(service.method)) return 1 + (service.retries ?? DEFAULT_SERVICE_RETRIES);
  return service.idempotentByKey ? 1 + (service.retries ?? 0) : 1;
}

/** The environment variables a service reads credentials from (secrets: the redactor masks their values). */
export function serviceSecretEnv(service: Pick<ServiceConfig, 'auth'>): string[] {
  if (!service.auth) return [];
  return [service.auth.type === 'bearer' ? service.auth.tokenEnv : service.auth.valueEnv];
}

/** Names must be unique per executor type: an action names one by its target. */
export function uniqueNames(entries: readonly { name: string }[], ctx: z.RefinementCtx, what: string): void {
  const seen = new Set<string>();
  entries.forEach((entry, index) => {
    if (seen.has(entry.name)) {
      ctx.addIssue({ code: 'custom', path: [index, 'name'], message: `${what} "${entry.name}" is defined twice` });
    }
    seen.add(entry.name);
  });
}

export const PipelinesSchema = z.array(PipelineSchema).superRefine((list, ctx) => uniqueNames(list, ctx, 'pipeline'));
export const ServicesSchema = z.array(ServiceSchema).superRefine((list, ctx) => uniqueNames(list, ctx, 'service'));

// ---- what the model sees ------------------------------------------------------------------------------------

/**
 * The pipelines and services an agent is offered: every service, and the pipelines whose every step uses a tool
 * the agent may use (an agent limited to some tools is not handed a pipeline that runs others).
 */
export function executorCatalog(
  binding: { pipelines?: readonly PipelineConfig[]; services?: readonly ServiceConfig[] },
  agent: { tools?: readonly string[] | undefined },
): { pipelines?: CatalogExecutor[]; services?: CatalogExecutor[] } {
  const entry = (e: PipelineConfig | ServiceConfig): CatalogExecutor => ({
    name: e.name,
    description: e.description,
    capabilities: [...e.capabilities],
    inputSchema: e.inputSchema,
  });
  const pipelines = (binding.pipelines ?? [])
    .filter((p) => !agent.tools || p.steps.every((step) => agent.tools?.includes(step.tool)))
    .map(entry);
  const services = (binding.services ?? []).map(entry);
  return {
    ...(pipelines.length > 0 ? { pipelines } : {}),
    ...(services.length > 0 ? { services } : {}),
  };
}
