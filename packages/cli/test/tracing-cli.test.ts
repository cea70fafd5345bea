import { spawn } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bin, type CliResult, ndjson, repoRoot, tempDir, writeJson } from './cli-helpers.js';

/**
 * `oar` exports its spans over OTLP/HTTP when the standard `OTEL_*` variables say so (issue: models as a governed
 * resource, section 7): a local HTTP server plays the collector.
 */
interface Received {
  path: string;
  contentType: string;
  body: OtlpTraces;
}

interface OtlpTraces {
  resourceSpans: {
    resource: { attributes: { key: string; value: { stringValue?: string } }[] };
    scopeSpans: {
      scope: { name: string };
      spans: {
        name: string;
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        attributes: { key: string; value: Record<string, unknown> }[];
      }[];
    }[];
  }[];
}

let collector: Server | undefined;
afterEach(async () => {
  await new Promise<void>((resolve) => (collector ? collector.close(() => resolve()) : resolve()));
  collector = undefined;
});

async function startCollector(): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = [];
  collector = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      received.push({
        path: req.url ?? '',
        contentType: String(req.headers['content-type']),
        body: JSON.parse(body) as OtlpTraces,
      });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => collector?.listen(0, '127.0.0.1', resolve));
  const { port } = collector.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, received };
}

/** Run the real `oar` binary without blocking this process's event loop (the collector answers in it). */
function oarAsync(cwd: string, args: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
  const child = spawn(bin, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

const attribute = (span: { attributes: { key: string; value: Record<string, unknown> }[] }, key: string) => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value ? Object.values(value)[0] : undefined;
};

/** Variables a developer's shell may set that would change where spans go. */
const CLEAN_OTEL_ENV = {
  OTEL_TRACES_EXPORTER: '',
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
  OTEL_SDK_DISABLED: '',
  OTEL_EXPORTER_OTLP_PROTOCOL: '',
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: '',
};

describe('oar run with OTEL_EXPORTER_OTLP_ENDPOINT', () => {
  it('exports the turn, model call and tool spans to the collector before it exits', async () => {
    const { url, received } = await startCollector();
    const cwd = tempDir();
    writeJson(cwd, 'script.json', {
      steps: [
        {
          protocol: {
            kind: 'act',
            message: 'Reading.',
            calls: [{ id: 'r1', type: 'tool', name: 'read', args: { filePath: 'notes.md' } }],
          },
        },
        { protocol: { kind: 'answer', message: 'The notes say hello.' } },
      ],
    });
    writeJson(cwd, 'oar.config.json', { model: 'script:script.json' });
    writeFileSync(join(cwd, 'notes.md'), 'hello\n');

    const run = await oarAsync(cwd, ['run', '--json', 'read the notes'], {
      ...CLEAN_OTEL_ENV,
      OTEL_EXPORTER_OTLP_ENDPOINT: url,
      OTEL_SERVICE_NAME: 'oar-under-test',
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toBe('');

    expect(received.length).toBeGreaterThan(0);
    for (const request of received) {
      expect(request.path).toBe('/v1/traces');
      expect(request.contentType).toContain('application/json');
    }
    const resources = received.flatMap((r) => r.body.resourceSpans);
    const serviceNames = resources.map(
      (r) => r.resource.attributes.find((a) => a.key === 'service.name')?.value.stringValue,
    );
    expect(new Set(serviceNames)).toEqual(new Set(['oar-under-test']));
    const spans = resources.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));
    const names = spans.map((s) => s.name);
    expect(names).toContain('invoke_agent main');
    expect(names).toContain('execute_tool read');
    expect(names.filter((n) => n.startsWith('chat '))).toHaveLength(2);

    const turn = spans.find((s) => s.name === 'invoke_agent main');
    const tool = spans.find((s) => s.name === 'execute_tool read');
    expect(tool?.parentSpanId).toBe(turn?.spanId);
    expect(tool?.traceId).toBe(turn?.traceId);
    expect(attribute(tool ?? { attributes: [] }, 'gen_ai.tool.name')).toBe('read');

    // The events printed carry the same ids.
    const events = ndjson(run.stdout).filter((e) => typeof e.type === 'string');
    const sessionId = (ndjson(run.stdout).at(-1) as { result: { sessionId: string } }).result.sessionId;
    expect(attribute(turn ?? { attributes: [] }, 'gen_ai.conversation.id')).toBe(sessionId);
    const started = events.find((e) => e.type === 'tool.started');
    expect(started?.spanId).toBe(tool?.spanId);
    expect(started?.traceId).toBe(tool?.traceId);
  });

  it('exports nothing when no OTEL variable asks for it', async () => {
    const { received } = await startCollector();
    const cwd = tempDir();
    writeJson(cwd, 'script.json', { steps: [{ protocol: { kind: 'answer', message: 'Hi.' } }] });
    writeJson(cwd, 'oar.config.json', { model: 'script:script.json' });
    const run = await oarAsync(cwd, ['run', '--json', 'hi'], { ...CLEAN_OTEL_ENV, OTEL_EXPORTER_OTLP_ENDPOINT: '' });
    expect(run.code, run.stderr).toBe(0);
    expect(received).toEqual([]);
    expect(ndjson(run.stdout).filter((e) => e.traceId !== undefined)).toEqual([]);
  });
});

describe('docs/tracing.md', () => {
  it('the library example runs as written: a turn span with its model calls and tool run under it', async () => {
    const doc = readFileSync(join(repoRoot, 'docs/tracing.md'), 'utf8');
    const code = /```ts\n([\s\S]*?)```/.exec(doc.slice(doc.indexOf('**Library.**')))?.[1];
    expect(code).toBeDefined();
    const cwd = tempDir('oar-tracing-doc-');
    mkdirSync(join(cwd, 'examples/scripts'), { recursive: true });
    cpSync(join(repoRoot, 'examples/scripts/read-and-answer.json'), join(cwd, 'examples/scripts/read-and-answer.json'));
    writeFileSync(join(cwd, 'README.md'), '# A project\n\nIt says hello.\n');
    // Inside the repository, so that '@oar/runtime' and the SDK resolve to the workspace's packages.
    const dir = join(repoRoot, 'node_modules/.cache/oar');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, `tracing-doc-${process.pid}-${Date.now()}.mjs`);
    writeFileSync(file, code ?? '');
    const child = spawn(process.execPath, [file], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exit = await new Promise<number | null>((resolve) => child.on('close', resolve));
    rmSync(file, { force: true });
    expect(exit, stderr).toBe(0);
    const spans = stdout
      .trim()
      .split('\n')
      .map((line) => {
        const [, name, id, parent] = /^(.*) ([0-9a-f]{16}) parent (\S+)$/.exec(line) ?? [];
        return { name, id, parent };
      });
    const turn = spans.find((s) => s.name === 'invoke_agent main');
    expect(turn?.parent).toBe('-');
    expect(spans.filter((s) => s.name?.startsWith('chat ') && s.parent === turn?.id)).toHaveLength(2);
    expect(spans.filter((s) => s.name === 'execute_tool read' && s.parent === turn?.id)).toHaveLength(1);
  });
});
