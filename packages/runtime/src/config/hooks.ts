import { isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { EnvVarNameSchema } from './models.js';
import { absoluteModuleSpec } from './modules.js';

/**
 * Hooks (docs/hooks.md): a team's own checks in the path of every tool call and model call. A hook is a command
 * (JSON on stdin, JSON on stdout) or a module function; it answers with a decision that the runtime records and
 * then applies through its own validation and permission checks — a hook never runs anything for the runtime.
 * The config file's form and the binding's are the same shape; the binding's paths are absolute (`absoluteHooks`).
 */

/** Where a hook runs. */
export const HOOK_POINTS = ['before_tool_call', 'after_tool_call', 'before_model_call', 'turn_end'] as const;
export const HookPointSchema = z.enum(HOOK_POINTS);
export type HookPoint = z.infer<typeof HookPointSchema>;

/** The executors a matcher may name (an action's `executor.type`). */
export const HOOK_EXECUTORS = ['tool', 'agent', 'pipeline', 'service', 'human', 'runtime'] as const;

/** What a hook may answer. Which decisions a point accepts: `POINT_DECISIONS`. */
export const HOOK_DECISIONS = ['allow', 'deny', 'ask', 'rewrite'] as const;
export type HookDecision = (typeof HOOK_DECISIONS)[number];

export const POINT_DECISIONS: Record<HookPoint, readonly HookDecision[]> = {
  before_tool_call: ['allow', 'deny', 'ask', 'rewrite'],
  // The call already ran: a veto withholds its result from the model (the full output stays stored).
  after_tool_call: ['allow', 'deny'],
  // No human waits in front of a model call: a hook can stop it or change what it is sent.
  before_model_call: ['allow', 'deny', 'rewrite'],
  // The turn has ended: a hook observes it (and may fail, which is recorded).
  turn_end: ['allow'],
};

/** A tool-name pattern: an exact name, or a prefix ending in `*` (`docs.*`: every tool of MCP server `docs`). */
const ToolPatternSchema = z.string().regex(/^[A-Za-z0-9_.:-]+\*?$|^\*$/, 'a tool name, or a prefix ending in "*"');

export const HookMatcherSchema = z.strictObject({
  /** Tool names (or `prefix*` patterns) the hook applies to; every tool when left out. */
  tools: z.array(ToolPatternSchema).min(1).optional(),
  /** Executor types the hook applies to (tool actions are `tool`); every one when left out. */
  executors: z.array(z.enum(HOOK_EXECUTORS)).min(1).optional(),
  /** Agents whose calls the hook applies to; every agent when left out. */
  agents: z.array(z.string().min(1)).min(1).optional(),
});
export type HookMatcher = z.infer<typeof HookMatcherSchema>;

export const HookConfigSchema = z
  .strictObject({
    /** The hook's name in the record (`hook.*` events); unique in the binding. */
    name: z.string().regex(/^[A-Za-z0-9_.-]+$/, 'hook names use letters, digits, "_", "." and "-"'),
    point: HookPointSchema,
    /** A command as an argv array (never a shell): JSON on stdin, JSON (or nothing, which allows) on stdout. */
    command: z.array(z.string().min(1)).min(1).optional(),
    /** An ES module (absolute path or package) exporting the hook function. */
    module: z.string().min(1).optional(),
    /** The module's export that is the hook (default `default`). */
    export: z.string().min(1).optional(),
    matcher: HookMatcherSchema.optional(),
    /** How long the hook may take; past it the hook failed (`hook_timeout`). */
    timeoutMs: z.number().int().min(10).max(600_000).default(10_000),
    /**
     * What a hook that fails (exits non-zero, times out, answers garbage) decides: `deny` (fail closed, the default
     * before a tool or model call) or `allow` (fail open, the default after a tool call and at the turn's end).
     */
    onFailure: z.enum(['deny', 'allow']).optional(),
    /** Variables passed to a command hook beyond PATH, LANG and TZ; nothing else of OAR's environment is. */
    env: z.array(EnvVarNameSchema).default([]),
    /** A command hook's working directory (default: the session's workspace). */
    cwd: z.string().optional(),
    /** The most stdout a command hook may print (default 1 MiB); more is `hook_output_too_large`. */
    maxOutputBytes: z
      .number()
      .int()
      .min(1024)
      .max(16 * 1024 * 1024)
      .default(1024 * 1024),
  })
  .superRefine((hook, ctx) => {
    if ((hook.command === undefined) === (hook.module === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['command'], message: 'a hook has exactly one of "command" and "module"' });
    }
    if (hook.export !== undefined && hook.module === undefined) {
      ctx.addIssue({ code: 'custom', path: ['export'], message: '"export" names a function of "module"' });
    }
    const tooled = hook.point === 'before_tool_call' || hook.point === 'after_tool_call';
    if (!tooled && hook.matcher && (hook.matcher.tools || hook.matcher.executors)) {
      ctx.addIssue({
        code: 'custom',
        path: ['matcher'],
        message: `a ${hook.point} hook matches agents only (it sees no tool call)`,
      });
    }
  });
export type HookConfig = z.infer<typeof HookConfigSchema>;

export const HooksSchema = z.array(HookConfigSchema).superRefine((hooks, ctx) => {
  const seen = new Set<string>();
  for (const [i, hook] of hooks.entries()) {
    if (seen.has(hook.name)) {
      ctx.addIssue({ code: 'custom', path: [i, 'name'], message: `two hooks are named "${hook.name}"` });
    }
    seen.add(hook.name);
  }
});
export type HooksConfig = z.infer<typeof HooksSchema>;

/** The failure policy in force: fail closed before a call, open after it. */
export function failurePolicy(hook: HookConfig): 'deny' | 'allow' {
  return hook.onFailure ?? (hook.point === 'before_tool_call' || hook.point === 'before_model_call' ? 'deny' : 'allow');
}

/**
 * The binding's form: a command's path-like elements (`./hooks/check.sh`), the module and the cwd made absolute
 * against the config file's folder, so a session runs the same hook from any directory. A bare command name
 * (`node`) is looked up on PATH; a package name stays as it is.
 */
export function absoluteHooks(hooks: HooksConfig, baseDir: string): HooksConfig {
  const pathLike = (arg: string) => arg.startsWith('./') || arg.startsWith('../');
  return hooks.map((hook) => ({
    ...hook,
    ...(hook.command ? { command: hook.command.map((arg) => (pathLike(arg) ? resolve(baseDir, arg) : arg)) } : {}),
    ...(hook.module ? { module: absoluteModuleSpec(hook.module, baseDir) } : {}),
    ...(hook.cwd ? { cwd: isAbsolute(hook.cwd) ? hook.cwd : resolve(baseDir, hook.cwd) } : {}),
  }));
}

// ----- the protocol ---------------------------------------------------------------------------------------------

/** A message of a model request as a hook sees it (the runtime sends a system prompt and the transcript). */
export const HookMessageSchema = z.strictObject({
  role: z.enum(['system', 'user']),
  content: z.string(),
});
export type HookMessage = z.infer<typeof HookMessageSchema>;

/**
 * What a hook answers (stdout of a command, the return value of a function). Empty stdout means `allow`.
 * `rewrite` carries the new tool input (`input`) or the new model messages (`messages`), which are validated again.
 */
export const HookOutputSchema = z.looseObject({
  decision: z.enum(HOOK_DECISIONS),
  /** Why: shown to the human for `ask`, to the model for `deny`, recorded always. */
  reason: z.string().max(4_000).optional(),
  input: z.record(z.string(), z.unknown()).optional(),
  messages: z.array(HookMessageSchema).min(1).optional(),
});
export type HookOutput = z.infer<typeof HookOutputSchema>;

/** What a hook is given (stdin of a command, the argument of a function). */
export interface HookInput {
  /** The protocol's version: fields are only ever added within one version. */
  version: 1;
  point: HookPoint;
  hook: string;
  sessionId: string;
  threadId: string;
  turnId: string;
  agent: string;
  workspaceRoot: string;
  /** A tool call (before/after_tool_call). */
  toolCallId?: string;
  tool?: {
    name: string;
    isReadOnly: boolean;
    isDestructive: boolean;
    isConcurrencySafe: boolean;
    capabilities: string[];
  };
  executor?: { type: string; target: string };
  input?: Record<string, unknown>;
  /** after_tool_call: what the call returned (its text capped at 64 KiB), or how it failed. */
  output?: { text: string; truncated: boolean; structured?: Record<string, unknown>; summary?: string };
  /** before_model_call: the messages about to be sent, and the model. */
  messages?: HookMessage[];
  model?: { modelId: string; provider: string };
  /** turn_end: how the turn ended. */
  turn?: { outcome: 'completed' | 'failed' | 'cancelled'; answer?: string; error?: { code: string; message: string } };
}
