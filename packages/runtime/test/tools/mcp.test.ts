import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { connectTimeoutOf, McpServerConfigSchema } from '../../src/config/mcp.js';
import { MCP_IDEMPOTENCY_KEY, mcpFacts } from '../../src/tools/mcp/tools.js';
import { type Harness, harness } from '../engine/harness.js';
import { act, actionRows, allEvents, answer, errorCode, ofType, payload, recordingModel } from '../engine/helpers.js';
import { assertEventsConform } from '../support/schemas.js';
import { tempDir } from '../support/temp-dirs.js';

/**
 * MCP servers as tools (docs/mcp.md), against real servers in real processes: one written here with the SDK's
 * server classes (test/fixtures/mcp/test-server.mjs) over stdio and over Streamable HTTP on 127.0.0.1, and the
 * reference server from npm (@modelcontextprotocol/server-everything).
 */
const SERVER = join(import.meta.dirname, '../fixtures/mcp/test-server.mjs');
const require = createRequire(import.meta.url);
const EVERYTHING = join(
  dirname(require.resolve('@modelcontextprotocol/server-everything/package.json')),
  'dist/index.js',
);

let h: Harness | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  await h?.runtime.close();
  await h?.store.close();
  h = undefined;
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

const stdioServer = (extra: Record<string, unknown> = {}) => ({
  name: 'test',
  command: process.execPath,
  args: [SERVER],
  ...extra,
});
const call = (id: string, name: string, args: Record<string, unknown> = {}) => ({ id, type: 'tool', name, args });

async function turn(steps: unknown[], options: Record<string, unknown> = {}) {
  const recorder = recordingModel({ steps: steps as never });
  h = await harness({ steps: [] }, { mcpServers: [stdioServer()], model: recorder.model, ...options });
  const { sessionId, threadId } = await h.runtime.createSession();
  await h.runtime.submitTurn({ sessionId, input: 'go' });
  await h.runtime.settled(sessionId);
  const events = await allEvents(h, sessionId);
  const read = await h.runtime.getThreadRead({ sessionId, threadId });
  return { sessionId, threadId, events, read, prompts: recorder.prompts, h };
}

describe('MCP over stdio (a server written with the SDK)', () => {
  it('joins the inventory as server.tool with its annotations as facts, and a read-only tool runs ungated', async () => {
    const { events, read, prompts, sessionId } = await turn([
      act([call('l1', 'test.lookup', { word: 'ontology' })]),
      answer('Looked up.'),
    ]);
    const inventory = await h?.runtime.getToolInventory({ sessionId });
    const byName = new Map((inventory?.tools ?? []).map((t: { name: string }) => [t.name, t]));
    expect(byName.get('test.lookup')).toMatchObject({
      isReadOnly: true,
      isConcurrencySafe: true,
      isDestructive: false,
    });
    expect(byName.get('test.drop_table')).toMatchObject({ isReadOnly: false, isDestructive: true });
    expect(byName.get('test.fails')).toMatchObject({ isReadOnly: false, isDestructive: true }); // the spec's defaults
    // The model is offered the server's schema.
    expect(prompts[0]?.text).toContain('test.lookup');
    expect(payload(ofType(events, 'permission.evaluated')[0])).toMatchObject({
      decision: 'allow',
      toolName: 'test.lookup',
    });
    expect(payload(ofType(events, 'tool.result')[0])).toMatchObject({ toolName: 'test.lookup' });
    expect(prompts[1]?.text).toContain('definition of ontology');
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Looked up.' });
    assertEventsConform(events);
  });

  it('read-only tools (readOnlyHint) run side by side; destructive ones one at a time', async () => {
    const { events } = await turn(
      [
        act([call('a', 'test.lookup', { word: 'one' }), call('b', 'test.lookup', { word: 'two' })]),
        act([call('c', 'test.drop_table', { table: 'x' }), call('d', 'test.drop_table', { table: 'y' })]),
        answer('Done.'),
      ],
      { permissions: { mode: 'bypass' } },
    );
    const order = (tool: string) =>
      events
        .filter((e) => (e.type === 'tool.started' || e.type === 'tool.result') && payload(e).toolName === tool)
        .map((e) => e.type);
    // Both reads started before either finished; the writes took the write lock in turn.
    expect(order('test.lookup')).toEqual(['tool.started', 'tool.started', 'tool.result', 'tool.result']);
    expect(order('test.drop_table')).toEqual(['tool.started', 'tool.result', 'tool.started', 'tool.result']);
  });

  it('validates input against the server schema before anything is asked or sent', async () => {
    const { events, prompts } = await turn([act([call('l1', 'test.lookup', { word: '', limit: 9 })]), answer('x')]);
    // Refused when the graph is validated, like any tool's input: the model is told what to fix, nothing runs.
    expect(ofType(events, 'tool.started')).toHaveLength(0);
    expect(ofType(events, 'permission.evaluated')).toHaveLength(0);
    expect(prompts[1]?.text).toContain('limit');
  });

  it('a destructive tool asks by default (destructiveHint), and runs once approved', async () => {
    const { read, sessionId } = await turn([
      act([call('d1', 'test.drop_table', { table: 'users' })]),
      answer('Dropped.'),
    ]);
    expect(read.status).toBe('blocked');
    const request = read.pendingRequests[0];
    expect(request).toMatchObject({ actionType: 'tool_approval', prompt: expect.stringContaining('test.drop_table') });
    expect(request?.prompt).toContain('destructive');
    await h?.runtime.respondAction({ sessionId, actionId: request?.actionId as string, decision: 'approve' });
    await h?.runtime.settled(sessionId);
    const events = await allEvents(h as Harness, sessionId);
    expect(payload(ofType(events, 'tool.result')[0])).toMatchObject({ toolName: 'test.drop_table' });
  });

  it('stores every content type as an artifact with its MIME type; the model sees the text and the refs', async () => {
    const { events, prompts } = await turn([act([call('e1', 'test.everything')]), answer('Got it.')]);
    const mimes = ofType(events, 'artifact.changed').map((e) => payload(e).mime);
    expect(mimes).toEqual(
      expect.arrayContaining(['image/png', 'text/markdown', 'application/octet-stream', 'application/json']),
    );
    // image, two embedded resources, one link, the structured content, and the call's own output.
    expect(mimes).toHaveLength(6);
    const result = payload(ofType(events, 'tool.result')[0]);
    expect(result.toolName).toBe('test.everything');
    expect(prompts[1]?.text).toContain('here is everything');
    expect(prompts[1]?.text).toMatch(/image\/png, \d+ bytes: artifact:\/\//);
    expect(prompts[1]?.text).toContain('from test://doc/1');
    const image = ofType(events, 'artifact.changed').find((e) => payload(e).mime === 'image/png');
    const stored = await h?.runtime.getArtifact({
      sessionId: image?.sessionId as string,
      artifactId: image?.artifactId as string,
    });
    expect(
      Buffer.from(stored?.bytes ?? [])
        .subarray(1, 4)
        .toString(),
    ).toBe('PNG');
  });

  it("carries the call's idempotency key in the request's _meta, as its tool.started records it", async () => {
    const { events } = await turn([act([call('m1', 'test.meta')]), answer('x')], { permissions: { mode: 'bypass' } });
    const key = payload(ofType(events, 'tool.started')[0]).idempotencyKey;
    expect(key).toMatch(/^idem_[0-9a-f]{32}$/);
    const observation = payload(ofType(events, 'tool.result')[0]).observation as { content?: string };
    expect(observation.content).toContain(`"${MCP_IDEMPOTENCY_KEY}":"${key}"`);
  });

  it('a server declared idempotentByKey: its writes start idempotent by key, so recovery retries them under their key', async () => {
    const { events } = await turn([act([call('m1', 'test.meta')]), answer('x')], {
      permissions: { mode: 'bypass' },
      mcpServers: [stdioServer({ idempotentByKey: ['meta'] })],
    });
    // Recorded at the start, where recovery reads it (worker/recovery.ts): retried under this key after a crash.
    expect(payload(ofType(events, 'tool.started')[0])).toMatchObject({ idempotent: false, idempotentByKey: true });
    const facts = (name: string, idempotentByKey: boolean | string[]) =>
      mcpFacts({ name, inputSchema: { type: 'object' }, annotations: {} }, { trustAnnotations: true, idempotentByKey });
    expect(facts('meta', true).isIdempotentByKey).toBe(true);
    expect(facts('other', ['meta']).isIdempotentByKey).toBeUndefined();
    // An idempotent tool needs no key to be re-run.
    const idempotent = mcpFacts(
      { name: 'meta', inputSchema: { type: 'object' }, annotations: { idempotentHint: true } },
      { trustAnnotations: true, idempotentByKey: true },
    );
    expect(idempotent).toMatchObject({ isIdempotent: true });
    expect(idempotent.isIdempotentByKey).toBeUndefined();
  });

  it("a tool's isError is a structured failure (mcp_tool_error)", async () => {
    const { read } = await turn([act([call('f1', 'test.fails')]), answer('x')], { permissions: { mode: 'bypass' } });
    expect(actionRows(read).find((a) => a.actionId === 'f1')).toMatchObject({
      status: 'failed',
      error: { code: 'mcp_tool_error', message: 'the thing is broken' },
    });
  });

  it('a server that crashes, hangs or answers garbage gives structured errors and is restarted for the next call', async () => {
    const { read, events } = await turn(
      [
        act([call('c1', 'test.crash')]),
        act([call('l1', 'test.lookup', { word: 'after-crash' })]),
        act([call('h1', 'test.hang')]),
        act([call('l2', 'test.lookup', { word: 'after-hang' })]),
        act([call('g1', 'test.garbage')]),
        act([call('l3', 'test.lookup', { word: 'after-garbage' })]),
        answer('Survived.'),
      ],
      { permissions: { mode: 'bypass' }, mcpServers: [stdioServer({ timeoutMs: 700 })] },
    );
    const rows = actionRows(read);
    const status = (id: string) => rows.find((a) => a.actionId === id);
    expect(status('c1')).toMatchObject({ status: 'failed', error: { code: 'mcp_unavailable', retryable: true } });
    expect(status('h1')).toMatchObject({ status: 'failed', error: { code: 'mcp_timeout', retryable: true } });
    expect(status('g1')).toMatchObject({ status: 'failed', error: { retryable: true } });
    expect(['mcp_timeout', 'mcp_protocol_error', 'mcp_unavailable']).toContain(
      (status('g1') as { error: { code: string } }).error.code,
    );
    for (const id of ['l1', 'l2', 'l3']) expect(status(id)).toMatchObject({ status: 'completed' });
    const texts = ofType(events, 'tool.result').map((e) => JSON.stringify(payload(e)));
    expect(texts.join()).toContain('after-garbage');
    expect(read.lastOutcome).toMatchObject({ status: 'completed', answer: 'Survived.' });
  });

  it('tools/list_changed refreshes the inventory between steps and records it', async () => {
    const { events, read } = await turn(
      [act([call('g1', 'test.grow', { name: 'fresh' })]), act([call('f1', 'test.fresh')]), answer('Grown.')],
      { permissions: { mode: 'bypass' } },
    );
    const catalogs = ofType(events, 'tool.catalog.resolved').map(payload);
    expect(catalogs).toHaveLength(2);
    expect(catalogs[1]).toMatchObject({ reason: 'tools_list_changed', added: ['test.fresh'], removed: [] });
    expect(actionRows(read).find((a) => a.actionId === 'f1')).toMatchObject({ status: 'completed' });
    assertEventsConform(events);
  });

  it('hooks govern MCP calls like any tool: a before_tool_call hook matching "test.*" vetoes one', async () => {
    const { events, read } = await turn([act([call('l1', 'test.lookup', { word: 'x' })]), answer('x')], {
      hooks: [
        {
          name: 'no-mcp',
          point: 'before_tool_call',
          module: join(import.meta.dirname, '../fixtures/hooks/module-hook.mjs'),
          matcher: { tools: ['test.*'] },
        },
      ],
    });
    expect(ofType(events, 'tool.started')).toHaveLength(0);
    expect(actionRows(read).find((a) => a.actionId === 'l1')).toMatchObject({ status: 'denied' });
  });

  it('a server that cannot start makes the binding unavailable (nothing is recorded that could not run)', async () => {
    h = await harness({ steps: [] }, { mcpServers: [{ name: 'gone', command: '/nonexistent/mcp-server' }] });
    expect(await errorCode(h.runtime.checkBinding())).toBe('binding_unavailable');
    // A session bound to it fails its turn with the cause; nothing crashes.
    const { sessionId, threadId } = await h.runtime.createSession();
    await h.runtime.submitTurn({ sessionId, input: 'go' });
    await h.runtime.settled(sessionId);
    const read = await h.runtime.getThreadRead({ sessionId, threadId });
    expect(read.lastOutcome).toMatchObject({
      status: 'failed',
      error: { code: 'binding_unavailable', retryable: true, details: { server: 'gone', cause: 'mcp_unavailable' } },
    });
  });

  it('a server that does not connect in time names the setting that changes the limit', async () => {
    // A process that starts but never answers `initialize`: the connect limit is what ends the wait.
    const silent = { name: 'silent', command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'] };
    h = await harness({ steps: [] }, { mcpServers: [{ ...silent, connectTimeoutMs: 300 }] });
    const error = await h.runtime.checkBinding().then(
      () => undefined,
      (e: { error?: { code: string; details?: Record<string, unknown> } }) => e.error,
    );
    expect(error).toMatchObject({
      code: 'binding_unavailable',
      details: { server: 'silent', cause: 'mcp_unavailable', connectTimeoutMs: 300 },
    });
    expect(String(error?.details?.hint)).toContain('"connectTimeoutMs" of the server "silent" in "mcp.servers"');
    expect(String(error?.details?.hint)).not.toContain('tools.modules');
  });

  it('a server started through npx gets 120 s to connect unless it says otherwise; others 20 s', () => {
    expect(connectTimeoutOf(McpServerConfigSchema.parse({ name: 'a', command: 'npx', args: ['-y', 'x'] }))).toBe(
      120_000,
    );
    expect(connectTimeoutOf(McpServerConfigSchema.parse({ name: 'a', command: '/usr/local/bin/npm' }))).toBe(120_000);
    expect(connectTimeoutOf(McpServerConfigSchema.parse({ name: 'a', command: 'node' }))).toBe(20_000);
    expect(connectTimeoutOf(McpServerConfigSchema.parse({ name: 'a', url: 'http://127.0.0.1:1/mcp' }))).toBe(20_000);
    expect(connectTimeoutOf(McpServerConfigSchema.parse({ name: 'a', command: 'npx', connectTimeoutMs: 500 }))).toBe(
      500,
    );
  });

  it('passes only the variables named in env to a stdio server', async () => {
    process.env.OAR_MCP_VISIBLE = 'visible-value';
    process.env.OAR_MCP_HIDDEN = 'hidden-value';
    try {
      const { prompts } = await turn(
        [
          act([
            call('s1', 'test.secret', { name: 'OAR_MCP_VISIBLE' }),
            call('s2', 'test.secret', { name: 'OAR_MCP_HIDDEN' }),
          ]),
          answer('x'),
        ],
        { permissions: { mode: 'bypass' }, mcpServers: [stdioServer({ env: ['OAR_MCP_VISIBLE'] })] },
      );
      expect(prompts[1]?.text).toContain('OAR_MCP_VISIBLE=visible-value');
      expect(prompts[1]?.text).toContain('OAR_MCP_HIDDEN=<unset>');
    } finally {
      delete process.env.OAR_MCP_VISIBLE;
      delete process.env.OAR_MCP_HIDDEN;
    }
  });
});

describe('MCP over Streamable HTTP on 127.0.0.1', () => {
  async function httpServer(token: string): Promise<string> {
    const portFile = join(tempDir('oar-mcp-http-'), 'port');
    const child = spawn(process.execPath, [SERVER, 'http', portFile], {
      env: { ...process.env, MCP_TEST_TOKEN: token },
      stdio: 'ignore',
    });
    children.push(child);
    for (let i = 0; i < 200 && !existsSync(portFile); i++) await new Promise((r) => setTimeout(r, 25));
    return `http://127.0.0.1:${readFileSync(portFile, 'utf8')}/mcp`;
  }

  it('calls a tool with the auth header from an env var, and the token never enters the record', async () => {
    const token = 'mcp-token-0123456789abcdef-secret';
    const url = await httpServer(token);
    process.env.OAR_MCP_TOKEN = token;
    try {
      const { events, read } = await turn([act([call('l1', 'web.lookup', { word: 'remote' })]), answer('Remote.')], {
        mcpServers: [{ name: 'web', url, auth: { env: 'OAR_MCP_TOKEN', scheme: 'Bearer' } }],
      });
      expect(actionRows(read).find((a) => a.actionId === 'l1')).toMatchObject({ status: 'completed' });
      expect(JSON.stringify(payload(ofType(events, 'tool.result')[0]))).toContain('definition of remote');
      expect(JSON.stringify(events)).not.toContain(token);
    } finally {
      delete process.env.OAR_MCP_TOKEN;
    }
  });

  it('a wrong token is an unavailable binding with the cause, not a crash', async () => {
    const url = await httpServer('right-token-0123456789');
    process.env.OAR_MCP_TOKEN = 'wrong-token-0123456789';
    try {
      h = await harness(
        { steps: [] },
        { mcpServers: [{ name: 'web', url, auth: { env: 'OAR_MCP_TOKEN', scheme: 'Bearer' } }] },
      );
      expect(await errorCode(h.runtime.checkBinding())).toBe('binding_unavailable');
    } finally {
      delete process.env.OAR_MCP_TOKEN;
    }
  });
});

describe('the reference server from npm (@modelcontextprotocol/server-everything)', () => {
  it('over Streamable HTTP on 127.0.0.1: its tools join and a call runs', async () => {
    // A free port, handed to the server (it listens on the PORT it is given).
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const child = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
      env: { ...process.env, PORT: String(port) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    children.push(child);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('server-everything did not start')), 15_000);
      child.stderr?.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('listening')) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    const { events, read } = await turn([act([call('s1', 'ref.get-sum', { a: 2, b: 40 })]), answer('Summed.')], {
      mcpServers: [{ name: 'ref', url: `http://127.0.0.1:${port}/mcp` }],
    });
    expect(actionRows(read).find((a) => a.actionId === 's1')).toMatchObject({ status: 'completed' });
    expect(JSON.stringify(payload(ofType(events, 'tool.result')[0]))).toContain('42');
  });

  it("docs/mcp.md's example entry, as written (npx -y), starts it and its echo tool runs", async () => {
    const page = readFileSync(join(import.meta.dirname, '../../../../docs/mcp.md'), 'utf8');
    const block = /```json\n([\s\S]*?)```/.exec(page)?.[1] ?? '';
    const documented = (JSON.parse(block) as { mcp: { servers: { name: string }[] } }).mcp.servers.find(
      (server) => server.name === 'everything',
    );
    expect(documented).toMatchObject({
      command: 'npx',
      args: ['-y', '@modelcontextprotocol/server-everything', 'stdio'],
    });
    // Run from this package, where the server is a devDependency: npx finds it there instead of downloading it
    // (the entry is otherwise the page's; the first start on a fresh machine is what the longer default is for).
    const server = { ...documented, cwd: join(import.meta.dirname, '../..') };
    const { events, read } = await turn(
      [act([call('e1', 'everything.echo', { message: 'from the docs' })]), answer('Echoed.')],
      { mcpServers: [server] },
    );
    expect(actionRows(read).find((a) => a.actionId === 'e1')).toMatchObject({ status: 'completed' });
    expect(JSON.stringify(payload(ofType(events, 'tool.result')[0]))).toContain('from the docs');
  });

  it('its echo tool runs through oar with its annotations honoured', async () => {
    const { events, read, sessionId } = await turn(
      [act([call('e1', 'everything.echo', { message: 'hi there' })]), answer('Echoed.')],
      {
        mcpServers: [{ name: 'everything', command: process.execPath, args: [EVERYTHING, 'stdio'] }],
      },
    );
    const inventory = await h?.runtime.getToolInventory({ sessionId });
    expect((inventory?.tools ?? []).find((t: { name: string }) => t.name === 'everything.echo')).toMatchObject({
      isReadOnly: true,
    });
    expect(actionRows(read).find((a) => a.actionId === 'e1')).toMatchObject({ status: 'completed' });
    expect(JSON.stringify(payload(ofType(events, 'tool.result')[0]))).toContain('hi there');
  });
});
