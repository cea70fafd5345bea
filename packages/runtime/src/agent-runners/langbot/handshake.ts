import { PeerError, wireError } from '@oar/runner-sdk';
import type { LangbotConnection } from './connection.js';
import { type PluginContainer, PluginContainerSchema } from './manifest.js';

/** The environment variable LangBot's runtime hands a production plugin its one-use registration capability in. */
export const REGISTRATION_CAPABILITY_ENV = 'LANGBOT_PLUGIN_REGISTRATION_CAPABILITY';

/** How long a started plugin has to register itself. */
export const REGISTER_TIMEOUT_MS = 15_000;

/**
 * The plugin settings `initialize_plugin` hands a plugin, as LangBot's host would for an enabled plugin. A LangBot
 * plugin's own (plugin-level) config form is not modelled by OAR: it is initialized empty, and each runner gets its
 * binding's config in its run context, as LangBot does.
 */
export const PLUGIN_SETTINGS = {
  enabled: true,
  priority: 0,
  plugin_config: {},
  install_source: 'oar',
  install_info: {},
};

/**
 * The registration handshake, as LangBot's plugin runtime does it: the plugin's first request is `register_plugin`
 * (its container, and in production mode the capability it was started with); before answering it, the runtime
 * sends `initialize_plugin` with the plugin's settings and then reads the (now initialized) container back with
 * `get_plugin_container`. The answer to `register_plugin` ends it. Any other first request is refused.
 */
export class Handshake {
  private resolveDone: (container: PluginContainer) => void = () => undefined;
  private rejectDone: (error: unknown) => void = () => undefined;
  /** Settles with the initialized container, or the reason the plugin did not register. */
  readonly done: Promise<PluginContainer>;
  private started = false;

  constructor(
    private readonly connection: LangbotConnection,
    private readonly capability: string,
  ) {
    this.done = new Promise((resolve, reject) => {
      this.resolveDone = resolve;
      this.rejectDone = reject;
    });
    // Nobody may be waiting yet (discovery asks later): a failure is still observed here, never unhandled.
    this.done.catch(() => undefined);
  }

  get registered(): boolean {
    return this.started;
  }

  /** The plugin never registered (it exited, timed out, or broke the wire). */
  fail(error: unknown): void {
    this.rejectDone(error);
  }

  /** Answer `register_plugin`: initialize, read the container, then accept the registration. */
  async register(data: Record<string, unknown>): Promise<Record<string, unknown>> {
    if (this.started) throw new PeerError(wireError('invalid_argument', 'the plugin is already registered'));
    this.started = true;
    // A production plugin names the capability it was launched with; one that names another was not started here.
    const named = typeof data.registration_capability === 'string' ? data.registration_capability.trim() : '';
    if (data.prod_mode === true && named !== this.capability) {
      const error = new PeerError(
        wireError('unauthorized', 'the registration capability is not the one this plugin was started with'),
      );
      this.rejectDone(error);
      throw error;
    }
    try {
      await this.connection.call('initialize_plugin', { plugin_settings: PLUGIN_SETTINGS });
      const raw = await this.connection.call('get_plugin_container', {});
      const container = PluginContainerSchema.safeParse(raw);
      if (!container.success) {
        const issue = container.error.issues[0];
        throw new PeerError(
          wireError(
            'invalid_manifest',
            `the plugin container is not LangBot's: ${issue?.message ?? 'invalid'} at /${(issue?.path ?? []).join('/')}`,
          ),
        );
      }
      this.resolveDone(container.data);
      return {};
    } catch (error) {
      this.rejectDone(error);
      throw error;
    }
  }
}
