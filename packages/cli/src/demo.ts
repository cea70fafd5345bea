import { cp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildRuntime, type OarConfig, OarConfigSchema } from '@oar/runtime';
import type { Command } from 'commander';
import { turnErrorText } from './io.js';
import { attachPrinter, driveSession } from './session-driver.js';

/** The bundled demo assets: the sample workspace, the scripted model and the sub-agent configuration. */
const DEMO_ASSETS = fileURLToPath(new URL('../demo/', import.meta.url));

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

async function demo(options: { store?: string; json?: boolean }): Promise<number> {
  const cwd = process.cwd();
  const { config, workspace } = await prepareDemo(cwd);
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
  try {
    if (!json) {
      process.stdout.write(
        `OAR demo — a governed turn with a scripted model over a sample workspace\n  store: ${store.location}\n  workspace: ${workspace}\n\n> ${DEMO_PROMPT}\n\n`,
      );
    }
    const { sessionId } = await runtime.createSession({ title: 'OAR demo' });
    runtime.worker?.adopt(sessionId);
    const printer = attachPrinter(runtime, sessionId, json);
    const { turnId } = await runtime.submitTurn({ sessionId, input: DEMO_PROMPT });
    const result = await driveSession(runtime, sessionId, turnId, {
      json,
      approvals: interactive ? 'ask' : 'approve',
      autoNote: 'auto-approved: no terminal to ask in (run `oar demo` in a terminal to decide yourself)',
      printer,
    });
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
    return result.status === 'completed' ? 0 : 1;
  } finally {
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
    .action(async (options: { store?: string; json?: boolean }) => setExit(await demo(options)));
}
