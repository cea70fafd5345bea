import { readFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';
import {
  type ToolAgentError,
  type ToolAgentOutput,
  type ToolAgentResult,
  type UiHint,
  UiHintSchema,
  validateJsonSchema,
} from '@oar/protocol';
import {
  CliOutputSchema,
  CREDENTIAL_ENV,
  type CredentialKey,
  IDEMPOTENCY_KEY_ENV,
  issueCredential,
  jsonSchemaText,
  type Manifest,
  ManifestSchema,
} from '@oar/tool-cli';
import { z } from 'zod';
import type { CliToolConfig } from '../../config/cli.js';
import { OarRuntimeError, ToolError } from '../../kernel/errors.js';
import { globMatches } from '../../kernel/match/glob-match.js';
import { type AnyTool, defineTool, type ToolCallInfo, type ToolFacts } from '../tool.js';
import { type CliProcessResult, runCliProcess } from './process.js';

/**
 * `project_cli` (the Agent Tool Protocol's one thin tool): the model sends `{module, method, input}`; OAR checks the
 * pair against the binding's whitelist ∩ the CLI's router and the input against the method's schema (both before
 * anyone is asked and before anything starts), issues a short-lived credential for the session's authority, runs
 * the CLI as a subprocess (docs/tool-protocol.md "The process boundary"), and turns its one JSON object into the
 * canonical record (ToolAgentOutput) and the model's view of it (the compact JSON of the result with its status).
 */

const NAME = /^[a-z][a-z0-9_]*$/;

/** Variables every CLI gets from OAR's environment, when set; everything else must be named in the config. */
const BASE_ENV = ['PATH', 'LANG', 'TZ'] as const;

/** The SDK's failure codes, as OAR's error list names them; any other code a CLI reports is `cli_failed`. */
const CLI_CODES: Record<string, string> = {
  ACTION_NOT_ALLOWED: 'action_not_allowed',
  INVALID_ACTION_INPUT: 'invalid_action_input',
  INPUT_NOT_JSON: 'invalid_action_input',
  CREDENTIAL_MISSING: 'credential_invalid',
  CREDENTIAL_INVALID: 'credential_invalid',
  CREDENTIAL_EXPIRED: 'credential_invalid',
  USAGE_ERROR: 'cli_failed',
  HANDLER_FAILED: 'cli_failed',
};

/** A per-method post-processor (docs/tool-protocol.md "ui_hints"): the UI hints of one successful call. */
export type PostProcessor = (call: {
  module: string;
  method: string;
  input: Record<string, unknown>;
  data: unknown;
  status: 'success' | 'partial';
}) => UiHint[] | undefined;

/** A skill as loaded: its one-line summary (the first line) and its text. */
export interface Skill {
  summary: string;
  text: string;
}

/** The most a `--describe` manifest may print. */
const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;

/** The most a skill document may hold: it is read into the context whole. */
const MAX_SKILL_BYTES = 64 * 1024;

/** What a business CLI offers under a binding: the manifest, the allowed set, skills and post-processors. */
export interface CliToolParts {
  config: CliToolConfig;
  manifest: Manifest;
  /** `module.method` pairs in the binding's whitelist ∩ the router's, in the manifest's order. */
  allowed: string[];
  skills: Record<string, Skill>;
  postProcessors: Record<string, PostProcessor>;
}

/** Ask the CLI for its manifest (`--describe`) and load its skills and post-processors: once per bound config. */
export async function loadCliTool(
  config: CliToolConfig,
  env: Record<string, string | undefined> = process.env,
): Promise<CliToolParts> {
  const unavailable = (reason: string, details: Record<string, unknown> = {}) =>
    new OarRuntimeError('binding_unavailable', `the business CLI of tool "${config.name}" ${reason}`, {
      retryable: true,
      details: { tool: config.name, command: config.command, ...details },
    });
  const described = await runCliProcess({
    argv: [...config.command, '--describe'],
    cwd: config.cwd ?? process.cwd(),
    env: cliEnv(config, env, {}),
    stdin: '',
    signal: AbortSignal.timeout(config.describeTimeoutMs),
    // The manifest is the CLI's whole interface (every method's schema): not held to one call's output cap.
    maxStdoutBytes: MAX_MANIFEST_BYTES,
  });
  if (described.spawnError) throw unavailable(`cannot start: ${described.spawnError}`);
  if (described.oversize) throw unavailable(`printed a manifest over ${MAX_MANIFEST_BYTES} bytes for --describe`);
  if (described.aborted) throw unavailable(`did not answer --describe within ${config.describeTimeoutMs} ms`);
  let manifest: Manifest;
  try {
    manifest = ManifestSchema.parse(JSON.parse(described.stdout));
  } catch (error) {
    throw unavailable('did not print a manifest for --describe', {
      exitCode: described.exitCode,
      reason: (error as Error).message.slice(0, 500),
    });
  }
  const allowed = manifest.methods.map((m) => `${m.module}.${m.method}`).filter((op) => globMatches(config.allow, op));
  const skills: Record<string, Skill> = {};
  for (const name of config.enabledSkills) {
    const file = config.skills[name] as string;
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      throw unavailable(`cannot read skill "${name}" (${file}): ${(error as Error).message}`);
    }
    if (Buffer.byteLength(text) > MAX_SKILL_BYTES) throw unavailable(`has a skill over 64 KiB: "${name}"`);
    const first = text.split('\n').find((line) => line.trim() !== '') ?? name;
    skills[name] = {
      summary: first
        .replace(/^#+\s*/, '')
        .trim()
        .slice(0, 200),
      text,
    };
  }
  let postProcessors: Record<string, PostProcessor> = {};
  if (config.postProcessors) {
    try {
      const mod = (await import(pathToFileURL(config.postProcessors).href)) as { postProcessors?: unknown };
      if (!mod.postProcessors || typeof mod.postProcessors !== 'object') throw new Error('no "postProcessors" export');
      postProcessors = mod.postProcessors as Record<string, PostProcessor>;
    } catch (error) {
      throw unavailable(`cannot load its post-processors ${config.postProcessors}: ${(error as Error).message}`);
    }
  }
  return { config, manifest, allowed, skills, postProcessors };
}

/**
 * The CLI's environment: the base names and the config's, when set here; the credential's verification key; and
 * the call's runtime-only context. Nothing else of OAR's environment is inherited.
 */
function cliEnv(
  config: CliToolConfig,
  env: Record<string, string | undefined>,
  context: Record<string, string>,
): Record<string, string> {
  const names = new Set<string>([...BASE_ENV, ...config.env]);
  const credential = config.credential;
  if (credential) names.add(credential.algorithm === 'HS256' ? credential.keyEnv : (credential.verifyKeyEnv as string));
  const out: Record<string, string> = {};
  for (const name of names) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  return { ...out, ...context };
}

/** The old command/subcommand/args shape: a correctable error that names the new one (no alias). */
const LEGACY_KEYS = new Set(['command', 'subcommand', 'args']);

function inputSchema(name: string) {
  return z.strictObject(
    {
      module: z.string().regex(NAME, 'a module name such as "calendar"'),
      method: z.string().regex(NAME, 'a method name such as "read"'),
      input: z.record(z.string(), z.unknown()),
    },
    {
      error: (issue) => {
        if (issue.code !== 'unrecognized_keys') return undefined;
        const legacy = issue.keys.some((key) => LEGACY_KEYS.has(key));
        return legacy
          ? `${name} takes {"module", "method", "input"}; "command"/"subcommand"/"args" were removed. Send e.g. {"module": "calendar", "method": "read", "input": {"mode": "day", "date": "2026-12-01"}}`
          : `${name} takes only {"module", "method", "input"}; put the method's fields inside "input"`;
      },
    },
  );
}

type CliInput = z.infer<ReturnType<typeof inputSchema>>;

/** The description the model sees: what the tool is, how to call it, its modules and its enabled skills. */
export function cliToolDescription(parts: Pick<CliToolParts, 'config' | 'manifest' | 'allowed' | 'skills'>): string {
  const { config, manifest } = parts;
  const modules = [...new Set(parts.allowed.map((op) => op.split('.')[0]))];
  const lines = [
    `Business actions${config.description || manifest.description ? ` (${config.description ?? manifest.description})` : ''}: call with {"module", "method", "input"}; "input" holds the method's fields. An invalid input returns the method's input_schema; correct and call again.`,
    `Modules: ${modules.join(', ') || 'none'}.`,
  ];
  const skills = Object.entries(parts.skills);
  if (skills.length > 0) {
    lines.push(
      'Skills (read one with a runtime read_skill action, input {"skill": NAME}, before using its module):',
      ...skills.map(([name, skill]) => `- ${name}: ${skill.summary}`),
    );
  }
  return lines.join('\n');
}

/** The facts of a method from its manifest entry (what permissions, scheduling and recovery read per call). */
function methodFacts(manifest: Manifest, module: string, method: string): Partial<ToolFacts> {
  const entry = manifest.methods.find((m) => m.module === module && m.method === method);
  if (!entry) return {};
  return {
    isReadOnly: entry.facts.readOnly,
    isDestructive: entry.facts.destructive,
    isIdempotent: entry.facts.idempotent,
    ...(entry.facts.idempotentByKey ? { isIdempotentByKey: true } : {}),
    isConcurrencySafe: entry.facts.concurrencySafe,
    interruptBehavior: entry.facts.interrupt,
  };
}

/** Build the tool from its loaded parts. */
export function cliTool(parts: CliToolParts, env: Record<string, string | undefined> = process.env): AnyTool {
  const { config, manifest } = parts;
  const allowed = new Set(parts.allowed);
  const credentials = new Map<string, { token: string; expiresAt: number }>();

  const record = (
    call: { toolCallId: string; input: CliInput },
    outcome: Pick<ToolAgentOutput, 'status' | 'result' | 'error' | 'ui_hints'>,
  ): ToolAgentOutput => ({
    tool_name: config.name,
    tool_call_id: call.toolCallId,
    tool_call_args: { module: call.input.module, method: call.input.method, input: call.input.input },
    ...outcome,
  });
  const failure = (
    toolCallId: string,
    input: CliInput,
    error: ToolAgentError,
    oarCode: string,
    retryable = false,
  ): ToolError =>
    new ToolError(
      oarCode,
      error.message,
      { retryable, details: { module: input.module, method: input.method, toolCode: error.code } },
      record({ toolCallId, input }, { status: 'failure', result: null, error, ui_hints: [] }),
    );

  /** A credential for this call: per call, or one per run kept while it has a minute left. */
  async function credentialFor(caller: ToolCallInfo, operation: string): Promise<string | undefined> {
    const cred = config.credential;
    if (!cred) return undefined;
    const cacheKey = cred.per === 'run' ? caller.runId : undefined;
    const cached = cacheKey ? credentials.get(cacheKey) : undefined;
    if (cached && cached.expiresAt - Date.now() > 60_000) return cached.token;
    const value = env[cred.keyEnv];
    if (!value) {
      throw new ToolError('credential_unavailable', `the credential key variable ${cred.keyEnv} is not set`, {
        retryable: true,
        details: { keyEnv: cred.keyEnv },
      });
    }
    const key: CredentialKey =
      cred.algorithm === 'HS256' ? { algorithm: 'HS256', secret: value } : { algorithm: 'EdDSA', key: value };
    const token = await issueCredential(
      {
        sub: caller.actor,
        ws: caller.workspaceId,
        ops: cred.per === 'run' ? [...allowed] : [operation],
        sid: caller.sessionId,
        tcid: caller.toolCallId,
      },
      key,
      cred.ttlSeconds,
    );
    if (cacheKey) {
      credentials.set(cacheKey, { token, expiresAt: Date.now() + cred.ttlSeconds * 1000 });
      // Runs end; their credentials need not be remembered past a handful.
      if (credentials.size > 64) credentials.delete(credentials.keys().next().value as string);
    }
    return token;
  }

  return defineTool<CliInput>({
    name: config.name,
    description: cliToolDescription(parts),
    input: inputSchema(config.name),
    // Until a call names a method, assume the worst: a destructive, non-idempotent write that must finish.
    isReadOnly: false,
    isConcurrencySafe: false,
    isDestructive: true,
    isIdempotent: false,
    interruptBehavior: 'block',
    capabilities: ['business'],
    timeoutMs: config.timeoutMs,
    factsOf: (input) => methodFacts(manifest, input.module, input.method),
    operationOf: (input) => `${input.module}.${input.method}`,
    // The model's view must be the whole result (spec §6): `summary`, the runtime default, would shorten it.
    defaultResultPolicy: { returnToModel: 'full', storeFull: true },
    skills: parts.skills,
    operations: parts.allowed,
    check,
    async execute(input, context) {
      const operation = `${input.module}.${input.method}`;
      const caller = await context.caller?.();
      const toolCallId = caller?.toolCallId ?? '';
      // Checked again here: a call that reached execution some other way (a pipeline step) is held to the same set.
      const refused = check(input);
      if (refused) throw refused;
      const token = caller ? await credentialFor(caller, operation) : undefined;
      const run = await runCliProcess({
        // The whitelisted constants, never the model's strings: `operation` is in `allowed`, so these are names
        // from the manifest (lowercase identifiers); the input travels on stdin only.
        argv: [...config.command, ...config.args, input.module, input.method],
        cwd: config.cwd ?? process.cwd(),
        env: cliEnv(config, env, {
          ...(token ? { [CREDENTIAL_ENV]: token } : {}),
          ...(caller
            ? { OAR_SESSION_ID: caller.sessionId, OAR_TURN_ID: caller.turnId, OAR_TOOL_CALL_ID: caller.toolCallId }
            : {}),
          OAR_TIME_ZONE: Intl.DateTimeFormat().resolvedOptions().timeZone,
          ...(context.idempotencyKey ? { [IDEMPOTENCY_KEY_ENV]: context.idempotencyKey } : {}),
        }),
        stdin: JSON.stringify(input.input),
        signal: context.signal,
        maxStdoutBytes: config.maxOutputBytes,
      });
      const timedOut = (context.signal.reason as Error | undefined)?.message === 'timeout';
      const outcome = interpret(input, run, timedOut);
      if ('error' in outcome) {
        throw failure(toolCallId, input, outcome.error, outcome.oarCode, outcome.retryable);
      }
      const status = outcome.result.partial ? 'partial' : 'success';
      const hints = uiHints(parts.postProcessors[operation], input, outcome.result.data, status);
      const agentOutput = record(
        { toolCallId, input },
        { status, result: outcome.result, error: null, ui_hints: hints },
      );
      return {
        text: JSON.stringify({ status, ...outcome.result }),
        mime: 'application/json',
        summary: `${operation}: ${status}`,
        agentOutput,
      };
    },
  });

  /** Refuse what could never run: a pair outside the allowed set, an input the method's schema rejects. */
  function check(input: CliInput): ToolError | undefined {
    const operation = `${input.module}.${input.method}`;
    // The tool call id is not known here: the executor fills in the action's call id when it records the failure.
    const id = '';
    if (!allowed.has(operation)) {
      return failure(
        id,
        input,
        {
          code: 'ACTION_NOT_ALLOWED',
          message: `${operation} is not allowed for ${config.name}`,
          module: input.module,
          method: input.method,
          details: { allowed: [...allowed] },
        },
        'action_not_allowed',
      );
    }
    const entry = manifest.methods.find((m) => m.module === input.module && m.method === input.method);
    if (!entry) return undefined;
    const valid = validateJsonSchema(entry.inputSchema, input.input);
    if (valid.ok) return undefined;
    const issues = valid.issues.map((i) => `${i.path || '(input)'}: ${i.message}`).join('; ');
    return failure(
      id,
      input,
      {
        code: 'INVALID_ACTION_INPUT',
        message: `${operation} input does not match: ${issues}`,
        module: input.module,
        method: input.method,
        input_schema: jsonSchemaText(entry.inputSchema),
      },
      'invalid_action_input',
    );
  }
}

/** What one CLI run amounts to: the result, or a structured error with its OAR code. */
function interpret(
  input: CliInput,
  run: CliProcessResult,
  timedOut: boolean,
): { result: ToolAgentResult } | { error: ToolAgentError; oarCode: string; retryable: boolean } {
  const where = { module: input.module, method: input.method };
  const fail = (code: string, message: string, oarCode: string, details: Record<string, unknown> = {}) => ({
    error: { code, message, ...where, ...(Object.keys(details).length > 0 ? { details } : {}) },
    oarCode,
    retryable: false,
  });
  if (run.spawnError) {
    return {
      ...fail('CLI_UNAVAILABLE', `the CLI could not start: ${run.spawnError}`, 'cli_unavailable'),
      retryable: true,
    };
  }
  // The executor classifies a stop by its own signal (tool_timeout / interrupted); the record names it too.
  if (run.aborted) {
    return timedOut
      ? {
          ...fail('CLI_TIMEOUT', 'the CLI did not finish in time; its process group was killed', 'tool_timeout'),
          retryable: true,
        }
      : fail('INTERRUPTED', 'the call was interrupted; the CLI process group was killed', 'interrupted');
  }
  if (run.oversize) {
    return fail('CLI_OUTPUT_TOO_LARGE', 'the CLI printed more than the configured maximum', 'cli_output_too_large', {
      stderr: run.stderr.slice(0, 2000),
    });
  }
  let json: unknown;
  try {
    json = JSON.parse(run.stdout);
  } catch {
    json = undefined;
  }
  const parsed = CliOutputSchema.safeParse(json);
  if (!parsed.success) {
    const diagnostics = { exitCode: run.exitCode, signal: run.signal, stderr: run.stderr.slice(0, 2000) };
    return run.exitCode !== 0
      ? fail(
          'CLI_EXIT_NONZERO',
          `the CLI exited with ${run.exitCode ?? run.signal} and no result`,
          'cli_exit_nonzero',
          diagnostics,
        )
      : fail('CLI_OUTPUT_INVALID', 'the CLI did not print one JSON result object', 'cli_output_invalid', diagnostics);
  }
  const output = parsed.data;
  if (!output.ok) {
    const error = { ...where, ...output.error };
    return { error, oarCode: CLI_CODES[error.code] ?? 'cli_failed', retryable: false };
  }
  if (output.module !== input.module || output.method !== input.method || run.exitCode !== 0) {
    return fail('CLI_OUTPUT_INVALID', 'the CLI answered for another call, or exited non-zero', 'cli_output_invalid', {
      exitCode: run.exitCode,
      answered: `${output.module}.${output.method}`,
    });
  }
  return {
    result: {
      module: output.module,
      method: output.method,
      data: output.data ?? null,
      ...(output.partial ? { partial: { not_done: output.partial.notDone, reason: output.partial.reason } } : {}),
    },
  };
}

/** The method's post-processor's hints, validated: a faulty one shows nothing rather than something wrong. */
function uiHints(
  processor: PostProcessor | undefined,
  input: CliInput,
  data: unknown,
  status: 'success' | 'partial',
): UiHint[] {
  if (typeof processor !== 'function') return [];
  try {
    const hints = processor({ module: input.module, method: input.method, input: input.input, data, status });
    const parsed = z.array(UiHintSchema).safeParse(hints ?? []);
    return parsed.success ? parsed.data : [];
  } catch {
    return [];
  }
}
