import { z } from 'zod';
import { EnvVarNameSchema } from './models.js';

/**
 * The `exec` tool's configuration, part of a session's binding (`tools.exec` in the config file): which variables
 * of the runtime's environment a command sees, whether it may use the network, how it is sandboxed, and which
 * commands only read. See docs/commands.md.
 */

/** Commands that only read, by argv prefix: they run concurrently with other reads and are allowed in `default`. */
export const DEFAULT_READ_ONLY_COMMANDS = [
  'cat',
  'date',
  'df',
  'du',
  'echo',
  'file',
  'git diff',
  'git log',
  'git show',
  'git status',
  'head',
  'ls',
  'pwd',
  'stat',
  'tail',
  'wc',
  'which',
] as const;

/** A command prefix: one or more words separated by single spaces (`git status`, `npm test`). */
export const CommandPrefixSchema = z
  .string()
  .trim()
  .min(1)
  .max(200)
  .regex(/^\S+( \S+)*$/, 'a command prefix is words separated by single spaces, e.g. "git status"');

export const ExecSandboxSchema = z.strictObject({
  /**
   * `bwrap`: run every command under bubblewrap (Linux); `none`: no sandbox (recorded as `profile: none`, and
   * every call is asked unless `unsandboxed` says otherwise). Default `bwrap`.
   */
  profile: z.enum(['bwrap', 'none']).default('bwrap'),
  /** Let commands reach the network (default false: only loopback inside a private network namespace). */
  network: z.boolean().default(false),
  /**
   * What a call does when the sandbox cannot start here (no bwrap, no user namespaces, not Linux) or the profile is
   * `none`: `ask` a human (default), `deny` it, or `allow` it unsandboxed (still recorded as `profile: none`).
   */
  unsandboxed: z.enum(['ask', 'deny', 'allow']).default('ask'),
  /** Absolute paths hidden from commands (an empty directory in their place), beyond the store and $HOME. */
  hide: z.array(z.string().min(1).startsWith('/', 'hidden paths are absolute')).default([]),
});
export type ExecSandbox = z.infer<typeof ExecSandboxSchema>;

export const ExecConfigSchema = z.strictObject({
  /** Variables of the runtime's environment passed to commands by name (default PATH, HOME, LANG, TERM). */
  env: z.array(EnvVarNameSchema).default(['PATH', 'HOME', 'LANG', 'TERM']),
  /** Variables passed to commands whose values are secrets: redacted from every output, event and artifact. */
  secrets: z.array(EnvVarNameSchema).default([]),
  /** Command prefixes that only read (default: ls, cat, git status…): see DEFAULT_READ_ONLY_COMMANDS. */
  readOnlyCommands: z.array(CommandPrefixSchema).default([...DEFAULT_READ_ONLY_COMMANDS]),
  sandbox: ExecSandboxSchema.default({ profile: 'bwrap', network: false, unsandboxed: 'ask', hide: [] }),
  /** The default per-call timeout (a call may ask for less or more, up to `maxTimeoutMs`). Default 120 s. */
  timeoutMs: z.number().int().min(100).max(86_400_000).default(120_000),
  /** The longest timeout a call may ask for. Default 30 min. */
  maxTimeoutMs: z.number().int().min(100).max(86_400_000).default(1_800_000),
  /** How long a terminated process group gets between SIGTERM and SIGKILL. Default 2 s. */
  killGraceMs: z.number().int().min(0).max(60_000).default(2_000),
  /** Background processes one session may have running at once. Default 4. */
  maxBackground: z.number().int().min(0).max(64).default(4),
});
export type ExecConfig = z.infer<typeof ExecConfigSchema>;

/** The secret variables of a binding's exec config: redacted wherever output is recorded (redaction/sources.ts). */
export function execSecretEnv(config: Pick<ExecConfig, 'secrets'>): string[] {
  return [...config.secrets];
}
