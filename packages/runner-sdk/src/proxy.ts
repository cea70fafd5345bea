import { AgentAPIError } from './errors.js';
import { type Peer, PeerError } from './rpc.js';
import type {
  ApiAction,
  ArtifactStreamChunk,
  ChatMessage,
  HistoryPageResult,
  HistorySearchResult,
  ModelInvokeResult,
  ModelRerankResult,
  ModelStreamChunk,
  ModelTool,
  STATE_SCOPES,
  STORAGE_AREAS,
  StorageGetResult,
  StorageListResult,
  ToolCallResult,
} from './schemas.js';

type StorageArea = (typeof STORAGE_AREAS)[number];
type StateScope = (typeof STATE_SCOPES)[number];

/** The wire method of a proxy call (runner → host). */
export const AGENT_API_METHOD = 'AGENT_API';

/**
 * The typed AgentRunAPIProxy (spec section 7) of one run. Every call carries the run's id and is bounded by the
 * run's deadline (`ctx.runtime.deadline_at`): past it the call fails with `deadline_exceeded` without waiting for
 * the host. The host checks everything again; this client only makes the calls convenient.
 */
export class AgentRunAPIProxy {
  constructor(
    private readonly peer: Peer,
    readonly runId: string,
    /** Seconds since the epoch, as in the run context; none: no deadline. */
    private readonly deadlineAt: number | null | undefined,
    private readonly runSignal?: AbortSignal,
  ) {}

  /** Any action by name: for actions this client has no method for yet, or a raw call in a test. */
  async call<T = unknown>(
    action: ApiAction | string,
    payload: Record<string, unknown>,
    onChunk?: (chunk: unknown) => void,
    /** Another run id, or null for none: only to test that the host refuses such calls. */
    runId: string | null = this.runId,
  ): Promise<T> {
    const signals: AbortSignal[] = [];
    if (this.runSignal) signals.push(this.runSignal);
    if (typeof this.deadlineAt === 'number') {
      const left = Math.floor(this.deadlineAt * 1000 - Date.now());
      if (left <= 0) throw new AgentAPIError({ code: 'deadline_exceeded', message: 'the run deadline has passed' });
      signals.push(AbortSignal.timeout(left));
    }
    const signal = signals.length ? AbortSignal.any(signals) : undefined;
    try {
      return (await this.peer.request(
        AGENT_API_METHOD,
        { ...(runId !== null ? { run_id: runId } : {}), action, payload },
        { ...(onChunk ? { onChunk } : {}), ...(signal ? { signal } : {}) },
      )) as T;
    } catch (error) {
      if (error instanceof PeerError) throw new AgentAPIError(error.error);
      if (signal?.aborted && !this.runSignal?.aborted) {
        throw new AgentAPIError({ code: 'deadline_exceeded', message: `${action} passed the run deadline` });
      }
      throw error;
    }
  }

  readonly models = {
    invoke: (model_id: string, messages: ChatMessage[], tools?: ModelTool[], extra_args?: Record<string, unknown>) =>
      this.call<ModelInvokeResult>('models.invoke', { model_id, messages, tools: tools ?? null, extra_args }),
    /** Streams text pieces to `onDelta` and resolves with the whole result. */
    stream: async (
      model_id: string,
      messages: ChatMessage[],
      onDelta: (text: string) => void,
      tools?: ModelTool[],
      extra_args?: Record<string, unknown>,
    ): Promise<ModelInvokeResult> => {
      let result: ModelInvokeResult | undefined;
      const end = await this.call<ModelStreamChunk | null>(
        'models.stream',
        { model_id, messages, tools: tools ?? null, extra_args },
        (chunk) => {
          const c = chunk as ModelStreamChunk;
          if (c.type === 'delta') onDelta(c.content);
          else result = c.result;
        },
      );
      if (end && end.type === 'result') result = end.result;
      if (!result) throw new AgentAPIError({ code: 'runtime_error', message: 'models.stream ended without a result' });
      return result;
    },
    /** The documents ranked against the query, most relevant first (a model whose provider offers reranking). */
    rerank: (model_id: string, query: string, documents: (string | Record<string, unknown>)[], top_k?: number) =>
      this.call<ModelRerankResult>('models.rerank', { model_id, query, documents, ...(top_k ? { top_k } : {}) }),
  };

  readonly tools = {
    get_detail: (tool_name: string) => this.call<Record<string, unknown>>('tools.get_detail', { tool_name }),
    call: (tool_name: string, parameters: Record<string, unknown>) =>
      this.call<ToolCallResult>('tools.call', { tool_name, parameters }),
  };

  readonly history = {
    page: (
      args: {
        conversation_id?: string;
        before_cursor?: string;
        after_cursor?: string;
        limit?: number;
        direction?: 'backward' | 'forward';
        include_artifacts?: boolean;
      } = {},
    ) => this.call<HistoryPageResult>('history.page', args),
    /** Ranked matches in the run's conversation's transcript (needs the `search` history op). */
    search: (query: string, filters?: { roles?: ChatMessage['role'][] } | null, top_k = 10) =>
      this.call<HistorySearchResult>('history.search', { query, filters: filters ?? null, top_k }),
  };

  readonly events = {
    get: (event_id: string) => this.call<Record<string, unknown>>('events.get', { event_id }),
    page: (args: { before_cursor?: string; limit?: number } = {}) =>
      this.call<{ items: Record<string, unknown>[]; next_cursor: string | null; has_more: boolean }>(
        'events.page',
        args,
      ),
  };

  readonly artifacts = {
    metadata: (artifact_id: string) => this.call<Record<string, unknown>>('artifacts.metadata', { artifact_id }),
    read_range: (artifact_id: string, offset = 0, length = 65_536) =>
      this.call<{ artifact_id: string; offset: number; data: string; encoding?: 'base64'; eof: boolean }>(
        'artifacts.read_range',
        { artifact_id, offset, length },
      ),
    /**
     * The whole artifact, streamed: `onChunk` gets each piece's bytes in order (at most 64 KiB each); resolves with
     * the size and sha256 the host computed, to check what arrived.
     */
    open_stream: async (
      artifact_id: string,
      onChunk: (bytes: Uint8Array, offset: number) => void,
    ): Promise<{ size: number; sha256: string }> => {
      const end = await this.call<ArtifactStreamChunk>('artifacts.open_stream', { artifact_id }, (chunk) => {
        const c = chunk as ArtifactStreamChunk;
        if (c.type === 'chunk') onChunk(new Uint8Array(Buffer.from(c.data, 'base64')), c.offset);
      });
      if (end?.type !== 'end') {
        throw new AgentAPIError({ code: 'runtime_error', message: 'artifacts.open_stream ended without its end' });
      }
      return { size: end.size, sha256: end.sha256 };
    },
  };

  readonly state = {
    get: (scope: string, key: string) => this.call<{ value: unknown }>('state.get', { scope, key }),
    set: (scope: string, key: string, value: unknown) => this.call<null>('state.set', { scope, key, value }),
    delete: (scope: string, key: string) => this.call<null>('state.delete', { scope, key }),
    /** The keys of one scope (sorted), those starting with `prefix`, at most `limit` (1-100); values via `get`. */
    list: (scope: StateScope, prefix?: string | null, limit?: number) =>
      this.call<{ keys: string[]; has_more: boolean }>('state.list', {
        scope,
        prefix: prefix ?? null,
        ...(limit !== undefined ? { limit } : {}),
      }),
  };

  /**
   * OAR's token estimate of what a `models.invoke` with these arguments would send (the one its budgets use, not a
   * provider's tokenizer: `estimate` is always true). Granted with `models.invoke` or `models.stream`.
   */
  readonly tokens = {
    count: (model_id: string, messages: ChatMessage[], tools?: ModelTool[]) =>
      this.call<{ tokens: number; estimate: true; method: string }>('tokens.count', {
        model_id,
        messages,
        tools: tools ?? null,
      }),
  };

  /**
   * Claim the input queued on the run's thread meanwhile (turns submitted while it runs), to fold it into the work
   * in flight: all of it in order, or one, at most `limit` (1-100). A claimed turn does not run on its own. Needs the
   * manifest's `steering` capability.
   */
  readonly steering = {
    pull: (mode: 'all' | 'one' = 'all', limit?: number) =>
      this.call<{
        items: { turn_id: string; input: string; source: string; enqueued_at: string }[];
        claimed_at: string | null;
      }>('steering.pull', { mode, ...(limit !== undefined ? { limit } : {}) }),
  };

  /** The agent's own instructions as system messages (none configured: no messages). */
  readonly prompt = {
    get: () => this.call<{ messages: { role: 'system'; content: string }[] }>('prompt.get', {}),
  };

  /**
   * The runner's storage areas (`plugin`, `workspace`, `binding`), as granted. A value is JSON, or bytes (a
   * Uint8Array, sent as base64 and read back as a base64 string with `encoding: "base64"`); at most 1 MiB each.
   * A missing key is `not_found`.
   */
  readonly storage = {
    get: (area: StorageArea, key: string) => this.call<StorageGetResult>('storage.get', { area, key }),
    set: (area: StorageArea, key: string, value: unknown) =>
      this.call<{ area: string; key: string; size: number; encoding: 'json' | 'base64' }>(
        'storage.set',
        value instanceof Uint8Array
          ? {
              area,
              key,
              value: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('base64'),
              encoding: 'base64',
            }
          : { area, key, value },
      ),
    delete: (area: StorageArea, key: string) => this.call<{ deleted: boolean }>('storage.delete', { area, key }),
    list: (area: StorageArea, prefix?: string | null, options: { cursor?: string | null; limit?: number } = {}) =>
      this.call<StorageListResult>('storage.list', { area, prefix: prefix ?? null, ...options }),
  };

  /**
   * Ask the platform to act (off by default: the manifest, the binding and a person must all allow it). Resolves
   * once a person approved; a denial is `unauthorized`. The call waits for the decision up to the run's deadline.
   */
  readonly platform = {
    request_action: (action: string, target: Record<string, unknown> = {}, payload: Record<string, unknown> = {}) =>
      this.call<{ status: 'approved'; action_id: string }>('platform.request_action', { action, target, payload }),
  };
}
