/*
 * The work of the commands runtime-commands.ts registers, imported by their actions when one runs: `oar --help` and
 * `oar --version` do not load the engine, nor what it loads (zod, the model providers, the database drivers).
 */
import { realpathSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { type ActionDecision, oarError, type RuntimeEvent } from '@oar/protocol';
import {
  absoluteModelSpec,
  type BindingUpdate,
  type BudgetDimension,
  bindingModel,
  buildRuntime,
  type ChangeLimitsInput,
  EXIT,
  loadConfig,
  type OarConfig,
  OarRuntimeError,
  PERMISSION_MODES,
  type PermissionMode,
  Runtime,
  Store,
  ToolRegistry,
  type WorkerOptions,
  workspaceTools,
} from '@oar/runtime';
import { CtrlC, interruptOnceStarted } from './ctrl-c.js';
import { storeFlag } from './demo.js';
import { printJson, readAttachments, redactedForOutput, turnErrorText, UsageError } from './io.js';
import { camel, type GlobalOptions, LIMIT_FLAGS } from './options.js';
import { renderEvent } from './render.js';
import {
  type ApprovalMode,
  attachPrinter,
  type DriveResult,
  driveSession,
  readSettled,
  requestDetails,
} from './session-driver.js';

/**
 * Open the configured runtime for work. `sessions`: the sessions this process's worker drives — the CLI never
 * touches other sessions' threads (no recovery of work it was not asked about); 'all' only for `resume --all`.
 */
export async function openRuntime(
  options: GlobalOptions,
  sessions: WorkerOptions['sessions'],
  open: { createStore?: boolean } = {},
): Promise<{ runtime: Runtime; store: Store; config: OarConfig }> {
  const cwd = process.cwd();
  const { config, baseDir } = await loadConfig(options.config, cwd);
  const store = options.store ?? process.env.OAR_STORE;
  const opened = await buildRuntime(config, baseDir, {
    cwd,
    env: process.env,
    worker: { sessions: sessions ?? [] },
    ...(store ? { store } : {}),
    ...(options.model ? { model: options.model } : {}),
    ...(options.workspace ? { workspace: options.workspace } : {}),
    ...(options.runner ? { runner: options.runner } : {}),
    ...open,
  });
  return { ...opened, config };
}

/**
 * Open the store and a runtime that continues existing sessions: each runs with its own recorded binding, so
 * nothing of the local config matters but where the store is and how long this process's leases last (a config
 * naming a tool module or workspace that does not exist here must not stop a respond). `sessions`: what the worker
 * drives; `false`: no worker (reading commands, `interrupt`).
 */
export async function openForSessions(
  options: GlobalOptions,
  sessions: WorkerOptions['sessions'] | false,
): Promise<{ runtime: Runtime; store: Store }> {
  const cwd = process.cwd();
  const { config } = await loadConfig(options.config, cwd);
  // Every caller works on sessions that exist: a store that does not is reported (store_not_found), never made.
  const store = await Store.open(options.store ?? process.env.OAR_STORE ?? config.store, { cwd, create: false });
  const runtime = await Runtime.create({
    store,
    workspaceRoot: cwd,
    tools: new ToolRegistry(workspaceTools()),
    model: (agent, binding) => bindingModel(agent, binding, process.env),
    worker: sessions === false ? false : { ...config.worker, sessions },
    resumeOnStart: sessions !== false,
  }).catch(async (error: unknown) => {
    await store.close();
    throw error;
  });
  return { runtime, store };
}

/** Reading commands: a control plane over the store, no worker, no tools loaded, no model. */
function openForReading(options: GlobalOptions): Promise<{ runtime: Runtime; store: Store }> {
  return openForSessions(options, false);
}

/**
 * A listing (`oar sessions`, `oar resume` without a session) over a store that does not exist lists nothing, and
 * says where it looked; the store is not created to say so. `missing`: the place where no store is.
 */
async function openForListing(
  options: GlobalOptions,
): Promise<{ runtime: Runtime; store: Store } | { missing: string }> {
  try {
    return await openForReading(options);
  } catch (error) {
    if (!(error instanceof OarRuntimeError) || error.code !== 'store_not_found') throw error;
    return { missing: String(error.error.details?.store ?? '') };
  }
}

/**
 * An unknown session, said once and plainly, with the store it was looked for in: an id means something only in
 * its store, and the default store is the working directory's (main.ts adds how to look in another).
 */
export function sessionNotInStore(error: unknown, location: string): unknown {
  if (!(error instanceof OarRuntimeError) || error.code !== 'session_not_found') return error;
  const sessionId = error.error.details?.sessionId;
  return new OarRuntimeError('session_not_found', `no session ${String(sessionId)} in the store ${location}`, {
    details: { ...error.error.details, store: location },
  });
}

function approvalMode(options: { approveAll?: boolean; denyAll?: boolean }): ApprovalMode {
  if (options.approveAll && options.denyAll) {
    throw new UsageError(oarError('invalid_option', '--approve-all and --deny-all exclude each other'));
  }
  if (options.approveAll) return 'approve';
  if (options.denyAll) return 'deny';
  return process.stdin.isTTY && process.stdout.isTTY ? 'ask' : 'leave';
}

/** The main thread's running turn, else its last: the turn whose outcome a respond or a limit change reports. */
export async function mainTurnId(runtime: Runtime, sessionId: string): Promise<string> {
  const { snapshot } = await readSettled(() => runtime.getSession({ sessionId, limit: 0 }));
  const main = snapshot.threads[0];
  return main?.activeTurnId ?? main?.turns.at(-1)?.turnId ?? '';
}

/** After a decision or a limit change: follow the main thread's turn to where it stops, and report its outcome. */
async function continueAndReport(
  runtime: Runtime,
  sessionId: string,
  printer: ReturnType<typeof attachPrinter>,
  options: { json?: boolean; store?: string },
  location: string,
): Promise<number> {
  const result = await driveSession(runtime, sessionId, await mainTurnId(runtime, sessionId), {
    json: options.json === true,
    approvals: 'leave',
    printer,
  });
  await printer.stop();
  return report(result, sessionId, options, location);
}

export async function withRuntime<T>(
  opened: { runtime: Runtime; store: Store },
  fn: (runtime: Runtime) => Promise<T>,
): Promise<T> {
  try {
    return await fn(opened.runtime);
  } catch (error) {
    throw sessionNotInStore(error, opened.store.location);
  } finally {
    await opened.runtime.close();
    await opened.store.close();
  }
}

export interface RunOptions extends GlobalOptions {
  json?: boolean;
  /** Record the turn and return: a worker elsewhere runs it. */
  detach?: boolean;
  /** Print the model's output as it arrives (`--stream` / `--no-stream`; default: in a terminal, without --json). */
  stream?: boolean;
  approveAll?: boolean;
  denyAll?: boolean;
  session?: string;
  agent?: string;
  title?: string;
  /** Files for the turn (`--attach`, repeatable). */
  attach?: string[];
}

/**
 * `run --session S` continues S with S's own binding: a flag that says otherwise is a mistake to point out, not
 * a silent switch (changing a binding is `oar session update`).
 */
async function checkBindingFlags(runtime: Runtime, sessionId: string, options: RunOptions): Promise<void> {
  const bound = await runtime.getBinding(sessionId);
  if (!bound) return;
  const conflicts: { flag: string; bound: string; given: string }[] = [];
  if (options.model) {
    const given = absoluteModelSpec(options.model, process.cwd());
    const choice = bound.binding.mainAgent.model ?? bound.binding.model ?? '';
    const current = typeof choice === 'string' ? choice : JSON.stringify(choice);
    if (given !== current) conflicts.push({ flag: '--model', bound: current, given });
  }
  if (options.workspace) {
    let given = resolve(options.workspace);
    try {
      given = realpathSync(given);
    } catch {
      // a workspace that does not exist certainly differs
    }
    if (given !== bound.binding.workspaceRoot) {
      conflicts.push({ flag: '--workspace', bound: bound.binding.workspaceRoot, given });
    }
  }
  if (options.runner && options.runner !== bound.binding.mainAgent.runner?.id) {
    conflicts.push({ flag: '--runner', bound: bound.binding.mainAgent.runner?.id ?? '(none)', given: options.runner });
  }
  if (options.agent && options.agent !== bound.binding.mainAgent.name) {
    conflicts.push({ flag: '--agent', bound: bound.binding.mainAgent.name, given: options.agent });
  }
  if (conflicts.length === 0) return;
  const fix = conflicts.map((c) => `${c.flag} ${c.flag === '--agent' ? c.given : `'${c.given}'`}`).join(' ');
  throw new UsageError(
    oarError(
      'binding_conflict',
      `session ${sessionId} is bound to ${conflicts.map((c) => `${c.flag.slice(2)} ${c.bound}`).join(', ')}; to change it: oar session update ${sessionId} ${fix}`,
      { details: { sessionId, conflicts } },
    ),
  );
}

/** Say so when another process holds a thread this one wanted to drive: its events are followed instead. */
function noteHolder(runtime: Runtime, threadId: string, json: boolean): void {
  const holder = runtime.worker?.holderOf(threadId);
  if (!holder || json) return;
  process.stderr.write(
    `thread ${threadId} is being driven by ${holder.owner} (lease until ${holder.expiresAt}); following its events\n`,
  );
}

/**
 * Whether the model's output is printed as it arrives: `--stream` / `--no-stream`, else in a terminal without
 * `--json` (a pipe or a file keeps the event lines only; `--json --stream` adds the deltas as NDJSON lines).
 */
function streaming(options: { stream?: boolean; json?: boolean }): boolean {
  return options.stream ?? (process.stdout.isTTY === true && options.json !== true);
}

/** Exit codes of run/resume: 0 answered, 1 failed, 3 waiting for a decision, 130 interrupted. */
export async function run(prompt: string, options: RunOptions): Promise<number> {
  // Ctrl-C belongs to this command from its first step (ctrl-c.ts): before the turn is submitted it stops the command
  // between two steps, after that it interrupts the turn. A Ctrl-C while the CLI is still loading ends the process
  // (the default), before anything is recorded.
  const ctrlC = new CtrlC();
  try {
    return await runTurn(prompt, options, ctrlC);
  } finally {
    ctrlC.dispose();
  }
}

/** Interrupted before the turn was submitted: said so, exit 130; `sessionId` when the session was created. */
function stoppedBeforeTurn(options: RunOptions, sessionId?: string): number {
  if (options.json) {
    process.stdout.write(
      `${JSON.stringify({ result: { ...(sessionId ? { sessionId } : {}), status: 'cancelled' } })}\n`,
    );
  } else {
    process.stdout.write(
      sessionId
        ? `interrupted before the turn was submitted: session ${sessionId} has no new turn\n`
        : 'interrupted before anything was recorded\n',
    );
  }
  return EXIT.cancelled;
}

async function runTurn(prompt: string, options: RunOptions, ctrlC: CtrlC): Promise<number> {
  const approvals = approvalMode(options);
  // Read before anything is opened or recorded: a missing or oversized file is a usage error (exit 2).
  const attachments = options.attach?.length ? { attachments: await readAttachments(options.attach) } : {};
  const opened = options.session ? await openForSessions(options, [options.session]) : await openRuntime(options, []);
  return withRuntime(opened, async (runtime) => {
    let after = 0;
    if (options.session) {
      await checkBindingFlags(runtime, options.session, options);
      after = await runtime.queries.lastSequence(options.session);
    } else {
      // Every model of the binding must be reachable before the session exists (a missing key fails here).
      await runtime.checkBinding();
    }
    if (ctrlC.requested) return stoppedBeforeTurn(options, options.session);
    const session = options.session
      ? { sessionId: options.session }
      : await runtime.createSession({
          title: options.title ?? prompt.slice(0, 80),
          ...(options.agent ? { agent: options.agent } : {}),
        });
    if (ctrlC.requested) return stoppedBeforeTurn(options, session.sessionId);
    if (options.detach) {
      // Recorded, not run: whichever worker claims the thread runs it (`oar worker`, `oar serve`); `oar wait` follows.
      const submitted = await runtime.submitTurn({ sessionId: session.sessionId, input: prompt, ...attachments });
      const ids = { sessionId: session.sessionId, threadId: submitted.threadId, turnId: submitted.turnId };
      if (options.json) printJson(ids);
      else {
        const store = storeFlag(options.store, opened.store.location);
        process.stdout.write(
          `submitted turn ${ids.turnId} of session ${ids.sessionId}; a worker runs it\n  → oar wait ${ids.sessionId}${store}\n`,
        );
      }
      return EXIT.ok;
    }
    runtime.worker?.adopt(session.sessionId);
    const printer = attachPrinter(runtime, session.sessionId, options.json === true, after, streaming(options));
    const submitted = await runtime.submitTurn({ sessionId: session.sessionId, input: prompt, ...attachments });
    // From here Ctrl-C interrupts this turn — one pressed during the submit, at once.
    ctrlC.arm(() => interruptOnceStarted(runtime, session.sessionId, submitted, after));
    await runtime.worker?.look(session.sessionId);
    noteHolder(runtime, submitted.threadId, options.json === true);
    const result = await ctrlC.follow((onCtrlC) =>
      driveSession(runtime, session.sessionId, submitted.turnId, {
        json: options.json === true,
        approvals,
        printer,
        onCtrlC,
      }),
    );
    await printer.stop();
    return report(result, session.sessionId, options, opened.store.location, ctrlC.requested);
  });
}

export function report(
  result: DriveResult,
  sessionId: string,
  options: { json?: boolean; store?: string },
  location: string,
  interrupted = false,
): number {
  if (options.json) {
    process.stdout.write(
      `${JSON.stringify({ result: { sessionId, status: result.status, answer: result.answer, error: redactedForOutput(result.error) } })}\n`,
    );
  } else {
    if (result.answer !== undefined) process.stdout.write(`\n${result.answer}\n`);
    if (result.error) process.stdout.write(turnErrorText(result.error));
    const store = storeFlag(options.store, location);
    if (result.status === 'waiting') {
      process.stdout.write('\nWaiting for a decision:\n');
      for (const p of result.threads.flatMap((t) => t.pendingRequests)) {
        // The session carries its own binding: the follow-up needs no --model, --workspace or config.
        const answer = p.actionType === 'user_input' ? `approve --text '<your answer>'` : 'approve|deny';
        process.stdout.write(`  ${p.prompt}\n`);
        for (const line of result.details?.get(p.actionId)?.lines ?? []) process.stdout.write(`    ${line}\n`);
        process.stdout.write(`  → oar respond ${sessionId} ${p.actionId} ${answer}${store}\n`);
      }
      for (const r of result.resources ?? []) {
        const limit = r.limitState as { message?: string; details?: { scope?: string; dimension?: string } };
        process.stdout.write(
          `\nWaiting for a budget (turn ${r.turnId}): ${limit.message ?? 'a limit stops the next model call'}\n`,
        );
        const flag = limitFlag(limit.details?.scope, limit.details?.dimension);
        process.stdout.write(`  → oar limit ${sessionId} ${flag ?? '--turn-cost USD'} <higher>${store}\n`);
      }
    }
    // Lost after a crash and not yet reconciled: they hold nothing, but someone should say what happened.
    for (const u of result.threads.flatMap((t) => t.unreconciledActions ?? [])) {
      process.stdout.write(`\nLost (it may or may not have taken effect): ${u.prompt}\n`);
      if (u.idempotencyKey) process.stdout.write(`    idempotency key: ${u.idempotencyKey}\n`);
      process.stdout.write(`  → oar respond ${sessionId} ${u.actionId} happened|not_happened|retry${store}\n`);
    }
    process.stdout.write(`\nsession ${sessionId} — log in ${location} (oar events ${sessionId}${store})\n`);
  }
  // Interrupted here (Ctrl-C) or from anywhere else (`oar interrupt`): the turn was cancelled either way.
  if (interrupted || result.status === 'cancelled') return EXIT.cancelled;
  return result.status === 'completed' ? EXIT.ok : result.status === 'waiting' ? EXIT.waiting : EXIT.failed;
}

export interface ResumeOptions extends RunOptions {
  all?: boolean;
}

/**
 * `oar resume`: with no session, list what is resumable and resume nothing; with sessions (or --all), drive
 * exactly those. Decision flags apply to the named sessions only.
 */
export async function resume(sessionIds: string[], options: ResumeOptions): Promise<number> {
  const approvals = approvalMode(options);
  if (sessionIds.length === 0 && !options.all) {
    const opened = await openForListing(options);
    if ('missing' in opened) {
      if (options.json) printJson([]);
      else
        process.stdout.write(
          `nothing to resume: no store at ${opened.missing} (--store URL or OAR_STORE names another)\n`,
        );
      return EXIT.ok;
    }
    return withRuntime(opened, async (runtime) => {
      const resumable = await readSettled(() => runtime.resumableSessions());
      if (options.json) printJson(resumable);
      else if (resumable.length === 0) process.stdout.write('nothing to resume\n');
      else {
        process.stdout.write('resumable sessions (resume one with `oar resume SESSION`, or all with --all):\n');
        for (const r of resumable) process.stdout.write(`  ${r.sessionId}  ${r.reason}\n`);
      }
      return 0;
    });
  }
  const opened = await openForSessions(options, options.all ? 'all' : sessionIds);
  return withRuntime(opened, async (runtime) => {
    // Reads of what the store holds ride out a briefly unreachable store, like every other CLI read (readSettled).
    const targets = options.all
      ? (await readSettled(() => runtime.resumableSessions())).map((r) => r.sessionId)
      : sessionIds;
    let waiting = 0;
    for (const sessionId of targets) {
      const { snapshot } = await readSettled(() => runtime.getSession({ sessionId, limit: 0 }));
      await runtime.worker?.look(sessionId);
      for (const thread of snapshot.threads) noteHolder(runtime, thread.threadId, options.json === true);
      const main = snapshot.threads[0];
      const turnId = main?.activeTurnId ?? main?.turns.at(-1)?.turnId ?? '';
      const result = await driveSession(runtime, sessionId, turnId, { json: options.json === true, approvals });
      if (result.status === 'waiting') waiting++;
    }
    if (!options.json) process.stdout.write(`resumed; ${waiting} session(s) still waiting for a decision\n`);
    return waiting > 0 ? 3 : 0;
  });
}

export interface SessionUpdateOptions extends GlobalOptions {
  permissionMode?: string;
  fromConfig?: boolean;
  json?: boolean;
}

/** `oar session update`: change a session's binding, recorded as a fact; effective from its next turn. */
export async function updateSession(sessionId: string, options: SessionUpdateOptions): Promise<number> {
  // The session exists or the update is refused: a store that does not exist is reported, never made.
  const opened = await openRuntime(options, [], { createStore: false });
  return withRuntime(opened, async (runtime) => {
    const template = runtime.defaultBinding;
    const update: BindingUpdate = {};
    if (options.fromConfig) {
      const { workspaceRoot: _workspace, ...fromConfig } = template;
      Object.assign(update, fromConfig);
      // The template leaves an empty list out; a config that says `"secrets": {"env": []}` asks for none, one that
      // says nothing about secrets leaves the session's names as they are (they keep values out of the record).
      if (opened.config.secrets?.env.length === 0) update.secrets = { env: [] };
      // Pipelines and services are the file's: none in the file clears the session's (the template omits empties).
      update.pipelines = template.pipelines ?? [];
      update.services = template.services ?? [];
    }
    if (options.model) update.model = template.model;
    if (options.workspace) update.workspaceRoot = template.workspaceRoot;
    if (options.permissionMode) {
      if (!PERMISSION_MODES.includes(options.permissionMode as PermissionMode)) {
        throw new UsageError(
          oarError('invalid_option', `--permission-mode must be one of ${PERMISSION_MODES.join(', ')}`),
        );
      }
      const current = (await runtime.getBinding(sessionId))?.binding.permissions ?? template.permissions;
      update.permissions = { ...current, mode: options.permissionMode as PermissionMode };
    }
    if (Object.keys(update).length === 0) {
      throw new UsageError(
        oarError('invalid_option', 'nothing to update: give --model, --workspace, --permission-mode or --from-config'),
      );
    }
    if (options.model) {
      // The main agent's own model would shadow the new default: the flag means "this session's model". A name
      // from this config's `models` comes along, or the session could not resolve it.
      const bound = (await runtime.getBinding(sessionId))?.binding ?? template;
      const { model: _own, ...mainAgent } = update.mainAgent ?? bound.mainAgent;
      update.mainAgent = mainAgent;
      update.models = { ...bound.models, ...template.models, ...update.models };
    }
    // Checked before it is recorded: an update that cannot run (a missing script, key or module) changes nothing.
    const result = await runtime.updateBinding({ sessionId, update });
    if (options.json) printJson(result);
    else if (result.changed.length === 0) process.stdout.write(`session ${sessionId}: binding unchanged\n`);
    else
      process.stdout.write(
        `session ${sessionId}: binding ${result.bindingHash.slice(0, 19)}… (${result.changed.join(', ')} changed; from the next turn)\n`,
      );
    return 0;
  });
}

/** The `oar limit` flag that raises a limit (`turn`, `costUsd` → `--turn-cost`). */
function limitFlag(scope: string | undefined, dimension: string | undefined): string | undefined {
  return LIMIT_FLAGS.find(([, path]) => path === `${scope}.${dimension}`)?.[0];
}

/** `oar respond`: answer a pending decision, then follow the main thread's turn and report its outcome. */
export async function respond(
  sessionId: string,
  actionId: string,
  decision: string,
  options: RunOptions & { reason?: string; text?: string },
): Promise<number> {
  return answerAndContinue(sessionId, options, (runtime) =>
    runtime.respondAction({
      sessionId,
      actionId,
      decision: decision as ActionDecision,
      ...(options.reason ? { reason: options.reason } : {}),
      ...(options.text ? { payload: { text: options.text } } : {}),
    }),
  );
}

/**
 * Answer a pending decision (`oar respond`, `oar permission resolve`), then drive the session here and report the
 * main thread's turn — a sub-agent's decision continues it too.
 */
export async function answerAndContinue(
  sessionId: string,
  options: RunOptions,
  answer: (runtime: Runtime) => Promise<unknown>,
): Promise<number> {
  const opened = await openForSessions(options, [sessionId]);
  return withRuntime(opened, async (runtime) => {
    const after = await runtime.queries.lastSequence(sessionId);
    const printer = attachPrinter(runtime, sessionId, options.json === true, after, streaming(options));
    await answer(runtime);
    return continueAndReport(runtime, sessionId, printer, options, opened.store.location);
  });
}

/** `oar limit`: change a session's budgets; a turn that waited for one continues and is reported. */
export async function limit(
  sessionId: string,
  options: RunOptions & Record<string, string | undefined>,
): Promise<number> {
  const opened = await openForSessions(options, [sessionId]);
  return withRuntime(opened, async (runtime) => {
    const after = await runtime.queries.lastSequence(sessionId);
    const change: ChangeLimitsInput = { sessionId, changedBy: 'cli' };
    for (const [flag, path] of LIMIT_FLAGS) {
      const raw = options[camel(flag)];
      if (raw === undefined) continue;
      const [scope, dimension] = path.split('.') as ['turn' | 'session', BudgetDimension];
      const value = raw.trim() === 'none' ? null : Number.isNaN(Number(raw)) || raw.trim() === '' ? raw : Number(raw);
      change[scope] = { ...change[scope], [dimension]: value as number | null };
    }
    if (options.onExceeded !== undefined) change.onExceeded = options.onExceeded as 'wait';
    if (options.lowAt !== undefined) change.lowAt = Number(options.lowAt);
    if (options.reason) change.reason = options.reason;
    const printer = attachPrinter(runtime, sessionId, options.json === true, after, streaming(options));
    const changed = await runtime.changeLimits(change);
    if (!options.json) {
      for (const c of changed.changes) {
        process.stdout.write(`  ${c.scope}.${c.dimension}: ${c.from ?? 'none'} → ${c.to ?? 'none'}\n`);
      }
    }
    if (changed.resumed.length === 0) {
      await printer.stop();
      if (options.json) printJson({ result: { sessionId, ...changed } });
      return EXIT.ok;
    }
    // A turn waited for a budget: it continues here, and its outcome is reported like a respond's.
    return continueAndReport(runtime, sessionId, printer, options, opened.store.location);
  });
}

/** `oar interrupt`: a durable request; whichever process drives the turn stops it. */
export async function interrupt(
  sessionId: string,
  options: GlobalOptions & { thread?: string; reason?: string; json?: boolean },
): Promise<number> {
  const opened = await openForReading(options);
  return withRuntime(opened, async (runtime) => {
    const result = await runtime.interruptTurn({
      sessionId,
      ...(options.thread ? { threadId: options.thread } : {}),
      ...(options.reason ? { reason: options.reason } : {}),
    });
    if (options.json) printJson(result);
    else if (!result.interrupted) process.stdout.write('no turn is running\n');
    else process.stdout.write(`turn ${result.turnId}: ${result.status}\n`);
    return EXIT.ok;
  });
}

/** `oar compact`: compact a session's context now. */
export async function compact(
  sessionId: string,
  options: GlobalOptions & { thread?: string; reason?: string; json?: boolean },
): Promise<number> {
  // A durable request the thread's worker acts on: this process drives the session while it waits, unless
  // another process holds the thread (its worker compacts then).
  const opened = await openForSessions(options, [sessionId]);
  return withRuntime(opened, async (runtime) => {
    const result = await runtime.compact({
      sessionId,
      ...(options.thread ? { threadId: options.thread } : {}),
      ...(options.reason ? { reason: options.reason } : {}),
    });
    if (options.json) printJson(result);
    else if (result.status === 'completed') {
      process.stdout.write(
        `compacted ${result.affectedTurns?.length ?? 0} turn(s) of thread ${result.threadId}: ${result.tokensBefore} → ${result.tokensAfter} tokens (${result.summarySource} summary, ${result.summaryRef})\n`,
      );
    } else if (result.status === 'requested') {
      process.stdout.write(`compaction ${result.requestId} requested; the thread's worker has not acted on it yet\n`);
    }
    if (result.status === 'failed' && result.error) {
      process.stderr.write(`${JSON.stringify({ error: redactedForOutput(result.error) })}\n`);
      return EXIT.failed;
    }
    return EXIT.ok;
  });
}

/** `oar session show`: the binding a session runs with. */
export async function showSession(sessionId: string, options: GlobalOptions): Promise<number> {
  const opened = await openForReading(options);
  return withRuntime(opened, async (runtime) => {
    const bound = await runtime.getBinding(sessionId);
    printJson(bound ?? { binding: null, note: 'created before bindings: runs with the configuration at hand' });
    return EXIT.ok;
  });
}

/** `oar sessions`: the sessions in the store. */
export async function listSessions(options: GlobalOptions & { json?: boolean }): Promise<number> {
  const opened = await openForListing(options);
  if ('missing' in opened) {
    if (options.json) printJson([]);
    else process.stdout.write(`no sessions: no store at ${opened.missing} (--store URL or OAR_STORE names another)\n`);
    return EXIT.ok;
  }
  return withRuntime(opened, async (runtime) => {
    const sessions = await runtime.listSessions();
    if (options.json) printJson(sessions);
    else if (sessions.length === 0) process.stdout.write('no sessions\n');
    else
      for (const s of sessions)
        process.stdout.write(
          `${s.sessionId}  ${s.updatedAt}  ${String(s.events).padStart(5)} events  ${s.title ?? ''}\n`,
        );
    return EXIT.ok;
  });
}

/** `oar events`: a session's event log, and with --follow each new event as any process commits it. */
export async function events(
  sessionId: string,
  options: GlobalOptions & { json?: boolean; after: string; follow?: boolean },
): Promise<number> {
  const opened = await openForReading(options);
  return withRuntime(opened, async (runtime) => {
    let after = Number(options.after);
    if (!Number.isInteger(after) || after < 0)
      throw new UsageError(oarError('invalid_option', '--after must be a sequence number'));
    const agents = new Map<string, string>();
    // An unknown session is an error whatever the cursor (with --follow it used to poll forever).
    await runtime.getSession({ sessionId, limit: 0 });
    const print = (event: RuntimeEvent) => {
      if (options.json) process.stdout.write(`${JSON.stringify(event)}\n`);
      else {
        const line = renderEvent(event, agents);
        process.stdout.write(
          `${String(event.sequence).padStart(5)} ${event.timestamp} ${event.type}${line ? `  ${line.trim()}` : ''}\n`,
        );
      }
    };
    if (!options.follow) {
      for (let events = await runtime.log.read(sessionId, { after, limit: 1000 }); events.length > 0; ) {
        for (const event of events) print(event);
        after = events.at(-1)?.sequence ?? after;
        events = await runtime.log.read(sessionId, { after, limit: 1000 });
      }
      return EXIT.ok;
    }
    // Following: the runtime's subscription (catch-up from the log, then each commit as the notifier reports
    // it, from this process or any other on the store) until Ctrl-C.
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      for await (const event of runtime.subscribe(sessionId, { after, signal: stop.signal })) print(event);
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
    return EXIT.ok;
  });
}

/** `oar inspect`: the session snapshot, for a person (or, with --json, the published snapshot schema). */
/** `oar environment`: where a session's work runs (get_execution_environment). */
export async function environment(
  sessionId: string,
  options: GlobalOptions & { json?: boolean; thread?: string },
): Promise<number> {
  const opened = await openForReading(options);
  return withRuntime(opened, async (runtime) => {
    const env = await runtime.getExecutionEnvironment({
      sessionId,
      ...(options.thread !== undefined ? { threadId: options.thread } : {}),
    });
    if (options.json) {
      printJson(env);
      return EXIT.ok;
    }
    const out = (line: string) => process.stdout.write(`${line}\n`);
    out(`session ${env.sessionId}${env.threadId ? ` thread ${env.threadId}` : ''}`);
    if (env.binding === 'unknown') out('  binding: unknown (the session was recorded without one)');
    out(`  cwd: ${env.cwd ?? 'unknown'}`);
    out(`  workspace roots: ${env.workspaceRoots.join(', ') || 'unknown'}`);
    out(`  variables passed to commands: ${env.env.passed.join(', ') || 'none'}`);
    out(`  secret variables (values redacted): ${env.env.secrets.join(', ') || 'none'}`);
    const limits = env.processLimits;
    out(
      limits.status === 'available'
        ? `  commands: sandbox ${limits.sandboxProfile}, network ${limits.network ? 'on' : 'off'}, timeout ${limits.timeoutMs} ms (at most ${limits.maxTimeoutMs}), ${limits.maxBackground} background at once`
        : `  commands: unavailable (${limits.reason})`,
    );
    out(`  live processes: ${env.activeProcesses.length}`);
    for (const p of env.activeProcesses) {
      out(
        `    ${p.processId} [${p.background ? 'background' : 'foreground'}] ${p.command} (thread ${p.threadId}, since ${p.startedAt})`,
      );
    }
    return EXIT.ok;
  });
}

export async function inspect(sessionId: string, options: GlobalOptions & { json?: boolean }): Promise<number> {
  const opened = await openForReading(options);
  return withRuntime(opened, async (runtime) => {
    const { snapshot } = await runtime.getSession({ sessionId, limit: 0 });
    if (options.json) {
      printJson(snapshot);
      return EXIT.ok;
    }
    process.stdout.write(`session ${snapshot.sessionId}${snapshot.title ? ` — ${snapshot.title}` : ''}\n`);
    const details = await requestDetails(runtime, sessionId);
    for (const thread of snapshot.threads) {
      process.stdout.write(`  thread ${thread.threadId} [${thread.status}] ${thread.turns.length} turn(s)\n`);
      for (const p of thread.pendingRequests) {
        process.stdout.write(`    pending ${p.actionId}: ${p.prompt}\n`);
        for (const line of details.get(p.actionId)?.lines ?? []) process.stdout.write(`      ${line}\n`);
      }
      for (const turn of thread.turns) {
        if (turn.status !== 'waiting_resource') continue;
        const wait = (turn.limitState ?? {}) as { kind?: string; reason?: string; message?: string };
        process.stdout.write(
          `    turn ${turn.turnId} waiting_resource (${wait.kind ?? 'resource'}: ${wait.message ?? wait.reason ?? 'a limit'})\n`,
        );
      }
      for (const q of thread.queuedTurns) process.stdout.write(`    queued ${q.queuedTurnId} #${q.position}\n`);
      for (const i of thread.incidents) process.stdout.write(`    ${i.severity} ${i.code}: ${i.message}\n`);
      const boundary = (thread.history as { contextBoundary?: Record<string, unknown> } | undefined)?.contextBoundary;
      if (boundary) {
        process.stdout.write(
          `    context compacted through turn ${boundary.throughTurnId} (${boundary.compactedTurns} turn(s), ${boundary.summarySource} summary ${boundary.summaryRef})\n`,
        );
      }
    }
    const t = snapshot.taskSummary;
    process.stdout.write(
      `  tasks: ${t.total ?? 0} total, ${t.completed ?? 0} completed, ${t.failed ?? 0} failed, ${t.waiting ?? 0} waiting\n`,
    );
    const usage = snapshot.telemetrySummary.usage;
    if (usage) {
      // The cache and reasoning counts are parts of the input and output counts, shown when reported.
      const parts = [
        ...(usage.cachedInputTokens ? [`${usage.cachedInputTokens} of them cached`] : []),
        ...(usage.reasoningTokens ? [`${usage.reasoningTokens} reasoning`] : []),
      ];
      const extra = parts.length > 0 ? ` (${parts.join(', ')})` : '';
      process.stdout.write(`  tokens: ${usage.inputTokens ?? 0} in, ${usage.outputTokens ?? 0} out${extra}\n`);
    }
    const cost = snapshot.routingLimitSummary.costState as { amount?: number; pricedCalls?: number } | undefined;
    if (cost?.amount !== undefined) {
      process.stdout.write(
        `  cost: ~$${cost.amount.toFixed(4)} for ${cost.pricedCalls ?? 0} priced call(s) (approximate list prices)\n`,
      );
    }
    const limit = snapshot.routingLimitSummary.limitState as
      | {
          turn?: Record<string, number>;
          session?: Record<string, number>;
          onExceeded?: string;
          sessionSpent?: Record<string, number>;
        }
      | undefined;
    if (limit?.turn) {
      const list = (limits: Record<string, number> | undefined) =>
        Object.entries(limits ?? {})
          .map(([k, v]) => `${k} ${v}`)
          .join(', ') || 'none';
      const spent = limit.sessionSpent ?? {};
      process.stdout.write(
        `  budgets: turn ${list(limit.turn)}; session ${list(limit.session)}; on exceeded: ${limit.onExceeded ?? 'wait'}; session spent: ${spent.tokens ?? 0} tokens, ~$${(spent.costUsd ?? 0).toFixed(4)}, ${spent.modelCalls ?? 0} call(s)\n`,
      );
    }
    const rate = (snapshot.routingLimitSummary.limitState as Record<string, unknown> | undefined)?.rateLimits as
      | { hits?: number; last?: { modelId?: string; at?: string; retryAfterMs?: number } }
      | undefined;
    if (rate?.last) {
      const wait = rate.last.retryAfterMs !== undefined ? `, retry-after ${rate.last.retryAfterMs} ms` : '';
      process.stdout.write(
        `  rate limits: ${rate.hits ?? 1} hit(s), last on ${rate.last.modelId} at ${rate.last.at}${wait}\n`,
      );
    }
    const routing = snapshot.routingLimitSummary;
    if (routing.selectedModel) {
      const fallback = routing.fallback
        ? ` (fell back from ${routing.fallback.from} on ${routing.fallback.trigger} after ${routing.fallback.attempts ?? 1} attempt(s))`
        : '';
      const chosen = routing.reason ? `; ${routing.reason}` : '';
      process.stdout.write(
        `  model: ${routing.selectedModel}${fallback}, ${routing.candidateCount ?? 1} candidate(s)${chosen}\n`,
      );
    }
    return EXIT.ok;
  });
}

/**
 * `oar replay`: rebuild every read model from the log and diff it with the stored one (exit 1 on a difference).
 * `--repair`: the report as found, plus `repair` — what was rewritten and recorded; exit 0 once the stored read
 * models equal the rebuild, 1 while the log holds a contradiction (a repair then rewrites nothing).
 */
export async function replaySession(sessionId: string, options: GlobalOptions & { repair?: boolean }): Promise<number> {
  const opened = await openForReading(options);
  return withRuntime(opened, async (runtime) => {
    if (options.repair) {
      // A control-plane command: unlike the check, it writes (the rows, and two facts).
      const result = await runtime.commands.repairSession(sessionId);
      printJson(result);
      // Repaired or not needed, the read models now equal the rebuild; a contradiction stays (and blocks a repair).
      return result.contradictions.length > 0 ? EXIT.failed : EXIT.ok;
    }
    const result = await runtime.replaySession(sessionId);
    printJson(result);
    return result.equal ? EXIT.ok : EXIT.failed;
  });
}

export interface ExportOptions extends GlobalOptions {
  evidence?: boolean;
  review?: boolean;
  thread?: string;
  turn?: string;
  task?: string;
  markdown?: boolean;
  out?: string;
}

/**
 * `oar export`: the replay export, the evidence pack, or the review pack of the session (or of one `--thread`,
 * `--turn` or `--task`), as JSON or `--markdown`. Each is recorded in the session (`evidence.changed`).
 */
export async function exportSession(sessionId: string, options: ExportOptions): Promise<number> {
  const scoped = (['thread', 'turn', 'task', 'markdown'] as const)
    .filter((name) => options[name] !== undefined)
    .map((name) => `--${name}`);
  if (options.review && options.evidence) {
    throw new UsageError(oarError('invalid_option', '--review and --evidence exclude each other'));
  }
  if (!options.review && scoped.length > 0) {
    throw new UsageError(oarError('invalid_option', `${scoped.join(', ')} only go with --review`));
  }
  const opened = await openForReading(options);
  return withRuntime(opened, async (runtime) => {
    const data = options.review
      ? await runtime.exportReview({
          sessionId,
          ...(options.thread !== undefined ? { threadId: options.thread } : {}),
          ...(options.turn !== undefined ? { turnId: options.turn } : {}),
          ...(options.task !== undefined ? { taskId: options.task } : {}),
          format: options.markdown ? 'markdown' : 'json',
        })
      : options.evidence
        ? await runtime.exportEvidence(sessionId)
        : await runtime.exportReplay(sessionId);
    const markdown = options.review && options.markdown ? (data as { markdown?: string }).markdown : undefined;
    const text = markdown ?? `${JSON.stringify(data, null, 2)}\n`;
    if (options.out) {
      await writeFile(options.out, text).catch((error: NodeJS.ErrnoException) => {
        throw new UsageError(
          oarError('file_unwritable', `cannot write ${options.out}: ${error.code ?? error.message}`),
        );
      });
      process.stderr.write(`wrote ${options.out}\n`);
    } else process.stdout.write(text);
    return EXIT.ok;
  });
}
