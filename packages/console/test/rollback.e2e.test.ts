import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { buildRuntime, OarConfigSchema, type Runtime } from '@oar/runtime';
import { createLogger, type RunningServer, startServer } from '@oar/server';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OarEvent, Snapshot } from '../src/types.js';

/**
 * A thread rolled back from the console, end to end, in headless Chromium from Debian's `chromium` package (never a
 * browser download) against a real server in this process (a runtime on a real SQLite file, the scripted model,
 * permissions `accept-edits`): two turns write notes.txt, a hand edit makes the rollback a conflict (shown, nothing
 * changed), then the rollback of the second turn restores the file and leaves the thread with one turn. Screenshots
 * go to test-results/console/.
 */

const CHROMIUM = process.env.OAR_CHROMIUM ?? '/usr/bin/chromium';
const here = dirname(fileURLToPath(import.meta.url));
const consoleDir = resolve(here, '..');
const repo = resolve(here, '../../..');
const shots = join(repo, 'test-results/console');

const available = existsSync(CHROMIUM);
if (!available) {
  if (process.env.CI) {
    throw new Error(
      `the console rollback end-to-end test needs Chromium at ${CHROMIUM} (Debian: apt-get install -y chromium); CI must not skip it`,
    );
  }
  console.warn(
    `\n⚠ SKIPPED: console rollback end-to-end test — no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set OAR_CHROMIUM)\n`,
  );
}

const silent = () =>
  createLogger({
    destination: new Writable({
      write(_chunk, _encoding, done) {
        done();
      },
    }),
  });

const write = (id: string, content: string) => ({
  protocol: {
    kind: 'act',
    message: `Writing notes.txt (${content.trim()}).`,
    calls: [{ id, type: 'tool', name: 'write', args: { filePath: 'notes.txt', content }, title: `Write ${id}` }],
  },
});
const answer = (message: string) => ({ protocol: { kind: 'answer', message } });

describe.skipIf(!available)('rolling a thread back in the console', () => {
  let dir = '';
  let workspace = '';
  let runtime: Runtime | undefined;
  let server: RunningServer | undefined;
  let key = '';
  let browser: Browser | undefined;
  let page: Page;
  const errors: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'oar-console-rollback-'));
    // The console built from the sources under test, into this test's own directory (never a stale dist/).
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
    workspace = join(dir, 'ws');
    mkdirSync(workspace);
    const steps = [write('first', 'one\n'), answer('Wrote one.'), write('second', 'two\n'), answer('Wrote two.')];
    writeFileSync(join(dir, 'script.json'), JSON.stringify({ steps }));
    const config = OarConfigSchema.parse({ model: 'script:script.json', permissions: { mode: 'accept-edits' } });
    ({ runtime } = await buildRuntime(config, dir, {
      cwd: dir,
      env: {},
      workspace,
      worker: { sessions: 'all' },
      store: join(dir, 'oar.db'),
    }));
    server = await startServer({ runtime, port: 0, consoleDir: consoleDist, logger: silent() });
    key = server.createdAdminKey as string;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('pageerror', (e) => errors.push(String(e)));
    page.setDefaultTimeout(15_000);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await runtime?.store.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const api = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${server?.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
    expect(response.status, path).toBe(200);
    return (await response.json()) as T;
  };
  const rollbackEvents = async (sessionId: string) =>
    (await api<{ events: OarEvent[] }>(`/v1/sessions/${sessionId}/events?type=history.rollback.*&limit=1000`)).events;

  async function guarded(name: string, steps: () => Promise<void>) {
    try {
      await steps();
      expect(errors).toEqual([]);
    } catch (error) {
      await page.screenshot({ path: join(shots, `failure-${name}.png`), fullPage: true }).catch(() => undefined);
      throw new Error(`${(error as Error).message}\npage errors: ${errors.join('; ') || 'none'}`, { cause: error });
    }
  }

  it('shows the plan, refuses a file changed by hand without changing anything, then rolls back the second turn with its file', async () => {
    await guarded('rollback', async () => {
      const url = server?.url as string;
      const file = join(workspace, 'notes.txt');
      await page.goto(`${url}/`);
      await page.getByLabel('API key').fill(key);
      await page.getByRole('button', { name: 'Open the console' }).click();
      await page.getByLabel('New session title').fill('Notes');
      await page.getByRole('button', { name: 'New session' }).click();
      await page.getByRole('heading', { name: 'Notes' }).waitFor();
      const sessionId = decodeURIComponent(new URL(page.url()).pathname.split('/')[2] as string);

      // Two turns, each writing notes.txt (accept-edits: no approval).
      const turns = page.locator('article.turn');
      for (const [i, input] of ['Write one', 'Write two'].entries()) {
        await page.getByLabel('New turn').fill(input);
        await page.getByRole('button', { name: /Send/ }).click();
        await turns.nth(i).locator('[data-answer]').waitFor();
        await turns.nth(i).getByRole('button', { name: 'Roll back to before this turn' }).waitFor();
      }
      expect(readFileSync(file, 'utf8')).toBe('two\n');
      const second = (await turns.nth(1).getAttribute('data-turn')) as string;
      const first = (await turns.nth(0).getAttribute('data-turn')) as string;

      // -- the plan (a dry run): one turn removed, notes.txt restored --
      await turns.nth(1).getByRole('button', { name: 'Roll back to before this turn' }).click();
      const plan = page.getByRole('region', { name: 'Rollback plan' });
      await plan.locator('[data-file="notes.txt"][data-file-action="restore"]').waitFor();
      await expect(plan.locator('[data-removed-turns]').getAttribute('data-removed-turns')).resolves.toBe(second);
      await expect(plan.getByRole('button', { name: 'Roll back', exact: true }).isEnabled()).resolves.toBe(true);
      await page.screenshot({ path: join(shots, '22-rollback-plan.png'), fullPage: true });

      // -- the file changed by hand after the plan: the rollback is refused, its message shown, nothing changed --
      writeFileSync(file, 'edited by hand\n');
      await plan.getByRole('button', { name: 'Roll back', exact: true }).click();
      const alert = plan.getByRole('alert');
      await alert.getByText('rollback_conflict').waitFor();
      await expect(alert.textContent()).resolves.toContain('notes.txt (changed_outside)');
      await expect(alert.textContent()).resolves.toContain('Nothing was changed');
      // The refusal's plan replaces the old one: the conflict, the confirm disabled, "history only" offered.
      await plan.locator('[data-conflict="notes.txt"][data-reason="changed_outside"]').waitFor();
      await expect(plan.getByRole('button', { name: 'Roll back', exact: true }).isDisabled()).resolves.toBe(true);
      await expect(plan.getByRole('button', { name: 'Roll back history only' }).isEnabled()).resolves.toBe(true);
      await page.screenshot({ path: join(shots, '23-rollback-conflict.png'), fullPage: true });
      expect(readFileSync(file, 'utf8')).toBe('edited by hand\n');
      expect(await rollbackEvents(sessionId)).toEqual([]);
      await expect(turns.count()).resolves.toBe(2);
      await plan.getByRole('button', { name: 'Cancel' }).click();
      await plan.waitFor({ state: 'detached' });

      // Opened again, the dry run itself finds the conflict: the confirm is disabled from the start.
      await turns.nth(1).getByRole('button', { name: 'Roll back to before this turn' }).click();
      await plan.locator('[data-conflict="notes.txt"]').waitFor();
      await expect(plan.getByRole('button', { name: 'Roll back', exact: true }).isDisabled()).resolves.toBe(true);
      expect(readFileSync(file, 'utf8')).toBe('edited by hand\n');
      expect(await rollbackEvents(sessionId)).toEqual([]);

      // -- the hand edit undone, checked again: the rollback goes through --
      writeFileSync(file, 'two\n');
      await plan.getByRole('button', { name: 'Check again' }).click();
      await plan.locator('[data-file="notes.txt"][data-file-action="restore"]').waitFor();
      await expect(plan.locator('[data-conflict]').count()).resolves.toBe(0);
      await plan.getByRole('button', { name: 'Roll back', exact: true }).click();
      await page.locator('[data-rolled-back]', { hasText: 'Rolled back 1 turn · notes.txt restored' }).waitFor();

      // The thread follows the read model: one turn, and a note where the second was.
      await page.locator(`article.turn[data-turn="${second}"]`).waitFor({ state: 'detached' });
      await expect(turns.count()).resolves.toBe(1);
      await expect(turns.first().getAttribute('data-turn')).resolves.toBe(first);
      const note = page.locator('[data-rollback][data-rollback-status="completed"]');
      await note.waitFor();
      await expect(note.locator(`[data-removed-turn="${second}"]`).textContent()).resolves.toContain('Write two');
      await expect(note.locator('[data-file="notes.txt"]').textContent()).resolves.toContain('restored');
      expect(readFileSync(file, 'utf8')).toBe('one\n');
      const rm = (await api<{ snapshot: Snapshot }>(`/v1/sessions/${sessionId}`)).snapshot.threads[0];
      expect(rm?.turns.map((t) => t.turnId)).toEqual([first]);
      const recorded = await rollbackEvents(sessionId);
      expect(recorded.map((e) => e.type)).toEqual(['history.rollback.started', 'history.rollback.completed']);
      expect(recorded[1]?.payload).toMatchObject({ removedTurns: [second], targetTurnId: second });
      await page.screenshot({ path: join(shots, '24-rolled-back.png'), fullPage: true });

      // -- the events explorer says what the rollback removed and restored --
      await page.getByRole('link', { name: 'Events', exact: true }).click();
      await page.getByLabel('Filter by type').fill('history.rollback.*');
      await page.getByRole('button', { name: 'Filter' }).click();
      const completedRow = page.locator('tr[data-seq]', { hasText: 'history.rollback.completed' });
      await expect(completedRow.locator('[data-summary]').textContent()).resolves.toBe(
        `rolled back 1 turn (${second}) · files: notes.txt restored`,
      );

      // -- the Files tab: both versions, the second's turn rolled back, its content before opens --
      await page.getByRole('link', { name: 'Files', exact: true }).click();
      const versions = page.getByRole('region', { name: 'file notes.txt' });
      await versions.locator('li[data-version="2"] [data-rolled-back]').waitFor();
      await expect(versions.locator('li[data-version="1"]').textContent()).resolves.toContain('created the file');
      await versions
        .locator('li[data-version="2"]')
        .getByRole('link', { name: /content before/ })
        .click();
      const before = page.getByRole('complementary', { name: 'before-image' });
      await expect(before.locator('pre.code').textContent()).resolves.toContain('one');
      await page.screenshot({ path: join(shots, '25-files.png'), fullPage: true });
    });
  }, 120_000);
});
