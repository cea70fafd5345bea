import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { buildRuntime, OarConfigSchema, type Runtime } from '@oar/runtime';
import { createLogger, type RunningServer, startServer } from '@oar/server';
import { type Browser, chromium, type Page } from 'playwright-core';
import { expect } from 'vitest';

/**
 * What the console's end-to-end tests of jobs and schedules share: Debian's Chromium (never a browser download;
 * CI fails without it, a local run skips with a visible message), the console built from the sources under test into
 * the test's own directory, a real server over a runtime on a real SQLite file whose worker drives every session, the
 * scripted model, and a page whose errors fail the test with a screenshot.
 */

export const CHROMIUM = process.env.OAR_CHROMIUM ?? '/usr/bin/chromium';
const here = dirname(fileURLToPath(import.meta.url));
const consoleDir = resolve(here, '..');
const repo = resolve(here, '../../..');
export const shots = join(repo, 'test-results/console');

/** Whether Chromium is here; under CI its absence is an error, never a skip. */
export function chromiumAvailable(what: string): boolean {
  if (existsSync(CHROMIUM)) return true;
  if (process.env.CI) {
    throw new Error(
      `the console ${what} end-to-end test needs Chromium at ${CHROMIUM} (Debian: apt-get install -y chromium); CI must not skip it`,
    );
  }
  console.warn(
    `\n⚠ SKIPPED: console ${what} end-to-end test — no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set OAR_CHROMIUM)\n`,
  );
  return false;
}

/** docs/console.md's pictures, refreshed on request only (OAR_WRITE_DOC_IMAGES=1), so a run leaves the tree as it was. */
export function docImage(name: string, png: Buffer): void {
  if (process.env.OAR_WRITE_DOC_IMAGES !== '1') return;
  mkdirSync(join(repo, 'docs/images'), { recursive: true });
  writeFileSync(join(repo, 'docs/images', name), png);
}

const silent = () =>
  createLogger({
    destination: new Writable({
      write(_chunk, _encoding, done) {
        done();
      },
    }),
  });

export interface ConsoleRun {
  dir: string;
  runtime: Runtime;
  server: RunningServer;
  /** The server's admin key. */
  key: string;
  browser: Browser;
  page: Page;
  /** Errors the page threw. */
  errors: string[];
  close(): Promise<void>;
  /** Run `steps`; a failure (or a page error) saves a screenshot and says what the page threw. */
  guarded(name: string, steps: () => Promise<void>): Promise<void>;
}

/** The server, its console and a browser page, in a new directory named after `prefix`; `steps` is the script. */
export async function startConsole(prefix: string, steps: unknown[]): Promise<ConsoleRun> {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const consoleDist = join(dir, 'console-dist');
  execFileSync(
    process.execPath,
    [
      resolve(repo, 'node_modules/vite/bin/vite.js'),
      'build',
      consoleDir,
      '--outDir',
      consoleDist,
      '--emptyOutDir',
      '--logLevel',
      'silent',
    ],
    { stdio: 'ignore' },
  );
  expect(existsSync(join(consoleDist, 'index.html'))).toBe(true);
  mkdirSync(shots, { recursive: true });
  const workspace = join(dir, 'ws');
  mkdirSync(workspace);
  writeFileSync(join(dir, 'script.json'), JSON.stringify({ steps }));
  const config = OarConfigSchema.parse({ model: 'script:script.json' });
  const { runtime } = await buildRuntime(config, dir, {
    cwd: dir,
    env: {},
    workspace,
    worker: { sessions: 'all' },
    store: join(dir, 'oar.db'),
  });
  const server = await startServer({ runtime, port: 0, consoleDir: consoleDist, logger: silent() });
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.setDefaultTimeout(15_000);
  return {
    dir,
    runtime,
    server,
    key: server.createdAdminKey as string,
    browser,
    page,
    errors,
    async close() {
      await browser.close();
      await server.close();
      await runtime.store.close();
      rmSync(dir, { recursive: true, force: true });
    },
    async guarded(name, run) {
      try {
        await run();
        expect(errors).toEqual([]);
      } catch (error) {
        await page.screenshot({ path: join(shots, `failure-${name}.png`), fullPage: true }).catch(() => undefined);
        throw new Error(`${(error as Error).message}\npage errors: ${errors.join('; ') || 'none'}`, { cause: error });
      }
    },
  };
}
