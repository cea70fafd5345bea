import { join } from 'node:path';
import type { Runtime } from '@oar/runtime';
import type { RunningServer } from '@oar/server';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Job } from '../src/types.js';
import { type ConsoleRun, chromiumAvailable, docImage, shots, startConsole } from './e2e-fixture.js';

/**
 * Jobs in the console (issue 30 §1: "the console shows a job's items and their sessions"), end to end, in headless
 * Chromium from Debian's `chromium` package (never a browser download) against a real server in this process (a
 * runtime on a real SQLite file, the scripted model). Jobs are started through the runtime (`runtime.jobs.start`);
 * the console lists them, opens one, follows an item to its thread and back through the session's Jobs tab,
 * retries the failed items (a new round), cancels a running job, and shows a viewer key's refusal. Screenshots go
 * to test-results/console/.
 */

const available = chromiumAvailable('jobs');

/**
 * Every model call of an item's thread (call N of a thread is step N): an answer, except for an item whose prompt
 * says BAD (the provider refuses it, 400: the attempt fails) or SLOWITEM (an answer a minute away: still running
 * when the job is cancelled, which aborts the wait).
 */
const step = {
  protocol: { kind: 'answer', message: 'Described.' },
  alternatives: [
    { ifPrompt: 'BAD', error: { message: 'the provider refused the BAD item', statusCode: 400 } },
    { ifPrompt: 'SLOWITEM', delayMs: 60_000, protocol: { kind: 'answer', message: 'too late' } },
  ],
};

describe.skipIf(!available)('jobs in the console', () => {
  let runtime: Runtime | undefined;
  let server: RunningServer | undefined;
  let key = '';
  let browser: Browser | undefined;
  let page: Page;
  let errors: string[] = [];
  let run: ConsoleRun | undefined;

  beforeAll(async () => {
    run = await startConsole('oar-console-jobs-', Array(8).fill(step));
    ({ runtime, server, key, browser, page, errors } = run);
  }, 120_000);

  afterAll(async () => {
    await run?.close();
  });

  const guarded = (name: string, steps: () => Promise<void>) => (run as ConsoleRun).guarded(name, steps);

  const job = (jobId: string) => (runtime as Runtime).jobs.get({ jobId }) as Promise<Job>;
  async function until(check: () => Promise<boolean>, what: string, ms = 15_000) {
    const end = Date.now() + ms;
    while (!(await check())) {
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it("lists a job with its counts, shows each item's status and attempts, links an item to its thread, and retries the failed item in a new round", async () => {
    await guarded('jobs-retry', async () => {
      const rt = runtime as Runtime;
      const started = await rt.jobs.start({
        name: 'cities',
        items: [{ city: 'Oslo' }, { city: 'BAD' }, { city: 'Lima' }],
        prompt: 'Describe {{city}}',
        policy: { concurrency: 2, maxAttempts: 2, backoffMs: 0 },
      });
      const { jobId, sessionId } = started;

      // -- the list, live: the job ends failed (its BAD item failed both attempts) without a reload --
      await page.goto(`${server?.url}/`);
      await page.getByLabel('API key').fill(key);
      await page.getByRole('button', { name: 'Open the console' }).click();
      await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Jobs' }).click();
      await page.getByRole('heading', { name: 'Jobs' }).waitFor();
      const row = page.locator(`tr[data-job="${jobId}"]`);
      await page.locator(`tr[data-job="${jobId}"][data-job-status="failed"]`).waitFor();
      await expect(row.locator('[data-counts]').getAttribute('data-counts')).resolves.toBe('2/3 completed, 1 failed');
      await expect(row.textContent()).resolves.toContain('2/3 completed, 1 failed');
      await expect(row.locator('[data-round]').textContent()).resolves.toBe('1');
      await expect(row.getByRole('img').getAttribute('aria-label')).resolves.toBe('2/3 completed, 1 failed');
      docImage('console-jobs.png', await page.screenshot({ path: join(shots, '30-jobs.png'), fullPage: true }));

      // -- the job: policy, reason, every item with its status, attempts and outcome --
      await row.getByRole('link', { name: 'cities' }).click();
      await page.getByRole('heading', { name: 'cities' }).waitFor();
      await page.locator('[data-job-status="failed"] [data-reason="items_failed"]').waitFor();
      await expect(page.locator('[data-policy]').textContent()).resolves.toContain('2 at once');
      await expect(page.locator('[data-policy]').textContent()).resolves.toContain('up to 2 attempts per item');
      const items = page.getByRole('table', { name: 'items' });
      const item = (i: number) => items.locator(`tr[data-item="${i}"]`);
      const done = await job(jobId);
      expect(done.items.map((i) => [i.status, i.attempts])).toEqual([
        ['completed', 1],
        ['failed', 2],
        ['completed', 1],
      ]);
      for (const i of done.items) {
        await expect(item(i.index).getAttribute('data-item-status')).resolves.toBe(i.status);
        // Each item is shown by the start of its prompt, not only its number.
        await expect(item(i.index).locator('.job-label').textContent()).resolves.toMatch(/^Describe /);
        // A completed item has nothing left to try; the others say how many attempts this round still has.
        await expect(item(i.index).locator('[data-attempts]').textContent()).resolves.toBe(
          i.status === 'completed' ? `${i.attempts}` : `${i.attempts}${i.attemptsLeft} left`,
        );
      }
      const bad = done.items[1];
      expect(bad?.error?.message).toBeTruthy();
      await expect(item(1).locator('.job-error').textContent()).resolves.toBe(
        `${bad?.error?.code} ${bad?.error?.message}`,
      );
      await expect(page.getByRole('button', { name: 'Cancel job' }).count()).resolves.toBe(0);
      await page.screenshot({ path: join(shots, '31-job-failed.png'), fullPage: true });

      // -- an item's link opens its thread in the job's session: its two failed attempts --
      await item(1).getByRole('link').click();
      await page.waitForURL((u) => u.pathname === `/sessions/${sessionId}`);
      expect(new URL(page.url()).searchParams.get('thread')).toBe(bad?.threadId);
      await page.locator(`article.turn[data-turn="${bad?.turnId}"]`).waitFor();
      await expect(page.locator('article.turn').count()).resolves.toBe(2);
      await expect(page.locator('article.turn').first().textContent()).resolves.toContain('Describe BAD');
      // The thread says which item of which job it is.
      const note = page.locator(`[data-job-item="${jobId}/1"]`);
      await expect(note.textContent()).resolves.toContain('Item 1 of job cities');
      await expect(note.getByRole('link', { name: 'cities' }).getAttribute('href')).resolves.toBe(`/jobs/${jobId}`);
      await page.screenshot({ path: join(shots, '32-job-item-thread.png'), fullPage: true });

      // -- the session's Jobs tab lists the job and leads back to it --
      await page.getByRole('link', { name: 'Jobs (1)' }).click();
      await page.waitForURL((u) => u.pathname === `/sessions/${sessionId}/jobs`);
      const tabRow = page.locator(`tr[data-job="${jobId}"]`);
      await expect(tabRow.locator('[data-counts]').getAttribute('data-counts')).resolves.toBe(
        '2/3 completed, 1 failed',
      );
      await page.screenshot({ path: join(shots, '33-session-jobs.png'), fullPage: true });
      await tabRow.getByRole('link', { name: 'cities' }).click();
      await page.getByRole('heading', { name: 'cities' }).waitFor();

      // -- retry: round 2 runs only the failed item (and it fails again, two more attempts) --
      await page.getByRole('button', { name: 'Retry failed items' }).click();
      await page.getByRole('status').filter({ hasText: 'Round 2: 1 item run again.' }).waitFor();
      await page.locator('dd[data-round="2"]').waitFor();
      await page.locator('tr[data-item="1"][data-item-status="failed"] [data-attempts="4"]').waitFor();
      await page.locator('dd[data-job-status="failed"]').waitFor();
      await expect(item(1).locator('[data-attempts]').textContent()).resolves.toBe('40 left');
      await expect(item(0).locator('[data-attempts]').getAttribute('data-attempts')).resolves.toBe('1');
      expect(await job(jobId)).toMatchObject({ round: 2, status: 'failed' });
      docImage('console-job.png', await page.screenshot({ path: join(shots, '34-job-retried.png'), fullPage: true }));

      // -- and the list says round 2 --
      await page.getByRole('link', { name: 'Jobs', exact: true }).first().click();
      await page.locator(`tr[data-job="${jobId}"] [data-round="2"]`).waitFor();
    });
  }, 120_000);

  it('cancels a running job from the console; a viewer key is refused with the API error', async () => {
    await guarded('jobs-cancel', async () => {
      const rt = runtime as Runtime;
      const started = await rt.jobs.start({
        name: 'slow batch',
        items: ['SLOWITEM a', 'SLOWITEM b', 'SLOWITEM c'],
        prompt: '{{item}}',
        policy: { concurrency: 1, maxAttempts: 1 },
      });
      const { jobId } = started;
      await until(async () => (await job(jobId)).items[0]?.status === 'running', 'the first item to run');

      // A viewer key (its own tab: the key lives in sessionStorage) sees the button, and the refusal.
      const created = await fetch(`${server?.url}/v1/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'looker', scope: 'viewer' }),
      });
      expect(created.status).toBe(201);
      const viewerKey = ((await created.json()) as { key: string }).key;
      const viewer = await (browser as Browser).newPage({ viewport: { width: 1280, height: 900 } });
      viewer.on('pageerror', (e) => errors.push(String(e)));
      viewer.setDefaultTimeout(15_000);
      await viewer.goto(`${server?.url}/jobs/${jobId}`);
      await viewer.getByLabel('API key').fill(viewerKey);
      await viewer.getByRole('button', { name: 'Open the console' }).click();
      await viewer.getByRole('heading', { name: 'slow batch' }).waitFor();
      await viewer.getByRole('button', { name: 'Cancel job' }).click();
      const refusal = viewer.getByRole('alert');
      await refusal.getByText('forbidden').waitFor();
      await viewer.close();
      expect((await job(jobId)).status).toBe('running');

      // The operator cancels it: the running item is interrupted, the others never start.
      await page.goto(`${server?.url}/jobs/${jobId}`);
      await page.getByRole('heading', { name: 'slow batch' }).waitFor();
      await page.locator('tr[data-item="0"][data-item-status="running"]').waitFor();
      await expect(page.locator('tr[data-item="1"]').getAttribute('data-item-status')).resolves.toBe('pending');
      await page.screenshot({ path: join(shots, '35-job-running.png'), fullPage: true });
      await page.getByLabel('Cancel reason').fill('not needed');
      await page.getByRole('button', { name: 'Cancel job' }).click();
      await page.getByRole('status').filter({ hasText: 'Job cancelled.' }).waitFor();
      await page.locator('dd[data-job-status="cancelled"]').waitFor();
      await expect(page.locator('[data-reason]').textContent()).resolves.toBe(' reason: not needed');
      await expect(page.locator('tr[data-item="0"] .job-outcome').textContent()).resolves.toBe('interrupted');
      await expect(page.locator('tr[data-item="2"] .job-outcome').textContent()).resolves.toBe('never started');
      for (const i of [0, 1, 2]) {
        await expect(page.locator(`tr[data-item="${i}"]`).getAttribute('data-item-status')).resolves.toBe('cancelled');
      }
      await expect(page.locator('.job-facts [data-counts]').getAttribute('data-counts')).resolves.toBe(
        '0/3 completed, 3 cancelled',
      );
      await expect(page.getByRole('button', { name: 'Cancel job' }).count()).resolves.toBe(0);
      // Cancelled items can run again.
      await page.getByRole('button', { name: 'Retry failed items' }).waitFor();
      const after = await job(jobId);
      expect(after).toMatchObject({ status: 'cancelled', reason: 'not needed' });
      expect(after.items.map((i) => [i.status, i.attempts])).toEqual([
        ['cancelled', 1],
        ['cancelled', 0],
        ['cancelled', 0],
      ]);
      await page.screenshot({ path: join(shots, '36-job-cancelled.png'), fullPage: true });
    });
  }, 120_000);
});
