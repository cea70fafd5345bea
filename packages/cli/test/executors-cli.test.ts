import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretScanner } from '../../runtime/test/support/secret-scan.js';
import { bin, type CliResult, ndjson, outputOf, tempDir, writeJson } from './cli-helpers.js';

/**
 * Pipelines and services end to end through the real `oar` binary: declared in oar.config.json, bound to the
 * session, offered to the model, executed (a pipeline over the built-in tools, a service against a local HTTP
 * server), and the service's bearer token — named by environment variable — absent from everything printed and
 * stored. The binary runs asynchronously so this process's server can answer it.
 */

const token = `cli${randomBytes(18).toString('hex')}`;
let server: Server;
let base: string;
const authorizations: (string | undefined)[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    authorizations.push(req.headers.authorization);
    res.writeHead(200, { 'content-type': 'application/json' });
    // Echoes the credential: the record must still not hold it.
    res.end(JSON.stringify({ ticket: 42, url: req.url, sawAuth: req.headers.authorization }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

function oar(cwd: string, args: string[]): Promise<CliResult> {
  return outputOf(
    spawn(bin, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, OAR_CLI_SVC_TOKEN: token } }),
  );
}

const block = (actions: Record<string, unknown>[]) =>
  `Running them.\n\n\`\`\`json agent-protocol\n${JSON.stringify({
    type: 'agent.protocol',
    version: '1',
    intent: 'execute',
    payload: { type: 'action_graph', actions: actions.map((a) => ({ type: 'action', ...a })) },
  })}\n\`\`\`\n`;

describe('oar run with configured pipelines and services', { timeout: 120_000 }, () => {
  it('runs both, records every step, and never records the token', async () => {
    const cwd = tempDir('oar-executors-');
    writeFileSync(join(cwd, 'notes.md'), '# Notes\n');
    writeJson(cwd, 'script.json', {
      steps: [
        {
          text: block([
            {
              id: 'copy',
              executor: { type: 'pipeline', target: 'copy_file' },
              input: { from: 'notes.md', to: 'copy.md' },
            },
            { id: 'ticket', executor: { type: 'service', target: 'tickets' }, input: { id: 'T-1' } },
          ]),
        },
        { protocol: { kind: 'answer', message: 'Copied and looked up.' } },
      ],
    });
    writeJson(cwd, 'oar.config.json', {
      model: 'script:script.json',
      permissions: { mode: 'bypass' },
      pipelines: [
        {
          name: 'copy_file',
          description: 'Copies a file.',
          inputSchema: {
            type: 'object',
            properties: { from: { type: 'string' }, to: { type: 'string' } },
            required: ['from', 'to'],
          },
          steps: [
            { id: 'load', tool: 'read', input: { filePath: { $input: 'from' } } },
            {
              id: 'save',
              tool: 'write',
              input: { filePath: { $input: 'to' }, content: { $step: 'load' } },
              depends: ['load'],
            },
          ],
        },
      ],
      services: [
        {
          name: 'tickets',
          description: 'Looks up a ticket.',
          url: `${base}/tickets/{id}`,
          inputSchema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] },
          auth: { type: 'bearer', tokenEnv: 'OAR_CLI_SVC_TOKEN' },
        },
      ],
    });
    const run = await oar(cwd, ['run', '--json', 'copy and look up']);
    expect(run.code, run.stderr).toBe(0);
    const lines = ndjson(run.stdout);
    const result = (lines.at(-1) as { result: { sessionId: string; status: string; answer?: string } }).result;
    expect(result).toMatchObject({ status: 'completed', answer: 'Copied and looked up.' });
    expect(authorizations).toEqual([`Bearer ${token}`]);
    expect(readFileSync(join(cwd, 'copy.md'), 'utf8')).toContain('# Notes');

    const session = await oar(cwd, ['session', 'show', result.sessionId]);
    expect(session.stdout).toContain('copy_file');
    expect(session.stdout).toContain('OAR_CLI_SVC_TOKEN');
    const events = await oar(cwd, ['events', result.sessionId, '--json']);
    const records = ndjson(events.stdout) as { type: string; payload?: Record<string, unknown> }[];
    const finished = records
      .filter((e) => e.type === 'tool.result')
      .map((e) => e.payload?.pipelineStep ?? e.payload?.toolName);
    expect(finished.sort()).toEqual(['copy_file', 'load', 'save', 'tickets']);

    const scanner = new SecretScanner([{ label: 'svc_token', value: token, fragments: [token.slice(3, 19)] }]);
    const evidence = await oar(cwd, ['export', result.sessionId, '--evidence']);
    const hits = [
      ...scanner.text(run.stdout + run.stderr, 'run'),
      ...scanner.text(events.stdout, 'events'),
      ...scanner.text(evidence.stdout, 'evidence'),
      ...(await scanner.sqlite(join(cwd, '.oar', 'oar.db'))),
    ];
    expect(hits).toEqual([]);
  });
});
