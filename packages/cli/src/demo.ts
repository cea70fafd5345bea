import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { OarConfig } from '@oar/runtime';
import type { Command } from 'commander';
import { packageRoot } from './package-root.js';

// The runtime and the drive loop are imported when a demo runs, not when `oar --help` lists this command.

/** The bundled demo assets: the sample workspace, the scripted model and the sub-agent configuration. */
const DEMO_ASSETS = join(packageRoot(), 'demo');

export const DEMO_PROMPT =
  'Review this project: what is it, is the build healthy, and are its scripts safe? Write your review to REVIEW.md.';

/** A long, deterministic build log: big enough that its full output spills to an artifact. */
function buildLog(): string {
  const lines: string[] = [];
  for (let i = 1; i <= 1500; i++) {
    const step = ['compile', 'bundle', 'lint', 'test'][i % 4];
    const level = i === 400 || i === 900 || i === 1300 ? 'WARN' : 'INFO';
    lines.push(
      `2026-11-21T10:${String(Math.floor(i / 60) % 60).padStart(2, '0')}:${String(i % 60).padStart(2, '0')}Z ${level} [${step}] step ${i} finished in ${(i * 7) % 97} ms`,
    );
  }
  lines.push('2026-11-21T10:25:00Z INFO build finished: 0 errors, 3 warnings');
  return `${lines.join('\n')}\n`;
}

/**
 * `oar demo`: one complete governed turn on embedded SQLite with the bundled scripted model over a copy of the
 * sample workspace — parallel reads, an artifact spill, a delegated sub-agent and an approval (interactive in a
 * terminal; auto-approved with a visible note otherwise).
 */
/**
 * A fresh copy of the sample workspace under `cwd/.oar/demo-workspace` and the demo's configuration (the scripted
 * model, its sub-agent): what `oar demo` runs once and `oar serve --demo` offers every new session.
 */
export async function prepareDemo(cwd: string): Promise<{ config: OarConfig; baseDir: string; workspace: string }> {
  const { OarConfigSchema } = await import('@oar/runtime');
  const workspace = resolve(cwd, '.oar/demo-workspace');
  await rm(workspace, { recursive: true, force: true });
  await mkdir(workspace, { recursive: true });
  await cp(join(DEMO_ASSETS, 'workspace'), workspace, { recursive: true });
  await mkdir(join(workspace, 'logs'), { recursive: true });
  await writeFile(join(workspace, 'logs/build.log'), buildLog());
  const agents = JSON.parse(await readFile(join(DEMO_ASSETS, 'agents.json'), 'utf8'));
  const config = OarConfigSchema.parse({ model: 'script:script.json', agents, limits: { observationTokens: 1500 } });
  return { config, baseDir: DEMO_ASSETS, workspace };
}

/**
 * The example business CLI (the repository's examples/business-cli), shipped inside this package: its built modules
 * and skills, copied here by `npm run build` and before packing (scripts/package-assets.mjs).
 */
const BUSINESS_EXAMPLE = join(packageRoot(), 'examples', 'business-cli');

export const BUSINESS_PROMPT =
  "What's on my calendar on 1 December? Add a design follow-up on 2 December at 15:00 for an hour with Alan, share the design review with Bob, and cancel my lunch.";

/**
 * The business demo's configuration: no workspace tools, only `project_cli` over the example business CLI with a
 * fresh store of its own, its skills and post-processors, and a credential signed with BUSINESS_CLI_KEY (a random
 * one for this process when the variable is not set).
 */
export async function prepareBusinessDemo(cwd: string): Promise<{ config: OarConfig; workspace: string }> {
  const { OarConfigSchema, OarRuntimeError } = await import('@oar/runtime');
  const cli = join(BUSINESS_EXAMPLE, 'dist/cli.js');
  if (!existsSync(cli)) {
    throw new OarRuntimeError(
      'binding_unavailable',
      `the example business CLI is missing (${cli}); in the repository, run \`npm run build\` first`,
    );
  }
  const workspace = resolve(cwd, '.oar/demo-business');
  await rm(workspace, { recursive: true, force: true });
  await mkdir(workspace, { recursive: true });
  process.env.BUSINESS_CLI_KEY ??= randomBytes(32).toString('hex');
  const config = OarConfigSchema.parse({
    model: 'script:business/script.json',
    // Per-operation rules: adding and sharing events runs; deleting one (destructive) still asks.
    permissions: {
      rules: [
        {
          decision: 'allow',
          tool: 'project_cli',
          operation: 'calendar.{create,share}',
          reason: 'the demo lets the agent add and share events',
        },
      ],
    },
    tools: {
      builtin: [],
      cli: {
        command: [process.execPath, cli],
        args: ['--store', join(workspace, 'business.db')],
        allow: ['calendar.*', 'contacts.read', 'memory.update'],
        cwd: workspace,
        credential: { algorithm: 'HS256', keyEnv: 'BUSINESS_CLI_KEY' },
        skills: Object.fromEntries(
          ['calendar', 'contacts', 'memory'].map((m) => [m, join(BUSINESS_EXAMPLE, `skills/${m}.md`)]),
        ),
        enabledSkills: ['calendar', 'contacts'],
        postProcessors: join(BUSINESS_EXAMPLE, 'dist/post-processors.js'),
      },
    },
  });
  return { config, workspace };
}

async function demo(options: { store?: string; json?: boolean; tools?: string }): Promise<number> {
  const [
    { buildRuntime, EXIT, OarRuntimeError },
    { turnErrorText },
    { attachPrinter, driveSession },
    { CtrlC, interruptOnceStarted },
  ] = await Promise.all([
    import('@oar/runtime'),
    import('./io.js'),
    import('./session-driver.js'),
    import('./ctrl-c.js'),
  ]);
  const cwd = process.cwd();
  const business = options.tools === 'business';
  if (options.tools !== undefined && !business) {
    throw new OarRuntimeError('invalid_option', `--tools takes "business", not "${options.tools}"`);
  }
  const { config, workspace } = business ? await prepareBusinessDemo(cwd) : await prepareDemo(cwd);
  const { runtime, store } = await buildRuntime(config, DEMO_ASSETS, {
    cwd,
    env: process.env,
    workspace,
    // This process drives the demo session only: other sessions in the store are not its business.
    worker: { sessions: [] },
    resumeOnStart: false,
    ...(options.store ? { store: options.store } : {}),
  });
  const json = options.json === true;
  const interactive = process.stdin.isTTY === true && process.stdout.isTTY === true && !json;
  // Ctrl-C interrupts the demo's turn as it does `oar run`'s (exit 130), also at the approval prompt.
  const ctrlC = new CtrlC();
  try {
    if (!json) {
      process.stdout.write(
        business
          ? `OAR demo — business tools: one governed project_cli over the example business CLI, acting for user:ada\n  store: ${store.location}\n  business data: ${workspace}/business.db\n\n> ${BUSINESS_PROMPT}\n\n`
          : `OAR demo — a governed turn with a scripted model over a sample workspace\n  store: ${store.location}\n  workspace: ${workspace}\n\n> ${DEMO_PROMPT}\n\n`,
      );
    }
    // The business demo's session acts for Ada, a user of the example's seed data: the credential's `sub`.
    const { sessionId } = await runtime.createSession({
      title: business ? 'OAR demo (business tools)' : 'OAR demo',
      ...(business ? { actor: 'user:ada' } : {}),
    });
    runtime.worker?.adopt(sessionId);
    const printer = attachPrinter(runtime, sessionId, json);
    const submitted = await runtime.submitTurn({ sessionId, input: business ? BUSINESS_PROMPT : DEMO_PROMPT });
    ctrlC.arm(() => interruptOnceStarted(runtime, sessionId, submitted, 0));
    const result = await ctrlC.follow((onCtrlC) =>
      driveSession(runtime, sessionId, submitted.turnId, {
        json,
        approvals: interactive ? 'ask' : 'approve',
        autoNote: 'auto-approved: no terminal to ask in (run `oar demo` in a terminal to decide yourself)',
        printer,
        onCtrlC,
      }),
    );
    await printer.stop();
    if (json) {
      process.stdout.write(
        `${JSON.stringify({ result: { sessionId, status: result.status, answer: result.answer, error: result.error } })}\n`,
      );
    } else {
      if (result.answer) process.stdout.write(`\n${result.answer}\n`);
      if (result.error) process.stdout.write(turnErrorText(result.error));
      process.stdout.write(
        `\nThe full record is the event log of session ${sessionId} in ${store.location}:\n${[
          'events',
          'inspect',
          'replay',
          'export',
        ]
          .map(
            (command) =>
              `  npx oar ${command} ${sessionId}${command === 'export' ? ' --evidence' : ''}${storeFlag(options.store, store.location)}`,
          )
          .join('\n')}\n`,
      );
    }
    if (ctrlC.requested || result.status === 'cancelled') return EXIT.cancelled;
    return result.status === 'completed' ? EXIT.ok : EXIT.failed;
  } finally {
    ctrlC.dispose();
    await runtime.close();
    await store.close();
  }
}

/** The `--store` flag a follow-up command needs: none for the default store, the (password-free) location otherwise. */
export function storeFlag(requested: string | undefined, location: string): string {
  return requested ? ` --store '${location}'` : '';
}

export function registerDemoCommand(program: Command, setExit: (code: number) => void): void {
  program
    .command('demo')
    .description('run the bundled demo: a complete governed turn on embedded SQLite with a scripted model')
    .option('--store <url>', 'SQLite path or postgres:// URL (default .oar/oar.db)')
    .option('--json', 'print every event as NDJSON, then a result line')
    .option(
      '--tools <kind>',
      '"business": business tools behind one governed project_cli (the example business CLI) instead of the workspace review',
    )
    .action(async (options: { store?: string; json?: boolean; tools?: string }) => setExit(await demo(options)));
}
