import { afterEach, describe, expect, it } from 'vitest';
import { type TestServer, testServer } from './support.js';

/**
 * Every route of the OpenAPI document, table-driven (issue: `oar serve`, "tests that must exist"): without a key
 * 401; below its scope 403; a session of another workspace 404 (never revealing it); a body over the limit 413
 * before it is parsed; a body of the wrong shape 400. The routes come from the served document, so a new route is
 * covered the day it is added.
 */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

interface Operation {
  path: string;
  method: string;
  scope: string;
  hasBody: boolean;
  sse: boolean;
}

const RANK = { viewer: 1, operator: 2, admin: 3 } as Record<string, number | undefined>;

describe('every route', () => {
  it('401 without a key, 403 below its scope, 404 across workspaces, 413 over the body limit, 400 for a wrong body', async () => {
    t = await testServer({ serve: { maxBodyBytes: 2048 } });
    const { body: created } = await t.json<{ sessionId: string }>('POST', '/v1/sessions', { body: {} });
    const doc = (
      await t.json<{ paths: Record<string, Record<string, Record<string, unknown>>> }>('GET', '/v1/openapi.json')
    ).body;
    const operations: Operation[] = Object.entries(doc.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, op]) => ({
        path,
        method: method.toUpperCase(),
        scope: op['x-oar-scope'] as string,
        hasBody: op.requestBody !== undefined,
        sse: JSON.stringify(op.responses).includes('text/event-stream'),
      })),
    );
    expect(operations.length).toBeGreaterThan(30);
    const viewer = await t.keyOf('viewer');
    await t.json('POST', '/v1/workspaces', { body: { name: 'Other', workspaceId: 'other' } });
    const otherAdmin = (
      await t.json<{ key: string }>('POST', '/v1/keys', { body: { name: 'o', scope: 'admin', workspaceId: 'other' } })
    ).body.key;
    const concrete = (path: string) =>
      path.replace('{sessionId}', created.sessionId).replace(/\{(\w+)\}/g, (_m, name: string) => `${name}_x`);
    const outcomes: string[] = [];
    const expectCode = async (label: string, response: Response, status: number, code: string) => {
      const body = (await response.json().catch(() => ({}))) as { error?: { code: string } };
      const got = `${label}: ${response.status} ${body.error?.code}`;
      outcomes.push(got);
      expect(got).toBe(`${label}: ${status} ${code}`);
    };
    for (const op of operations) {
      const label = `${op.method} ${op.path}`;
      const url = concrete(op.path);
      const init = op.hasBody ? { body: {} } : {};
      if (op.scope === 'public') continue;
      await expectCode(
        `${label} without a key`,
        await t.call(op.method, url, { ...init, key: null }),
        401,
        'unauthorized',
      );
      if ((RANK[op.scope] ?? 0) > 1) {
        await expectCode(
          `${label} as viewer`,
          await t.call(op.method, url, { ...init, key: viewer }),
          403,
          'forbidden',
        );
      }
      if (op.path.includes('{sessionId}')) {
        // An admin of another workspace (any scope would do): the session does not exist for it.
        await expectCode(
          `${label} across workspaces`,
          await t.call(op.method, url, {
            ...init,
            key: otherAdmin,
            headers: op.sse ? { accept: 'text/event-stream' } : {},
          }),
          404,
          'session_not_found',
        );
      }
      if (op.hasBody) {
        await expectCode(
          `${label} oversized`,
          await t.call(op.method, url, { body: { pad: 'x'.repeat(4096) } }),
          413,
          'payload_too_large',
        );
        await expectCode(
          `${label} wrong shape`,
          await t.call(op.method, url, { body: '"a string"' }),
          400,
          'invalid_input',
        );
      }
    }
    expect(outcomes.length).toBeGreaterThan(80);
  });
});
