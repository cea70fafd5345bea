import { readFileSync, writeFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import { Runtime, Store } from '@oar/runtime';
import { createScriptedModel, type ModelScript } from '@oar/runtime/testing';
import { createLogger, startServer } from '@oar/server';
import { wrapModel } from './oar.js';

/**
 * The server process of the serve-load benchmark (serve-load.ts starts it, kills it with SIGKILL mid-run and
 * starts it again on the same store and port): `oar serve` as a library, with a scripted model whose calls take
 * `MODEL_LATENCY_MS`. Every second it writes its RSS and event-loop lag to `STATS_FILE` (the last line survives a
 * kill).
 *
 * argv: store path, workspace, port, admin key, script file, stats file.
 */
const [storePath, workspace, port, adminKey, scriptFile, statsFile] = process.argv.slice(2) as [
  string,
  string,
  string,
  string,
  string,
  string,
];
const MODEL_LATENCY_MS = 20;

const script = JSON.parse(readFileSync(scriptFile, 'utf8')) as ModelScript;
const scripted = createScriptedModel(script);
const model = wrapModel(scripted, async (call) => {
  await new Promise((resolve) => setTimeout(resolve, MODEL_LATENCY_MS));
  return call();
});

const store = await Store.open(storePath);
const runtime = await Runtime.create({
  store,
  workspaceRoot: workspace,
  model: () => ({ model, provider: 'oar-script', modelId: scripted.modelId, supportsForcedToolChoice: true }),
  limits: { maxSteps: 10_000 },
  // A killed server's leases run out in 2 s, so the restarted one takes its threads over quickly.
  worker: { leaseTtlMs: 2_000 },
});
const lag = monitorEventLoopDelay({ resolution: 10 });
lag.enable();
const quiet = new Writable({ write: (_chunk, _encoding, done) => done() });
const server = await startServer({
  runtime,
  port: Number(port),
  adminKey,
  logger: createLogger({ destination: quiet, level: 'warn' }),
  rateLimit: { perMinute: 0 },
});
const stats = () =>
  writeFileSync(
    statsFile,
    `${JSON.stringify({ rssMb: process.memoryUsage().rss / 2 ** 20, lagP99Ms: lag.percentile(99) / 1e6 - 10, lagMaxMs: lag.max / 1e6 - 10 })}\n`,
    { flag: 'a' },
  );
setInterval(stats, 1000).unref();
// Start-up (module loading, taking over a killed server's threads) is not steady-state serving.
setTimeout(() => lag.reset(), 2_000).unref();
process.stdout.write(`ready ${server.url}\n`);
process.on('SIGTERM', async () => {
  stats();
  await server.close();
  await store.close();
  process.exit(0);
});
