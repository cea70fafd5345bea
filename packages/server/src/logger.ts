import { processRedactor } from '@oar/runtime';
import pino, { type Logger } from 'pino';

/**
 * Structured JSON logs (pino), one line per request and per server event, with the request id. Every line passes
 * the runtime's redactor: an API key or any credential shape in a message, a path or an error becomes
 * `[REDACTED:<kind>]`; request lines never carry headers or query strings (a stream's `access_token`).
 */
export type { Logger };

export function createLogger(options: { level?: string; destination?: NodeJS.WritableStream } = {}): Logger {
  // Provider keys of the environment by value, and every credential shape (an OAR key included).
  const redactor = processRedactor();
  return pino(
    {
      level: options.level ?? process.env.OAR_LOG_LEVEL ?? 'info',
      base: { service: 'oar-server' },
      formatters: {
        log: (object) => redactor.redactJson(object) as Record<string, unknown>,
      },
      hooks: {
        logMethod(args, method) {
          method.apply(
            this,
            args.map((a) => (typeof a === 'string' ? redactor.redactText(a) : a)) as Parameters<typeof method>,
          );
        },
      },
    },
    (options.destination as pino.DestinationStream | undefined) ?? pino.destination(2),
  );
}
