import { join } from 'node:path';
import type { Runtime } from '@oar/runtime';
import type { RunningServer } from '@oar/server';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Schedule } from '../src/types.js';
import { type ConsoleRun, chromiumAvailable, docImage, shots, startConsole } from './e2e-fixture.js';

/**
 * Schedules in the console (issue 30 §2: "the console's list with next and last firings"), end to end, in headless
 * Chromium from Debian's `chromium` package (never a browser download) against a real server in this process (a
 * runtime on a real SQLite file whose worker drives all sessions, so its ticker fires schedules; the scripted model).
 * Schedules are added through the runtime (`runtime.schedules.add`); the console lists them with their next cron
 * time and last firing, opens one, follows a started firing to its session, pauses and resumes it, shows a firing
 * skipped for overlap, and a viewer key's refusal. Screenshots go to test-results/console/.
 */

const available = chromiumAvailable('schedules');

/** Every model call: an answer, except for a prompt saying SLOWTICK (an answer a minute away: its turn still runs). */
const step = {
  protocol: { kind: 'answer', message: 'Ticked.' },
  alternatives: [{ ifPrompt: 'SLOWTICK', delayMs: 60_000, protocol: { kind: 'answer', message: 'too late' } }],
};

describe.skipIf(!available)('schedules in the console', () => {
  let runtime: Runtime | undefined;
  let server: RunningServer | undefined;
  let key = '';
  let browser: Browser | undefined;
  let page: Page;
  let errors: string[] = [];
  let run: ConsoleRun | undefined;

  beforeAll(async () => {
    run = await startConsole('oar-console-schedules-', Array(8).fill(step));
    ({ runtime, server, key, browser, page, errors } = run);
  }, 120_000);

  afterAll(async () => {
    await run?.close();
  });

  const guarded = (name: string, steps: () => Promise<void>) => (run as ConsoleRun).guarded(name, steps);

  const schedule = (scheduleId: string) => (runtime as Runtime).schedules.get({ scheduleId }) as Promise<Schedule>;
  async function until<T>(check: () => Promise<T | undefined | false>, what: string, ms = 15_000): Promise<T> {
    const end = Date.now() + ms;
    for (;;) {
      const found = await check();
      if (found) return found;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  it('lists a schedule with its next firing and last firing, links a started firing to its session, pauses and resumes it', async () => {
    await guarded('schedules-pause', async () => {
      const rt = runtime as Runtime;
      await rt.schedules.add({
        scheduleId: 'every-second',
        cron: '* * * * * *',
        timezone: 'Europe/Paris',
        start: { kind: 'session', input: 'Tick report', title: 'tick' },
      });
      await rt.schedules.add({
        scheduleId: 'weekly-accounts',
        cron: '0 6 * * 1',
        start: {
          kind: 'job',
          name: 'accounts',
          items: [{ account: 'a' }, { account: 'b' }],
          prompt: 'Check {{account}}',
        },
        paused: true,
      });

      // -- the list: state, cron and time zone, what a firing starts, the next cron time, the last firing (live) --
      await page.goto(`${server?.url}/`);
      await page.getByLabel('API key').fill(key);
      await page.getByRole('button', { name: 'Open the console' }).click();
      await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Schedules' }).click();
      await page.getByRole('heading', { name: 'Schedules' }).waitFor();
      const row = page.locator('tr[data-schedule="every-second"]');
      await row.waitFor();
      await expect(row.getAttribute('data-schedule-state')).resolves.toBe('active');
      await expect(row.locator('[data-cron]').textContent()).resolves.toBe('* * * * * * · Europe/Paris');
      await expect(row.locator('[data-start-kind="session"]').textContent()).resolves.toBe(
        'new session “tick”: “Tick report”',
      );
      const next = Date.parse((await row.locator('[data-next]').getAttribute('data-next')) ?? '');
      expect(Math.abs(next - Date.now())).toBeLessThan(5_000);
      // The last firing is read again as firings happen, without a reload: a started one links to its session.
      await row.locator('[data-firing-status="started"] a[href^="/sessions/"]').waitFor();
      const weekly = page.locator('tr[data-schedule="weekly-accounts"][data-schedule-state="paused"]');
      await expect(weekly.locator('[data-start-kind="job"]').textContent()).resolves.toBe(
        'job “accounts” over 2 items',
      );
      await expect(weekly.textContent()).resolves.toContain('— (paused)');
      await expect(weekly.textContent()).resolves.toContain('none yet');
      docImage(
        'console-schedules.png',
        await page.screenshot({ path: join(shots, '40-schedules.png'), fullPage: true }),
      );

      // -- the schedule: its next cron times and recent firings; a started one opens its session --
      await row.getByRole('link', { name: 'every-second' }).click();
      await page.getByRole('heading', { name: 'every-second' }).waitFor();
      await page.locator('dd[data-schedule-state="active"]').waitFor();
      await page.locator('dd[data-next-firings="3"]').waitFor();
      const firings = page.getByRole('table', { name: 'firings' });
      const started = firings.locator('tr[data-firing-status="started"]').first();
      await started.waitFor();
      const fireAt = (await started.getAttribute('data-fire-at')) as string;
      const record = (await schedule('every-second')).lastFirings.find((f) => f.fireAt === fireAt);
      expect(record?.status).toBe('started');
      const sessionId = record?.started?.sessionId as string;
      expect(sessionId).toContain('ses_sch_');
      const link = started.getByRole('link', { name: `session ${sessionId}` });
      await expect(link.getAttribute('href')).resolves.toBe(`/sessions/${sessionId}`);
      await page.screenshot({ path: join(shots, '41-schedule.png'), fullPage: true });
      await link.click();
      await page.waitForURL((u) => u.pathname === `/sessions/${sessionId}`);
      await page.locator('article.turn').filter({ hasText: 'Tick report' }).first().waitFor();
      await page.goBack();
      await page.getByRole('heading', { name: 'every-second' }).waitFor();

      // -- pause: the console says so, the runtime agrees, and nothing fires any more --
      await page.getByRole('button', { name: 'Pause' }).click();
      await page.getByRole('status').filter({ hasText: 'Schedule paused' }).waitFor();
      await page.locator('dd[data-schedule-state="paused"]').waitFor();
      const pausedAt = Date.now();
      const paused = await schedule('every-second');
      expect(paused).toMatchObject({ paused: true, nextFirings: [] });
      await expect(page.locator('dd[data-next-firings]').textContent()).resolves.toBe('— (paused)');
      await new Promise((r) => setTimeout(r, 2_500));
      const latest = (await schedule('every-second')).lastFirings[0];
      expect(Date.parse(latest?.fireAt ?? '')).toBeLessThanOrEqual(pausedAt + 1_000);
      docImage(
        'console-schedule.png',
        await page.screenshot({ path: join(shots, '42-schedule-paused.png'), fullPage: true }),
      );

      // -- resume: active again, firing from the first cron time after now --
      await page.getByRole('button', { name: 'Resume' }).click();
      await page.getByRole('status').filter({ hasText: 'Schedule resumed' }).waitFor();
      await page.locator('dd[data-schedule-state="active"]').waitFor();
      const resumedAt = Date.now();
      const resumed = await schedule('every-second');
      expect(resumed.paused).toBe(false);
      expect(resumed.nextFirings).toHaveLength(3);
      const fresh = await until(async () => {
        const f = (await schedule('every-second')).lastFirings.find(
          (x) => x.status === 'started' && Date.parse(x.fireAt) > resumedAt - 1_000,
        );
        return f;
      }, 'a firing after the resume');
      // Shown without a reload.
      await firings.locator(`tr[data-fire-at="${fresh.fireAt}"][data-firing-status="started"]`).waitFor();
      await rt.schedules.pause({ scheduleId: 'every-second' });

      // -- back in the list: paused (by the runtime this time), as the list reads it when it opens --
      await page.getByRole('link', { name: 'Schedules', exact: true }).first().click();
      await page.locator('tr[data-schedule="every-second"][data-schedule-state="paused"]').waitFor();
    });
  }, 120_000);

  it("shows a firing skipped while the previous firing's work runs; a viewer key's Resume is refused with the API error", async () => {
    await guarded('schedules-skip', async () => {
      const rt = runtime as Runtime;
      await rt.schedules.add({
        scheduleId: 'slow',
        cron: '* * * * * *',
        start: { kind: 'session', input: 'SLOWTICK' },
      });
      const skipped = await until(
        async () => (await schedule('slow')).lastFirings.find((f) => f.status === 'skipped' && f.reason === 'overlap'),
        'a firing skipped for overlap',
      );
      await rt.schedules.pause({ scheduleId: 'slow' });
      const first = (await schedule('slow')).lastFirings.find((f) => f.status === 'started');
      const slowSession = first?.started?.sessionId as string;
      expect(slowSession).toBeTruthy();

      await page.goto(`${server?.url}/schedules/slow`);
      await page.getByRole('heading', { name: 'slow' }).waitFor();
      const row = page.locator(`tr[data-fire-at="${skipped.fireAt}"]`);
      await expect(row.getAttribute('data-firing-status')).resolves.toBe('skipped');
      await expect(row.locator('[data-firing-reason="overlap"]').textContent()).resolves.toContain(
        'the previous firing’s work still ran',
      );
      await page.locator(`tr[data-firing-status="started"] a[href="/sessions/${slowSession}"]`).waitFor();
      await page.screenshot({ path: join(shots, '43-schedule-skipped.png'), fullPage: true });

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
      await viewer.goto(`${server?.url}/schedules/slow`);
      await viewer.getByLabel('API key').fill(viewerKey);
      await viewer.getByRole('button', { name: 'Open the console' }).click();
      await viewer.getByRole('heading', { name: 'slow' }).waitFor();
      await viewer.getByRole('button', { name: 'Resume' }).click();
      await viewer.getByRole('alert').getByText('forbidden').waitFor();
      await viewer.close();
      expect((await schedule('slow')).paused).toBe(true);
      await rt.interruptTurn({ sessionId: slowSession, reason: 'test over' });
    });
  }, 120_000);
});
