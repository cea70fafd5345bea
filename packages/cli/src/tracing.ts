import type { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';

/**
 * Tracing for one `oar` process, configured by the standard OpenTelemetry environment variables (docs/tracing.md):
 * on when `OTEL_TRACES_EXPORTER` names `otlp`, or, when it is unset, when an OTLP endpoint is set
 * (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_EXPORTER_OTLP_ENDPOINT`); off with `OTEL_SDK_DISABLED=true` or
 * `OTEL_TRACES_EXPORTER=none`. Spans go over OTLP/HTTP (JSON) through a batch processor; the exporter reads its own
 * variables (endpoint, headers, timeout), the provider the sampler and limits ones. The runtime's spans reach it
 * through the global tracer provider.
 */
export interface CliTracing {
  /** Export what is still buffered, then stop (before the process exits). */
  shutdown(): Promise<void>;
}

/** The longest the CLI waits for the last spans to be exported when it exits. */
const FLUSH_TIMEOUT_MS = 10_000;

export async function tracingFromEnv(
  version: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<CliTracing | undefined> {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return undefined;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '')
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!(exporters.length > 0 ? exporters.includes('otlp') : Boolean(endpoint))) return undefined;
  // Loaded only when asked for: the SDK and exporter cost every other command a noticeable start-up time.
  const [{ BasicTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { setGlobalTracerProvider }] =
    await Promise.all([
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@oar/runtime'),
    ]);
  const provider = new BasicTracerProvider({
    resource: resourceFromEnv(env, version),
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  });
  // The runtimes this process creates use the global provider.
  const unregister = setGlobalTracerProvider(provider);
  return {
    async shutdown() {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<void>((resolve) => {
        timer = setTimeout(resolve, FLUSH_TIMEOUT_MS);
        timer.unref();
      });
      // A collector that is down must not fail the command: its spans are lost, the command's result is not.
      await Promise.race([provider.shutdown().catch(() => undefined), timeout]);
      clearTimeout(timer);
      unregister();
    },
  };
}

type Resource = NonNullable<NonNullable<ConstructorParameters<typeof BasicTracerProvider>[0]>['resource']>;
type Attributes = Resource['attributes'];

/**
 * The process's resource: `OTEL_RESOURCE_ATTRIBUTES` (`key=value,…`, percent-encoded values), `service.name` from
 * `OTEL_SERVICE_NAME`, else from those attributes, else `oar`.
 */
function resourceFromEnv(env: NodeJS.ProcessEnv, version: string): Resource {
  const attributes: Attributes = {};
  for (const pair of (env.OTEL_RESOURCE_ATTRIBUTES ?? '').split(',')) {
    const at = pair.indexOf('=');
    if (at <= 0) continue;
    try {
      attributes[decodeURIComponent(pair.slice(0, at).trim())] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      // A malformed pair is skipped, as the SDK's own detector does.
    }
  }
  return resource({
    'telemetry.sdk.language': 'nodejs',
    'telemetry.sdk.name': 'opentelemetry',
    'service.version': version,
    ...attributes,
    'service.name': env.OTEL_SERVICE_NAME?.trim() || String(attributes['service.name'] ?? 'oar'),
  });
}

/** A resource of known attributes (nothing detected asynchronously). */
function resource(attributes: Attributes): Resource {
  return {
    attributes,
    merge: (other) => resource({ ...attributes, ...(other?.attributes ?? {}) }),
    getRawAttributes: () => Object.entries(attributes),
  };
}
