import { closeSync, openSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ndjson, oarIn, repoRoot, spawnOar, tempDir, writeJson } from './cli-helpers.js';

const MiB = 1024 * 1024;
const BOM = '\uFEFF';

function structuredError(stderr: string): { code: string; message: string; details?: Record<string, unknown> } {
  return (JSON.parse(stderr.trim().split('\n').at(-1) ?? '{}') as { error: never }).error;
}

/** A file of `size` bytes: a JSON string literal, so only its size is wrong. */
function bigJsonFile(dir: string, name: string, size: number): string {
  const path = join(dir, name);
  const fd = openSync(path, 'w');
  writeSync(fd, '"');
  const chunk = 'x'.repeat(MiB);
  for (let left = size - 2; left > 0; left -= chunk.length) writeSync(fd, chunk.slice(0, Math.min(left, chunk.length)));
  writeSync(fd, '"');
  closeSync(fd);
  return path;
}

describe('oar protocol check input limits', () => {
  it('refuses a 50 MB input before reading it: input_too_large, exit 2, with the limit and the size', () => {
    const dir = tempDir();
    const input = bigJsonFile(dir, 'big.json', 50 * 1000 * 1000);
    const started = Date.now();
    const run = oarIn(repoRoot, ['protocol', 'check', input]);
    expect(run.code, run.stderr).toBe(2);
    expect(structuredError(run.stderr)).toMatchObject({
      code: 'input_too_large',
      details: { file: input, limit: MiB, size: 50 * 1000 * 1000 },
    });
    // The old code spent 50 s and 2 GB on this input.
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it('stops reading standard input at the limit', () => {
    const run = oarIn(repoRoot, ['protocol', 'check', '-'], `"${'x'.repeat(3 * MiB)}"`);
    expect(run.code, run.stderr).toBe(2);
    expect(structuredError(run.stderr)).toMatchObject({
      code: 'input_too_large',
      details: { file: '-', limit: MiB, sizeIsLowerBound: true },
    });
  });

  it('refuses a catalog over its own limit (4 MiB)', () => {
    const dir = tempDir();
    const catalog = bigJsonFile(dir, 'catalog.json', 5 * MiB);
    const run = oarIn(repoRoot, ['protocol', 'check', '--catalog', catalog, 'examples/act.json']);
    expect(run.code, run.stderr).toBe(2);
    expect(structuredError(run.stderr)).toMatchObject({ code: 'input_too_large', details: { limit: 4 * MiB } });
  });

  it('answers deeply nested model output with the protocol error, not a crash', () => {
    const deep = `{"kind":"act","calls":[{"id":"r","type":"tool","name":"read","args":{"x":${'['.repeat(100_000)}${']'.repeat(100_000)}}}]}`;
    const run = oarIn(repoRoot, ['protocol', 'check', '--catalog', 'examples/catalog.json', '-'], deep);
    expect(run.code, run.stderr).toBe(1);
    const out = JSON.parse(run.stdout) as { errors: { code: string; message: string }[] };
    expect(out.errors.map((e) => e.code)).toEqual(['nesting_too_deep']);
    expect(out.errors[0]?.message).toContain('the limit is 128');
  });

  it('refuses a catalog nested deeper than the limit with input_too_deep', () => {
    const dir = tempDir();
    const catalog = join(dir, 'deep.json');
    writeFileSync(
      catalog,
      `{"tools":[{"name":"t","description":"d","inputSchema":${'['.repeat(5_000)}${']'.repeat(5_000)}}]}`,
    );
    const run = oarIn(repoRoot, ['protocol', 'check', '--catalog', catalog, 'examples/act.json']);
    expect(run.code, run.stderr).toBe(2);
    expect(structuredError(run.stderr)).toMatchObject({ code: 'input_too_deep', details: { limit: 128 } });
  });
});

describe('config files and model scripts have size and depth limits', () => {
  const script = { steps: [{ protocol: { kind: 'answer', message: 'Hello.' } }] };

  it('a --config file over 1 MiB is refused before it is read: input_too_large, exit 2', () => {
    const cwd = tempDir();
    writeJson(cwd, 'script.json', script);
    // A valid config but for its size (the old code read it whole and ran the turn).
    writeJson(cwd, 'big.json', { $schema: 'x'.repeat(2 * MiB), model: 'script:script.json' });
    const run = oarIn(cwd, ['run', '--config', 'big.json', 'hi']);
    expect(run.code, run.stdout + run.stderr).toBe(2);
    expect(structuredError(run.stderr)).toMatchObject({
      code: 'input_too_large',
      details: { file: join(cwd, 'big.json'), limit: MiB, size: statSync(join(cwd, 'big.json')).size },
    });
  });

  it('so is ./oar.config.json, for every command that reads it', () => {
    const cwd = tempDir();
    writeJson(cwd, 'oar.config.json', { $schema: 'x'.repeat(2 * MiB) });
    const run = oarIn(cwd, ['sessions']);
    expect(run.code, run.stdout + run.stderr).toBe(2);
    expect(structuredError(run.stderr)).toMatchObject({ code: 'input_too_large', details: { limit: MiB } });
  });

  it('a config nested deeper than 128 levels is input_too_deep', () => {
    const cwd = tempDir();
    writeFileSync(join(cwd, 'oar.config.json'), `{"$schema":${'['.repeat(5_000)}${']'.repeat(5_000)}}`);
    const run = oarIn(cwd, ['sessions']);
    expect(run.code, run.stdout + run.stderr).toBe(2);
    expect(structuredError(run.stderr)).toMatchObject({ code: 'input_too_deep', details: { limit: 128 } });
  });

  it('a model script over 16 MiB is refused before it is read: input_too_large, exit 2', () => {
    const cwd = tempDir();
    writeJson(cwd, 'big-script.json', { ...script, description: 'x'.repeat(17 * MiB) });
    const run = oarIn(cwd, ['run', '--model', 'script:big-script.json', 'hi']);
    expect(run.code, run.stdout + run.stderr).toBe(2);
    expect(structuredError(run.stderr)).toMatchObject({
      code: 'input_too_large',
      details: { file: join(cwd, 'big-script.json'), limit: 16 * MiB },
    });
  });

  it('a model script nested deeper than 128 levels is input_too_deep (deep model output is scripted as text)', () => {
    const cwd = tempDir();
    const deep = `{"steps":[{"protocol":{"kind":"answer","message":"Hello.","x":${'['.repeat(5_000)}${']'.repeat(5_000)}}}]}`;
    writeFileSync(join(cwd, 'deep.json'), deep);
    const run = oarIn(cwd, ['run', '--model', 'script:deep.json', 'hi']);
    expect(run.code, run.stdout + run.stderr).toBe(2);
    expect(structuredError(run.stderr)).toMatchObject({ code: 'input_too_deep', details: { limit: 128 } });
  });
});

describe('a UTF-8 byte-order mark is accepted', () => {
  it('in protocol check inputs and catalog files', () => {
    const dir = tempDir();
    const input = join(dir, 'answer.json');
    writeFileSync(input, `${BOM}{"kind":"answer","message":"Done."}`);
    const catalog = join(dir, 'catalog.json');
    writeFileSync(catalog, `${BOM}{"tools":[],"agents":[]}`);
    const run = oarIn(repoRoot, ['protocol', 'check', '--catalog', catalog, input]);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ ok: true });
  });

  it('in oar.config.json and in a model script', () => {
    const cwd = tempDir();
    writeFileSync(
      join(cwd, 'script.json'),
      `${BOM}${JSON.stringify({ steps: [{ protocol: { kind: 'answer', message: 'Hello.' } }] })}`,
    );
    writeFileSync(join(cwd, 'oar.config.json'), `${BOM}${JSON.stringify({ model: 'script:script.json' })}`);
    const run = oarIn(cwd, ['run', '--json', 'hi']);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toContain('"answer":"Hello."');
  });
});

describe('Ctrl-C while a tool matches a pathological pattern', () => {
  it('ends the run promptly with the cancellation recorded (the match runs in a thread that is stopped)', {
    timeout: 90_000,
  }, async () => {
    const cwd = tempDir();
    // Over a minute of matching for the one long line, inside one synchronous RE2 call.
    const grep = { id: 'g', type: 'tool', name: 'grep', args: { pattern: `${'a{0,1000}'.repeat(12)}[0-9]` } };
    writeJson(cwd, 'script.json', { steps: [{ protocol: { kind: 'act', message: 'Searching.', calls: [grep] } }] });
    writeJson(cwd, 'oar.config.json', { model: 'script:script.json' });
    writeFileSync(join(cwd, 'long.txt'), `${'a'.repeat(100_000)}\n`);
    const child = spawnOar(cwd, ['run', '--json', 'search']);
    let out = '';
    const exit = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    let interruptedAt = 0;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`never started:\n${out}`)), 60_000);
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (interruptedAt === 0 && out.includes('"type":"tool.started"')) {
          clearTimeout(timer);
          // Let the match get going first.
          setTimeout(() => {
            interruptedAt = Date.now();
            child.kill('SIGINT');
            resolve();
          }, 1_000);
        }
      });
    });
    expect(await exit).toBe(130);
    expect(Date.now() - interruptedAt).toBeLessThan(10_000);
    const sessionId = (ndjson(out)[0] as { sessionId?: string }).sessionId ?? '';
    const log = ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout);
    expect(log.find((e) => e.type === 'tool.failed')?.status).toBe('cancelled');
  });
});
