import { z } from 'zod';
import { CREDENTIAL_ENV, type CredentialClaims, type CredentialKey, grants, verifyCredential } from './credential.js';
import { CliError, type CliOutput } from './output.js';
import { schemaText } from './schema-text.js';

/**
 * The router of a business CLI: the only dispatcher, a whitelist of `module.method` pairs, each bound to one
 * handler and one strict zod schema. `runCli` is the whole boundary: arguments are `[config flags] MODULE METHOD
 * [format flags]`, the input is the JSON object on stdin (never flags or arguments made from model text), the
 * credential is in the environment, and the output is one JSON object. `--describe` prints the manifest.
 */

/** What OAR's permissions, scheduling and recovery read of a method (Agent Tool Protocol: per method, not per tool). */
export const MethodFactsSchema = z.object({
  readOnly: z.boolean(),
  destructive: z.boolean(),
  idempotent: z.boolean(),
  /**
   * OAR: not idempotent by itself, but the method stores what it did under the call's idempotency key and answers a
   * repeated key with that — so a call left in flight by a crash is retried with the same key instead of `lost`.
   */
  idempotentByKey: z.boolean().optional(),
  concurrencySafe: z.boolean(),
  /** `cancel`: an interrupt stops it; `block`: it finishes first. */
  interrupt: z.enum(['cancel', 'block']),
});
export type MethodFacts = z.infer<typeof MethodFactsSchema>;

/**
 * Where OAR puts a call's idempotency key: the same for the same attempt of one call (a retry after a crash), a new
 * one for a new attempt. A method that must not act twice stores what it did under the key and answers a repeated
 * key with that (docs/tool-protocol.md "Idempotency keys").
 */
export const IDEMPOTENCY_KEY_ENV = 'OAR_IDEMPOTENCY_KEY';

/**
 * What a handler gets besides its input: who acts (the verified credential), the CLI's config flags, and the call's
 * idempotency key (absent when OAR did not pass one: a call from a shell, an older OAR).
 */
export interface MethodContext {
  credential: CredentialClaims | undefined;
  config: Record<string, string>;
  env: Record<string, string | undefined>;
  idempotencyKey: string | undefined;
}

export interface MethodDefinition<S extends z.ZodType = z.ZodType> {
  description: string;
  input: S;
  facts: MethodFacts;
  handler: (input: z.infer<S>, context: MethodContext) => Promise<unknown> | unknown;
}

/** A method's definition with its handler typed from its schema. */
export function method<S extends z.ZodType>(definition: MethodDefinition<S>): MethodDefinition {
  return definition as unknown as MethodDefinition;
}

/** A partial success: the data of what was done, and what was not. */
export class PartialResult {
  constructor(
    readonly data: unknown,
    readonly notDone: unknown[],
    readonly reason: string,
  ) {}
}

export interface CliDefinition {
  name: string;
  version: string;
  description?: string;
  /** `module → method → definition`: the whitelist. */
  modules: Record<string, Record<string, MethodDefinition>>;
  /**
   * How the controlled credential is verified: the algorithm and the environment variable holding its key (a
   * secret for HS256, a PEM key for EdDSA). Without it the CLI runs without identity (local tools only).
   */
  credential?: { algorithm: 'HS256' | 'EdDSA'; keyEnv: string };
}

const NAME = /^[a-z][a-z0-9_]*$/;

export function defineCli(definition: CliDefinition): CliDefinition {
  for (const [module, methods] of Object.entries(definition.modules)) {
    if (!NAME.test(module)) throw new Error(`module name "${module}" must match ${NAME}`);
    for (const name of Object.keys(methods)) {
      if (!NAME.test(name)) throw new Error(`method name "${module}.${name}" must match ${NAME}`);
    }
  }
  return definition;
}

export const ManifestSchema = z.object({
  name: z.string(),
  version: z.string(),
  description: z.string().optional(),
  credential: z.object({ algorithm: z.enum(['HS256', 'EdDSA']) }).optional(),
  methods: z.array(
    z.object({
      module: z.string(),
      method: z.string(),
      description: z.string(),
      inputSchema: z.record(z.string(), z.unknown()),
      facts: MethodFactsSchema,
    }),
  ),
});
export type Manifest = z.infer<typeof ManifestSchema>;

/** The `--describe` manifest: every method with its input JSON Schema and facts. */
export function manifestOf(cli: CliDefinition): Manifest {
  return {
    name: cli.name,
    version: cli.version,
    ...(cli.description ? { description: cli.description } : {}),
    ...(cli.credential ? { credential: { algorithm: cli.credential.algorithm } } : {}),
    methods: Object.entries(cli.modules).flatMap(([module, methods]) =>
      Object.entries(methods).map(([name, m]) => {
        const { $schema: _dialect, ...inputSchema } = z.toJSONSchema(m.input, {
          target: 'draft-2020-12',
          io: 'input',
          unrepresentable: 'any',
        }) as Record<string, unknown>;
        return { module, method: name, description: m.description, inputSchema, facts: m.facts };
      }),
    ),
  };
}

export interface CliRun {
  exitCode: number;
  /** Exactly one JSON object (and a newline). */
  stdout: string;
}

/** Config flags before MODULE METHOD (`--name value`), format flags after (`--pretty`). */
function parseArgs(argv: readonly string[]): {
  config: Record<string, string>;
  module: string;
  method: string;
  pretty: boolean;
} {
  const config: Record<string, string> = {};
  let i = 0;
  while (i < argv.length && argv[i]?.startsWith('--')) {
    const flag = (argv[i] as string).slice(2);
    const value = argv[i + 1];
    if (!/^[a-z][a-z0-9-]*$/.test(flag) || value === undefined) {
      throw new CliError('USAGE_ERROR', `expected [--config-flag value]… MODULE METHOD [--pretty]; got "${argv[i]}"`);
    }
    config[flag] = value;
    i += 2;
  }
  const [module, name, ...format] = argv.slice(i);
  if (!module || !name) throw new CliError('USAGE_ERROR', 'expected MODULE METHOD after the config flags');
  for (const flag of format) {
    if (flag !== '--pretty') throw new CliError('USAGE_ERROR', `unknown format flag "${flag}" (only --pretty)`);
  }
  return { config, module, method: name, pretty: format.includes('--pretty') };
}

function credentialKey(cli: CliDefinition, env: Record<string, string | undefined>): CredentialKey | undefined {
  if (!cli.credential) return undefined;
  const value = env[cli.credential.keyEnv];
  if (!value) {
    throw new CliError('CREDENTIAL_INVALID', `the CLI's verification key is not configured (${cli.credential.keyEnv})`);
  }
  return cli.credential.algorithm === 'HS256'
    ? { algorithm: 'HS256', secret: value }
    : { algorithm: 'EdDSA', key: value };
}

/**
 * Run one call: parse the arguments, look the pair up in the whitelist, verify the credential and its scope, parse
 * stdin with the method's schema, run the handler, and print one JSON object. Exit 0 on success (a partial one
 * too), 1 on a failure, 2 on a usage error.
 */
export async function runCli(
  cli: CliDefinition,
  io: { argv: readonly string[]; stdin: string; env: Record<string, string | undefined> },
): Promise<CliRun> {
  if (io.argv.length === 1 && io.argv[0] === '--describe') {
    return { exitCode: 0, stdout: `${JSON.stringify(manifestOf(cli))}\n` };
  }
  let pretty = false;
  let where: { module?: string; method?: string } = {};
  const print = (output: CliOutput, exitCode: number): CliRun => ({
    exitCode,
    stdout: `${JSON.stringify(output, null, pretty ? 2 : undefined)}\n`,
  });
  try {
    const args = parseArgs(io.argv);
    pretty = args.pretty;
    where = { module: args.module, method: args.method };
    // Own-property lookups only: `__proto__` or `constructor` are never a method.
    const methods = Object.hasOwn(cli.modules, args.module) ? cli.modules[args.module] : undefined;
    const definition = methods && Object.hasOwn(methods, args.method) ? methods[args.method] : undefined;
    if (!definition) {
      throw new CliError('ACTION_NOT_ALLOWED', `${args.module}.${args.method} is not a method of ${cli.name}`, where);
    }
    const key = credentialKey(cli, io.env);
    const credential = key ? await verifyCredential(io.env[CREDENTIAL_ENV], key) : undefined;
    if (credential && !grants(credential, args.module, args.method)) {
      throw new CliError('ACTION_NOT_ALLOWED', `the credential does not allow ${args.module}.${args.method}`, where);
    }
    let raw: unknown;
    try {
      raw = io.stdin.trim() === '' ? {} : JSON.parse(io.stdin);
    } catch (error) {
      throw new CliError('INPUT_NOT_JSON', `stdin is not JSON: ${(error as Error).message}`, where);
    }
    const parsed = definition.input.safeParse(raw);
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join('.') || '(input)'}: ${i.message}`);
      throw new CliError(
        'INVALID_ACTION_INPUT',
        `${args.module}.${args.method} input does not match: ${issues.join('; ')}`,
        {
          ...where,
          input_schema: schemaText(definition.input),
        },
      );
    }
    const result = await definition.handler(parsed.data, {
      credential,
      config: args.config,
      env: io.env,
      idempotencyKey: io.env[IDEMPOTENCY_KEY_ENV] || undefined,
    });
    if (result instanceof PartialResult) {
      return print(
        {
          ok: true,
          module: args.module,
          method: args.method,
          data: result.data,
          partial: { notDone: result.notDone, reason: result.reason },
        },
        0,
      );
    }
    return print({ ok: true, module: args.module, method: args.method, data: result ?? null }, 0);
  } catch (error) {
    const failure =
      error instanceof CliError
        ? error.toJSON()
        : { code: 'HANDLER_FAILED', message: (error as Error)?.message ?? String(error), ...where };
    return print({ ok: false, status: 'failure', error: failure }, failure.code === 'USAGE_ERROR' ? 2 : 1);
  }
}

/** The process entry of a CLI built on the SDK: reads stdin, runs, prints, exits. */
export async function main(cli: CliDefinition): Promise<never> {
  const chunks: Buffer[] = [];
  if (!process.stdin.isTTY) for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const run = await runCli(cli, {
    argv: process.argv.slice(2),
    stdin: Buffer.concat(chunks).toString('utf8'),
    env: process.env,
  });
  process.stdout.write(run.stdout);
  process.exit(run.exitCode);
}
