import { writeFile } from 'node:fs/promises';
import { oarError } from '@oar/protocol';
import { buildRuntime, loadConfig, Runtime, Store } from '@oar/runtime';
import type { Command } from 'commander';
import { storeFlag } from './demo.js';
import { printJson, UsageError } from './io.js';
import { renderEvent } from './render.js';
import { type ApprovalMode, attachPrinter, driveSession } from './session-driver.js';

export interface GlobalOptions {
  config?: string;
  store?: string;
  model?: string;
  workspace?: string;
}

/** Open the configured runtime for work: models resolved, tools loaded, unfinished work resumed when `resume`. */
export async function openRuntime(
  options: GlobalOptions,
  resume: boolean,
): Promise<{ runtime: Runtime; store: Store }> {
  const cwd = process.cwd();
  const { config, baseDir } = await loadConfig(options.config, cwd);
  return buildRuntime(config, baseDir, {
    cwd,
    env: process.env,
    resumeOnStart: resume,
    ...(options.store ? { store: options.store } : {}),
    ...(options.model ? { model: options.model } : {}),
    ...(options.workspace ? { workspace: options.workspace } : {}),
  });
}

/** Reading commands open only the store: no models, no tools, no recovery. */
async function openForReading(options: GlobalOptions): Promise<{ runtime: Runtime; store: Store }> {
  const cwd = process.cwd();
  const { config, baseDir } = await loadConfig(options.config, cwd);
  const store = await Store.open(options.store ?? process.env.OAR_STORE ?? config.store, { cwd });
  const runtime = await Runtime.create({
    store,
    workspaceRoot: baseDir,
    resumeOnStart: false,
    model: () => {
      throw new UsageError(oarError('model_required', 'this command does not call a model'));
    },
  });
  return { runtime, store };
}

function approvalMode(options: { approveAll?: boolean; denyAll?: boolean }): ApprovalMode {
  if (options.approveAll && options.denyAll) {
    throw new UsageError(oarError('invalid_option', '--approve-all and --deny-all exclude each other'));
  }
  if (options.approveAll) return 'approve';
  if (options.denyAll) return 'deny';
  return process.stdin.isTTY && process.stdout.isTTY ? 'ask' : 'leave';
}

async function withRuntime<T>(
  opened: { runtime: Runtime; store: Store },
  fn: (runtime: Runtime) => Promise<T>,
): Promise<T> {
  try {
    return await fn(opened.runtime);
  } finally {
    await opened.runtime.close();
    await opened.store.close();
  }
}

interface RunOptions extends GlobalOptions {
  json?: boolean;
  approveAll?: boolean;
  denyAll?: boolean;
  session?: string;
  agent?: string;
  title?: string;
}

/** Exit codes of run/resume: 0 answered, 1 failed, 3 waiting for a decision, 130 interrupted. */
async function run(prompt: string, options: RunOptions): Promise<number> {
  const approvals = approvalMode(options);
  const opened = await openRuntime(options, true);
  return withRuntime(opened, async (runtime) => {
    const session = options.session
      ? { sessionId: options.session }
      : await runtime.createSession({
          title: options.title ?? prompt.slice(0, 80),
          ...(options.agent ? { agent: options.agent } : {}),
        });
    const detach = attachPrinter(runtime, session.sessionId, options.json === true);
    // The handler is installed before the turn starts: a Ctrl-C at any moment interrupts, never kills.
    let interrupting: Promise<unknown> | undefined;
    let threadId: string | undefined;
    const onSigint = () => {
      interrupting ??= runtime.interruptTurn({
        sessionId: session.sessionId,
        ...(threadId ? { threadId } : {}),
        reason: 'interrupted from the terminal (Ctrl-C)',
      });
    };
    process.once('SIGINT', onSigint);
    try {
      const submitted = await runtime.submitTurn({ sessionId: session.sessionId, input: prompt });
      threadId = submitted.threadId;
      const drive = () =>
        driveSession(runtime, session.sessionId, submitted.turnId, { json: options.json === true, approvals });
      let result = await drive();
      if (interrupting) {
        // The interrupt records the cancellation after the running work stops; report the recorded outcome.
        await interrupting;
        result = await drive();
      }
      detach();
      return report(result, session.sessionId, options, opened.store.location, interrupting !== undefined);
    } finally {
      process.off('SIGINT', onSigint);
    }
  });
}

function report(
  result: Awaited<ReturnType<typeof driveSession>>,
  sessionId: string,
  options: { json?: boolean; store?: string },
  location: string,
  interrupted = false,
): number {
  if (options.json) {
    process.stdout.write(
      `${JSON.stringify({ result: { sessionId, status: result.status, answer: result.answer, error: result.error } })}\n`,
    );
  } else {
    if (result.answer !== undefined) process.stdout.write(`\n${result.answer}\n`);
    if (result.error) process.stdout.write(`\nerror: ${result.error.code}: ${result.error.message}\n`);
    if (result.status === 'waiting') {
      const pending = result.threads.flatMap((t) => t.pendingRequests);
      process.stdout.write('\nWaiting for a decision:\n');
      for (const p of pending) {
        process.stdout.write(`  ${p.prompt}\n  → oar respond ${sessionId} ${p.actionId} approve|deny\n`);
      }
    }
    process.stdout.write(
      `\nsession ${sessionId} — log in ${location} (oar events ${sessionId}${storeFlag(options.store, location)})\n`,
    );
  }
  if (interrupted) return 130;
  return result.status === 'completed' ? 0 : result.status === 'waiting' ? 3 : 1;
}

async function resume(options: RunOptions): Promise<number> {
  const approvals = approvalMode(options);
  const opened = await openRuntime(options, true);
  return withRuntime(opened, async (runtime) => {
    await runtime.settled();
    const sessions = await runtime.listSessions();
    let waiting = 0;
    for (const s of sessions) {
      const { snapshot } = await runtime.getSession({ sessionId: s.sessionId, limit: 0 });
      const active = snapshot.threads.some((t) => t.pendingRequests.length > 0);
      if (!active) continue;
      const main = snapshot.threads[0];
      const turnId = main?.activeTurnId ?? main?.turns.at(-1)?.turnId ?? '';
      const result = await driveSession(runtime, s.sessionId, turnId, { json: options.json === true, approvals });
      if (result.status === 'waiting') waiting++;
    }
    if (!options.json) process.stdout.write(`resumed; ${waiting} session(s) still waiting for a decision\n`);
    return waiting > 0 ? 3 : 0;
  });
}

export function registerRuntimeCommands(program: Command, setExit: (code: number) => void): void {
  const globals = (command: Command) =>
    command
      .option('--config <file>', 'config file (default ./oar.config.json when present)')
      .option('--store <url>', 'SQLite path or postgres:// URL (default .oar/oar.db; env OAR_STORE)');

  globals(program.command('run'))
    .description('run one turn of the main agent on a prompt, with live progress')
    .argument('<prompt>', 'what to do')
    .option(
      '--model <spec>',
      'model spec: openai:MODEL, anthropic:MODEL, openai-compatible:NAME, script:FILE or a configured name',
    )
    .option('--agent <name>', 'the agent that runs the session (default: the main agent)')
    .option('--workspace <dir>', 'workspace root for the file tools (default: the working directory)')
    .option('--session <id>', 'continue an existing session instead of creating one')
    .option('--json', 'print every event as NDJSON, then a result line')
    .option('--approve-all', 'approve every pending decision (without a TTY)')
    .option('--deny-all', 'deny every pending decision (without a TTY)')
    .action(async (prompt: string, options: RunOptions) => setExit(await run(prompt, options)));

  globals(program.command('resume'))
    .description('resume unfinished work after a crash or restart (completed actions never re-run)')
    .option('--model <spec>', 'model spec (as for run)')
    .option('--workspace <dir>', 'workspace root')
    .option('--json', 'print events as NDJSON')
    .option('--approve-all', 'approve pending decisions')
    .option('--deny-all', 'deny pending decisions')
    .action(async (options: RunOptions) => setExit(await resume(options)));

  globals(program.command('respond'))
    .description('answer a pending decision: approve, deny or approve_for_session')
    .argument('<session>', 'session id')
    .argument('<action>', 'the decision id (actionId of action.required)')
    .argument('<decision>', 'approve | deny | approve_for_session')
    .option('--reason <text>', 'why')
    .option('--text <text>', 'the answer to an ask_user question')
    .option('--model <spec>', 'model spec used to continue the turn')
    .option('--json', 'print events as NDJSON')
    .action(
      async (
        sessionId: string,
        actionId: string,
        decision: string,
        options: RunOptions & { reason?: string; text?: string },
      ) => {
        const opened = await openRuntime(options, false);
        setExit(
          await withRuntime(opened, async (runtime) => {
            const detach = attachPrinter(runtime, sessionId, options.json === true);
            const resolved = await runtime.respondAction({
              sessionId,
              actionId,
              decision: decision as 'approve',
              ...(options.reason ? { reason: options.reason } : {}),
              ...(options.text ? { payload: { text: options.text } } : {}),
            });
            const thread = await runtime.getThreadRead({ sessionId, threadId: resolved.threadId });
            const result = await driveSession(
              runtime,
              sessionId,
              thread.activeTurnId ?? thread.turns.at(-1)?.turnId ?? '',
              {
                json: options.json === true,
                approvals: 'leave',
              },
            );
            detach();
            return report(result, sessionId, options, opened.store.location);
          }),
        );
      },
    );

  globals(program.command('sessions'))
    .description('list sessions in the store')
    .option('--json', 'print JSON')
    .action(async (options: GlobalOptions & { json?: boolean }) => {
      const opened = await openForReading(options);
      await withRuntime(opened, async (runtime) => {
        const sessions = await runtime.listSessions();
        if (options.json) printJson(sessions);
        else if (sessions.length === 0) process.stdout.write('no sessions\n');
        else
          for (const s of sessions)
            process.stdout.write(
              `${s.sessionId}  ${s.updatedAt}  ${String(s.events).padStart(5)} events  ${s.title ?? ''}\n`,
            );
      });
    });

  globals(program.command('events'))
    .description('print the event log of a session')
    .argument('<session>', 'session id')
    .option('--json', 'NDJSON, one event per line')
    .option('--after <sequence>', 'only events after this sequence', '0')
    .option('--follow', 'keep printing new events until interrupted')
    .action(async (sessionId: string, options: GlobalOptions & { json?: boolean; after: string; follow?: boolean }) => {
      const opened = await openForReading(options);
      await withRuntime(opened, async (runtime) => {
        let after = Number(options.after);
        if (!Number.isInteger(after) || after < 0)
          throw new UsageError(oarError('invalid_option', '--after must be a sequence number'));
        const agents = new Map<string, string>();
        const first = await runtime.log.read(sessionId, { after, limit: 1 });
        if (first.length === 0 && after === 0)
          throw new UsageError(oarError('session_not_found', `unknown session id "${sessionId}"`));
        let stop = false;
        const onSignal = () => {
          stop = true;
        };
        process.once('SIGINT', onSignal);
        process.once('SIGTERM', onSignal);
        try {
          do {
            const events = await runtime.log.read(sessionId, { after, limit: 1000 });
            for (const event of events) {
              if (options.json) process.stdout.write(`${JSON.stringify(event)}\n`);
              else {
                const line = renderEvent(event, agents);
                process.stdout.write(
                  `${String(event.sequence).padStart(5)} ${event.timestamp} ${event.type}${line ? `  ${line.trim()}` : ''}\n`,
                );
              }
              after = event.sequence;
            }
            if (options.follow && events.length === 0) await new Promise((r) => setTimeout(r, 300));
          } while (options.follow && !stop);
        } finally {
          process.off('SIGINT', onSignal);
          process.off('SIGTERM', onSignal);
        }
      });
    });

  globals(program.command('inspect'))
    .description('show the session snapshot: threads, turns, pending decisions, tasks, usage')
    .argument('<session>', 'session id')
    .option('--json', 'print the snapshot as JSON (the published snapshot schema)')
    .action(async (sessionId: string, options: GlobalOptions & { json?: boolean }) => {
      const opened = await openForReading(options);
      await withRuntime(opened, async (runtime) => {
        const { snapshot } = await runtime.getSession({ sessionId, limit: 0 });
        if (options.json) {
          printJson(snapshot);
          return;
        }
        process.stdout.write(`session ${snapshot.sessionId}${snapshot.title ? ` — ${snapshot.title}` : ''}\n`);
        for (const thread of snapshot.threads) {
          process.stdout.write(`  thread ${thread.threadId} [${thread.status}] ${thread.turns.length} turn(s)\n`);
          for (const p of thread.pendingRequests) process.stdout.write(`    pending ${p.actionId}: ${p.prompt}\n`);
          for (const q of thread.queuedTurns) process.stdout.write(`    queued ${q.queuedTurnId} #${q.position}\n`);
          for (const i of thread.incidents) process.stdout.write(`    ${i.severity} ${i.code}: ${i.message}\n`);
        }
        const t = snapshot.taskSummary;
        process.stdout.write(
          `  tasks: ${t.total ?? 0} total, ${t.completed ?? 0} completed, ${t.failed ?? 0} failed, ${t.waiting ?? 0} waiting\n`,
        );
        const usage = snapshot.telemetrySummary.usage;
        if (usage) process.stdout.write(`  tokens: ${usage.inputTokens ?? 0} in, ${usage.outputTokens ?? 0} out\n`);
      });
    });

  globals(program.command('replay'))
    .description('rebuild every read model of a session from its event log and diff with the stored ones')
    .argument('<session>', 'session id')
    .action(async (sessionId: string, options: GlobalOptions) => {
      const opened = await openForReading(options);
      setExit(
        await withRuntime(opened, async (runtime) => {
          const result = await runtime.replaySession(sessionId);
          printJson(result);
          return result.equal ? 0 : 1;
        }),
      );
    });

  globals(program.command('export'))
    .description('export a session: the replay (events + snapshot) or, with --evidence, the evidence pack')
    .argument('<session>', 'session id')
    .option('--evidence', 'export the evidence pack (timeline, failures, artifact refs, correlation ids)')
    .option('--out <file>', 'write to a file instead of standard output')
    .action(async (sessionId: string, options: GlobalOptions & { evidence?: boolean; out?: string }) => {
      const opened = await openForReading(options);
      await withRuntime(opened, async (runtime) => {
        const data = options.evidence ? await runtime.exportEvidence(sessionId) : await runtime.exportReplay(sessionId);
        if (options.out) {
          await writeFile(options.out, `${JSON.stringify(data, null, 2)}\n`).catch((error: NodeJS.ErrnoException) => {
            throw new UsageError(
              oarError('file_unwritable', `cannot write ${options.out}: ${error.code ?? error.message}`),
            );
          });
          process.stderr.write(`wrote ${options.out}\n`);
        } else printJson(data);
      });
    });
}
