import { setMaxListeners } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createAdaptorServer } from '@hono/node-server';
import { DEFAULT_WORKSPACE, type Runtime, Workspaces } from '@oar/runtime';
import { type AppOptions, createApp } from './app.js';
import { Inflight } from './inflight.js';
import { createLogger, type Logger } from './logger.js';

/**
 * `oar serve` as a library call: the API on a socket, the first admin key, and a graceful shutdown.
 *
 * Shutdown (`close`, or SIGTERM in the CLI): the server stops accepting connections, every open event stream ends
 * with a `server.closing` event naming its cursor (the client resumes from it elsewhere or after the restart), the
 * requests in flight finish, and then the runtime closes, which lets running steps reach a durable point.
 */

export interface ServeOptions extends Omit<AppOptions, 'logger' | 'streams'> {
  port?: number;
  host?: string;
  logger?: Logger;
  streams?: Omit<NonNullable<AppOptions['streams']>, 'closing'>;
  /**
   * The initial admin key (`OAR_ADMIN_KEY`): stored (hashed) if it is not yet. Without it, an admin key is created
   * when the default workspace has none that works, and returned once as `createdAdminKey`.
   */
  adminKey?: string;
  /** Close the runtime with the server (default true). */
  closeRuntime?: boolean;
}

export interface RunningServer {
  url: string;
  port: number;
  /** The admin key created at this start (shown once), if one was. */
  createdAdminKey?: string;
  close(): Promise<void>;
}

/** Make sure someone can administer the server: the given key stored, or a new one when none works. */
async function initialAdminKey(runtime: Runtime, adminKey: string | undefined): Promise<string | undefined> {
  const workspaces = new Workspaces(runtime.store);
  if (adminKey !== undefined) {
    await workspaces.createKey({
      workspaceId: DEFAULT_WORKSPACE,
      scope: 'admin',
      name: 'OAR_ADMIN_KEY',
      key: adminKey,
    });
    return undefined;
  }
  if (await workspaces.hasUsableAdminKey()) return undefined;
  const { key } = await workspaces.createKey({ workspaceId: DEFAULT_WORKSPACE, scope: 'admin', name: 'initial admin' });
  return key;
}

export async function startServer(options: ServeOptions): Promise<RunningServer> {
  const logger = options.logger ?? createLogger();
  const createdAdminKey = await initialAdminKey(options.runtime, options.adminKey);
  const closing = new AbortController();
  // Every open event stream listens for the shutdown (one 'abort' listener each, removed when it ends): hundreds
  // are normal for a server, not the leak Node's default limit of 10 warns about.
  setMaxListeners(0, closing.signal);
  const inflight = new Inflight();
  const { app } = createApp({ ...options, logger, inflight, streams: { ...options.streams, closing: closing.signal } });
  const server = createAdaptorServer({ fetch: app.fetch, hostname: options.host ?? '127.0.0.1' }) as Server;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8787, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;
  logger.info({ url, worker: options.runtime.worker !== undefined }, 'listening');
  let closed: Promise<void> | undefined;
  return {
    url,
    port: address.port,
    ...(createdAdminKey ? { createdAdminKey } : {}),
    close() {
      closed ??= (async () => {
        logger.info('closing: no new connections, streams end with their cursor');
        const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
        closing.abort();
        // Requests in flight finish and streams send their last event (up to 10 s); then every connection left is
        // idle or abandoned by its client, and is cut so `close` does not wait for clients' keep-alive timeouts.
        let deadline: NodeJS.Timeout | undefined;
        await Promise.race([
          inflight.drained(),
          new Promise<void>((resolve) => {
            deadline = setTimeout(resolve, 10_000);
          }),
        ]);
        clearTimeout(deadline);
        // Finished responses flush and their connections turn idle (closed at once); after a last second, what is
        // left was abandoned by its client and is cut.
        const idle = setInterval(() => server.closeIdleConnections(), 25);
        const cut = setTimeout(() => server.closeAllConnections(), 1_000);
        server.closeIdleConnections();
        await stopped;
        clearInterval(idle);
        clearTimeout(cut);
        if (options.closeRuntime !== false) await options.runtime.close();
        logger.info('closed');
      })();
      return closed;
    },
  };
}
