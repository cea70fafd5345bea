import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import {
  plantedSecrets,
  plantedText,
  randomSuffix,
  SecretScanner,
  writeSecretWorkspace,
} from '../support/secret-scan.js';
import { POSTGRES_URL, postgresUnavailable } from '../support/stores.js';

/** The scanner is a test's only witness that nothing leaked: it must find what is there, in every form. */

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'oar-secret-scan-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('plantedSecrets', () => {
  it('makes fresh, distinct secrets of every kind on each call', () => {
    const a = plantedSecrets();
    const b = plantedSecrets();
    expect(a.all.length).toBeGreaterThanOrEqual(18);
    expect(new Set(a.all.map((s) => s.label)).size).toBe(a.all.length);
    for (const secret of a.all) {
      expect(b.byLabel(secret.label).value).not.toBe(secret.value);
      expect(secret.inContext).toContain(secret.label === 'basic_auth' ? secret.value : secret.value.slice(0, 8));
      for (const fragment of secret.fragments) {
        expect(fragment.length).toBeGreaterThanOrEqual(12);
        expect(secret.value).toContain(fragment);
      }
    }
    const shapes = new Set(a.all.map((s) => s.shape).filter(Boolean));
    for (const kind of [
      'openai_key',
      'anthropic_key',
      'github_token',
      'slack_token',
      'stripe_key',
      'aws_access_key',
      'aws_secret_key',
      'google_api_key',
      'bearer_token',
      'basic_auth',
      'private_key',
      'jwt',
      'url_password',
      'password',
    ]) {
      expect(shapes, kind).toContain(kind);
    }
    expect(a.env.OPENAI_API_KEY).toBe(a.byLabel('openai_key').value);
    expect(a.secretEnvNames).toEqual(['GITHUB_TOKEN', 'CUSTOM_SERVICE_TOKEN']);
  });

  it('writes a workspace with .env, PEM files and source files containing them', async () => {
    const dir = tempDir();
    const planted = plantedSecrets();
    const { files } = await writeSecretWorkspace(dir, planted);
    expect(files).toEqual(
      expect.arrayContaining(['.env', '.env.example', 'certs/server.pem', '.ssh/id_ed25519', 'src/config.ts']),
    );
    expect(readFileSync(join(dir, '.env'), 'utf8')).toContain(planted.byLabel('dotenv_session_secret').value);
    const scan = new SecretScanner(planted.all);
    const hits = await scan.directory(dir);
    const found = new Set(hits.map((hit) => hit.label));
    // Every secret that lives in files is found there; the environment-only ones are not.
    for (const secret of planted.all) expect(found.has(secret.label), secret.label).toBe(secret.envName === undefined);
    expect(hits.find((hit) => hit.label === 'private_key')?.where).toBe('file:certs/server.pem');
  });
});

describe('SecretScanner.text', () => {
  it('finds a secret raw, JSON-escaped, URL-encoded, base64-encoded at any alignment, and by fragment', () => {
    const secret = { label: 's', value: 'pa"ss/wo+rd\\with-2-Odd chars', fragments: ['wo+rd\\with-2'] };
    const cases: [string, string][] = [
      [`x ${secret.value} y`, 'raw'],
      [JSON.stringify({ v: secret.value }), 'json'],
      [JSON.stringify(JSON.stringify({ v: secret.value })), 'json2'],
      [`?q=${encodeURIComponent(secret.value)}`, 'url'],
      [Buffer.from(`user:${secret.value}`).toString('base64'), 'base64'],
      [Buffer.from(`ab${secret.value}`).toString('base64url'), 'base64url'],
      [`preview: pa"ss/${secret.fragments[0]}…`, 'fragment'],
    ];
    for (const [text, form] of cases) {
      const hits = new SecretScanner([secret]).text(text, 'case');
      expect(hits, form).toHaveLength(1);
      expect(hits[0]).toMatchObject({ label: 's', where: 'case' });
      // A base64url core without `-`/`_` is the base64 core itself.
      expect(hits[0]?.form.replace('base64url', 'base64'), form).toBe(form.replace('base64url', 'base64'));
    }
    expect(new SecretScanner([secret]).text('nothing to see', 'clean')).toEqual([]);
  });

  it('takes plain strings and bytes', () => {
    const scan = new SecretScanner(['s3cr3t-value-1', 'other-secret-2']);
    expect(scan.text(Buffer.from('\x00\x01s3cr3t-value-1\xff'), 'blob')).toEqual([
      { label: 'secret#0', where: 'blob', form: 'raw' },
    ]);
    expect(scan.hits).toHaveLength(1);
  });

  it('finds every planted secret in the planted text', () => {
    const planted = plantedSecrets();
    const hits = new SecretScanner(planted.all).text(plantedText(planted), 'text');
    expect(hits.map((hit) => hit.label).sort()).toEqual(planted.all.map((s) => s.label).sort());
  });
});

describe('SecretScanner.sqlite', () => {
  it('finds a planted secret in a BLOB (even one spanning overflow pages), in text rows and in the raw bytes', async () => {
    const dir = tempDir();
    const file = join(dir, 'oar.db');
    const planted = plantedSecrets();
    const key = planted.byLabel('private_key');
    const jwt = planted.byLabel('jwt');
    const db = new SQLite(file);
    db.exec('create table oar_artifacts (id text primary key, bytes blob not null)');
    db.exec('create table oar_events (seq integer primary key, payload text not null)');
    // 20 KB of noise around the key: the row spans several overflow pages, so the raw file holds it in pieces.
    const blob = Buffer.concat([Buffer.alloc(10_000, 7), Buffer.from(key.value), Buffer.alloc(10_000, 9)]);
    db.prepare('insert into oar_artifacts values (?, ?)').run('art_1', blob);
    db.prepare('insert into oar_events values (?, ?)').run(1, JSON.stringify({ output: jwt.inContext }));
    db.prepare('insert into oar_events values (?, ?)').run(2, JSON.stringify({ output: 'clean' }));
    db.close();

    const hits = await new SecretScanner(planted.all).sqlite(file);
    expect(hits).toContainEqual({ label: 'private_key', where: 'sqlite:oar_artifacts[rowid=1].bytes', form: 'raw' });
    expect(hits).toContainEqual({ label: 'jwt', where: 'sqlite:oar_events[rowid=1].payload', form: 'raw' });
    expect(hits.some((hit) => hit.label === 'jwt' && hit.where.startsWith('sqlite-bytes:'))).toBe(true);
    expect(hits.some((hit) => hit.where.includes('rowid=2'))).toBe(false);
  });

  it('reports nothing for a clean database', async () => {
    const file = join(tempDir(), 'clean.db');
    const db = new SQLite(file);
    db.exec("create table t (a text, b blob); insert into t values ('hello', x'0001')");
    db.close();
    expect(await new SecretScanner(plantedSecrets().all).sqlite(file)).toEqual([]);
  });
});

const postgresError = await postgresUnavailable();
const IN_CI = process.env.CI === 'true' || process.env.CI === '1';

describe.skipIf(postgresError !== undefined && !IN_CI)('SecretScanner.postgres', () => {
  it('finds a planted secret in a bytea row, a jsonb row and a text row of the schema', async () => {
    const schema = `oar_scan_${randomSuffix()}`;
    const planted = plantedSecrets();
    const client = new pg.Client({ connectionString: POSTGRES_URL });
    await client.connect();
    try {
      await client.query(`create schema "${schema}"`);
      await client.query(`create table "${schema}".oar_artifacts (id text primary key, bytes bytea not null)`);
      await client.query(`create table "${schema}".oar_events (id text primary key, payload jsonb, note text)`);
      await client.query(`insert into "${schema}".oar_artifacts values ($1, $2)`, [
        'art_1',
        Buffer.from(`prefix ${planted.byLabel('slack_token').value} suffix`),
      ]);
      await client.query(`insert into "${schema}".oar_events values ($1, $2, $3)`, [
        'evt_1',
        JSON.stringify({ error: { body: `{"key":"${planted.byLabel('anthropic_key').value}"}` } }),
        planted.byLabel('dsn_password').inContext,
      ]);
      await client.query(`insert into "${schema}".oar_events values ($1, $2, $3)`, ['evt_2', '{}', 'clean']);

      const hits = await new SecretScanner(planted.all).postgres(POSTGRES_URL, schema);
      expect(hits).toContainEqual({
        label: 'slack_token',
        where: `pg:${schema}.oar_artifacts[id=art_1].bytes`,
        form: 'raw',
      });
      expect(hits).toContainEqual(
        expect.objectContaining({ label: 'anthropic_key', where: `pg:${schema}.oar_events[id=evt_1].payload` }),
      );
      expect(hits).toContainEqual({
        label: 'dsn_password',
        where: `pg:${schema}.oar_events[id=evt_1].note`,
        form: 'raw',
      });
      expect(hits.some((hit) => hit.where.includes('evt_2'))).toBe(false);
    } finally {
      await client.query(`drop schema if exists "${schema}" cascade`);
      await client.end();
    }
  });
});
