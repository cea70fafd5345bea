import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { buildRuntime, OarConfigSchema, type Runtime } from '@oar/runtime';
import { createLogger, type RunningServer, startServer } from '@oar/server';
import { type Browser, chromium, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OarEvent, Snapshot, ThreadRM, UnreconciledAction } from '../src/types.js';

/**
 * The console end to end, in headless Chromium from Debian's `chromium` package (never a browser download),
 * against a real `oar serve` server in this process: a runtime on a real SQLite file with the demo's scripted
 * model (parallel reads, a spilled build log, a sub-agent, a write that needs approval). Screenshots of every main
 * screen go to test-results/console/.
 */

const CHROMIUM = process.env.OAR_CHROMIUM ?? '/usr/bin/chromium';
const here = dirname(fileURLToPath(import.meta.url));
const consoleDir = resolve(here, '..');
const demoAssets = resolve(here, '../../cli/demo');
const shots = resolve(here, '../../../test-results/console');
const DEMO_PROMPT =
  'Review this project: what is it, is the build healthy, and are its scripts safe? Write your review to REVIEW.md.';

const available = existsSync(CHROMIUM);
if (!available) {
  if (process.env.CI) {
    throw new Error(
      `the console end-to-end test needs Chromium at ${CHROMIUM} (Debian: apt-get install -y chromium); CI must not skip it`,
    );
  }
  console.warn(
    `\n⚠ SKIPPED: console end-to-end tests — no Chromium at ${CHROMIUM} (apt-get install -y chromium, or set OAR_CHROMIUM)\n`,
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

interface Env {
  dir: string;
  workspace: string;
  storePath: string;
  runtime?: Runtime;
  server?: RunningServer;
  port?: number;
  key?: string;
}

/**
 * The demo's script, then two more main-agent steps: a turn after the restart whose answer streams in slowly
 * (text deltas), and a turn that waits a minute for its model (to be interrupted).
 */
function writeScript(dir: string): void {
  const script = JSON.parse(readFileSync(join(demoAssets, 'script.json'), 'utf8'));
  script.steps.push(
    {
      text: 'Checking the log after the restart: every event is there once.',
      protocol: { kind: 'answer', message: 'Still here after the restart: **nothing was lost**.' },
      chunks: 12,
      chunkDelayMs: 120,
    },
    { delayMs: 60_000, protocol: { kind: 'answer', message: 'too late' } },
  );
  writeFileSync(join(dir, 'script.json'), JSON.stringify(script));
}

async function start(env: Env): Promise<void> {
  const agents = JSON.parse(readFileSync(join(demoAssets, 'agents.json'), 'utf8'));
  const config = OarConfigSchema.parse({ model: 'script:script.json', agents, limits: { observationTokens: 1500 } });
  const { runtime } = await buildRuntime(config, env.dir, {
    cwd: env.dir,
    env: {},
    workspace: env.workspace,
    worker: { sessions: 'all' },
    store: env.storePath,
  });
  env.runtime = runtime;
  env.server = await startServer({
    runtime,
    port: env.port ?? 0,
    consoleDir: join(env.dir, 'console-dist'),
    logger: silent(),
    ...(env.key ? { adminKey: env.key } : {}),
  });
  env.port = env.server.port;
  env.key ??= env.server.createdAdminKey;
}

async function stop(env: Env): Promise<void> {
  await env.server?.close();
  await env.runtime?.store.close();
  env.server = undefined;
  env.runtime = undefined;
}

/**
 * The console built from the sources under test (half a second) into the test's own directory (`console-dist`):
 * never a stale dist/, and packages/console/dist is never emptied under a test that reads it (the packaging test
 * ships it in @oar/server).
 */
function buildConsole(dir: string): void {
  execFileSync(
    process.execPath,
    [
      resolve(consoleDir, '../../node_modules/vite/bin/vite.js'),
      'build',
      consoleDir,
      '--outDir',
      join(dir, 'console-dist'),
      '--emptyOutDir',
      '--logLevel',
      'silent',
    ],
    { stdio: 'ignore' },
  );
}

function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
}

/** Chromium and one page whose uncaught errors land in `errors` (each test expects none). */
async function openPage(errors: string[]): Promise<{ browser: Browser; page: Page }> {
  const browser = await launchChromium();
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.setDefaultTimeout(15_000);
  mkdirSync(shots, { recursive: true });
  return { browser, page };
}

/** Close what a describe opened: the browser, the server and its store, the test's directory. */
async function closeAll(env: Env, browser: Browser | undefined): Promise<void> {
  await browser?.close();
  await stop(env);
  if (env.dir) rmSync(env.dir, { recursive: true, force: true });
}

async function shot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

describe.skipIf(!available)('the web console in Chromium', () => {
  const env: Env = { dir: '', workspace: '', storePath: '' };
  let browser: Browser;
  let page: Page;
  const errors: string[] = [];

  beforeAll(async () => {
    env.dir = mkdtempSync(join(tmpdir(), 'oar-console-'));
    buildConsole(env.dir);
    rmSync(shots, { recursive: true, force: true });
    mkdirSync(shots, { recursive: true });
    env.workspace = join(env.dir, 'ws');
    env.storePath = join(env.dir, 'oar.db');
    await cp(join(demoAssets, 'workspace'), env.workspace, { recursive: true });
    writeScript(env.dir);
    mkdirSync(join(env.workspace, 'logs'));
    const log = Array.from({ length: 1500 }, (_, i) => `2026-11-21T10:00:00Z INFO [build] step ${i + 1} finished`);
    writeFileSync(join(env.workspace, 'logs/build.log'), `${log.join('\n')}\n`);
    await start(env);
    ({ browser, page } = await openPage(errors));
  }, 120_000);

  afterAll(() => closeAll(env, browser));

  it('logs in with a key, runs the demo turn live, approves in the inbox, travels in time and reconnects after a restart', async () => {
    try {
      await journey();
    } catch (error) {
      await shot(page, 'failure').catch(() => undefined);
      throw new Error(`${(error as Error).message}\npage errors: ${errors.join('; ') || 'none'}`, { cause: error });
    }
  }, 180_000);

  async function journey() {
    const url = env.server?.url as string;
    // -- login --
    await page.goto(`${url}/`);
    await page.getByRole('heading', { name: 'OAR console' }).waitFor();
    await shot(page, '01-login');
    await page.getByLabel('API key').fill('oar_wrong_key_000000000000000000000000000000');
    await page.getByRole('button', { name: 'Open the console' }).click();
    await page.getByText('This key is unknown, revoked or expired.').waitFor();
    await page.getByLabel('API key').fill(env.key as string);
    await page.getByRole('button', { name: 'Open the console' }).click();

    // -- sessions: empty, then a new session --
    await page.getByText('No sessions yet').waitFor();
    await shot(page, '02-sessions-empty');
    await page.getByLabel('New session title').fill('Demo review');
    await page.getByRole('button', { name: 'New session' }).click();
    await page.getByRole('heading', { name: 'Demo review' }).waitFor();
    await page.getByText('No turns yet').waitFor();

    // -- submit the demo turn and watch the DAG --
    await page.getByLabel('New turn').fill(DEMO_PROMPT);
    await page.getByRole('button', { name: /Send/ }).click();
    await page.locator('[data-action="read_build_log"][data-status="completed"]').waitFor();
    await page.locator('[data-action="find_docs"][data-status="completed"]').waitFor();
    await page.locator('[data-action="review_scripts"][data-status="completed"]').waitFor();
    await page.locator('[data-action="write_review"][data-status="waiting_permission"]').waitFor();
    await page.getByText(/decision pending/).waitFor();
    await shot(page, '03-session-waiting');
    // Every node's label and status line are shown whole (no "code-revie…"), and the title has them all.
    for (const id of ['review_scripts', 'write_review', 'read_build_log']) {
      const node = page.locator(`[data-action="${id}"]`);
      const cut = await node.evaluate((el) =>
        [...el.querySelectorAll('.dag-title, .dag-sub')].some((part) => part.scrollWidth > part.clientWidth),
      );
      expect(cut, `${id}'s label is cut`).toBe(false);
    }
    await expect(page.locator('[data-action="review_scripts"] .dag-sub').textContent()).resolves.toContain(
      'code-reviewer',
    );
    await expect(page.locator('[data-action="review_scripts"]').getAttribute('title')).resolves.toContain(
      'Review scripts — completed · agent code-reviewer',
    );

    // -- a node's details: permission, attempts, observation, the spilled build log as an artifact --
    await page.locator('[data-action="read_build_log"]').click();
    const detail = page.getByRole('complementary', { name: 'action read_build_log' });
    await detail.getByText('What the model saw').waitFor();
    await expect(detail.locator('[data-permission]').textContent()).resolves.toContain('allow');
    await detail.locator('.artifact pre.code').first().waitFor();
    await expect(detail.locator('.artifact pre.code').first().textContent()).resolves.toContain('step 1500 finished');
    await shot(page, '04-node-detail-artifact');
    // keyboard: nodes are reachable and open with Enter
    await page.locator('[data-action="write_review"]').click();
    await page
      .getByRole('complementary', { name: 'action write_review' })
      .getByText(/answer it in the inbox/)
      .waitFor();
    // keyboard: nodes are focusable and open with Enter
    await page.locator('[data-action="read_readme"]').focus();
    await page.keyboard.press('Enter');
    await page.getByRole('complementary', { name: 'action read_readme' }).waitFor();

    // -- the sessions list says the session waits, with one pending decision; its badge leads to the inbox --
    await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Sessions' }).click();
    const waitingRow = page.locator('tr[data-session]').first();
    await waitingRow.locator('[data-status="blocked"]').waitFor();
    await waitingRow.getByText('1 pending').waitFor();
    await page.getByLabel('Search sessions').fill('no such session');
    await page.getByText('No session matches the search or filter').waitFor();
    await page.getByLabel('Search sessions').fill('demo');
    await page.getByRole('button', { name: 'Waiting' }).click();
    await waitingRow.waitFor();
    await shot(page, '05-sessions-waiting');

    // -- approvals inbox: approve with the keyboard --
    await waitingRow.getByText('1 pending').click();
    const item = page.locator('[data-decision]').first();
    await item.waitFor();
    await expect(item.textContent()).resolves.toContain('Allow write on REVIEW.md?');
    // why (the permission rule or mode that matched, from permission.requested) and what (the action's input)
    await expect(item.locator('[data-why]').textContent()).resolves.toContain('asks before tools that write');
    // The reason is said once, on its "Why:" line; the question above it is the question alone.
    const card = (await item.textContent()) ?? '';
    expect(card.split('asks before tools that write').length - 1).toBe(1);
    await expect(item.locator('.what').textContent()).resolves.toBe('Allow write on REVIEW.md?');
    await item.getByText(/What exactly/).click();
    await item.getByText(/Review of acme-notes/).waitFor();
    await shot(page, '06-inbox');
    await page.getByLabel('Reason', { exact: true }).fill('reviewed in the console');
    await page.getByLabel('Reason', { exact: true }).press('Escape');
    await page.keyboard.press('a');
    await page.getByText('Nothing waits for you').waitFor();

    // -- back to the session: the DAG completes and the answer is rendered Markdown --
    await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Sessions' }).click();
    const row = page.locator('tr[data-session]').first();
    await row.getByText('idle').waitFor();
    await expect(row.textContent()).resolves.toContain('none');
    await shot(page, '07-sessions');
    await row.getByRole('link', { name: 'Demo review' }).click();
    await page.locator('[data-action="write_review"][data-status="completed"]').waitFor();
    expect(readFileSync(join(env.workspace, 'REVIEW.md'), 'utf8')).toContain('Review of acme-notes');
    const answer = page.locator('[data-answer]');
    await answer.waitFor();
    await expect(answer.locator('strong').first().textContent()).resolves.toBe('acme-notes');
    await page.locator('[data-action="write_review"]').click();
    await expect(
      page.getByRole('complementary', { name: 'action write_review' }).locator('[data-permission]').textContent(),
    ).resolves.toContain('reviewed in the console');
    await shot(page, '08-session-completed');

    // -- sub-agent: the child thread from its node, and back --
    await page.locator('[data-action="review_scripts"]').click();
    await page.getByRole('link', { name: /open the child thread/ }).click();
    await page.getByText('agent code-reviewer').waitFor();
    await page.locator('[data-action="inspect_manifest"][data-status="completed"]').waitFor();
    await shot(page, '09-subagent-thread');
    await page.getByRole('link', { name: /back to the parent thread/ }).click();
    await page.getByRole('complementary', { name: 'action review_scripts' }).waitFor();

    // -- event explorer: filter, paginate, raw JSON --
    await page.getByRole('link', { name: 'Events', exact: true }).click();
    await page.locator('tr[data-seq]').first().waitFor();
    await page.getByLabel('Filter by type').fill('tool.*');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.locator('tr[data-seq] >> text=tool.started').first().waitFor();
    // The filtered page replaces the rows: poll until it has, since a tool.started row may already have been on
    // the unfiltered page and the first read could catch both.
    const filteredTypes = () => page.locator('tr[data-seq] td:nth-child(2)').allTextContents();
    await expect
      .poll(
        async () => {
          const types = await filteredTypes();
          return types.length > 0 && types.every((t) => t.startsWith('tool.'));
        },
        { timeout: 15_000 },
      )
      .toBe(true);
    await page.locator('tr[data-seq]').first().click();
    await page.locator('tr.raw pre').waitFor();
    await expect(page.locator('tr.raw pre').textContent()).resolves.toContain('"sessionId"');
    await shot(page, '10-events');

    // -- time travel: back to the moment the write waited for approval --
    const sessionId = new URL(page.url()).pathname.split('/')[2] as string;
    const log = (await (
      await fetch(`${url}/v1/sessions/${sessionId}/events?type=action.required`, {
        headers: { authorization: `Bearer ${env.key}` },
      })
    ).json()) as { events: { sequence: number }[] };
    const waitingAt = log.events[0]?.sequence as number;
    await page.getByRole('link', { name: 'Time travel' }).click();
    const slider = page.getByLabel('Event sequence');
    await slider.waitFor();
    await slider.fill(String(waitingAt));
    await page.locator(`[data-at="${waitingAt}"]`).waitFor();
    await page.locator('[data-action="write_review"][data-status="waiting_permission"]').waitFor();
    await expect(page.locator('[data-answer]').count()).resolves.toBe(0);
    // the read model as of that event, from GET /v1/sessions/{id}/history?at=
    const rmAt = page.locator(`[data-rm-at="${waitingAt}"]`);
    await rmAt.getByText('blocked').waitFor();
    await shot(page, '11-time-travel');
    await slider.focus();
    await page.keyboard.press('End');
    await page.locator('[data-action="write_review"][data-status="completed"]').waitFor();

    // -- fork from there: a new session whose history stops where the write waited, waiting there on its own --
    await slider.fill(String(waitingAt));
    await page.locator(`[data-at="${waitingAt}"]`).waitFor();
    await page.getByRole('button', { name: 'Fork here' }).click();
    await page.waitForURL((u) => u.pathname.startsWith('/sessions/') && u.pathname.split('/')[2] !== sessionId);
    const forkId = decodeURIComponent(new URL(page.url()).pathname.split('/')[2] as string);
    await page.locator('[data-action="write_review"][data-status="waiting_permission"]').waitFor();
    const forkLog = (await (
      await fetch(`${url}/v1/sessions/${encodeURIComponent(forkId)}/events`, {
        headers: { authorization: `Bearer ${env.key}` },
      })
    ).json()) as { events: { type: string; payload: { forkedFrom?: { sessionId: string; sequence: number } } }[] };
    expect(forkLog.events.at(-1)?.payload.forkedFrom).toEqual(
      expect.objectContaining({ sessionId, sequence: waitingAt }),
    );
    await shot(page, '11b-forked');
    await page.goBack();
    await slider.waitFor();
    await slider.focus();
    await page.keyboard.press('End');
    await page.locator('[data-action="write_review"][data-status="completed"]').waitFor();

    // -- a narrow window --
    await page.setViewportSize({ width: 420, height: 900 });
    await page.getByRole('link', { name: 'Timeline' }).click();
    await page.locator('[data-answer]').waitFor();
    await shot(page, '12-session-narrow');
    await page.setViewportSize({ width: 1280, height: 900 });

    // -- the server restarts on the same store: the stream says so, then resumes with Last-Event-ID --
    await page.locator('[data-conn="live"]').waitFor();
    const turnsBefore = await page.locator('article.turn').count();
    await stop(env);
    await page.locator('[data-conn="reconnecting"]').waitFor();
    await shot(page, '13-disconnected');
    await start(env);
    await page.locator('[data-conn="live"]').waitFor({ timeout: 20_000 });
    const submitted = await fetch(`${url}/v1/sessions/${sessionId}/turns`, {
      method: 'POST',
      headers: { authorization: `Bearer ${env.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'And after the restart?' }),
    });
    expect(submitted.status).toBe(202);
    await page.locator('article.turn').nth(turnsBefore).waitFor();
    await page.getByText('And after the restart?').waitFor();
    // the answer streams in (live model deltas), then stands as the turn's answer
    await page.locator('[data-streaming]').waitFor();
    await shot(page, '14-streaming');
    await page.locator('[data-answer]', { hasText: 'Still here after the restart' }).waitFor();
    // nothing duplicated: each turn once
    const ids = await page.locator('article.turn').evaluateAll((els) => els.map((e) => e.getAttribute('data-turn')));
    expect(new Set(ids).size).toBe(ids.length);
    await shot(page, '15-reconnected');

    // -- interrupt a running turn from the console, then ask the worker to resume --
    await page.getByLabel('New turn').fill('Take your time');
    await page.getByRole('button', { name: /Send/ }).click();
    const third = page.locator('article.turn').nth(turnsBefore + 1);
    await third.locator('[data-status="running"]').first().waitFor();
    await page.getByRole('button', { name: 'Interrupt' }).click();
    await third.locator('[data-status="cancelled"]').first().waitFor();
    await page.getByText(/interrupt: (cancelled|requested)/).waitFor();
    await page.getByRole('button', { name: 'Resume' }).click();
    await page.getByText('resume requested').waitFor();
    await shot(page, '16-interrupted');
    expect(errors).toEqual([]);
  }
});

// ---- a lost action: a real crash mid-call, recovered by the server's worker, answered in the console ----

const oarBin = resolve(here, '../../../node_modules/.bin/oar');
const invoiceTools = resolve(here, 'fixtures/invoice-tools.mjs');

/** A script per session: send one invoice (the call the crash strands), then the answers of the turns after it. */
function invoiceScript(dir: string, invoice: string, answers: string[]): string {
  const name = `script-${invoice}.json`;
  const send = { id: 'send', type: 'tool', name: 'send_invoice', args: { invoice }, title: `Send invoice ${invoice}` };
  const steps = [
    { protocol: { kind: 'act', message: `Sending ${invoice}.`, calls: [send] } },
    ...answers.map((message) => ({ protocol: { kind: 'answer', message } })),
  ];
  writeFileSync(join(dir, name), JSON.stringify({ steps }));
  return name;
}

/**
 * A real `oar run` of the script in `dir`, SIGKILLed once its send_invoice call has durably started and sent the
 * invoice (sent.txt has it; the tool then waits on HOLD): the crash lands after the effect, before the result.
 */
async function crashMidCall(dir: string, script: string, invoice: string): Promise<string> {
  const child = spawn(oarBin, ['run', '--json', '--model', `script:${script}`, `Send invoice ${invoice}`], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, OAR_STORE: join(dir, 'oar.db') },
  });
  let out = '';
  let err = '';
  child.stderr.on('data', (chunk: Buffer) => {
    err += chunk.toString();
  });
  const exited = new Promise((done) => child.on('exit', done));
  const sessionId = await new Promise<string>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`send_invoice never started:\n${out}\n${err}`)), 30_000);
    let session = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      for (const line of out.split('\n').filter((l) => l.startsWith('{'))) {
        const e = JSON.parse(line) as { type?: string; sessionId?: string; payload?: { graphActionId?: string } };
        session = e.sessionId ?? session;
        if (e.type !== 'tool.started' || e.payload?.graphActionId !== 'send') continue;
        const poll = setInterval(() => {
          const sent = existsSync(join(dir, 'sent.txt')) ? readFileSync(join(dir, 'sent.txt'), 'utf8') : '';
          if (!sent.includes(invoice)) return;
          clearInterval(poll);
          clearTimeout(timer);
          child.kill('SIGKILL');
          done(session);
        }, 10);
        return;
      }
    });
  });
  await exited;
  return sessionId;
}

describe.skipIf(!available)('a lost action in the console', () => {
  const env: Env = { dir: '', workspace: '', storePath: '' };
  let browser: Browser;
  let page: Page;
  const errors: string[] = [];
  const sessions = { happened: '', retry: '' };

  const api = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${env.server?.url}${path}`, { headers: { authorization: `Bearer ${env.key}` } });
    expect(response.status, path).toBe(200);
    return (await response.json()) as T;
  };
  const events = async (sessionId: string, type: string) =>
    (await api<{ events: OarEvent[] }>(`/v1/sessions/${sessionId}/events?type=${type}&limit=1000`)).events;
  const thread = async (sessionId: string) =>
    (await api<{ snapshot: Snapshot }>(`/v1/sessions/${sessionId}`)).snapshot.threads[0] as ThreadRM;
  const unreconciled = async () =>
    (await api<{ unreconciled: (UnreconciledAction & { sessionId: string })[] }>('/v1/decisions')).unreconciled;
  const sent = () => readFileSync(join(env.dir, 'sent.txt'), 'utf8');

  beforeAll(async () => {
    env.dir = mkdtempSync(join(tmpdir(), 'oar-console-lost-'));
    env.workspace = env.dir;
    env.storePath = join(env.dir, 'oar.db');
    buildConsole(env.dir);
    // Short leases: the server's worker takes a crashed run's thread over a second after the kill.
    const config = {
      model: `script:${invoiceScript(env.dir, 'INV-1', ['INV-1 was lost in a crash: someone must say if it went out.'])}`,
      tools: { modules: [invoiceTools] },
      permissions: { mode: 'bypass' },
      worker: { leaseTtlMs: 1000, pollMs: 100 },
    };
    writeFileSync(join(env.dir, 'oar.config.json'), JSON.stringify(config));
    const retryScript = invoiceScript(env.dir, 'INV-2', ['INV-2 was lost in a crash.', 'INV-2 sent on the retry.']);
    writeFileSync(join(env.dir, 'HOLD'), '');
    sessions.happened = await crashMidCall(env.dir, config.model.slice('script:'.length), 'INV-1');
    sessions.retry = await crashMidCall(env.dir, retryScript, 'INV-2');
    expect(sent()).toBe('INV-1\nINV-2\n');
    // The server on the same store, with the same config: its worker recovers both threads (lost + the question).
    const { runtime } = await buildRuntime(OarConfigSchema.parse(config), env.dir, {
      cwd: env.dir,
      env: {},
      worker: { sessions: 'all' },
      store: env.storePath,
    });
    env.runtime = runtime;
    env.server = await startServer({
      runtime,
      port: 0,
      consoleDir: join(env.dir, 'console-dist'),
      logger: silent(),
    });
    env.key = env.server.createdAdminKey;
    for (let waited = 0; (await unreconciled()).length < 2; waited += 100) {
      if (waited > 20_000) throw new Error(`recovery asked about ${(await unreconciled()).length} lost actions`);
      await new Promise((r) => setTimeout(r, 100));
    }
    ({ browser, page } = await openPage(errors));
  }, 120_000);

  afterAll(() => closeAll(env, browser));

  async function guarded(name: string, steps: () => Promise<void>) {
    try {
      await steps();
      expect(errors).toEqual([]);
    } catch (error) {
      await shot(page, `failure-${name}`).catch(() => undefined);
      throw new Error(`${(error as Error).message}\npage errors: ${errors.join('; ') || 'none'}`, { cause: error });
    }
  }

  it('shows a lost action beside approvals and records "It happened" with its reason', async () => {
    await guarded('lost-happened', async () => {
      const url = env.server?.url as string;
      const lost = (await unreconciled()).find((u) => u.sessionId === sessions.happened) as UnreconciledAction;
      // What the card must show, read from the log itself: the key the call ran under.
      const started = (await events(sessions.happened, 'tool.started'))[0];
      const key = String(started?.payload?.idempotencyKey);
      expect(key).toMatch(/^idem_/);
      expect(lost.idempotencyKey).toBe(key);

      await page.goto(`${url}/`);
      await page.getByLabel('API key').fill(env.key as string);
      await page.getByRole('button', { name: 'Open the console' }).click();
      // The sessions list counts it, though the thread reads idle.
      const row = page.locator(`tr[data-session="${sessions.happened}"]`);
      await row.getByText('1 lost').waitFor();
      await row.locator('[data-status="idle"]').waitFor();
      // The timeline says what is open and where to answer; the node reads lost, not failed.
      await row.getByRole('link').first().click();
      await expect(page.locator('[data-lost-note]').textContent()).resolves.toContain(lost.prompt);
      await page.locator('[data-action="send"][data-status="lost"]').click();
      await page.getByRole('complementary', { name: 'action send' }).locator('[data-reconcile]').waitFor();
      await shot(page, '17-session-lost-action');

      await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Approvals' }).click();
      const card = page.locator(`[data-lost="${lost.actionId}"]`);
      await card.waitFor();
      await expect(page.locator('[data-lost]').count()).resolves.toBe(2);
      await expect(card.locator('.what').textContent()).resolves.toBe(lost.prompt);
      expect(lost.prompt).toContain('Send invoice INV-1');
      await expect(card.locator('[data-tool]').textContent()).resolves.toBe('send_invoice');
      await expect(card.locator('[data-idempotency-key]').textContent()).resolves.toBe(key);
      await expect(card.locator('[data-lost-at]').getAttribute('datetime')).resolves.toBe(lost.lostAt);
      await shot(page, '18-inbox-lost-actions');

      await card.getByLabel('Reason').fill('INV-1 is in the outbox');
      await card.getByRole('button', { name: 'It happened' }).click();
      await card.waitFor({ state: 'detached' });
      await page.locator('.notice', { hasText: `It happened: send_invoice (${lost.actionId})` }).waitFor();
      // The other lost action is still asked about: only the answered one left.
      await page.locator(`[data-lost]`).first().waitFor();
      await expect(page.locator('[data-lost]').count()).resolves.toBe(1);

      // What the runtime recorded: the question resolved with the answer, the action completed, nothing re-ran.
      const rm = await thread(sessions.happened);
      expect(rm.unreconciledActions).toBeUndefined();
      expect(rm.actions?.find((a) => a.actionId === 'send')?.status).toBe('completed');
      const resolved = (await events(sessions.happened, 'action.resolved')).filter((e) => e.actionId === lost.actionId);
      expect(resolved).toHaveLength(1);
      expect(resolved[0]?.payload).toMatchObject({
        decision: 'happened',
        actionType: 'reconcile',
        reason: 'INV-1 is in the outbox',
      });
      expect(String(resolved[0]?.payload?.resolvedBy)).toMatch(/^api_key:/);
      expect((await unreconciled()).map((u) => u.sessionId)).toEqual([sessions.retry]);
      expect(sent()).toBe('INV-1\nINV-2\n');
    });
  }, 90_000);

  it('"Retry" runs the lost call again in a new turn, under a new idempotency key', async () => {
    await guarded('lost-retry', async () => {
      const lost = (await unreconciled()).find((u) => u.sessionId === sessions.retry) as UnreconciledAction;
      const turnsBefore = (await thread(sessions.retry)).turns.length;
      rmSync(join(env.dir, 'HOLD'));
      const card = page.locator(`[data-lost="${lost.actionId}"]`);
      await card.getByRole('button', { name: 'Retry' }).click();
      await card.waitFor({ state: 'detached' });
      await page.locator('.notice', { hasText: /runs again in turn turn_/ }).waitFor();
      await page.getByText('Nothing waits for you').waitFor();

      // The new turn ran the call and the model saw its result: its answer shows in the session's timeline.
      await page.goto(`${env.server?.url}/sessions/${sessions.retry}`);
      await page.locator('[data-answer]', { hasText: 'INV-2 sent on the retry.' }).waitFor({ timeout: 30_000 });
      expect(sent()).toBe('INV-1\nINV-2\nINV-2\n');
      const rm = await thread(sessions.retry);
      expect(rm.turns.length).toBe(turnsBefore + 1);
      expect(rm.unreconciledActions).toBeUndefined();
      const starts = (await events(sessions.retry, 'tool.started')).map(
        (e) => (e.payload as { idempotencyKey?: string }).idempotencyKey,
      );
      expect(starts).toHaveLength(2);
      expect(starts[1]).not.toBe(starts[0]);
      expect(starts[0]).toBe(lost.idempotencyKey);
      const resolved = (await events(sessions.retry, 'action.resolved')).find((e) => e.actionId === lost.actionId);
      expect(resolved?.payload).toMatchObject({ decision: 'retry', actionType: 'reconcile' });
      // The lost call stays lost on record; the retry is a call of its own.
      expect(rm.actions?.map((a) => a.status)).toEqual(['lost', 'completed']);
      await shot(page, '19-lost-action-retried');
    });
  }, 90_000);
});

describe.skipIf(!available)('the task graph in the console', () => {
  const env: Env = { dir: '', workspace: '', storePath: '' };
  let browser: Browser;
  let page: Page;
  const errors: string[] = [];

  beforeAll(async () => {
    env.dir = mkdtempSync(join(tmpdir(), 'oar-console-tasks-'));
    buildConsole(env.dir);
    env.workspace = join(env.dir, 'ws');
    mkdirSync(env.workspace);
    env.storePath = join(env.dir, 'oar.db');
    writeScript(env.dir);
    await start(env);
    ({ browser, page } = await openPage(errors));
  }, 120_000);

  afterAll(() => closeAll(env, browser));

  const call = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const response = await fetch(`${env.server?.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${env.key}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    expect(response.status, `${method} ${path}`).toBeLessThan(300);
    return (await response.json()) as T;
  };

  it('shows the tasks as a tree with what each waits for, and follows their changes live', async () => {
    const { sessionId } = await call<{ sessionId: string }>('POST', '/v1/sessions', { title: 'Release' });
    const tasks = `/v1/sessions/${sessionId}/tasks`;
    await call('POST', tasks, {
      taskId: 'plan',
      title: 'Plan the release',
      objective: 'Plan it',
      assignee: { kind: 'external', name: 'ada' },
    });
    await call('POST', tasks, {
      taskId: 'ship',
      title: 'Ship it',
      objective: 'Ship the release',
      parentTaskId: 'plan',
      dependsOn: ['plan'],
      assignee: { kind: 'external', name: 'bo' },
    });
    await call('POST', `${tasks}/ship/start`, {});
    await call('POST', `${tasks}/plan/start`, {});
    await call('POST', `${tasks}/plan/progress`, { message: 'drafted', percent: 50 });

    await page.goto(`${env.server?.url}/`);
    await page.getByLabel('API key').fill(env.key as string);
    await page.getByRole('button', { name: 'Open the console' }).click();
    await page.goto(`${env.server?.url}/sessions/${sessionId}/tasks`);
    const plan = page.locator('li[data-task="plan"]');
    await plan.locator(':scope > .task-row [data-status="running"]').waitFor();
    await expect(plan.locator(':scope > [data-progress]').textContent()).resolves.toContain('50% drafted');
    await expect(plan.locator(':scope > .task-row').textContent()).resolves.toContain('external: ada');
    // The dependent is the plan's child in the tree, blocked, and says what it waits for.
    const ship = plan.locator('li[data-task="ship"]');
    await ship.locator(':scope > .task-row [data-status="blocked"]').waitFor();
    await expect(ship.locator('[data-edge="dependency"]').textContent()).resolves.toContain(
      'waits for Plan the release (pending)',
    );
    await expect(plan.locator(':scope > .task-edges [data-edge="dependent"]').textContent()).resolves.toContain(
      'needed by Ship it',
    );
    await shot(page, '20-task-graph');

    // Completed elsewhere: the view follows the session's events.
    await call('POST', `${tasks}/plan/complete`, { summary: 'planned' });
    await plan.locator(':scope > .task-row [data-status="completed"]').waitFor();
    await ship.locator(':scope > .task-row [data-status="queued"]').waitFor();
    await expect(ship.locator('[data-edge="dependency"]').textContent()).resolves.toContain('(completed)');
    await shot(page, '21-task-graph-released');
    expect(errors).toEqual([]);
  }, 90_000);
});
