/**
 * `@oar/runtime/constants`: the values a front end needs before it loads the engine — the exit statuses and the
 * error table (to end a process on a usage mistake), the default names (the config file, the store, the workspace)
 * and the permission modes (for help text). This module and what it imports load no dependency at all: `oar --help`
 * and `oar --version` import it, and loading the engine (zod schemas, model providers, database drivers) costs them
 * many times a bare `node` start. Each value is defined here once; the engine's own modules import it from here.
 */
export { ERROR_CODES, type ErrorCode, type ErrorCodeInfo, EXIT, exitCodeFor } from './error-codes.js';

/** The default config file name, looked up in the working directory. */
export const CONFIG_FILE = 'oar.config.json';

/** The default embedded store: a SQLite file in the working directory. */
export const DEFAULT_STORE_PATH = '.oar/oar.db';

/** The workspace every store has (a store from before workspaces keeps all its sessions there). */
export const DEFAULT_WORKSPACE = 'default';

/**
 * `default` asks before writes, `read-only` forbids them, `accept-edits` lets non-destructive writes through,
 * `bypass` allows everything that no user rule denies or asks about.
 */
export const PERMISSION_MODES = ['default', 'read-only', 'accept-edits', 'bypass'] as const;
