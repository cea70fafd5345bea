import type { RuntimeEvent } from '@oar/protocol';
import { ArtifactRetentionSchema, expireArtifacts } from '@oar/runtime';
import { afterEach, describe, expect, it } from 'vitest';
import { type TestServer, testServer } from './support.js';

/**
 * An artifact the retention policy expired, over HTTP (docs/http-api.md "Errors"): both artifact routes answer
 * 410 `artifact_expired` with the tombstone in `details` — it existed, it is gone — never 404; the OpenAPI document
 * says so; and the session's events carry the `output.expired` that recorded it.
 */
let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

describe('an expired artifact over HTTP', () => {
  it('is 410 artifact_expired with its tombstone on the metadata and content routes', async () => {
    t = await testServer();
    const { sessionId } = await t.runtime.createSession();
    await t.runtime.submitTurn({ sessionId, input: 'What does the README say?' });
    await t.runtime.settled(sessionId);
    const stored = (await t.runtime.log.read(sessionId)).find((e) => e.type === 'artifact.changed');
    const artifactId = stored?.artifactId as string;
    const path = `/v1/sessions/${sessionId}/artifacts/${artifactId}`;
    const before = await t.json<{ sha256: string; size: number; name?: string }>('GET', path);
    expect(before.status).toBe(200);

    // Forty days old, then one sweep of a 30-day policy.
    await t.store.db
      .updateTable('oar_artifacts')
      .set({ created_at: new Date(Date.now() - 40 * 86_400_000).toISOString() })
      .where('id', '=', artifactId)
      .execute();
    const report = await expireArtifacts(t.runtime.log, ArtifactRetentionSchema.parse({ maxAgeDays: 30 }));
    expect(report.expired.map((a) => a.artifactId)).toEqual([artifactId]);

    for (const route of [path, `${path}/content`, `${path}/content?download=1`]) {
      const gone = await t.json<{ error: Record<string, unknown> }>('GET', route);
      expect(gone.status, route).toBe(410);
      expect(gone.body.error).toMatchObject({
        code: 'artifact_expired',
        retryable: false,
        details: {
          artifactId,
          sessionId,
          size: before.body.size,
          sha256: before.body.sha256,
          expiredAt: expect.any(String),
        },
      });
    }
    // An id that never existed is still 404: "gone" and "never was" stay apart.
    expect((await t.json('GET', `/v1/sessions/${sessionId}/artifacts/art_missing`)).status).toBe(404);

    const events = await t.json<{ events: RuntimeEvent[] }>(
      'GET',
      `/v1/sessions/${sessionId}/events?type=output.expired`,
    );
    expect(events.body.events.map((e) => (e.payload as { artifactIds: string[] }).artifactIds)).toEqual([[artifactId]]);

    const openapi = await t.json<{ paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }>(
      'GET',
      '/v1/openapi.json',
    );
    for (const route of [
      '/v1/sessions/{sessionId}/artifacts/{artifactId}',
      '/v1/sessions/{sessionId}/artifacts/{artifactId}/content',
    ]) {
      expect(Object.keys(openapi.body.paths[route]?.get?.responses ?? {})).toContain('410');
    }
  });
});
