import { readFile, stat } from 'node:fs/promises';
import { extname, join, resolve, sep } from 'node:path';
import type { Hono } from 'hono';

/**
 * The web console's built files (a directory with index.html and assets/), served at `/` for GET and HEAD. A path
 * with no file behind it that looks like a client route (no extension) gets index.html; `/v1/*` is never served
 * from here, so an unknown API route stays a JSON 404. The server does not depend on the console package: the
 * caller (`oar serve`) passes the directory.
 */

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.map': 'application/json',
};

/** The console talks to this origin only; artifacts are fetched as data, never rendered as pages. */
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'";

async function fileAt(root: string, path: string): Promise<string | undefined> {
  let decoded: string;
  try {
    decoded = decodeURIComponent(path);
  } catch {
    return undefined;
  }
  if (decoded.includes('\0')) return undefined;
  const full = resolve(join(root, decoded));
  if (full !== root && !full.startsWith(root + sep)) return undefined;
  try {
    return (await stat(full)).isFile() ? full : undefined;
  } catch {
    return undefined;
  }
}

export function mountConsole(app: Hono, dir: string): void {
  const root = resolve(dir);
  app.on(['GET', 'HEAD'], '*', async (c) => {
    const path = c.req.path;
    if (path === '/v1' || path.startsWith('/v1/')) return c.notFound();
    let file = path === '/' ? undefined : await fileAt(root, path);
    if (!file) {
      // A client route (/sessions/…, /inbox): the app's index.html. A missing asset (has an extension): 404.
      if (extname(path) !== '' && path !== '/') return c.notFound();
      file = await fileAt(root, '/index.html');
      if (!file) return c.notFound();
    }
    const body = await readFile(file);
    const hashed = path.startsWith('/assets/');
    return c.body(body, 200, {
      'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
      'cache-control': hashed ? 'public, max-age=31536000, immutable' : 'no-cache',
      'x-content-type-options': 'nosniff',
      'content-security-policy': CSP,
      'referrer-policy': 'no-referrer',
    });
  });
}
