import { z } from 'zod';
import { httpError } from '../errors.js';
import { Id, type Route, route } from '../route.js';

/**
 * Artifacts: every full output the runtime stored (redacted like every record). Metadata as JSON; the bytes with
 * the stored MIME type and HTTP Range. The bytes are served so a browser never runs them: `nosniff` and a
 * sandboxing Content-Security-Policy, since an artifact may be HTML a tool fetched.
 */

const ArtifactParams = z.object({ sessionId: Id, artifactId: Id });

const ArtifactMetadata = z.object({
  artifactId: z.string(),
  sessionId: z.string(),
  uri: z.string(),
  name: z.string().optional(),
  mime: z.string(),
  size: z.number(),
  sha256: z.string(),
  preview: z.string(),
});

/** One `bytes=` range of a `size`-byte body: [start, end] inclusive; undefined to serve it whole. */
export function byteRange(header: string | undefined, size: number): { start: number; end: number } | undefined {
  if (!header) return undefined;
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  // Several ranges (or another unit) are allowed to be answered with the whole body (RFC 9110 §14.2).
  if (!match || (match[1] === '' && match[2] === '')) return undefined;
  let start: number;
  let end: number;
  if (match[1] === '') {
    const suffix = Number(match[2]);
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(match[1]);
    end = match[2] === '' ? size - 1 : Math.min(Number(match[2]), size - 1);
  }
  if (start >= size || start > end) {
    throw httpError('range_not_satisfiable', `the range ${header} is outside the artifact's ${size} bytes`, {
      details: { size, range: header },
    });
  }
  return { start, end };
}

export const artifactRoutes: Route[] = [
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/artifacts/{artifactId}',
      operationId: 'getArtifact',
      summary: "An artifact's metadata (name, MIME type, size, SHA-256, preview)",
      tag: 'artifacts',
      scope: 'viewer',
      params: ArtifactParams,
      response: ArtifactMetadata,
    },
    async ({ deps, params }) => {
      const { bytes: _bytes, ...metadata } = await deps.runtime.getArtifact(params);
      return metadata;
    },
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/artifacts/{artifactId}/content',
      operationId: 'getArtifactContent',
      summary: "An artifact's bytes, with its MIME type; `Range: bytes=…` for a part",
      description: '`?download=1` asks the browser to save it (Content-Disposition: attachment).',
      tag: 'artifacts',
      scope: 'viewer',
      params: ArtifactParams,
      query: z.object({ download: z.enum(['0', '1']).optional() }),
      produces: 'bytes',
    },
    async ({ c, deps, params, query }) => {
      const artifact = await deps.runtime.getArtifact(params);
      const size = artifact.bytes.byteLength;
      const range = byteRange(c.req.header('range'), size);
      const filename = (artifact.name ?? artifact.artifactId).replace(/[^A-Za-z0-9._-]/g, '_');
      const headers: Record<string, string> = {
        'content-type': artifact.mime,
        'accept-ranges': 'bytes',
        etag: `"${artifact.sha256}"`,
        'x-content-type-options': 'nosniff',
        'content-security-policy': "sandbox; default-src 'none'",
        'content-disposition': `${query.download === '1' ? 'attachment' : 'inline'}; filename="${filename}"`,
      };
      if (!range) {
        return new Response(artifact.bytes.slice(), {
          status: 200,
          headers: { ...headers, 'content-length': String(size) },
        });
      }
      const part = artifact.bytes.slice(range.start, range.end + 1);
      return new Response(part, {
        status: 206,
        headers: {
          ...headers,
          'content-length': String(part.byteLength),
          'content-range': `bytes ${range.start}-${range.end}/${size}`,
        },
      });
    },
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/exports/replay',
      operationId: 'exportReplay',
      summary: 'The replay export: every event and the read models rebuilt from them (recorded: evidence.changed)',
      tag: 'exports',
      scope: 'viewer',
      params: z.object({ sessionId: Id }),
      response: z.looseObject({}),
    },
    async ({ deps, params }) => {
      return deps.runtime.exportReplay(params.sessionId);
    },
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/exports/evidence',
      operationId: 'exportEvidence',
      summary: 'The evidence export: what was asked, decided, run and produced, with artifact refs (recorded)',
      tag: 'exports',
      scope: 'viewer',
      params: z.object({ sessionId: Id }),
      response: z.looseObject({}),
    },
    async ({ deps, params }) => {
      return deps.runtime.exportEvidence(params.sessionId);
    },
  ),
  route(
    {
      method: 'get',
      path: '/v1/sessions/{sessionId}/exports/review',
      operationId: 'exportReview',
      summary: 'The review pack of a session, thread, turn or task: changes with diffs, approvals, commands, costs',
      description:
        'JSON (`oar.review.v1`) by default; `?format=markdown` or `Accept: text/markdown` answers with the Markdown ' +
        'document (text/markdown; its review id and digest in `x-oar-review-id` / `x-oar-review-digest`). An unknown ' +
        'thread, turn or task (or one of another thread than `threadId`) is 404. Like every export it is recorded: ' +
        'one `evidence.changed` (docs/review.md).',
      tag: 'exports',
      scope: 'viewer',
      params: z.object({ sessionId: Id }),
      query: z.object({
        threadId: Id.optional(),
        turnId: Id.optional(),
        taskId: Id.optional(),
        format: z.enum(['json', 'markdown']).optional(),
      }),
      response: z.looseObject({ format: z.literal('oar.review.v1'), reviewId: z.string(), digest: z.string() }),
    },
    async ({ c, deps, params, query }) => {
      const accept = (c.req.header('accept') ?? '').split(',').map((type) => type.trim());
      const markdown = query.format ? query.format === 'markdown' : accept.some((t) => t.startsWith('text/markdown'));
      const review = await deps.runtime.exportReview({
        ...query,
        sessionId: params.sessionId,
        format: markdown ? 'markdown' : 'json',
      });
      if (!markdown) return review;
      return new Response(review.markdown, {
        status: 200,
        headers: {
          'content-type': 'text/markdown; charset=utf-8',
          'x-oar-review-id': review.reviewId,
          'x-oar-review-digest': review.digest,
        },
      });
    },
  ),
  route(
    {
      method: 'post',
      path: '/v1/sessions/{sessionId}/replay-check',
      operationId: 'replayCheck',
      summary: 'Rebuild every read model from the log and compare with the stored ones',
      tag: 'exports',
      scope: 'viewer',
      params: z.object({ sessionId: Id }),
      response: z.looseObject({ equal: z.boolean(), differences: z.array(z.string()) }),
    },
    async ({ deps, params }) => {
      return deps.runtime.replaySession(params.sessionId);
    },
  ),
];
