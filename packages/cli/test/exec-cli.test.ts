import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { getArtifact, Store } from '@oar/runtime';
import { beforeAll, describe, expect, it } from 'vitest';
import { sandboxUnavailable } from '../../runtime/test/exec/support.js';
import { ndjson, oarIn, spawnOar, tempDir, writeJson } from './cli-helpers.js';

/**
 * Issue 13's "done", tried as a new user would: an agent runs `npm test` in its workspace through the real `oar`
 * binary, under the sandbox, with the output printed live as the command runs and stored whole in the log.
 */
let skip: string | undefined;
beforeAll(async () => {
  skip = await sandboxUnavailable();
});

function project(): string {
  const cwd = tempDir('oar-exec-cli-');
  writeJson(cwd, 'package.json', { name: 'tiny', version: '1.0.0', private: true, scripts: { test: 'node test.js' } });
  // The test prints a line, then waits for a `go` file before it prints the rest: a barrier only a reader of the
  // live output can open (the test writes it once it saw the first line), so a run that ends proves liveness.
  writeFileSync(
    join(cwd, 'test.js'),
    [
      "const fs = require('node:fs');",
      "console.log('running 2 checks');",
      "const t = setInterval(() => { if (!fs.existsSync('go')) return; clearInterval(t); console.log('ok 1 - addition'); console.log('ok 2 - repeat'); }, 20);",
      "setTimeout(() => { console.log('nobody saw the first line'); process.exit(1); }, 20000).unref();",
      '',
    ].join('\n'),
  );
  writeJson(cwd, 'script.json', {
    steps: [
      {
        protocol: {
          kind: 'act',
          message: 'Running the tests.',
          calls: [{ id: 't', type: 'tool', name: 'exec', args: { command: ['npm', 'test'] } }],
        },
      },
      { protocol: { kind: 'answer', message: 'The tests pass.' } },
    ],
  });
  writeJson(cwd, 'oar.config.json', {
    model: 'script:script.json',
    tools: { exec: { env: ['PATH', 'HOME', 'LANG'] } },
    permissions: { rules: [{ decision: 'allow', tool: 'exec', command: 'npm test' }] },
  });
  return cwd;
}

describe('oar run with the exec tool', () => {
  it('runs npm test under the sandbox: output live, then stored in the log', async (t) => {
    if (skip) t.skip();
    const cwd = project();
    const child = spawnOar(cwd, ['run', '--stream', 'run the tests']);
    let stdout = '';
    let firstLineBeforeEnd: boolean | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      if (firstLineBeforeEnd === undefined && stdout.includes('│ running 2 checks')) {
        firstLineBeforeEnd = !stdout.includes('ok 2 - repeat');
        writeFileSync(join(cwd, 'go'), '');
      }
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(stderr).toBe('');
    expect(code).toBe(0);
    // Live: the command's first line was printed while it still ran.
    expect(firstLineBeforeEnd).toBe(true);
    expect(stdout).toContain('│ ok 2 - repeat');
    expect(stdout).toContain('exit 0');
    const sessionId = /session (ses_[A-Za-z0-9]+)/.exec(stdout)?.[1] as string;

    const events = ndjson(oarIn(cwd, ['events', sessionId, '--json']).stdout);
    const types = events.map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['sandbox.applied', 'process.started', 'process.completed']));
    expect(types).not.toContain('process.output');
    const applied = events.find((e) => e.type === 'sandbox.applied') as { payload: Record<string, unknown> };
    expect(applied.payload).toMatchObject({ profile: 'bwrap', network: false });
    // The store (.oar/ in the workspace) is hidden from the command.
    expect(applied.payload.hidden).toContain(join(cwd, '.oar'));
    const result = events.find((e) => e.type === 'tool.result') as { payload: { outputRef: string } };
    const store = await Store.open(join(cwd, '.oar', 'oar.db'));
    try {
      const artifact = await getArtifact(store.db, sessionId, result.payload.outputRef.replace('artifact://', ''));
      const log = new TextDecoder().decode(artifact?.bytes);
      expect(log).toContain('> node test.js');
      expect(log).toContain('running 2 checks\nok 1 - addition\nok 2 - repeat\n');
    } finally {
      await store.close();
    }
  });

  it('a command that exits 1 shows as failed with its exit code (✗), never ✓', () => {
    // No sandbox needed for this: the point is how a non-zero exit is shown and recorded.
    const cwd = tempDir('oar-exec-exit-');
    const command = ['node', '-e', "console.log('checking'); process.exit(1)"];
    writeJson(cwd, 'script.json', {
      steps: [
        {
          protocol: {
            kind: 'act',
            message: 'Checking.',
            calls: [{ id: 'c', type: 'tool', name: 'exec', args: { command } }],
          },
        },
        { protocol: { kind: 'answer', message: 'The check failed.' } },
      ],
    });
    writeJson(cwd, 'oar.config.json', {
      model: 'script:script.json',
      tools: { exec: { env: ['PATH'], sandbox: { profile: 'none', unsandboxed: 'allow' } } },
      permissions: { rules: [{ decision: 'allow', tool: 'exec', command: 'node' }] },
    });
    const run = oarIn(cwd, ['run', 'check']);
    expect(run.code, run.stderr).toBe(0);
    // The live line: ✗, "failed", and the exit status the summary leads with.
    expect(run.stdout).toMatch(/✗ c exec failed — exit 1, /);
    expect(run.stdout).not.toMatch(/✓ c /);
    const events = ndjson(
      oarIn(cwd, ['events', /session (ses_[A-Za-z0-9]+)/.exec(run.stdout)?.[1] as string, '--json']).stdout,
    );
    expect(events.find((e) => e.type === 'tool.result')?.payload).toMatchObject({ toolName: 'exec', isError: true });
  });

  it('--json --stream prints the live output as process.output lines', (t) => {
    if (skip) t.skip();
    const cwd = project();
    writeFileSync(join(cwd, 'go'), '');
    const run = oarIn(cwd, ['run', '--json', '--stream', 'run the tests']);
    expect(run.code).toBe(0);
    const output = ndjson(run.stdout).filter((e) => e.type === 'process.output');
    expect(output.map((e) => (e.payload as { delta: string }).delta).join('')).toContain('ok 2 - repeat');
    const started = ndjson(run.stdout).find((e) => e.type === 'process.started') as { processId: string };
    expect(output.every((e) => e.processId === started.processId)).toBe(true);
  });
});
