import { isAbsolute } from 'node:path';
import { pathToFileURL } from 'node:url';
import { type OarError, oarError } from '@oar/protocol';
import type { HookConfig, HookInput, HookOutput } from '../../config/hooks.js';
import { HookOutputSchema, POINT_DECISIONS } from '../../config/hooks.js';
import { runCliProcess } from '../../tools/cli/process.js';

/** How one hook run ended: its (validated) answer, or a structured failure its failure policy then decides. */
export type HookRun =
  | { ok: true; output: HookOutput; durationMs: number }
  | { ok: false; error: OarError; durationMs: number };

/** The variables every command hook gets (when set): enough to find programs and read text, nothing secret. */
const BASE_ENV = ['PATH', 'LANG', 'TZ'] as const;

/** The part of a failed command's stderr kept in the error's details (redacted like everything recorded). */
const STDERR_TAIL = 2_000;

/** A function a module hook exports. Returning nothing allows. */
export type HookFunction = (
  input: HookInput,
  context: { signal: AbortSignal },
) => HookOutput | undefined | Promise<HookOutput | undefined>;

/**
 * Run one hook under its timeout and the caller's signal (an interrupt): a command without a shell, in its own
 * process group (killed whole on timeout), with only the variables it is allowed; or a module's function. Its
 * answer is checked against the protocol and against what its point accepts before anyone acts on it.
 */
export async function runHook(
  hook: HookConfig,
  input: HookInput,
  options: { signal: AbortSignal; env: Record<string, string | undefined>; cwd: string },
): Promise<HookRun> {
  const started = Date.now();
  const controller = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Error('timeout'));
  }, hook.timeoutMs);
  const onAbort = () => controller.abort(options.signal.reason);
  if (options.signal.aborted) onAbort();
  else options.signal.addEventListener('abort', onAbort, { once: true });
  const done = (result: { ok: true; output: HookOutput } | { ok: false; error: OarError }): HookRun => ({
    ...result,
    durationMs: Date.now() - started,
  });
  const timeout = () =>
    oarError('hook_timeout', `hook "${hook.name}" did not answer within ${hook.timeoutMs} ms`, {
      retryable: true,
      details: { hook: hook.name, timeoutMs: hook.timeoutMs },
    });
  try {
    const answer = hook.command
      ? await commandAnswer(hook, hook.command, input, controller.signal, options)
      : await moduleAnswer(hook, input, controller.signal);
    if (timedOut) return done({ ok: false, error: timeout() });
    if (!answer.ok) return done(answer);
    return done(checkAnswer(hook, answer.value));
  } catch (error) {
    if (timedOut) return done({ ok: false, error: timeout() });
    if (options.signal.aborted) {
      return done({ ok: false, error: oarError('interrupted', `hook "${hook.name}" was cancelled by an interrupt`) });
    }
    return done({
      ok: false,
      error: oarError('hook_failed', `hook "${hook.name}" threw: ${(error as Error)?.message ?? String(error)}`, {
        details: { hook: hook.name },
      }),
    });
  } finally {
    clearTimeout(timer);
    options.signal.removeEventListener('abort', onAbort);
  }
}

type Answer = { ok: true; value: unknown } | { ok: false; error: OarError };

async function commandAnswer(
  hook: HookConfig,
  argv: readonly string[],
  input: HookInput,
  signal: AbortSignal,
  options: { env: Record<string, string | undefined>; cwd: string },
): Promise<Answer> {
  const env: Record<string, string> = {};
  for (const name of [...BASE_ENV, ...hook.env]) {
    const value = options.env[name];
    if (value !== undefined) env[name] = value;
  }
  env.OAR_HOOK_POINT = hook.point;
  env.OAR_HOOK_NAME = hook.name;
  const result = await runCliProcess({
    argv,
    cwd: hook.cwd ?? options.cwd,
    env,
    stdin: `${JSON.stringify(input)}\n`,
    signal,
    maxStdoutBytes: hook.maxOutputBytes,
    graceMs: 500,
  });
  const details = { hook: hook.name, stderr: result.stderr.slice(-STDERR_TAIL) };
  if (result.spawnError !== undefined) {
    return {
      ok: false,
      error: oarError('hook_failed', `hook "${hook.name}" could not start: ${result.spawnError}`, {
        details: { ...details, command: argv[0] },
      }),
    };
  }
  if (result.aborted) throw new Error('aborted');
  if (result.oversize) {
    return {
      ok: false,
      error: oarError('hook_output_too_large', `hook "${hook.name}" printed more than ${hook.maxOutputBytes} bytes`, {
        details: { ...details, maxOutputBytes: hook.maxOutputBytes },
      }),
    };
  }
  if (result.exitCode !== 0) {
    const how = result.exitCode === null ? `was killed by ${result.signal}` : `exited with status ${result.exitCode}`;
    return {
      ok: false,
      error: oarError('hook_failed', `hook "${hook.name}" ${how}`, {
        details: { ...details, exitCode: result.exitCode, signal: result.signal },
      }),
    };
  }
  const text = result.stdout.trim();
  // Saying nothing is saying yes: a hook that only watches need not print.
  if (text === '') return { ok: true, value: { decision: 'allow' } };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return {
      ok: false,
      error: oarError('hook_output_invalid', `hook "${hook.name}" printed something that is not JSON`, {
        details: { hook: hook.name, reason: (error as Error).message, stdout: text.slice(0, 500) },
      }),
    };
  }
}

async function moduleAnswer(hook: HookConfig, input: HookInput, signal: AbortSignal): Promise<Answer> {
  const spec = hook.module as string;
  const name = hook.export ?? 'default';
  let fn: unknown;
  try {
    const mod = (await import(isAbsolute(spec) ? pathToFileURL(spec).href : spec)) as Record<string, unknown>;
    fn = mod[name];
  } catch (error) {
    return {
      ok: false,
      error: oarError('hook_failed', `hook "${hook.name}": cannot load ${spec}: ${(error as Error).message}`, {
        details: { hook: hook.name, module: spec },
      }),
    };
  }
  if (typeof fn !== 'function') {
    return {
      ok: false,
      error: oarError('hook_failed', `hook "${hook.name}": ${spec} exports no function "${name}"`, {
        details: { hook: hook.name, module: spec, export: name },
      }),
    };
  }
  // The function cannot be killed: the timeout stops waiting for it (and aborts its signal so it can stop itself).
  const aborted = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(new Error('aborted'));
    signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
  });
  const value = await Promise.race([
    Promise.resolve((fn as HookFunction)(structuredClone(input), { signal })),
    aborted,
  ]);
  return { ok: true, value: value ?? { decision: 'allow' } };
}

/** The answer against the protocol and the point: a decision the point does not take is a malformed answer. */
function checkAnswer(
  hook: HookConfig,
  value: unknown,
): { ok: true; output: HookOutput } | { ok: false; error: OarError } {
  const parsed = HookOutputSchema.safeParse(value);
  const invalid = (message: string, details: Record<string, unknown> = {}) => ({
    ok: false as const,
    error: oarError('hook_output_invalid', `hook "${hook.name}": ${message}`, {
      details: { hook: hook.name, ...details },
    }),
  });
  if (!parsed.success) {
    return invalid('its answer does not match the hook protocol', {
      issues: parsed.error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message })),
    });
  }
  const output = parsed.data;
  if (!POINT_DECISIONS[hook.point].includes(output.decision)) {
    return invalid(`"${output.decision}" is not a decision a ${hook.point} hook can make`, {
      decision: output.decision,
      accepted: POINT_DECISIONS[hook.point],
    });
  }
  if (output.decision === 'rewrite') {
    const wanted = hook.point === 'before_tool_call' ? 'input' : 'messages';
    if (output[wanted] === undefined) return invalid(`a rewrite at ${hook.point} carries "${wanted}"`);
  }
  return { ok: true, output };
}
