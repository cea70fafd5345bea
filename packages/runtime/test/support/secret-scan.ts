import { randomBytes, randomInt } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import type { RedactionKind } from '../../src/redaction/kinds.js';

/**
 * Test support: plant known secrets, then look for them everywhere the runtime writes — database files (raw
 * bytes) and every row of every table (BLOB artifact bytes included), PostgreSQL schemas, stdout/stderr, export
 * files, whole directories. Deliberately independent of `src/redaction` (its own needles, its own encodings): a
 * scanner sharing the redactor's code would share its blind spots.
 *
 * Usage:
 *   const planted = plantedSecrets();                    // fresh random secrets of every kind
 *   await writeSecretWorkspace(dir, planted);            // .env, PEM files, source files containing them
 *   ... run with env: { ...process.env, ...planted.env } and secrets.env: planted.secretEnvNames ...
 *   const scan = new SecretScanner(planted.all);
 *   scan.text(stdout, 'stdout'); await scan.sqlite(dbFile); await scan.directory(exportDir);
 *   expect(scan.hits).toEqual([]);
 */

/** A secret planted for a test. */
export interface PlantedSecret {
  /** Stable name of this secret within a planted set, e.g. `openai_key`, `dotenv_session_secret`. */
  label: string;
  /** The secret itself: must never appear in any sink, in any of the encodings the scanner tries. */
  value: string;
  /**
   * Distinctive random substrings (≥ 12 characters) of the value: finding one counts as a (partial) leak — a
   * preview or a truncation that cut a secret still leaks it. Not the non-secret parts (`-----BEGIN…`, `sk-`).
   */
  fragments: string[];
  /** The secret in the context that identifies it, as it is planted in text (`Authorization: Bearer <value>`). */
  inContext: string;
  /** The kind a redactor recognises by its SHAPE alone; undefined when only its value (env/.env) identifies it. */
  shape?: RedactionKind;
  /** The environment variable holding it, when it is planted in the environment. */
  envName?: string;
  /** The `.env` key holding it, when it is planted in the workspace's `.env`. */
  dotenvKey?: string;
}

export interface PlantedSecrets {
  all: PlantedSecret[];
  /** Environment variables to run with (provider keys and the `secrets.env` ones). */
  env: Record<string, string>;
  /** Names for the binding's `secrets.env` (the non-provider environment secrets). */
  secretEnvNames: string[];
  byLabel(label: string): PlantedSecret;
}

/** Where a planted secret was found. */
export interface SecretHit {
  label: string;
  where: string;
  /** Which form matched: raw, json, url, base64, fragment. */
  form: string;
}

// --- random material -----------------------------------------------------------------------------------------------

const UPPER = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
const LOWER = 'abcdefghijklmnopqrstuvwxyz';
const DIGITS = '0123456789';
const ALNUM = UPPER + LOWER + DIGITS;
const B64 = `${ALNUM}+/`;
const B64URL = `${ALNUM}-_`;

function pick(alphabet: string, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[randomInt(alphabet.length)];
  return out;
}

/** Random alphanumerics with at least one upper, one lower and one digit (as real keys have). */
export function mixed(length: number): string {
  const body = pick(ALNUM, length - 3) + pick(UPPER, 1) + pick(LOWER, 1) + pick(DIGITS, 1);
  return [...body].sort(() => randomInt(3) - 1).join('');
}

function base64url(data: string | Buffer): string {
  return Buffer.from(data).toString('base64url');
}

function pemBlock(label: string): { value: string; lines: string[] } {
  const lines = Array.from({ length: 8 }, () => pick(B64, 64));
  lines.push(`${pick(B64, 40)}==`);
  return {
    value: `-----BEGIN ${label} PRIVATE KEY-----\n${lines.join('\n')}\n-----END ${label} PRIVATE KEY-----`,
    lines,
  };
}

/** Fresh, realistic, random fake secrets of every kind the redactor knows (new values on every call). */
export function plantedSecrets(): PlantedSecrets {
  const all: PlantedSecret[] = [];
  const add = (secret: Omit<PlantedSecret, 'fragments'> & { fragments?: string[] }) =>
    all.push({ ...secret, fragments: secret.fragments ?? [] });

  const openai = `sk-proj-${mixed(48)}`;
  add({
    label: 'openai_key',
    value: openai,
    inContext: `openai.api_key = "${openai}"`,
    shape: 'openai_key',
    envName: 'OPENAI_API_KEY',
    fragments: [openai.slice(8, 28), openai.slice(-20)],
  });

  const anthropic = `sk-ant-api03-${pick(B64URL, 93)}AA`;
  add({
    label: 'anthropic_key',
    value: anthropic,
    inContext: `x-api-key: ${anthropic}`,
    shape: 'anthropic_key',
    envName: 'ANTHROPIC_API_KEY',
    fragments: [anthropic.slice(13, 33), anthropic.slice(-20)],
  });

  const ghp = `ghp_${mixed(36)}`;
  add({
    label: 'github_token',
    value: ghp,
    inContext: `echo ${ghp} | gh auth login --with-token`,
    shape: 'github_token',
    envName: 'GITHUB_TOKEN',
    fragments: [ghp.slice(4, 20), ghp.slice(-16)],
  });

  const custom = mixed(28);
  add({
    label: 'env_custom_secret',
    value: custom,
    inContext: `service token is ${custom} (from the environment)`,
    envName: 'CUSTOM_SERVICE_TOKEN',
    fragments: [custom.slice(0, 14), custom.slice(-14)],
  });

  const pat = `github_pat_${mixed(22)}_${mixed(59)}`;
  add({
    label: 'github_pat',
    value: pat,
    inContext: `const token = "${pat}";`,
    shape: 'github_token',
    fragments: [pat.slice(11, 31), pat.slice(-20)],
  });

  const slack = `xoxb-${pick(DIGITS, 12)}-${pick(DIGITS, 13)}-${mixed(24)}`;
  add({
    label: 'slack_token',
    value: slack,
    inContext: `slack: ${slack}`,
    shape: 'slack_token',
    fragments: [slack.slice(-20)],
  });

  const stripe = `sk_live_${mixed(24)}`;
  add({
    label: 'stripe_key',
    value: stripe,
    inContext: `stripe.setKey('${stripe}')`,
    shape: 'stripe_key',
    fragments: [stripe.slice(-20)],
  });

  const akia = `AKIA${pick(UPPER + DIGITS, 15)}${pick(DIGITS, 1)}`;
  add({
    label: 'aws_access_key',
    value: akia,
    inContext: `AWS_ACCESS_KEY_ID=${akia}`,
    shape: 'aws_access_key',
    dotenvKey: 'AWS_ACCESS_KEY_ID',
    fragments: [akia.slice(4)],
  });

  const awsSecret = `${mixed(20)}/${pick(B64, 19)}`;
  add({
    label: 'aws_secret_key',
    value: awsSecret,
    inContext: `aws_secret_access_key = ${awsSecret}`,
    shape: 'aws_secret_key',
    dotenvKey: 'AWS_SECRET_ACCESS_KEY',
    fragments: [awsSecret.slice(0, 16), awsSecret.slice(-16)],
  });

  const google = `AIza${pick(B64URL, 35)}`;
  add({
    label: 'google_api_key',
    value: google,
    inContext: `maps?key=${google}`,
    shape: 'google_api_key',
    fragments: [google.slice(4, 22), google.slice(-16)],
  });

  const bearer = `${mixed(40)}.${pick(B64URL, 12)}`;
  add({
    label: 'bearer_token',
    value: bearer,
    inContext: `Authorization: Bearer ${bearer}`,
    shape: 'bearer_token',
    fragments: [bearer.slice(0, 20), bearer.slice(-16)],
  });

  const basicPassword = mixed(22);
  const basic = Buffer.from(`deploy:${basicPassword}`).toString('base64');
  add({
    label: 'basic_auth',
    value: basic,
    inContext: `Authorization: Basic ${basic}`,
    shape: 'basic_auth',
    fragments: [basic.slice(10, 26)],
  });

  const rsa = pemBlock('RSA');
  add({
    label: 'private_key',
    value: rsa.value,
    inContext: rsa.value,
    shape: 'private_key',
    fragments: rsa.lines.map((line) => line.slice(0, 32)),
  });

  const openssh = pemBlock('OPENSSH');
  add({
    label: 'ssh_private_key',
    value: openssh.value,
    inContext: openssh.value,
    shape: 'private_key',
    fragments: openssh.lines.map((line) => line.slice(0, 32)),
  });

  const jwtPayload = base64url(JSON.stringify({ sub: mixed(16), iat: 1_700_000_000, role: 'admin' }));
  const jwtSignature = pick(B64URL, 43);
  const jwt = `eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.${jwtPayload}.${jwtSignature}`;
  add({
    label: 'jwt',
    value: jwt,
    inContext: `session cookie: ${jwt}`,
    shape: 'jwt',
    fragments: [jwtPayload.slice(8, 30), jwtSignature.slice(0, 20)],
  });

  const urlPassword = mixed(20);
  add({
    label: 'url_password',
    value: urlPassword,
    inContext: `postgres://app:${urlPassword}@db.internal:5432/app`,
    shape: 'url_password',
    dotenvKey: 'DATABASE_URL',
    fragments: [urlPassword.slice(0, 14)],
  });

  const queryPassword = mixed(20);
  add({
    label: 'query_password',
    value: queryPassword,
    inContext: `https://api.example.com/v1/login?user=app&password=${queryPassword}`,
    shape: 'url_password',
    fragments: [queryPassword.slice(0, 14)],
  });

  const pgPassword = mixed(18);
  add({
    label: 'pg_password',
    value: pgPassword,
    inContext: `PGPASSWORD=${pgPassword} psql -h db -U app`,
    shape: 'password',
    fragments: [pgPassword.slice(0, 14)],
  });

  const dsnPassword = mixed(18);
  add({
    label: 'dsn_password',
    value: dsnPassword,
    inContext: `host=db port=5432 user=app password=${dsnPassword} dbname=app`,
    shape: 'password',
    fragments: [dsnPassword.slice(0, 14)],
  });

  const session = mixed(32);
  add({
    label: 'dotenv_session_secret',
    value: session,
    inContext: `the session secret ${session} leaked`,
    dotenvKey: 'SESSION_SECRET',
    fragments: [session.slice(0, 14), session.slice(-14)],
  });

  const env: Record<string, string> = {};
  for (const secret of all) if (secret.envName) env[secret.envName] = secret.value;
  const secretEnvNames = all
    .map((secret) => secret.envName)
    .filter((name): name is string => name !== undefined && name !== 'OPENAI_API_KEY' && name !== 'ANTHROPIC_API_KEY');
  return {
    all,
    env,
    secretEnvNames,
    byLabel(label) {
      const found = all.find((secret) => secret.label === label);
      if (!found) throw new Error(`no planted secret "${label}"`);
      return found;
    },
  };
}

/** Every planted secret in its context, one per paragraph, between ordinary lines of prose and code. */
export function plantedText(planted: PlantedSecrets): string {
  return planted.all
    .map((secret) => `Step ${secret.label}: reading config.\n${secret.inContext}\nconst ok = true; // done\n`)
    .join('\n');
}

/**
 * Writes a workspace full of secrets: `.env` (the `.env`-planted secrets, a DATABASE_URL with the URL password,
 * harmless settings), `.env.example` (placeholders), `certs/server.pem` (the RSA key), `.ssh/id_ed25519` (the
 * OpenSSH key), `src/config.ts` and `scripts/deploy.sh` (the shaped secrets in context), `README.md` (none).
 * Returns the workspace-relative paths written.
 */
export async function writeSecretWorkspace(dir: string, planted: PlantedSecrets): Promise<{ files: string[] }> {
  const get = (label: string) => planted.byLabel(label);
  const files: Record<string, string> = {
    '.env': [
      '# local settings — never commit',
      'NODE_ENV=development',
      'PORT=3000',
      `export SESSION_SECRET="${get('dotenv_session_secret').value}"`,
      `AWS_ACCESS_KEY_ID=${get('aws_access_key').value}`,
      `AWS_SECRET_ACCESS_KEY='${get('aws_secret_key').value}'`,
      `DATABASE_URL=${get('url_password').inContext} # primary`,
      '',
    ].join('\n'),
    '.env.example': 'NODE_ENV=development\nSESSION_SECRET=change-me\nDATABASE_URL=postgres://app:app@localhost/app\n',
    'certs/server.pem': `${get('private_key').value}\n`,
    '.ssh/id_ed25519': `${get('ssh_private_key').value}\n`,
    'src/config.ts': [
      "import { connect } from './db';",
      '',
      `export const githubToken = ${JSON.stringify(get('github_pat').value)};`,
      `// ${get('slack_token').inContext}`,
      get('stripe_key').inContext,
      `const maps = 'https://maps.example.com/${get('google_api_key').inContext}';`,
      `const headers = { Authorization: 'Bearer ${get('bearer_token').value}' };`,
      `const basic = 'Authorization: Basic ${get('basic_auth').value}';`,
      `const jwt = '${get('jwt').value}';`,
      `const login = '${get('query_password').inContext}';`,
      `export const dsn = '${get('dsn_password').inContext}';`,
      `// ${get('aws_secret_key').inContext}`,
      'export function open() {',
      '  return connect(dsn);',
      '}',
      '',
    ].join('\n'),
    'scripts/deploy.sh': `#!/bin/sh\n${get('pg_password').inContext} -c 'select 1'\n`,
    'README.md': '# App\n\nRun `npm start`. Configuration lives in `.env` (see `.env.example`).\n',
  };
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
  return { files: Object.keys(files).sort() };
}

// --- scanning ----------------------------------------------------------------------------------------------------

interface Needle {
  label: string;
  form: string;
  text: string;
  bytes: Buffer;
}

/** The base64 characters that encode `bytes` whatever precedes them, at byte offset `shift` (0, 1, 2). */
function base64Core(bytes: Buffer, shift: number): string {
  const encoded = Buffer.concat([Buffer.alloc(shift), bytes])
    .toString('base64')
    .replace(/=+$/, '');
  return encoded.slice(Math.ceil((8 * shift) / 6), Math.floor((8 * (shift + bytes.length)) / 6));
}

function needlesOf(secret: { label: string; value: string; fragments?: string[] }): Needle[] {
  const forms = new Map<string, string>();
  const add = (form: string, text: string) => {
    if (text.length >= 8 && !forms.has(text)) forms.set(text, form);
  };
  add('raw', secret.value);
  add('json', JSON.stringify(secret.value).slice(1, -1));
  add('json2', JSON.stringify(JSON.stringify(secret.value)).slice(3, -3));
  add('url', encodeURIComponent(secret.value));
  const bytes = Buffer.from(secret.value);
  for (let shift = 0; shift < 3; shift++) {
    const core = base64Core(bytes, shift);
    if (core.length >= 12) {
      add('base64', core);
      add('base64url', core.replaceAll('+', '-').replaceAll('/', '_'));
    }
  }
  for (const fragment of secret.fragments ?? []) add('fragment', fragment);
  return [...forms].map(([text, form]) => ({ label: secret.label, form, text, bytes: Buffer.from(text) }));
}

const SKIPPED_DIRS = new Set(['node_modules', '.git']);

/**
 * Looks for planted secrets. Give it the planted secrets (or plain strings, labelled `secret#<i>`); feed it
 * strings, buffers, files, directories, SQLite files and PostgreSQL schemas; read `hits`.
 */
export class SecretScanner {
  readonly hits: SecretHit[] = [];
  private readonly needles: Needle[];

  constructor(secrets: readonly (string | Pick<PlantedSecret, 'label' | 'value' | 'fragments'>)[]) {
    this.needles = secrets.flatMap((secret, i) =>
      needlesOf(typeof secret === 'string' ? { label: `secret#${i}`, value: secret } : secret),
    );
  }

  /** Scans a string or bytes (stdout, stderr, an export, a payload); `where` names it in the hits. */
  text(data: string | Uint8Array, where: string): SecretHit[] {
    const found: SecretHit[] = [];
    const seen = new Set<string>();
    const buffer = typeof data === 'string' ? undefined : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    for (const needle of this.needles) {
      if (seen.has(needle.label)) continue;
      const hit = buffer ? buffer.includes(needle.bytes) : (data as string).includes(needle.text);
      if (hit) {
        seen.add(needle.label);
        found.push({ label: needle.label, where, form: needle.form });
      }
    }
    this.hits.push(...found);
    return found;
  }

  /** Scans one file's bytes. */
  async file(path: string, where = `file:${path}`): Promise<SecretHit[]> {
    return this.text(await readFile(path), where);
  }

  /** Scans every file under `dir` (node_modules and .git skipped), named `file:<relative path>`. */
  async directory(dir: string): Promise<SecretHit[]> {
    const found: SecretHit[] = [];
    const walk = async (current: string): Promise<void> => {
      for (const entry of await readdir(current, { withFileTypes: true })) {
        const path = join(current, entry.name);
        if (entry.isDirectory()) {
          if (!SKIPPED_DIRS.has(entry.name)) await walk(path);
        } else if (entry.isFile()) {
          found.push(...(await this.file(path, `file:${relative(dir, path)}`)));
        }
      }
    };
    await walk(dir);
    return found;
  }

  /**
   * Scans a SQLite database: the raw bytes of the file and of its `-wal` / `-journal` companions (deleted rows and
   * free pages included), then every row of every table, column by column — text, and BLOBs as bytes (values
   * that overflow onto several pages are only whole here).
   */
  async sqlite(file: string): Promise<SecretHit[]> {
    const found: SecretHit[] = [];
    for (const suffix of ['', '-wal', '-journal']) {
      if (existsSync(file + suffix)) found.push(...(await this.file(file + suffix, `sqlite-bytes:${file}${suffix}`)));
    }
    const db = new SQLite(file, { readonly: true, fileMustExist: true });
    try {
      const tables = db.prepare("select name, sql from sqlite_master where type = 'table' order by name").all() as {
        name: string;
        sql: string | null;
      }[];
      for (const { name, sql } of tables) {
        const withRowid = !/WITHOUT\s+ROWID/i.test(sql ?? '');
        const rows = db.prepare(`select ${withRowid ? 'rowid as "__rowid", ' : ''}* from "${name}"`);
        let index = 0;
        for (const row of rows.iterate() as Iterable<Record<string, unknown>>) {
          const id = withRowid ? `rowid=${row.__rowid}` : `#${index}`;
          for (const [column, value] of Object.entries(row)) {
            if (column === '__rowid') continue;
            found.push(...this.value(value, `sqlite:${name}[${id}].${column}`));
          }
          index++;
        }
      }
    } finally {
      db.close();
    }
    return found;
  }

  /** Scans every row of every table of a PostgreSQL schema (text, bytea as bytes, json/jsonb as JSON text). */
  async postgres(connectionString: string, schema: string): Promise<SecretHit[]> {
    const found: SecretHit[] = [];
    const client = new pg.Client({ connectionString });
    await client.connect();
    try {
      const tables = await client.query<{ table_name: string }>(
        "select table_name from information_schema.tables where table_schema = $1 and table_type = 'BASE TABLE' order by table_name",
        [schema],
      );
      for (const { table_name: table } of tables.rows) {
        const result = await client.query<Record<string, unknown>>(
          `select * from "${schema.replaceAll('"', '""')}"."${table.replaceAll('"', '""')}"`,
        );
        result.rows.forEach((row, index) => {
          const id = typeof row.id === 'string' || typeof row.id === 'number' ? `id=${row.id}` : `#${index}`;
          for (const [column, value] of Object.entries(row)) {
            found.push(...this.value(value, `pg:${schema}.${table}[${id}].${column}`));
          }
        });
      }
    } finally {
      await client.end();
    }
    return found;
  }

  /** Scans a database value: strings, bytes, and anything else as its JSON text. */
  private value(value: unknown, where: string): SecretHit[] {
    if (value === null || value === undefined || typeof value === 'number' || typeof value === 'bigint') return [];
    if (typeof value === 'string') return this.text(value, where);
    if (value instanceof Uint8Array) return this.text(value, where);
    if (value instanceof Date || typeof value === 'boolean') return [];
    return this.text(JSON.stringify(value), where);
  }
}

/** Random bytes as a label-safe suffix (for schema and file names in tests). */
export function randomSuffix(): string {
  return randomBytes(6).toString('hex');
}
