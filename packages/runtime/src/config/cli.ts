import { isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { EnvVarNameSchema } from './models.js';

/**
 * `tools.cli`: a business CLI behind one model-facing tool (Agent Tool Protocol, docs/tool-protocol.md). The config
 * file's form and the binding's are the same shape; the binding's paths are absolute (`absoluteCliConfig`), so a
 * session runs the same executable from any directory. Keys are named by environment variable, never given.
 */

const NAME = /^[a-z][a-z0-9_]*$/;

/** A whitelist entry: `module.method`, or `module.*` for every method of a module. */
export const OperationPatternSchema = z
  .string()
  .regex(/^[a-z][a-z0-9_]*\.([a-z][a-z0-9_]*|\*)$/, 'an operation is "module.method" or "module.*"');

export const CliCredentialConfigSchema = z.strictObject({
  /** HS256 (a shared secret) or EdDSA (OAR signs with a private key, the CLI verifies with the public one). */
  algorithm: z.enum(['HS256', 'EdDSA']),
  /** The variable holding OAR's signing key: the HS256 secret, or the EdDSA private key (PEM). */
  keyEnv: EnvVarNameSchema,
  /**
   * The variable the CLI reads its verification key from, passed to it: for EdDSA the public key (PEM, required);
   * for HS256 it is `keyEnv` itself (the shared secret), so leave it out.
   */
  verifyKeyEnv: EnvVarNameSchema.optional(),
  /** Lifetime of one credential in seconds, 300–600 (the protocol's 5–10 minutes). */
  ttlSeconds: z.number().int().min(300).max(600).default(300),
  /** `call`: a credential per call, scoped to its one operation; `run`: one per run, scoped to the allowed set. */
  per: z.enum(['call', 'run']).default('call'),
});
export type CliCredentialConfig = z.infer<typeof CliCredentialConfigSchema>;

export const CliToolConfigSchema = z
  .strictObject({
    /** The tool's name in the catalog. */
    name: z.string().regex(NAME, 'tool names are lowercase identifiers').default('project_cli'),
    /** A line about the business the CLI serves, added to the tool's description. */
    description: z.string().max(500).optional(),
    /** The executable and its fixed arguments (`["node", "./cli.js"]`): never a shell, never model text. */
    command: z.array(z.string().min(1)).min(1),
    /** Fixed configuration flags, given before MODULE METHOD (`["--store", "./business.db"]`). */
    args: z.array(z.string()).default([]),
    /** The `module.method` pairs the agents may call (∩ the CLI's router, read from `--describe`). */
    allow: z.array(OperationPatternSchema).min(1),
    /** The CLI's working directory (default: the config file's folder). */
    cwd: z.string().optional(),
    /** Variables passed to the CLI beyond PATH, LANG, TZ and the credential's key; nothing else is inherited. */
    env: z.array(EnvVarNameSchema).default([]),
    /** One call's time limit. */
    timeoutMs: z.number().int().min(100).max(600_000).default(30_000),
    /**
     * How long binding waits for `--describe`. Its own limit, not a call's: the manifest is read once as the
     * binding starts, when a cold CLI (an interpreter loading every module) is slowest, and a short call limit
     * must not make a loaded machine's start look like a broken CLI.
     */
    describeTimeoutMs: z.number().int().min(100).max(600_000).default(15_000),
    /** The most stdout a call may print; more is `CLI_OUTPUT_TOO_LARGE` (stderr is capped at 64 KiB, kept aside). */
    maxOutputBytes: z
      .number()
      .int()
      .min(1024)
      .max(64 * 1024 * 1024)
      .default(1024 * 1024),
    /** The controlled credential; without it the CLI runs without identity (local tools only). */
    credential: CliCredentialConfigSchema.optional(),
    /** Skill documents by module: Markdown on using the tool for that module (its first line is its summary). */
    skills: z.record(z.string().regex(NAME), z.string().min(1)).default({}),
    /** The skills listed in the tool's description and readable with `read_skill`. Disclosure only: never authority. */
    enabledSkills: z.array(z.string().regex(NAME)).default([]),
    /** An ES module exporting `postProcessors`: `{"calendar.read": (call) => UiHint[]}` (docs/tool-protocol.md). */
    postProcessors: z.string().optional(),
  })
  .superRefine((config, ctx) => {
    for (const [i, name] of config.enabledSkills.entries()) {
      if (!Object.hasOwn(config.skills, name)) {
        ctx.addIssue({
          code: 'custom',
          path: ['enabledSkills', i],
          message: `skill "${name}" is enabled but not in "skills"`,
        });
      }
    }
    if (config.credential?.algorithm === 'EdDSA' && !config.credential.verifyKeyEnv) {
      ctx.addIssue({
        code: 'custom',
        path: ['credential', 'verifyKeyEnv'],
        message: 'EdDSA needs verifyKeyEnv: the variable holding the public key the CLI verifies with',
      });
    }
  });
export type CliToolConfig = z.infer<typeof CliToolConfigSchema>;

/**
 * The binding's form: paths made absolute against the config file's folder (the command's first element only when
 * it is a path, `./cli.js`; a bare name such as `node` is looked up on PATH).
 */
export function absoluteCliConfig(config: CliToolConfig, baseDir: string): CliToolConfig {
  const abs = (path: string) => (isAbsolute(path) ? path : resolve(baseDir, path));
  const pathLike = (arg: string) => arg.startsWith('./') || arg.startsWith('../');
  return {
    ...config,
    command: config.command.map((arg) => (pathLike(arg) ? abs(arg) : arg)),
    args: config.args.map((arg) => (pathLike(arg) ? abs(arg) : arg)),
    cwd: abs(config.cwd ?? '.'),
    skills: Object.fromEntries(Object.entries(config.skills).map(([module, file]) => [module, abs(file)])),
    ...(config.postProcessors ? { postProcessors: abs(config.postProcessors) } : {}),
  };
}

/** The environment variables whose values are secret: the credential's signing key (redacted wherever recorded). */
export function cliSecretEnv(config: Pick<CliToolConfig, 'credential'>): string[] {
  return config.credential ? [config.credential.keyEnv] : [];
}
