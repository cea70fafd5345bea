import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  CliOutputSchema,
  CREDENTIAL_ENV,
  defineCli,
  issueCredential,
  ManifestSchema,
  method,
  PartialResult,
  runCli,
  schemaText,
} from '../src/index.js';

/**
 * The SDK of a business CLI (issue: the Agent Tool Protocol, section 2): the router is the only dispatcher over a
 * whitelist of module.method pairs with strict schemas; the input comes from stdin only; the credential decides
 * identity and scope; every answer is one JSON object of the output contract.
 */

const READ = {
  readOnly: true,
  destructive: false,
  idempotent: true,
  concurrencySafe: true,
  interrupt: 'cancel',
} as const;
const WRITE = {
  readOnly: false,
  destructive: true,
  idempotent: false,
  concurrencySafe: false,
  interrupt: 'block',
} as const;
const SECRET = 'test-secret-of-at-least-thirty-two-bytes!!';
const key = { algorithm: 'HS256' as const, secret: SECRET };

const deleted: string[] = [];
const cli = defineCli({
  name: 'calendar-cli',
  version: '1.0.0',
  credential: { algorithm: 'HS256', keyEnv: 'CAL_KEY' },
  modules: {
    calendar: {
      read: method({
        description: 'Events of a day, a range, or one event',
        input: z.strictObject({
          mode: z.enum(['day', 'range', 'event']),
          start_at: z.iso.datetime({ offset: true }).optional(),
          date: z.iso.date().optional(),
        }),
        facts: READ,
        handler: (input, { credential }) => ({ count: 0, mode: input.mode, owner: credential?.sub }),
      }),
      delete: method({
        description: 'Delete events',
        input: z.strictObject({ ids: z.array(z.string()).min(1), owner_id: z.string().optional() }),
        facts: WRITE,
        handler: (input) => {
          const done = input.ids.filter((id) => id !== 'evt_locked');
          deleted.push(...done);
          const left = input.ids.filter((id) => id === 'evt_locked');
          return left.length > 0
            ? new PartialResult({ deleted: done }, left, 'locked events are kept')
            : { deleted: done };
        },
      }),
      boom: method({
        description: 'fails',
        input: z.strictObject({}),
        facts: READ,
        handler: () => {
          throw new Error('disk on fire');
        },
      }),
    },
  },
});

async function call(argv: string[], input: unknown, ops = ['calendar.*'], extraEnv: Record<string, string> = {}) {
  const credential = await issueCredential({ sub: 'user:ada', ws: 'default', ops }, key, 300);
  const run = await runCli(cli, {
    argv,
    stdin: typeof input === 'string' ? input : JSON.stringify(input),
    env: { CAL_KEY: SECRET, [CREDENTIAL_ENV]: credential, ...extraEnv },
  });
  const output = CliOutputSchema.parse(JSON.parse(run.stdout));
  if (!argv.includes('--pretty')) expect(run.stdout.trim().split('\n')).toHaveLength(1);
  return { ...run, output };
}

describe('the router', () => {
  it('dispatches a whitelisted pair with its parsed input and prints {ok, module, method, data}', async () => {
    const { exitCode, output } = await call(['calendar', 'read'], { mode: 'day', date: '2026-11-25' });
    expect(exitCode).toBe(0);
    expect(output).toEqual({
      ok: true,
      module: 'calendar',
      method: 'read',
      data: { count: 0, mode: 'day', owner: 'user:ada' },
    });
  });

  it('refuses pairs outside the whitelist, whatever the strings', async () => {
    for (const [module, name] of [
      ['calendar', 'drop'],
      ['calendar;rm -rf /', 'read'],
      ['__proto__', 'toString'],
      ['calendar', 'constructor'],
      ['$(id)', '`id`'],
    ]) {
      const { exitCode, output } = await call([module as string, name as string], {});
      expect(exitCode).toBe(1);
      expect(output.ok === false && output.error.code).toBe('ACTION_NOT_ALLOWED');
    }
  });

  it('a naive datetime fails with INVALID_ACTION_INPUT and the schema as compact text', async () => {
    const { exitCode, output } = await call(['calendar', 'read'], { mode: 'range', start_at: '2026-04-21T10:00:00' });
    expect(exitCode).toBe(1);
    if (output.ok) throw new Error('expected a failure');
    expect(output.error).toMatchObject({
      code: 'INVALID_ACTION_INPUT',
      module: 'calendar',
      method: 'read',
      input_schema: {
        mode: 'enum(day|range|event)',
        'start_at?': 'datetime with offset',
        'date?': 'date (YYYY-MM-DD)',
      },
    });
    expect(output.error.message).toContain('start_at');
    // Corrected from input_schema, it passes.
    const fixed = await call(['calendar', 'read'], { mode: 'range', start_at: '2026-04-21T10:00:00+08:00' });
    expect(fixed.exitCode).toBe(0);
  });

  it('input is stdin JSON only: model text never becomes a flag, and hostile strings are plain data', async () => {
    for (const hostile of ['--token x', ';rm -rf /', 'a\nb', '$(id)', '`id`']) {
      const { output } = await call(['calendar', 'delete'], { ids: [hostile] });
      expect(output).toMatchObject({ ok: true, data: { deleted: [hostile] } });
    }
    expect((await call(['calendar', 'read'], '{not json')).output).toMatchObject({
      ok: false,
      error: { code: 'INPUT_NOT_JSON' },
    });
    const extra = await call(['calendar', 'read'], { mode: 'day', token: 'x' });
    expect(extra.output).toMatchObject({ ok: false, error: { code: 'INVALID_ACTION_INPUT' } });
  });

  it('usage errors exit 2; a handler failure is HANDLER_FAILED; a partial success names what was not done', async () => {
    expect((await call(['calendar'], {})).exitCode).toBe(2);
    expect((await call(['calendar', 'read', '--rm'], { mode: 'day' })).exitCode).toBe(2);
    const pretty = await call(['--region', 'eu', 'calendar', 'read', '--pretty'], { mode: 'day' });
    expect(pretty.exitCode).toBe(0);
    const boom = await call(['calendar', 'boom'], {});
    expect(boom.output).toMatchObject({ ok: false, error: { code: 'HANDLER_FAILED', message: 'disk on fire' } });
    const partial = await call(['calendar', 'delete'], { ids: ['evt_a', 'evt_locked'] });
    expect(partial.output).toMatchObject({
      ok: true,
      data: { deleted: ['evt_a'] },
      partial: { notDone: ['evt_locked'], reason: 'locked events are kept' },
    });
  });

  it('--describe prints the manifest: each method with its input JSON Schema and facts', async () => {
    const run = await runCli(cli, { argv: ['--describe'], stdin: '', env: {} });
    const manifest = ManifestSchema.parse(JSON.parse(run.stdout));
    expect(manifest.methods.map((m) => `${m.module}.${m.method}`)).toEqual([
      'calendar.read',
      'calendar.delete',
      'calendar.boom',
    ]);
    expect(manifest.methods[1]?.facts).toEqual(WRITE);
    expect(manifest.methods[0]?.inputSchema).toMatchObject({ type: 'object', additionalProperties: false });
  });
});

describe('the controlled credential', () => {
  it('identity is the verified credential, never an owner_id in the input', async () => {
    const { output } = await call(['calendar', 'read'], { mode: 'day' });
    expect(output).toMatchObject({ data: { owner: 'user:ada' } });
    const { output: other } = await call(['calendar', 'delete'], { ids: ['e1'], owner_id: 'user:mallory' });
    expect(other.ok).toBe(true);
  });

  it('refuses a missing, forged, expired or out-of-scope credential', async () => {
    const missing = await runCli(cli, {
      argv: ['calendar', 'read'],
      stdin: '{"mode":"day"}',
      env: { CAL_KEY: SECRET },
    });
    expect(JSON.parse(missing.stdout).error.code).toBe('CREDENTIAL_MISSING');
    const forged = await issueCredential(
      { sub: 'user:ada', ws: 'default', ops: ['calendar.*'] },
      { algorithm: 'HS256', secret: 'another-secret-another-secret-xx' },
      300,
    );
    const forgedRun = await runCli(cli, {
      argv: ['calendar', 'read'],
      stdin: '{"mode":"day"}',
      env: { CAL_KEY: SECRET, [CREDENTIAL_ENV]: forged },
    });
    expect(JSON.parse(forgedRun.stdout).error.code).toBe('CREDENTIAL_INVALID');
    expect(forgedRun.stdout).not.toContain(forged);
    const expired = await issueCredential({ sub: 'user:ada', ws: 'default', ops: ['calendar.*'] }, key, -60);
    const expiredRun = await runCli(cli, {
      argv: ['calendar', 'read'],
      stdin: '{"mode":"day"}',
      env: { CAL_KEY: SECRET, [CREDENTIAL_ENV]: expired },
    });
    expect(JSON.parse(expiredRun.stdout).error.code).toBe('CREDENTIAL_EXPIRED');
    const scoped = await call(['calendar', 'delete'], { ids: ['e1'] }, ['calendar.read']);
    expect(scoped.output).toMatchObject({ ok: false, error: { code: 'ACTION_NOT_ALLOWED' } });
  });

  it('schemaText renders what the model needs to correct a call', () => {
    expect(
      schemaText(z.object({ n: z.number().int().min(1).max(5), tags: z.array(z.string()), when: z.iso.datetime() })),
    ).toEqual({
      n: 'integer ≥ 1 ≤ 5',
      tags: 'array of string',
      when: 'datetime (UTC, Z)',
    });
  });
});

describe('a CLI on the SDK as a real process', () => {
  const fixture = fileURLToPath(new URL('./fixtures/calendar-cli.mjs', import.meta.url));
  const run = (argv: string[], input: string, env: Record<string, string>) =>
    spawnSync(process.execPath, [fixture, ...argv], {
      input,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', ...env },
    });

  it('reads stdin, verifies the credential from its environment, prints one JSON object, exits 0 / 1 / 2', async () => {
    const credential = await issueCredential(
      { sub: 'user:ada', ws: 'default', ops: ['calendar.read', 'calendar.env'] },
      key,
      300,
    );
    const env = { CALENDAR_CLI_KEY: SECRET, [CREDENTIAL_ENV]: credential };
    const ok = run(['calendar', 'read'], '{"mode":"day"}', env);
    expect(ok.status).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ ok: true, data: { count: 1, items: [{ owner: 'user:ada' }] } });
    const bad = run(['calendar', 'read'], '{"mode":"week"}', env);
    expect(bad.status).toBe(1);
    expect(JSON.parse(bad.stdout).error.input_schema.mode).toBe('enum(day|range|event)');
    expect(run(['calendar'], '', env).status).toBe(2);
    const describe = run(['--describe'], '', {});
    expect(ManifestSchema.parse(JSON.parse(describe.stdout)).methods).toHaveLength(2);
    // What it sees of its environment is what it was given.
    const seen = JSON.parse(run(['calendar', 'env'], '{}', env).stdout).data.keys as string[];
    expect(seen).toEqual(['CALENDAR_CLI_KEY', CREDENTIAL_ENV, 'PATH'].sort());
  });
});
